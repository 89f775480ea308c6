"""Publish: sign the terminal inside the update of its ref, then write the attempt evidence.

Order is what makes a crash safe. The terminal's signature (when a key is configured) is made
once the ref update is on record and before the ref moves (``before_move``), so a published
terminal is never unsigned, and a crash while signing leaves that update pending: recovery
reads the terminal from it and publishes that very terminal, finishing its signature (signing
again yields the same deterministic Ed25519 signature), instead of deciding another one. A
crash after the terminal ref moved leaves the evidence to recovery.
"""

from __future__ import annotations

from yyb.attempts.context import Result
from yyb.evidence.records import EVIDENCE


def seal(store, oid: str, signer) -> None:
    """Make sure ``oid`` carries its signature when a key is configured (idempotent)."""
    if signer is None:
        return
    from yyb import signing

    signing.sign(store, oid, signer)


def publish(ctx, attempt_oid: str, terminal: dict, listing: str | None, status) -> Result:
    """Store the terminal, create its ref from nothing signing it on the way, then the
    evidence. Also how recovery finishes a terminal whose publishing a crash cut short."""
    store = ctx.store
    terminal_oid = store.objects.put_record(terminal)
    store.refs.update(
        ctx.ref(attempt_oid, "terminal"),
        terminal_oid,
        old=None,
        reason=f"terminal {terminal['class']}",
        before_move=lambda: seal(store, terminal_oid, ctx.signer),
    )
    evidence(ctx, attempt_oid, terminal_oid, terminal, listing)
    result = Result.of(attempt_oid, ctx.attempts[attempt_oid], terminal_oid, terminal, status)
    if ctx.progress:
        ctx.progress(result)
    return result


def evidence(ctx, attempt_oid: str, terminal_oid: str, terminal: dict, listing: str | None) -> str:
    """Create the attempt's evidence ref (from nothing) for its published terminal."""
    links = {"terminal": terminal_oid}
    for key in ("manifest", "patch", "evaluations"):
        if terminal["links"].get(key):
            links[key] = terminal["links"][key]
    if listing:
        links["listing"] = listing
    record = {
        "schema_version": EVIDENCE,
        "plan": ctx.plan_oid,
        "attempt": attempt_oid,
        "class": terminal["class"],
        "links": links,
    }
    oid = ctx.store.objects.put_record(record)
    ctx.store.refs.update(
        ctx.ref(attempt_oid, "evidence"), oid, old=None, reason="attempt evidence"
    )
    return oid
