"""An environment as a case declares it: a spec file, its record, its hashes.

A spec file is JSON (docs/environments.md, "The spec"): the record's fields, with two
conveniences a record cannot hold: ``base`` names another spec file (relative to this one)
whose oid becomes ``links.base``, and ``source`` names where an ``oci`` image lies (a layout
folder or a saved tarball, relative to the file), which is where to build from, not what is
built: the image's digest in ``oci.image`` is. The record is what enters hashes; its oid names
the environment a case declares, and the built environment's record (harness/environments/)
adds the manifest's hash.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from yyb.errors import EnvironmentMismatch, EnvironmentSpecError, SchemaViolation
from yyb.harness.environments import SPEC, WORKSPACE
from yyb.store.objects import codec
from yyb.store.objects.format import hash_object

MAX_SPEC = 1 << 20
MAX_DEPTH = 4  # a python spec over a rootfs over nothing: bases do not nest deeper


@dataclass(frozen=True)
class Declared:
    """A spec file read and checked: its record's value and oid, its base, its image source."""

    path: str
    value: dict
    oid: str
    base: Declared | None = None
    source: str | None = None

    @property
    def name(self) -> str:
        return self.value["name"]

    def records(self) -> list[tuple[str, dict]]:
        """(oid, value) of this spec and every base below it, bases first."""
        below = self.base.records() if self.base is not None else []
        return [*below, (self.oid, self.value)]


def load(path: str, depth: int = 0) -> Declared:
    """Read the spec file at ``path``.

    Raises:
        EnvironmentSpecError: unreadable, not JSON, refused by the schema, or a base that is
            not a root (an oci or rootfs spec) or nests too deep.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SPEC + 1)
    except OSError as exc:
        raise EnvironmentSpecError(path, None, f"cannot read it ({exc.strerror})") from None
    if len(data) > MAX_SPEC:
        raise EnvironmentSpecError(path, None, f"larger than {MAX_SPEC} bytes")
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise EnvironmentSpecError(path, None, f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise EnvironmentSpecError(path, None, "must be a JSON object")
    here = os.path.dirname(os.path.abspath(path))
    base = source = None
    value.setdefault("schema_version", SPEC)
    value.setdefault("workspace", WORKSPACE)
    if "base" in value:
        base = _base(path, here, value.pop("base"), depth)
        value.setdefault("links", {})["base"] = base.oid
    if "source" in value:
        given = value.pop("source")
        if not isinstance(given, str) or not given:
            raise EnvironmentSpecError(path, "source", "must be a path")
        source = os.path.join(here, given)
    return Declared(os.path.abspath(path), value, check(value, path), base, source)


def _base(path: str, here: str, given, depth: int) -> Declared:
    if not isinstance(given, str) or not given:
        raise EnvironmentSpecError(path, "base", "must be the path of another spec file")
    if depth + 1 >= MAX_DEPTH:
        raise EnvironmentSpecError(path, "base", f"bases nest deeper than {MAX_DEPTH}")
    base = load(os.path.join(here, given), depth + 1)
    if base.value["kind"] == "python":
        raise EnvironmentSpecError(path, "base", f"{given} is a python spec, not a root")
    return base


def check(value: dict, where: str) -> str:
    """Validate a spec record's value; its oid.

    Raises:
        EnvironmentSpecError: naming the field the schema refuses.
    """
    from yyb.store import schema

    if value.get("schema_version") != SPEC:
        raise EnvironmentSpecError(where, "schema_version", f"must be {SPEC}")
    try:
        schema.validate(value, SPEC)
    except SchemaViolation as exc:
        raise EnvironmentSpecError(where, exc.path.removeprefix("$."), exc.reason) from None
    return hash_object("record", codec.encode(value))


def identity_of(ready) -> dict:
    """``identity`` of a built environment (harness.environments.build.Ready)."""
    return identity(ready.spec_oid, ready.record, ready.oid)


def identity(spec_oid: str, environment: dict, environment_oid: str) -> dict:
    """What a plan, a receipt, a grader's input and a compatibility key say of the
    environment an attempt ran in: the spec's oid, the built tree's manifest hash, the
    environment record's oid."""
    return {
        "spec": spec_oid,
        "manifest_sha256": environment["manifest_sha256"],
        "environment": environment_oid,
    }


def ensure(store, declared: Declared, repository: str | None = None, progress=None):
    """``declared`` built (its base first) or found built and checked, as a
    ``harness.environments.build.Ready``; its spec records stored.

    Raises:
        EnvironmentBuildFailed, EnvironmentSpecError, EnvironmentMismatch: see build.ensure.
    """
    from yyb.harness.environments import build

    base = ensure(store, declared.base, None, progress) if declared.base is not None else None
    store.objects.put_record(declared.value)
    request = build.Request(declared.value, declared.oid, base, declared.source, repository)
    return build.ensure(store, request, progress=progress)


def resolver(open_store, progress=None):
    """The ``environments`` a task plan takes (plans.build.Environments); ``open_store``
    gives the store, called only once an environment is needed (a plan refused for its input
    leaves no store behind)."""

    def resolve(declared: Declared, repository: str | None) -> tuple[str, dict]:
        ready = ensure(open_store(), declared, repository, progress)
        return ready.oid, ready.record

    return resolve


def pinned(store, plan: dict) -> dict:
    """The plan's built environments (build.Ready), by spec oid, each found built here and
    checked (once per process: ``build.pinned``).

    Raises:
        EnvironmentMismatch: one is not built here, or differs from its manifest.
    """
    from yyb.harness.environments import build

    return {
        pin["spec"]: build.pinned(store, pin["environment"]) for pin in plan.get("environments", ())
    }


def pinned_for(store, plan: dict, case: dict | None):
    """The built environment (build.Ready) the plan pins for ``case``, checked; None when
    the case declares none.

    Raises:
        EnvironmentMismatch: not built here, or its tree differs from its manifest.
    """
    if case is None or not case.get("environment"):
        return None
    found = pinned(store, plan).get(case["environment"])
    if found is None:
        raise EnvironmentMismatch(case["case_id"], ".", "the plan pins no build of its environment")
    return found
