"""An instance's listed test ids, checked against what pytest collects (``--check-ids``).

Each instance's base commit is exported from its clone as a candidate's workspace is
(yyb/harness/snapshot.py), listed into a store in memory, and collected with the test patch
applied, in the sandbox (yyb/grading/collection.py). A listed id that begins exactly one
collected id is repaired to it, and the repair is reported; any other id that is not
collected refuses the instance, naming every such id. docs/swe-bench.md, "Checking the ids".
"""

from __future__ import annotations

import dataclasses

from yyb.config import DEFAULT_EXCLUDED
from yyb.evidence import testpatch
from yyb.grading import collection
from yyb.harness import apply, manifest, probe, scratch, snapshot, worktree
from yyb.store.repo import Store
from yyb.swebench.instances import LISTS, Instance, InstanceError

# The pytest of a built environment: its own ``python`` (on the environment's PATH).
ENVIRONMENT_PYTEST = ["python", "-m", "pytest"]


def check(
    instances: list[Instance], clones: dict[str, str], python: str, box: dict
) -> tuple[list[Instance], list[str]]:
    """(the instances with repaired lists, one line per repair); ``clones`` maps each instance
    id to its clone, ``box`` holds the sandbox's ``protected`` roots and ``read_only`` paths,
    and the built ``environments`` by instance id, for the instances that run on one.

    Raises:
        SandboxUnavailable: the sandbox cannot start here.
        InstanceError: an instance with a listed id that is not collected and cannot be
            repaired, or whose test patch does not apply to its base.
    """
    probe.probe()
    pytest = collection.runner([python, "-m", "pytest"])
    out, repairs = [], []
    for instance in instances:
        if not testpatch.test_files([*instance.fail_to_pass, *instance.pass_to_pass]):
            out.append(instance)  # no pytest node id to check
            continue
        ready = box.get("environments", {}).get(instance.instance_id)
        runner = pytest if ready is None else ENVIRONMENT_PYTEST
        collected = _collect(
            instance, clones[instance.instance_id], runner, dict(box, environment=ready)
        )
        lists = {}
        for name, listed in zip(LISTS, (instance.fail_to_pass, instance.pass_to_pass), strict=True):
            unknown = collection.resolve(listed, collected)
            refused = [u for u in unknown if u.repaired is None]
            if refused:
                raise InstanceError(
                    instance.where,
                    name,
                    f"{len(refused)} listed id(s) not collected at the base with the test "
                    "patch applied: " + "; ".join(f"{u.test_id!r} {u.reason}" for u in refused),
                )
            fixed = {u.test_id: u.repaired for u in unknown}
            lists[name] = [fixed.get(t, t) for t in listed]
            repairs += [f"{instance.where}: {name}: {u.test_id!r} {u.reason}" for u in unknown]
        out.append(
            dataclasses.replace(
                instance, fail_to_pass=lists["FAIL_TO_PASS"], pass_to_pass=lists["PASS_TO_PASS"]
            )
        )
    return out, repairs


def _collect(instance: Instance, clone: str, pytest: list[str], box: dict):
    """What pytest collects of the instance's listed tests' files at its base commit with
    its test patch applied."""
    store = Store.memory()
    root = scratch.folder("import")
    try:
        dest = f"{root}/workspace"
        snapshot.create(clone, instance.base_commit, list(DEFAULT_EXCLUDED), dest)
        base = manifest.scan(store, dest).entries
    finally:
        worktree.remove(root)
    listed = [*instance.fail_to_pass, *instance.pass_to_pass]
    try:
        return collection.collect(store, pytest, base, instance.test_patch, listed, box)
    except apply.PatchError as exc:
        raise InstanceError(
            instance.where, "test_patch", f"does not apply to the base: {exc}"
        ) from None
