"""SWE-bench's per-repository, per-version environment specs, read from ``specs.json``.

``specs.json`` is SWE-bench's published table of how each Python repository is installed and
tested at each of its versions (``MAP_REPO_VERSION_TO_SPECS_PY``), with each repository's log
parser (``MAP_REPO_TO_PARSER_PY``) and the yyb ``tests`` runner that reads the same log
format; its ``source`` names the commits it was taken from. It is data, shipped with the
package, and read once, on the first lookup (docs/swe-bench.md, "Environment specs").
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class RepoSpec:
    """How one repository is installed and tested at one version, as SWE-bench does it.

    Attributes:
        repo, version: the instance's ``repo`` (``owner/name``) and ``version``.
        python: the interpreter's version (``"3.9"``).
        packages: what the environment is made from: a conda-style package list
            (``"numpy scipy pytest"``), ``"requirements.txt"`` or ``"environment.yml"`` (read
            from ``requirements_paths`` or ``environment_yml_paths`` in the repository), or
            None.
        pip_packages: requirements pip installs after it.
        pre_install: shell commands run in the repository before it is installed.
        install: the command that installs the repository, or None.
        eval_commands: shell commands run before the tests.
        test_cmd: the test command; the test files or labels are appended to it.
        env: the variables ``eval_commands`` export (``LANG``, ``LC_ALL``, ...).
        log_parser: SWE-bench's parser of the test command's log (``pytest``,
            ``pytest_options``, ``pytest_v2``, ``django``, ``sympy``, ``seaborn``,
            ``matplotlib``).
        runner: the ``tests`` profile's ``runner`` that reads that log (docs/grading.md).
        requirements_paths, environment_yml_paths: where ``packages`` is read from, in order.
        execute_test_as_nonroot, no_use_env: SWE-bench's flags: the tests run as a user who
            is not root; the install uses no conda environment.
        nano_cpus: SWE-bench's CPU limit for the tests, in billionths of a CPU, or None.
    """

    repo: str
    version: str
    python: str
    packages: str | None
    pip_packages: tuple[str, ...]
    pre_install: tuple[str, ...]
    install: str | None
    eval_commands: tuple[str, ...]
    test_cmd: str
    env: tuple[tuple[str, str], ...]
    log_parser: str
    runner: str
    requirements_paths: tuple[str, ...]
    environment_yml_paths: tuple[str, ...]
    execute_test_as_nonroot: bool = False
    no_use_env: bool = False
    nano_cpus: int | None = None


@functools.cache
def table() -> dict:
    """The whole of ``specs.json``: ``source`` and ``repos``, read once."""
    text = resources.files("yyb.swebench").joinpath("specs.json").read_text(encoding="utf-8")
    return json.loads(text)


def spec_for(repo: str, version: str) -> RepoSpec | None:
    """The spec of ``repo`` (``owner/name``) at ``version``, or None when the table has none.

    Args:
        repo: an instance's ``repo``, as SWE-bench spells it (``django/django``).
        version: its ``version`` (``"3.0"``), a string as the datasets publish it.

    Returns:
        The spec, or None for a repository or version the table does not hold.
    """
    entry = table()["repos"].get(repo)
    if entry is None or not isinstance(version, str):
        return None
    spec = entry["versions"].get(version)
    if spec is None:
        return None
    return RepoSpec(
        repo=repo,
        version=version,
        python=spec["python"],
        packages=spec["packages"],
        pip_packages=tuple(spec["pip_packages"]),
        pre_install=tuple(spec["pre_install"]),
        install=spec["install"],
        eval_commands=tuple(spec["eval_commands"]),
        test_cmd=spec["test_cmd"],
        env=tuple(spec["env"].items()),
        log_parser=entry["log_parser"],
        runner=entry["runner"],
        requirements_paths=tuple(entry["requirements_paths"]),
        environment_yml_paths=tuple(entry["environment_yml_paths"]),
        execute_test_as_nonroot=spec["execute_test_as_nonroot"],
        no_use_env=spec["no_use_env"],
        nano_cpus=spec["nano_cpus"],
    )


def repositories() -> list[str]:
    """Every repository the table holds, sorted."""
    return sorted(table()["repos"])
