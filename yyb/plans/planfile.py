"""The plan file: the experiment plan record and every record it links, with their oids.

Loading recomputes every oid from the records' canonical form and refuses a file whose bytes
were edited. docs/plans.md has the format.
"""

from __future__ import annotations

import json
import os

from yyb.errors import UsageError, YybError
from yyb.evidence.kinds.plan import ExperimentPlan
from yyb.evidence.record import kind_of
from yyb.evidence.records import PLAN
from yyb.store import file
from yyb.store.objects import codec
from yyb.store.objects.format import hash_object, is_oid
from yyb.store.objects.store import record_body

FORMAT = "yyb-plan-file.v1"


class PlanFileError(UsageError):
    def __init__(self, path: str, reason: str):
        super().__init__(f"plan file {path}: {reason}")
        self.path = path
        self.reason = reason


def render(plan_oid: str, records: dict[str, dict]) -> bytes:
    document = {
        "format": FORMAT,
        "plan": plan_oid,
        "dispatch_count": 0,
        "records": {oid: codec.to_json(records[oid]) for oid in sorted(records)},
    }
    return (json.dumps(document, indent=1, ensure_ascii=False) + "\n").encode()


def write_new(path: str, data: bytes) -> None:
    """Write a plan file atomically, refusing to replace anything already there."""
    file.write_new(path, data)


def check_output_free(path: str) -> None:
    if os.path.lexists(path):
        raise UsageError(f"{path} exists; an output file is never overwritten")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{path}: folder {folder} does not exist")


def load(path: str, kind: str = PLAN) -> tuple[str, dict[str, dict]]:
    """Read a plan file and prove it unedited: return (plan oid, {oid: record value}).

    Raises:
        PlanFileError: unreadable, malformed, any record not hashing to its stated oid, or a
            plan that is not of ``kind`` (an isolated experiment plan, unless the governed lane
            asks for its own: neither lane takes the other's plan).
    """
    data = file.read_input(path)
    try:
        document = codec.from_json(data)
    except YybError as exc:
        raise PlanFileError(path, f"not a plan file ({exc})") from None
    if document.get("format") != FORMAT:
        raise PlanFileError(path, f"format is {document.get('format')!r}, not {FORMAT!r}")
    plan_oid = document.get("plan")
    raw = document.get("records")
    if not is_oid(plan_oid) or not isinstance(raw, dict) or plan_oid not in raw:
        raise PlanFileError(path, "it does not hold its plan record")
    records = {oid: _proved(path, oid, value) for oid, value in raw.items()}
    plan = records[plan_oid]
    _of_kind(path, plan, kind)
    links = plan.get("links", {})
    for oid in list(links.get("attempts", [])) + list(links.get("cases", [])):
        if oid not in records:
            raise PlanFileError(path, f"the plan links {oid}, which the file does not hold")
    return plan_oid, records


def _proved(path: str, oid: str, value) -> dict:
    """``value`` when it is a record that hashes to ``oid``; PlanFileError otherwise."""
    if not isinstance(value, dict):
        raise PlanFileError(path, f"record {oid} is not an object")
    try:
        body = record_body(value)
    except YybError as exc:
        raise PlanFileError(path, f"record {oid} is invalid ({exc})") from None
    got = hash_object("record", body)
    if got != oid:
        raise PlanFileError(path, f"record {oid} was edited (it now hashes to {got})")
    return value


def plan_oid(name: str, open_store) -> str:
    """Only the oid of the plan ``name`` (a plan file, else an oid or ref in ``open_store()``),
    for commands that read the plan from the store: of a file, only the plan record is proved
    unedited, which is quick however many attempts the file holds."""
    if not os.path.exists(name):
        return in_store(name, open_store)[1]
    data = file.read_input(name)
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PlanFileError(name, f"not a plan file ({exc})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise PlanFileError(name, f"not a {FORMAT} plan file")
    oid, raw = document.get("plan"), document.get("records")
    if not is_oid(oid) or not isinstance(raw, dict) or oid not in raw:
        raise PlanFileError(name, "it does not hold its plan record")
    try:
        value = codec.from_json(json.dumps(raw[oid]))
    except YybError as exc:
        raise PlanFileError(name, f"record {oid} is invalid ({exc})") from None
    _of_kind(name, _proved(name, oid, value), PLAN)
    return oid


def _of_kind(name: str, plan: dict, kind: str) -> None:
    found = kind_of(plan)
    if found != kind:
        raise PlanFileError(name, f"it holds a {found} plan, not a {kind} one")


def in_store(name: str, open_store) -> tuple[object, str]:
    """(the store ``open_store()``, the oid ``name`` stands for in it), for a plan name that
    is no file here: however it is spelled (``plan.json``, ``./plan.json``, an absolute path,
    a ref, an oid), a name that is neither gets one answer.

    Raises:
        UsageError: ``name`` names no file and nothing in the store, or there is no store.
        AmbiguousOid: an abbreviation that matches several objects.
    """
    from yyb.errors import InvalidOid, InvalidRefName, NotFound, StoreNotFound

    try:
        store = open_store()
    except StoreNotFound as exc:
        raise UsageError(f"no plan file or ref {name} ({exc})") from None
    try:
        return store, store.rev_parse(name)
    except (NotFound, InvalidRefName, InvalidOid):
        raise UsageError(f"no plan file or ref {name}") from None


def from_store(store, name: str, oid: str | None = None) -> tuple[str, dict[str, dict]]:
    """The plan ``name`` (oid, abbreviation or ref; ``oid``: what it stands for, when known)
    and every record it links, from a store."""
    oid = oid or store.rev_parse(name)
    experiment = store.objects.get_record(oid)
    if not ExperimentPlan.holds(experiment):
        raise UsageError(f"{name} is not an experiment plan")
    records = {oid: experiment}
    links = ExperimentPlan.from_stored(experiment).links
    for linked in links.attempts + (links.cases or ()):
        records[linked] = store.objects.get_record(linked)
    return oid, records


def resolve(name: str, open_store) -> tuple[str, dict[str, dict]]:
    """A plan named by a plan file path, else by an oid or ref in the store ``open_store()``."""
    if os.path.exists(name):
        return load(name)
    store, oid = in_store(name, open_store)
    return from_store(store, name, oid)
