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
from yyb.evidence.kinds.attempt import AttemptEvidence, AttemptEvidenceLinks, Terminal
from yyb.evidence.record import ABSENT


def seal(store, oid: str, signer) -> None:
    """Make sure ``oid`` carries its signature when a key is configured (idempotent)."""
    if signer is None:
        return
    from yyb import signing

    signing.sign(store, oid, signer)


def publish(ctx, attempt_oid: str, terminal: Terminal, listing: str | None, status) -> Result:
    """Store the terminal, create its ref from nothing signing it on the way, then the
    evidence. Also how recovery finishes a terminal whose publishing a crash cut short."""
    store = ctx.store
    terminal_oid = store.objects.put_record(terminal.to_value())
    store.refs.update(
        ctx.ref(attempt_oid, "terminal"),
        terminal_oid,
        old=None,
        reason=f"terminal {terminal.class_}",
        before_move=lambda: seal(store, terminal_oid, ctx.signer),
    )
    evidence(ctx, attempt_oid, terminal_oid, terminal, listing)
    result = Result.of(attempt_oid, ctx.attempts[attempt_oid], terminal_oid, terminal, status)
    if ctx.progress:
        ctx.progress(result)
    return result


def evidence(
    ctx, attempt_oid: str, terminal_oid: str, terminal: Terminal, listing: str | None
) -> str:
    """Create the attempt's evidence ref (from nothing) for its published terminal."""
    found = terminal.links
    record = AttemptEvidence(
        plan=ctx.plan_oid,
        attempt=attempt_oid,
        class_=terminal.class_,
        links=AttemptEvidenceLinks(
            terminal=terminal_oid,
            # An empty list of evaluations is left out, as an absent one is.
            manifest=found.manifest or ABSENT,
            patch=found.patch or ABSENT,
            evaluations=found.evaluations or ABSENT,
            listing=listing or ABSENT,
        ),
    )
    oid = ctx.store.objects.put_record(record.to_value())
    ctx.store.refs.update(
        ctx.ref(attempt_oid, "evidence"), oid, old=None, reason="attempt evidence"
    )
    return oid
