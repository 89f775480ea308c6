"""Which checks make up ``yyb doctor`` of a whole store, and the two that are doctor's own.

Doctor is the store's fsck, then what only a benchmark store holds: run folders that yyb
processes gone left behind, the transparency log against the refs (``logaudit``), the
checkpoint the store carries, every release-readiness receipt re-derived from the attempts
it names, and every built environment's cached tree against its manifest. The receipts are
why the selection lives in this package: it is the one porcelain package whose evidence
doctor re-derives, and porcelain packages do not import each other.
Each check yields findings; the caller decides how to show them and which exit code follows.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from yyb.errors import YybError
from yyb.harness import scratch
from yyb.store.fsck import Finding, error, fsck, info
from yyb.store.log import audit as logaudit
from yyb.store.log import checkpoint


def findings(store) -> Iterator[Finding]:
    """Every finding of ``yyb doctor`` on ``store``, check after check, as they come."""
    return itertools.chain(
        fsck(store),
        leftovers(store),
        logaudit.audit(store),
        carried_checkpoint(store),
        readiness(store),
        environments(store),
    )


def bucket_findings(location, scratch_folder: str) -> Iterator[Finding]:
    """Every finding of ``yyb doctor --remote s3://...``: the bucket's own checks (its keys,
    journal, packs, objects, refs; yyb/store/bucket/check.py), then the checks of doctor's
    that read only objects and refs, on the bucket read as a store: the transparency log
    against the refs, the carried checkpoint and the release-readiness receipts."""
    from yyb.store.bucket.check import BucketCheck

    check = BucketCheck(location, scratch_folder)
    yield from check.findings()
    if check.view is None:
        return
    try:
        yield from itertools.chain(
            logaudit.audit(check.view), carried_checkpoint(check.view), readiness(check.view)
        )
    finally:
        check.view.objects.close()


def readiness(store) -> Iterator[Finding]:
    """The release-readiness receipts' findings (``verify.doctor``); the modules that check
    them (every record kind) are imported only for a store with a ref under
    ``refs/release-readiness/``: a doctor of objects alone does not pay for them."""
    from yyb.evidence import names

    if store.refs.names(under=names.READINESS):
        from yyb.readiness import verify

        yield from verify.doctor(store)


def environments(store) -> Iterator[Finding]:
    """Every built environment a ref names, its cached tree read whole against its manifest
    (docs/environments.md): one that differs is an error; one not cached here is a note. The
    registry is imported only for a store with a ref under ``refs/environments/``."""
    from yyb.harness.environments import REFS

    if not store.refs.names(under=REFS.rstrip("/")):
        return
    from yyb.harness.environments import registry

    for entry in registry.entries(store):
        subject = f"refs/environments/{entry.spec_oid}"
        if not entry.cached:
            yield info("environment-not-cached", subject, "not built in this registry")
            continue
        problem = registry.verify(store, entry)
        if problem is not None:
            yield error("environment-mismatch", subject, problem)


def leftovers(store) -> Iterator[Finding]:
    """Run folders (private folders of attempts and gradings) of yyb processes that are gone."""
    for path in scratch.leftovers(store.path):
        yield error(
            "leftover-run-folder",
            path,
            "private folders of a yyb process that is gone (workspaces, grader files); "
            "the next 'yyb run' or 'yyb recover' removes them",
        )


def carried_checkpoint(store) -> list[Finding]:
    """The checkpoint under refs/transparency/checkpoint, if any: its note, root and leaves
    agree, and when it is this store's own, its log still extends it."""
    oid = store.refs.read(checkpoint.REF)
    if oid is None:
        return []
    try:
        record, _ = checkpoint.check(store, oid)
        with store.refs.transparency.reading() as log:
            if log.origin() == record["origin"]:
                checkpoint.extends(
                    checkpoint.parse_body(store.objects.get(record["links"]["note"]).body),
                    list(log.entries()),
                )
    except YybError as exc:
        return [error("log-checkpoint", oid, str(exc))]
    return []
