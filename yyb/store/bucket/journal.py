"""The journal of a store in a bucket: numbered commits, each created once, that together say
which packs are in the store, where each ref stands and what its transparency log holds
(docs/remotes.md, "A store in a bucket").

An S3 bucket offers no rename and no lock, but it does offer a create that fails when the key
exists (``If-None-Match: *``, answered 412). The store's state is therefore never one object
that is rewritten: it is the replay of ``journal/<N>`` for N = 1, 2, ..., each made with a
create-only PUT. A writer uploads its packs first (named by their content, so a second upload
of one is the same bytes), then creates commit N+1, which names them and moves its refs from
the values it read. Of two writers that read commit N, one creates N+1 and the other is
refused; the loser reads N+1 and tries N+2 if none of its refs moved meanwhile, else it fails
as a compare-and-swap fails. A writer that dies before its commit leaves packs no commit names
(``doctor`` notes them, nothing reads them); one that dies after it has pushed. Each commit
also names the SHA-256 of the one before it, so a commit rewritten in place is found.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from yyb.errors import CorruptObject, RefMismatch, UsageError, YybError
from yyb.store.bucket.client import Bucket
from yyb.store.objects.format import is_oid
from yyb.store.refs.names import check_ref_name

FORMAT_KEY = "format"
FORMAT_HEAD = "yyb-bucket 1\nhash sha256\n"
ORIGIN = re.compile(r"yyb/[0-9a-f]{32}")
JOURNAL = "journal/"
COMMIT_FORMAT = "yyb-bucket-commit 1"
DIGITS = 20
COMMIT_KEY = re.compile(r"journal/([0-9]{20})")
PACKS = "objects/pack/"
READERS = 16  # commits read at once
SNAPSHOTS = "snapshots/"
SNAPSHOT_KEY = re.compile(r"snapshots/([0-9]{20})")
SNAPSHOT_FORMAT = "yyb-bucket-snapshot 1"
# A snapshot of the state is written after every this many commits, so that a writer reads
# the newest one and the commits after it, never the whole journal (Delta Lake's
# checkpoints, every 10 commits, serve the same end).
SNAPSHOT_EVERY = 32
# ... and after a commit that moves this many refs or more (a first push of a whole store),
# so that the next writer reads its refs once, as a snapshot, without the commit's leaves.
SNAPSHOT_REFS = 1000


class BucketCorrupt(CorruptObject):
    """The bucket's journal does not replay (yyb doctor against it says everything)."""

    def __init__(self, key: str, reason: str):
        super().__init__(key, reason, "bucket-journal")
        self.message = f"the bucket's {key}: {reason} (run yyb doctor --remote on it)"


@dataclass
class State:
    """The replay of the journal up to commit ``number``."""

    origin: str
    number: int = 0
    digest: str | None = None  # SHA-256 of commit ``number``'s bytes
    refs: dict[str, tuple[str, str]] = field(default_factory=dict)  # ref -> (value, log head)
    packs: list[str] = field(default_factory=list)  # trailers, in the order committed
    leaves: list[tuple[str, str]] = field(default_factory=list)  # (update oid, ref)
    # the number of leaves in all, the ones before a snapshot read included (``leaves``
    # then holds only those of the commits after it)
    leaf_count: int = 0


def commit_key(number: int) -> str:
    return f"{JOURNAL}{number:0{DIGITS}d}"


def snapshot_key(number: int) -> str:
    return f"{SNAPSHOTS}{number:0{DIGITS}d}"


def snapshot_bytes(state: State) -> bytes:
    """The snapshot of ``state``: every ref, every pack, and where the journal stands."""
    return encode(
        {
            "format": SNAPSHOT_FORMAT,
            "number": state.number,
            "digest": state.digest,
            "refs": {name: list(pair) for name, pair in sorted(state.refs.items())},
            "packs": state.packs,
            "leaves": state.leaf_count,
        }
    )


def format_text(origin: str) -> bytes:
    return f"{FORMAT_HEAD}origin {origin}\n".encode("ascii")


