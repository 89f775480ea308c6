"""Dispatch: the durable intent that makes an attempt happen at most once, and its inputs."""

from __future__ import annotations

import os
import socket

from yyb.errors import RefMismatch
from yyb.evidence.kinds.attempt import DispatchIntent, DispatchIntentLinks
from yyb.harness import supervise


def dispatch(ctx, attempt_oid: str) -> str | None:
    """Write the attempt's dispatch intent; None when another process dispatched it first.

    The intent ref is created from nothing by compare-and-swap before the candidate starts:
    whoever creates it owns the attempt, and an attempt with an intent is never started again.
    """
    attempt = ctx.attempts[attempt_oid]
    intent = DispatchIntent(
        plan=ctx.plan_oid,
        attempt=attempt_oid,
        ordinal=attempt["ordinal"],
        model=attempt["model"]["resolved"],
        harness=ctx.plan["candidate_harness"]["id"],
        time_ms=supervise.now_ms(),
        host=socket.gethostname(),
        pid=os.getpid(),
        links=DispatchIntentLinks(plan=ctx.plan_oid, attempt=attempt_oid),
    )
    oid = ctx.store.objects.put_record(intent.to_value())
    try:
        ctx.store.refs.update(
            ctx.ref(attempt_oid, "intent"), oid, old=None, reason="dispatch intent"
        )
    except RefMismatch:
        return None
    return oid


def inputs(ctx, attempt: dict) -> tuple[dict | None, bytes | None, bytes | None]:
    """(case record, prompt bytes, workflow bytes) of an attempt, from the store."""
    objects = ctx.store.objects
    if attempt["kind"] == "workflow":
        return None, None, objects.get(attempt["links"]["workflow"]).body
    case = objects.get_record(attempt["links"]["case"])
    return case, objects.get(case["links"]["prompt"]).body, None
