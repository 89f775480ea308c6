"""An attacker's tools against a store: forged records, refs moved or planted.

``move`` uses the plumbing a forger has (``update-ref``), which leaves every move on record;
``plant`` goes below it, replacing the ref file and its update log as if the forged record
had been the first and only value. Only checks of content (identity, evaluator, paths) or a
signature can catch what ``plant`` does.
"""

from __future__ import annotations

import os

from yyb.evidence import names


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