def read_origin(bucket: Bucket) -> str | None:
    """The origin of the store's log, or None when no store is at the prefix.

    Raises:
        BucketCorrupt: a ``format`` key of another form.
    """
    data = bucket.get(FORMAT_KEY)
    if data is None:
        return None
    text = data.decode("ascii", "replace")
    origin = text.removeprefix(FORMAT_HEAD).removeprefix("origin ").removesuffix("\n")
    if not text.startswith(FORMAT_HEAD + "origin ") or not ORIGIN.fullmatch(origin):
        first = text.splitlines()[0] if text else "(empty)"
        raise BucketCorrupt(FORMAT_KEY, f"not a yyb store in a bucket ({first!r})")
    return origin


def commits(bucket: Bucket, after: int = 0) -> list[int]:
    """The numbers of the commits listed after ``after``, ascending.

    Raises:
        BucketCorrupt: a key in ``journal/`` that is no commit.
    """
    numbers = []
    for key, _ in bucket.list(JOURNAL, commit_key(after) if after else None):
        found = COMMIT_KEY.fullmatch(key)
        if found is None:
            raise BucketCorrupt(key, "not a commit of the journal")
        numbers.append(int(found[1]))
    return [n for n in sorted(numbers) if n > after]


def fetched(bucket: Bucket, numbers: list[int]) -> Iterator[tuple[int, bytes | None]]:
    """(number, bytes) of each commit, in order, read several at a time."""
    with ThreadPoolExecutor(READERS) as pool:
        yield from zip(numbers, pool.map(lambda n: bucket.get(commit_key(n)), numbers), strict=True)


def replay(bucket: Bucket, state: State, numbers: list[int]) -> State:
    """``state`` brought forward by the commits ``numbers`` (the ones after it).

    Raises:
        BucketCorrupt: a commit missing from the sequence, or one that does not follow.
    """
    for number, data in fetched(bucket, numbers):
        apply(state, number, data)
    return state


def read_state(bucket: Bucket, whole: bool = True) -> State:
    """The store's state: every commit replayed (``whole`` false: from the newest snapshot
    on, so that ``leaves`` holds only the leaves of the commits after it).

    Raises:
        BucketError, BucketCorrupt; ``NoStore`` when nothing is there.
    """
    origin = read_origin(bucket)
    if origin is None:
        raise NoStore(bucket.location.url)
    state = State(origin) if whole else _from_snapshot(bucket, State(origin))
    return replay(bucket, state, commits(bucket, state.number))


def _from_snapshot(bucket: Bucket, state: State) -> State:
    """``state`` as the newest snapshot has it (unchanged when there is none). The commit it
    names must exist; its digest is checked by the next commit's ``previous`` as that commit
    is replayed (and every snapshot against the whole replay by ``doctor``), so that the
    snapshot of a large commit spares a writer that commit's bytes too."""
    numbers = []
    for key, _ in bucket.list(SNAPSHOTS):
        found = SNAPSHOT_KEY.fullmatch(key)
        if found is None:
            raise BucketCorrupt(key, "not a snapshot of the journal")
        numbers.append(int(found[1]))
    if not numbers:
        return state
    number = max(numbers)
    key = snapshot_key(number)
    value = _snapshot(key, bucket.get(key), number)
    if bucket.size(commit_key(number)) is None:
        raise BucketCorrupt(key, f"names commit {number}, which is not in the journal")
    state.number, state.digest = number, value["digest"]
    state.refs = {name: tuple(pair) for name, pair in value["refs"].items()}
    state.packs, state.leaf_count = list(value["packs"]), value["leaves"]
    return state


def _snapshot(key: str, data: bytes | None, number: int) -> dict:
    try:
        value = json.loads(data) if data is not None else None
    except ValueError:
        value = None
    ok = (
        isinstance(value, dict)
        and value.get("format") == SNAPSHOT_FORMAT
        and value.get("number") == number
        and is_oid(value.get("digest"))
        and isinstance(value.get("refs"), dict)
        and all(_pair(pair) for pair in value["refs"].values())
        and isinstance(value.get("packs"), list)
        and all(is_oid(p) for p in value["packs"])
        and isinstance(value.get("leaves"), int)
        and data == encode(value)
    )
    if not ok:
        raise BucketCorrupt(key, f"not a canonical {SNAPSHOT_FORMAT} object of commit {number}")
    return value


class NoStore(UsageError):
    """No store in the bucket at the prefix named."""

    def __init__(self, url: str):
        super().__init__(f"no store in the bucket at {url} (yyb store init {url})")


