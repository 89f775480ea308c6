"""The environment each imported instance runs in, written as spec files (docs/swe-bench.md).

An instance's environment is a ``python`` spec (docs/environments.md): the interpreter of the
Python version its repository's version asks for, the pinned requirements, and the install
command run at ``environment_setup_commit`` (else the base commit) in ``/testbed``, where an
attempt's workspace is shown, so that an editable install tests the candidate's code. The
recipe comes from the ``--environments`` file when it names the instance (exact pins that were
measured to work), else from SWE-bench's per-repository, per-version specs
(yyb/swebench/specs.json): its ``pip_packages``, with pytest, and its install command. The
interpreter is the host's ``/usr/bin/pythonX.Y`` when there is one and the recipe names no
``system_packages``, else one from a Debian root (a ``rootfs`` spec) of the suite that ships
that version, with those packages. Instances of one repository
and version share one spec, so one build; instances of other versions get their own, in the
same plan.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from yyb.swebench.instances import Instance, InstanceError

# The Debian suites whose python3 is each version (the ones this machine's mirror serves).
SUITES = {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
FOLDER = "envs"
NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Recipe:
    """What an instance's environment is made of."""

    name: str
    python: str
    requirements: tuple[str, ...]
    install: tuple[str, ...]
    system_packages: tuple[str, ...] = ()  # Debian packages: the spec then gets a rootfs base
    variables: tuple[tuple[str, str], ...] = ()  # set for every process in the environment


def read_given(path: str | None) -> dict:
    """The ``--environments`` file: instance id -> recipe fields (docs/swe-bench.md)."""
    if path is None:
        return {}
    from yyb.store import file

    try:
        value = json.loads(file.read_input(path))
    except ValueError as exc:
        raise InstanceError(path, None, f"not JSON ({exc})") from None
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise InstanceError(path, None, "must map instance ids to environment recipes")
    return value


def recipe(instance: Instance, given: dict) -> Recipe | None:
    """The instance's recipe: from ``given`` (the --environments file's entry), else from
    SWE-bench's specs; None when neither knows the instance (it runs on the host's tools)."""
    version = instance.kept.get("version", "")
    entry = given.get(instance.instance_id)
    if entry is not None:
        python = entry.get("python")
        if not isinstance(python, str) or not re.fullmatch(r"3\.\d+", python):
            raise InstanceError(instance.where, "python", "the environment's python must be 3.N")
        name = entry.get("name") or f"{instance.repo_id}-{version or instance.instance_id}"
        return Recipe(
            NAME.sub("-", name)[:100],
            python,
            tuple(_strings(instance, entry, "requirements")),
            tuple(_strings(instance, entry, "install")),
            tuple(sorted(set(_strings(instance, entry, "system_packages")))),
            _variables(instance, entry),
        )
    from yyb.swebench import specs

    spec = specs.spec_for(instance.repo, version)
    if spec is None:
        return None
    requirements = list(spec.pip_packages)
    if not any(re.match(r"pytest\b", r) for r in requirements):
        requirements.append("pytest")
    return Recipe(
        NAME.sub("-", f"{instance.repo_id}-{version}")[:100],
        spec.python,
        tuple(requirements),
        (spec.install,) if spec.install else (),
    )


def _variables(instance: Instance, entry: dict) -> tuple[tuple[str, str], ...]:
    value = entry.get("variables", {})
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and k.isidentifier() and isinstance(v, str) for k, v in value.items()
    ):
        raise InstanceError(instance.where, "variables", "must map variable names to strings")
    return tuple(sorted(value.items()))


def _strings(instance: Instance, entry: dict, name: str) -> list[str]:
    value = entry.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InstanceError(instance.where, name, "must be a list of strings")
    return value


def spec_files(instance: Instance, recipe: Recipe, out: str) -> tuple[str, dict[str, bytes]]:
    """(the instance's spec file, every spec file it needs: path -> bytes).

    Raises:
        InstanceError: its Python is neither the host's nor any Debian suite's here.
    """
    folder = os.path.join(out, FOLDER)
    interpreter = f"/usr/bin/python{recipe.python}"
    spec = {
        "name": recipe.name,
        "kind": "python",
        "python": {
            "interpreter": interpreter,
            "requirements": list(recipe.requirements),
            "install": list(recipe.install),
            "install_commit": instance.kept.get("environment_setup_commit") or instance.base_commit,
        },
    }
    if recipe.variables:
        spec["variables"] = dict(recipe.variables)
    files = {}
    if recipe.system_packages or not os.path.exists(interpreter):
        suite = SUITES.get(recipe.python)
        if suite is None:
            known = ", ".join(f"{v} ({s})" for v, s in SUITES.items())
            raise InstanceError(
                instance.where,
                "version",
                f"needs Python {recipe.python} on a Debian root, and no Debian suite here "
                f"ships it (known: {known}); give an oci environment (docs/environments.md)",
            )
        packages = sorted({f"python{recipe.python}", "git", *recipe.system_packages})
        extra = "-".join(recipe.system_packages)
        name = f"debian-{suite}-python{recipe.python}" + (f"-{extra}" if extra else "")
        base = f"{NAME.sub('-', name)[:100]}.json"
        files[os.path.join(folder, base)] = _json(
            {"name": base[:-5], "kind": "rootfs", "rootfs": {"suite": suite, "packages": packages}}
        )
        spec["base"] = base
    path = os.path.join(folder, f"{recipe.name}.json")
    files[path] = _json(spec)
    return path, files


def _json(value: dict) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode()
