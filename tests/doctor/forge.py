"""An attacker's tools against a store: forged records, refs moved or planted.

``move`` uses the plumbing a forger has (``update-ref``), which leaves every move on record;
``plant`` goes below it, replacing the ref file and its update log as if the forged record
had been the first and only value. Only checks of content (identity, evaluator, paths), a
signature or the transparency log's replay (a second creation of a ref the log holds) can
catch what ``plant`` does. ``plant_by_hand`` does the same with files alone, the log's leaf
appended by hand and its derived files dropped.
"""

from __future__ import annotations

import os

from tests.conftest import forged_update
from yyb.evidence import names
from yyb.store.log import transparency as translog


def forge(store, oid: str, **changes) -> str:
    """A copy of the record ``oid`` with ``changes`` (``links`` merged), stored."""
    record = dict(store.objects.get_record(oid), **changes)
    if "links" in changes:
        record["links"] = dict(store.objects.get_record(oid)["links"], **changes["links"])
    return store.objects.put_record(record)


def move(store, name: str, oid: str) -> None:
    """update-ref: the move is appended to the ref's update chain."""
    store.refs.update(name, oid, reason="forged")


def plant(store, name: str, oid: str) -> None:
    """Make ``oid`` the ref's value with a chain of one update from nothing."""
    for path in (store.refs.path(name), store.refs.log_path(name)):
        if os.path.exists(path):
            os.unlink(path)
    store.refs.update(name, oid, old=None, reason="planted")


def plant_by_hand(store, name: str, oid: str) -> str:
    """``plant`` with files alone: a fresh update from nothing to ``oid`` (``old`` empty),
    the ref file and its log head naming it, its leaf appended to ``transparency/leaves``, the
    log's derived files removed (every reader rebuilds them from the leaves); its oid."""
    update = forged_update(store, name, oid)
    for path, value in ((store.refs.path(name), oid), (store.refs.log_path(name), update)):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(value + "\n")
    folder = os.path.join(store.path, translog.FOLDER)
    with open(os.path.join(folder, "leaves"), "ab") as handle:
        handle.write(translog.leaf_line(update, name))
    drop_derived(store)
    return update


def set_back(store, ref: str, head: str) -> None:
    """Point a ref and its log head at an earlier update, as someone with the files can."""
    record = store.objects.get_record(head)
    with open(store.refs.log_path(ref), "w") as handle:
        handle.write(head + "\n")
    with open(store.refs.path(ref), "w") as handle:
        handle.write(record["new"] + "\n")


def drop_derived(store) -> None:
    """Remove the log's derived files (``level-NN``, ``state``), as a rewriter of it does."""
    folder = os.path.join(store.path, translog.FOLDER)
    for entry in os.listdir(folder):
        if entry.startswith("level-") or entry == "state":
            os.remove(os.path.join(folder, entry))


def consistent_pass(store, plan_oid: str) -> tuple[str, dict[str, str]]:
    """The idler's failure as a pass, consistent all the way down (doctor --plan's content
    checks alone cannot tell): a new result, its generation-1 evaluation, a resolved terminal
    linking it and evidence linking both. (attempt oid, {run ref: the forged record}); no ref
    is moved."""
    attempt_oid, terminal = attempt_of(store, plan_oid, "example/idler")
    [receipt_oid] = terminal["links"]["evaluations"]
    receipt = store.objects.get_record(receipt_oid)
    result = forge(store, receipt["links"]["result"], verdict="pass", quality="pass", exit_code=0)
    evaluation = forge(store, receipt_oid, verdict="pass", links={"result": result})
    name = leaf(store, plan_oid, attempt_oid, "terminal")
    forged = forge(
        store,
        store.refs.read(name),
        reason="the candidate succeeded and the grader passed its result",
        links={"evaluations": [evaluation]},
        **{"class": "resolved"},
    )
    evidence = forge(
        store,
        store.refs.read(leaf(store, plan_oid, attempt_oid, "evidence")),
        links={"terminal": forged, "evaluations": [evaluation]},
        **{"class": "resolved"},
    )
    return attempt_oid, {
        names.evaluation(plan_oid, attempt_oid, receipt["profile"]): evaluation,
        name: forged,
        leaf(store, plan_oid, attempt_oid, "evidence"): evidence,
    }


def leaf(store, plan_oid: str, attempt_oid: str, which: str) -> str:
    return names.attempt(plan_oid, attempt_oid, which)


def attempt_of(store, plan_oid: str, model: str) -> tuple[str, dict]:
    """The first attempt of ``model`` (a resolved model name) and its terminal."""
    plan = store.objects.get_record(plan_oid)
    for attempt_oid in plan["links"]["attempts"]:
        attempt = store.objects.get_record(attempt_oid)
        if attempt["model"]["resolved"] == model:
            terminal = store.objects.get_record(
                store.refs.read(leaf(store, plan_oid, attempt_oid, "terminal"))
            )
            return attempt_oid, terminal
    raise LookupError(model)