def apply(state: State, number: int, data: bytes | None) -> None:
    """Replay one commit onto ``state``, checking that it follows.

    Raises:
        BucketCorrupt: it does not (a gap, a broken digest chain, a move from a value the ref
        did not hold, a malformed commit).
    """
    key = commit_key(number)
    if number != state.number + 1 or data is None:
        raise BucketCorrupt(commit_key(state.number + 1), "missing: the journal has a gap")
    value = _parse(key, data)
    if value["number"] != number:
        raise BucketCorrupt(key, f"says it is commit {value['number']}")
    if value["previous"] != state.digest:
        raise BucketCorrupt(key, "does not name the digest of the commit before it")
    for ref, move in sorted(value["refs"].items()):
        old = tuple(move["old"]) if move["old"] is not None else None
        if state.refs.get(ref) != old:
            raise BucketCorrupt(key, f"moves {ref} from a value it did not hold")
        state.refs[ref] = tuple(move["new"])
    state.packs += [p for p in value["packs"] if p not in state.packs]
    state.leaves += [tuple(leaf) for leaf in value["leaves"]]
    state.leaf_count += len(value["leaves"])
    state.number, state.digest = number, hashlib.sha256(data).hexdigest()


def _parse(key: str, data: bytes) -> dict:
    try:
        value = json.loads(data)
    except ValueError:
        raise BucketCorrupt(key, "not JSON") from None
    if not isinstance(value, dict) or value.get("format") != COMMIT_FORMAT:
        raise BucketCorrupt(key, f"not a {COMMIT_FORMAT} object")
    if data != encode(value):
        raise BucketCorrupt(key, "not in canonical form (sorted keys, no spaces)")
    if not _well_formed(value):
        raise BucketCorrupt(key, "a field is missing or of the wrong form")
    return value


def _pair(value) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(is_oid(v) for v in value)


def _well_formed(value: dict) -> bool:
    try:
        refs = value["refs"]
        return (
            isinstance(value["number"], int)
            and (value["previous"] is None or is_oid(value["previous"]))
            and isinstance(value["time_ms"], int)
            and isinstance(value["packs"], list)
            and all(is_oid(p) for p in value["packs"])
            and isinstance(refs, dict)
            and all(
                check_ref_name(r) == r
                and (m["old"] is None or _pair(m["old"]))
                and _pair(m["new"])
                and set(m) == {"old", "new"}
                for r, m in refs.items()
            )
            and isinstance(value["leaves"], list)
            and all(
                isinstance(x, list) and len(x) == 2 and is_oid(x[0]) and check_ref_name(x[1])
                for x in value["leaves"]
            )
        )
    except (KeyError, TypeError, YybError):
        return False


def encode(value: dict) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


@dataclass
class Change:
    """What one writer commits: packs it uploaded, ref moves, the log's new leaves."""

    packs: list[str]
    refs: dict[str, tuple[tuple[str, str] | None, tuple[str, str]]]  # ref -> (old, new)
    leaves: list[tuple[str, str]]


def commit(bucket: Bucket, state: State, change: Change) -> State:
    """Create the commit after ``state`` holding ``change``; when another writer created it
    first, replay what it did and try the next number, unless one of ``change``'s refs moved.

    Raises:
        RefMismatch: a ref of ``change`` moved in the bucket since ``state`` was read.
        BucketError, BucketCorrupt.
    """
    while True:
        value = {
            "format": COMMIT_FORMAT,
            "number": state.number + 1,
            "previous": state.digest,
            "time_ms": int(time.time() * 1000),
            "packs": change.packs,
            "refs": {
                ref: {"old": list(old) if old else None, "new": list(new)}
                for ref, (old, new) in sorted(change.refs.items())
            },
            "leaves": [list(leaf) for leaf in change.leaves],
        }
        data = encode(value)
        if bucket.create(commit_key(state.number + 1), data):
            apply(state, state.number + 1, data)
            if state.number % SNAPSHOT_EVERY == 0 or len(change.refs) >= SNAPSHOT_REFS:
                bucket.create(snapshot_key(state.number), snapshot_bytes(state))
            return state
        replay(bucket, state, commits(bucket, state.number))
        for ref, (old, _) in sorted(change.refs.items()):
            now = state.refs.get(ref)
            if now != old:
                raise RefMismatch(ref, old[0] if old else None, now[0] if now else None)
