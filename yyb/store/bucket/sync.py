"""Push to and fetch from a store in a bucket (``s3://bucket/prefix``; docs/remotes.md).

There is no program on the bucket's side, so the pusher does what ``receive-pack`` does for a
store on disk, against the bucket read as a store (view.py): it decides each ref move as an
import decides it (a fast-forward of the ref's update chain, or nothing to do), uploads one
pack of exactly the objects no index in the bucket lists, and then creates the journal's next
commit naming the pack and the moves (journal.py). A fetch reads the bucket as a store,
streams the packs that hold what this store lacks, and imports a thin bundle of those objects
through the same checks as any bundle.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from yyb.errors import CorruptRef, RefNotFound, UsageError
from yyb.store import file, transfer
from yyb.store.bucket import journal
from yyb.store.bucket.client import Bucket, Location
from yyb.store.bucket.view import open_view, pack_key
from yyb.store.bundle import exchange
from yyb.store.bundle.exchange import Imported, Move, Summary
from yyb.store.bundle.reader import CAPABILITIES, VERSION, Header
from yyb.store.fsck.update_chain import walk_ref_chain
from yyb.store.objects import pack
from yyb.store.refs.names import check_ref_name
from yyb.store.repo import Store


def init(location: Location) -> bool:
    """Make an empty store at ``location`` (create-only: a store there already is kept);
    whether it is new.

    Raises:
        BucketError; BucketCorrupt: something that is no store has the ``format`` key.
    """
    bucket = Bucket(location)
    origin = f"yyb/{os.urandom(16).hex()}"
    made = bucket.create(journal.FORMAT_KEY, journal.format_text(origin))
    journal.read_origin(bucket)
    return made


@contextmanager
def scratch(store: Store) -> Iterator[str]:
    """A temporary folder in the store's ``tmp/`` for the packs read and written."""
    folder = os.path.join(store.path, "tmp") if store.path else None
    if folder:
        file.ensure_dir(folder)
    with tempfile.TemporaryDirectory(dir=folder, prefix=file.TEMP_PREFIX) as path:
        yield path


def push(store: Store, location: Location, names: list[str], force: bool = False):
    """Send ``names`` (refs of ``store``) and the objects the bucket lacks; each ref moves as
    a fast-forward of its update chain, by the journal's compare-and-swap.

    Raises:
        UsageError: ``force`` (a bucket's refs move only as fast-forwards), no store there.
        NotFastForward: a ref the bucket holds at a value not in the pushed chain.
        RefMismatch: a ref another push moved meanwhile. BucketError, BucketCorrupt.
    """
    if force:
        raise UsageError(
            f"{location.url}: refs in a bucket move only as fast-forwards (no --force)"
        )
    bucket = Bucket(location)
    state = journal.read_state(bucket, whole=False)
    header = transfer.header_of(store, names)
    tips = {n: (header.refs[n], header.logs[n]) for n in header.refs}
    same = [
        Move(n, v, v, "none") for n, (v, h) in sorted(tips.items()) if state.refs.get(n) == (v, h)
    ]
    moving = sorted(n for n in tips if state.refs.get(n) != tips[n])
    count, moves = 0, []
    with scratch(store) as folder:
        view = open_view(bucket, state, folder)
        chains = {n: _chain(store, n, *tips[n]) for n in moving}
        wanted = Header(
            header.capabilities,
            {n: tips[n][0] for n in moving},
            {n: tips[n][1] for n in moving},
            header.version,
        )
        moves = exchange.plan_moves(view, Summary(wanted, 0, chains), force=False)
        adopted = [m for m in moves if m.how == "adopt"]
        roots = sorted({x for m in adopted for x in tips[m.ref]})
        oids = transfer.lacking(
            store, roots, lambda part: [o for o in part if not view.objects.contains(o)]
        )
        packs = [_upload(store, bucket, oids, folder)] if oids else []
        view.objects.close()
        count = len(oids)
        if adopted:
            change = journal.Change(
                packs,
                {m.ref: (state.refs.get(m.ref), tips[m.ref]) for m in adopted},
                [
                    leaf
                    for m in adopted
                    for leaf in store.refs.chain_since(tips[m.ref][1], m.old_head)
                ],
            )
            journal.commit(bucket, state, change)
    imported = Imported(sorted(same + moves, key=lambda m: m.ref), [])
    return transfer.Sent(imported, count, bucket.sent, bucket.received)


def _chain(store: Store, name: str, value: str, head: str) -> list[str]:
    """The update records of ``name``'s chain here, newest first, checked as fsck checks it."""
    chain = []
    for finding, oid in walk_ref_chain(name, value, head, store.objects.get_record):
        if finding is not None:
            raise CorruptRef(name, f"{finding.code}: {finding.detail}")
        chain.append(oid)
    return chain


def _upload(store: Store, bucket: Bucket, oids: list[str], folder: str) -> str:
    """Write one pack of ``oids`` (and its index) and put both in the bucket, the index
    last (a pack without its index is not part of the store); its trailer. A pack of the
    same name already there whole (a push cut short, then rerun) is not sent again."""
    items = ((oid, _stored(store, oid)) for oid in sorted(oids))
    path = pack.write(folder, items)
    trailer = os.path.basename(path)[len("pack-") : -len(".pack")]
    if bucket.size(pack_key(trailer)) != os.path.getsize(path):
        bucket.put(pack_key(trailer), path)
    bucket.put(pack_key(trailer, ".idx"), path[: -len(".pack")] + ".idx")
    for suffix in (".pack", ".idx"):
        os.unlink(path[: -len(".pack")] + suffix)
    return trailer


def _stored(store: Store, oid: str) -> bytes:
    got = store.objects.get(oid)  # proved: a copy that hashes to its oid
    return b"%s %d\0" % (got.kind.encode(), len(got.body)) + bytes(got.body)


def fetch(store: Store, location: Location, names: list[str], force: bool = False):
    """Receive ``names`` (refs of the store in the bucket) and the objects this store lacks,
    imported as ``bundle unbundle`` imports a thin bundle (everything checked first).

    Raises:
        RefNotFound: a name the bucket has no ref of. NotFastForward (without ``force``),
        CorruptBundle: what the bucket holds does not verify. BucketError, BucketCorrupt.
    """
    bucket = Bucket(location)
    state = journal.read_state(bucket, whole=False)
    refs, logs = {}, {}
    for name in names:
        full = check_ref_name(name)
        if full not in state.refs:
            raise RefNotFound(full)
        refs[full], logs[full] = state.refs[full]
    header = Header(CAPABILITIES[VERSION], refs, logs, VERSION)
    with scratch(store) as folder:
        view = open_view(bucket, state, folder)
        try:
            roots = sorted(set(refs.values()) | set(logs.values()))
            oids = transfer.lacking(view, roots, lambda part: transfer.lacks(store, part))
            path = os.path.join(folder, "thin.bundle")
            exchange.create(view, path, header, oids, durable=False)
        finally:
            view.objects.close()
        imported = exchange.unbundle(store, path, force, thin=True)
    return transfer.Sent(imported, len(oids), bucket.sent, bucket.received)
