"""Writing SWE-bench instances as case files, hidden patches and a configuration.

For each instance (yyb/swebench/instances.py) whose repository is already cloned under the
repositories folder, as ``<owner>__<name>`` or else ``<name>``, and holds its base commit, the
output folder gets (docs/swe-bench.md):

```
cases/<instance_id>.md             the task file: front matter, then the problem statement
hidden/<instance_id>/test.patch    the hidden test patch, pinned in the task by its sha256
hidden/<instance_id>/gold.patch    the gold patch, for `yyb validate --gold` only
yylo-benchmark.config.json         repositories and one `tests` profile per repository
```

Everything is built and checked in memory first; a file already there is left as it is when
it holds the same bytes and refused otherwise (the configuration is merged instead: entries
are added, and one that exists with other content is refused), so nothing is half written by
bad input and an import can be run again. No network: repositories are read where they are.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

from yyb import config as configuration
from yyb.errors import InvalidArgument, UsageError
from yyb.harness import source
from yyb.swebench.instances import Instance, InstanceError

GRADER_ID = "swe-bench-pytest"
TIMEOUT_MS = 30 * 60 * 1000
TAGS = ["benchmark-case", "swe-bench"]


@dataclass(frozen=True)
class Written:
    """What an import wrote: each case's task file, the configuration, and one line per
    listed test id it repaired (``check_ids``)."""

    tasks: list[tuple[str, str]]  # (instance id, task file path)
    config: str
    repairs: list[str] = field(default_factory=list)


def profile_name(instance: Instance, runner: str | None = None) -> str:
    """``swe-<repo>`` (pytest, with a JUnit report); ``swe-<repo>-<version>`` for a log
    runner, whose command is SWE-bench's for that version."""
    if runner is None:
        return f"swe-{instance.repo_id}"
    return f"swe-{instance.repo_id}-{instance.kept.get('version', '')}".rstrip("-")


def log_runner(instance: Instance) -> tuple[str | None, list[str] | None]:
    """(runner, command) for an instance whose repository SWE-bench tests with another runner
    than pytest (Django's ``runtests.py``, SymPy's ``bin/test``): its spec's test command with
    the test patch's labels; (None, None) for pytest's."""
    import shlex

    from yyb.swebench import specs

    spec = specs.spec_for(instance.repo, instance.kept.get("version", ""))
    if spec is None or spec.runner not in ("django", "sympy") or not spec.test_cmd:
        return None, None
    words = shlex.split(spec.test_cmd)
    assignments = []
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        assignments.append(words.pop(0))
    if words and (words[0].endswith(".py") or words[0].removeprefix("./") == "bin/test"):
        words = ["python", words[0].removeprefix("./"), *words[1:]]  # no exec bit needed
    return spec.runner, [*(["env", *assignments] if assignments else []), *words, "{labels}"]


def test_command(python: str) -> list[str]:
    """The default test command of an imported profile: pytest, one JUnit report, the
    listed tests only."""
    return [
        python,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-rA",
        "--junitxml={junit}",
        "{tests}",
    ]


def locate(repos: str, instance: Instance) -> str:
    """The clone of the instance's repository under ``repos`` that holds its base commit.

    Raises:
        InstanceError: no such clone, or the base commit is not in it.
    """
    owner, name = instance.repo.split("/")
    tried = [os.path.join(repos, f"{owner}__{name}"), os.path.join(repos, name)]
    for path in tried:
        if os.path.isdir(path):
            try:
                repo = source.open_repository(path)
                source.commit_at(repo, instance.base_commit, "base_commit")
            except UsageError as exc:
                raise InstanceError(instance.where, "repo", exc.message) from None
            return os.path.abspath(path)
    raise InstanceError(
        instance.where,
        "repo",
        f"{instance.repo} is not cloned under {repos} (looked for {' and '.join(tried)})",
    )


def environment_specs(
    instances: list[Instance], out: str, given: dict
) -> tuple[dict[str, str], dict[str, bytes]]:
    """(instance id -> its spec file, every spec file: path -> bytes) for the instances an
    environment recipe knows (yyb/swebench/environments.py).

    Raises:
        InstanceError: a recipe that cannot be had here, or two instances whose one spec
            file would differ.
    """
    from yyb.swebench import environments

    chosen, files = {}, {}
    for instance in instances:
        found = environments.recipe(instance, given)
        if found is None:
            continue
        path, wanted = environments.spec_files(instance, found, out)
        for name, data in wanted.items():
            if files.setdefault(name, data) != data:
                raise InstanceError(
                    instance.where,
                    "environment_setup_commit",
                    f"its environment {found.name} would differ from another instance's; "
                    "name it apart in the --environments file",
                )
        chosen[instance.instance_id] = path
    return chosen, files


def plan_files(
    instances: list[Instance],
    repos: str,
    out: str,
    python: str,
    tool_paths: list[str],
    specs: tuple[dict[str, str], dict[str, bytes]] = ({}, {}),
) -> dict[str, bytes]:
    """Every file the import writes (path -> bytes), the configuration merged with the one
    already in ``out``, if any; ``specs`` are the instances' environments
    (``environment_specs``), whose profiles run the environment's ``python``.

    Raises:
        InstanceError: an instance whose repository or base commit is missing.
        UsageError / ConfigError: an existing configuration that the merge would change.
    """
    chosen, spec_files = specs
    files: dict[str, bytes] = dict(spec_files)
    repositories: dict[str, str] = {}
    profiles: dict[str, dict] = {}
    for instance in instances:
        clone = locate(repos, instance)
        repositories[instance.repo_id] = os.path.relpath(clone, out)
        environment = chosen.get(instance.instance_id)
        runner, command = log_runner(instance) if environment else (None, None)
        profiles[profile_name(instance, runner)] = {
            "kind": "tests",
            "grader_id": GRADER_ID if runner is None else f"swe-bench-{runner}",
            "version": "1",
            "command": command or test_command("python" if environment else python),
            **({"runner": runner} if runner else {}),
            "timeout_ms": TIMEOUT_MS,
            "purpose": "correctness",
            "required": True,
            # No protected_paths of its own: the tests kind always protects pytest's
            # configuration, every conftest.py, the listed tests' files and the test patch's.
        }
        hidden = os.path.join("hidden", instance.instance_id)
        files[os.path.join(out, hidden, "test.patch")] = instance.test_patch
        files[os.path.join(out, hidden, "gold.patch")] = instance.patch
        spec = os.path.relpath(environment, os.path.join(out, "cases")) if environment else None
        files[os.path.join(out, "cases", f"{instance.instance_id}.md")] = task_file(
            instance, os.path.join("..", hidden), spec
        )
    config_path = os.path.join(out, configuration.CONFIG_NAME)
    files[config_path] = _config(config_path, repositories, profiles, tool_paths)
    return files


def task_file(instance: Instance, hidden: str, environment: str | None = None) -> bytes:
    """The task file of one instance; ``hidden`` is its hidden folder and ``environment`` its
    environment's spec file (None: none), relative to the task."""
    import yaml

    tests = {
        "test_patch": f"{hidden}/test.patch",
        "test_patch_sha256": hashlib.sha256(instance.test_patch).hexdigest(),
        "fail_to_pass": instance.fail_to_pass,
        "pass_to_pass": instance.pass_to_pass,
        "gold_patch": f"{hidden}/gold.patch",
        "gold_patch_sha256": hashlib.sha256(instance.patch).hexdigest(),
    }
    front = {
        "id": instance.instance_id,
        "title": f"{instance.repo} {instance.instance_id}",
        "tags": TAGS,
        "fields": {
            "benchmark": {
                "repository": instance.repo_id,
                "base_commit": instance.base_commit,
                "case_version": "1",
                "category": "swe-bench",
                "grader_profile": profile_name(
                    instance, log_runner(instance)[0] if environment else None
                ),
                "tests": tests,
                **({"environment": environment} if environment else {}),
            },
            "swe_bench": {
                "instance_id": instance.instance_id,
                "repo": instance.repo,
                **instance.kept,
            },
        },
    }
    text = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1 << 20)
    return f"---\n{text}---\n".encode() + instance.problem_statement.encode()


def _config(path: str, repositories: dict, profiles: dict, tool_paths: list[str]) -> bytes:
    """The configuration at ``path`` with the import's entries added (a new one if none)."""
    if os.path.exists(path):
        data = configuration.load(path).data
    else:
        data = configuration.template("swe-bench")
        data["repositories"] = {}
        data["tool_policy"]["read_only_paths"] = []
    for key, entries in (("repositories", repositories), ("evaluators", profiles)):
        known = data.setdefault(key, {})
        for name, value in sorted(entries.items()):
            if name in known and known[name] != value:
                raise UsageError(
                    f"{path}: {key}.{name} exists with other content; the import would change it"
                )
            known[name] = value
    policy = data.setdefault("tool_policy", {"network": "denied"})
    paths = policy.setdefault("read_only_paths", [])
    paths += [os.path.abspath(p) for p in tool_paths if os.path.abspath(p) not in paths]
    text = configuration.render(data)
    configuration.parse(text, path)  # the merged configuration must still be valid
    return text.encode()


def conflicts(files: dict[str, bytes], config_path: str) -> str | None:
    """The first file that exists with other bytes (the configuration is merged, never
    refused here), or None."""
    for path, data in sorted(files.items()):
        if path == config_path or not os.path.lexists(path):
            continue
        try:
            with open(path, "rb") as handle:
                same = handle.read() == data
        except OSError:
            same = False
        if not same:
            return path
    return None


def write(files: dict[str, bytes], config_path: str) -> None:
    """Write the planned files: new ones created, the configuration replaced atomically."""
    from yyb.store import file

    for path, data in sorted(files.items()):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if path == config_path and os.path.exists(path):
            with open(path, "rb") as handle:
                if handle.read() == data:
                    continue
            file.write_atomic(path, data)
        elif not os.path.lexists(path):
            file.write_new(path, data)


def run(
    path: str,
    repos: str,
    out: str,
    python: str = "python3",
    tool_paths: tuple[str, ...] = (),
    check_ids: bool = False,
    environments: str | None = None,
    open_store=None,
) -> Written:
    """Import the instances in the file at ``path`` (docs/swe-bench.md); with ``check_ids``,
    their listed test ids are first checked against pytest's collection in the sandbox
    (yyb/swebench/testids.py), and repaired where that is certain. Each instance an
    environment recipe knows (the ``environments`` file, else SWE-bench's specs) gets a spec
    file; with ``check_ids`` those are built first (in the store ``open_store`` gives) and the
    collection runs on them.

    Raises:
        InstanceError: a record that is not a valid instance, whose repository or base
            commit is missing, or (``check_ids``) whose listed ids are not collected.
        UsageError: an output file exists with other bytes, or a configuration entry would
            change.
        SandboxUnavailable: ``check_ids`` on a host where the sandbox cannot start.
    """
    from yyb.store import file
    from yyb.swebench import instances as reading

    if not os.path.isdir(repos):
        raise InvalidArgument("repos", f"{repos} is not a folder", repos)
    from yyb.swebench.environments import read_given

    found = reading.read(path, file.read_input(path))
    out = os.path.abspath(out)
    specs = environment_specs(found, out, read_given(environments))
    repairs: list[str] = []
    if check_ids:
        from yyb.harness import sandbox
        from yyb.swebench import testids

        clones = {i.instance_id: locate(repos, i) for i in found}
        hidden = sandbox.protected_roots(None, None, {"evaluators": {"catalog": {}}}, (out,))
        box = {"protected": hidden, "read_only": [os.path.abspath(p) for p in tool_paths]}
        if specs[0]:
            box["environments"] = _built(specs, out, clones, open_store)
        found, repairs = testids.check(found, clones, python, box)
    files = plan_files(found, repos, out, python, list(tool_paths), specs)
    config_path = os.path.join(out, configuration.CONFIG_NAME)
    clash = conflicts(files, config_path)
    if clash is not None:
        raise UsageError(f"{clash} exists with other content; the import never replaces it")
    write(files, config_path)
    tasks = [(i.instance_id, os.path.join(out, "cases", f"{i.instance_id}.md")) for i in found]
    return Written(tasks, config_path, repairs)


def _built(specs, out: str, clones: dict[str, str], open_store) -> dict:
    """Each instance's environment built (or found built), by instance id: the spec files
    are read from a scratch copy, since nothing is written to ``out`` before every check."""
    import tempfile

    from yyb.evidence import environment

    chosen, files = specs
    built = {}
    with tempfile.TemporaryDirectory(prefix="yyb-import-") as scratch:
        for name, data in files.items():
            copy = os.path.join(scratch, os.path.relpath(name, out))
            os.makedirs(os.path.dirname(copy), exist_ok=True)
            with open(copy, "wb") as handle:
                handle.write(data)
        for instance_id, spec_path in chosen.items():
            declared = environment.load(os.path.join(scratch, os.path.relpath(spec_path, out)))
            built[instance_id] = environment.ensure(open_store(), declared, clones[instance_id])
    return built
