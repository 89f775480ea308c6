"""Moving refs and only the objects the other store lacks, over one byte stream each way
(docs/remotes.md, "The transfer protocol").

Two programs speak it: the one run by the user (``yyb push`` / ``yyb fetch``) and the one
run on the other store (``yyb receive-pack DIR`` / ``yyb upload-pack DIR``, over SSH or as a
local child process), as Git's ``send-pack`` speaks to ``receive-pack``. Every message is a
decimal length, a newline and that many bytes of JSON (an object); a pack is a message
``{"pack": N}`` followed by exactly N bytes: a thin bundle (docs/format.md, "Bundles": the
version 2 form, holding only the objects the receiver said it lacks).

The side that has the objects walks from the refs' values and log heads one level at a
time, asking the other side which of them it lacks (``{"lacks": [...]}`` answered by
``{"lacking": [...]}``) and following only the links of those: a store holds everything an
object it holds links (yyb writes what a record links before the record, and an import lands
each object after the ones it links), so what it holds it holds whole. The receiver checks
the thin bundle as ``bundle verify`` does, every link resolving in the bundle or in the store,
lands it, and moves each ref by compare-and-swap (a fast-forward of its update chain, as
``bundle unbundle`` moves them), so a push that would rewrite or roll back history is refused
and of two concurrent pushes of one ref one wins and the other is refused.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from yyb.errors import UsageError, YybError
from yyb.store import file
from yyb.store.bundle import exchange, pack_form
from yyb.store.bundle.exchange import Imported, Move
from yyb.store.bundle.reader import CAPABILITIES, VERSION, Header, render_header
from yyb.store.objects.pack import HASH, HEAD
from yyb.store.refs.names import check_ref_name
from yyb.store.repo import Store

PROTOCOL = "yyb-transfer/1"
MAX_MESSAGE = 64 << 20  # bytes of one JSON message
ASK_BATCH = 20_000  # oids asked about in one message
COPY = 1 << 20


class ProtocolError(YybError):
    """The other side broke the protocol (or the connection was cut)."""

    exit_code = 1


class RemoteRefused(YybError):
    """The other side refused the transfer; its reason is the message."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


class Channel:
    """The two byte streams to the other side, with the protocol's framing."""

    def __init__(self, incoming: BinaryIO, outgoing: BinaryIO):
        self.incoming, self.outgoing = incoming, outgoing
        self.sent = self.received = 0  # bytes, both ways, framing included

    def send(self, message: dict) -> None:
        data = json.dumps(message, sort_keys=True, separators=(",", ":")).encode()
        self._write(b"%d\n" % len(data) + data)

    def receive(self) -> dict:
        line = self.incoming.readline(32)
        self.received += len(line)
        if not line.endswith(b"\n") or not line[:-1].isdigit():
            raise ProtocolError("the connection was cut" if not line else "a malformed frame")
        size = int(line)
        if size > MAX_MESSAGE:
            raise ProtocolError(f"a message of {size} bytes, more than {MAX_MESSAGE}")
        data = self._read(size)
        try:
            message = json.loads(data)
        except ValueError:
            raise ProtocolError("a message that is not JSON") from None
        if not isinstance(message, dict):
            raise ProtocolError("a message that is not a JSON object")
        if "error" in message:
            raise RemoteRefused(str(message["error"]), _code(message.get("exit")))
        return message

    def receive_file(self, size: int, folder: str | None) -> str:
        """The next ``size`` bytes into a new temporary file in ``folder``; its path."""
        fd, path = tempfile.mkstemp(dir=folder, prefix=file.TEMP_PREFIX, suffix=".bundle")
        try:
            with os.fdopen(fd, "wb") as handle:
                left = size
                while left:
                    chunk = self.incoming.read(min(COPY, left))
                    if not chunk:
                        raise ProtocolError("the connection was cut in the middle of a pack")
                    handle.write(chunk)
                    left -= len(chunk)
                    self.received += len(chunk)
        except BaseException:
            file.discard(path)
            raise
        return path

    def write_raw(self, data: bytes) -> None:
        """Bytes of a pack whose size was stated, unframed and not yet flushed."""
        self._write(data, flush=False)

    def flush(self) -> None:
        try:
            self.outgoing.flush()
        except (BrokenPipeError, ConnectionResetError):
            raise ProtocolError("the connection was cut") from None

    def _write(self, data: bytes, flush: bool = True) -> None:
        try:
            self.outgoing.write(data)
            if flush:
                self.outgoing.flush()
        except (BrokenPipeError, ConnectionResetError):
            raise ProtocolError("the connection was cut") from None
        self.sent += len(data)

    def _read(self, size: int) -> bytes:
        data = self.incoming.read(size)
        self.received += len(data)
        if len(data) != size:
            raise ProtocolError("the connection was cut")
        return data


def _code(value) -> int:
    return value if isinstance(value, int) and value in (1, 2) else 1


def expect(message: dict, key: str):
    if key not in message:
        raise ProtocolError(f"expected {key!r}, got {sorted(message)}")
    return message[key]


# --- what the other side lacks --------------------------------------------------------------


def lacking(
    store: Store,
    roots: list[str],
    ask: Callable[[list[str]], list[str]],
    sizes: dict[str, int] | None = None,
) -> list[str]:
    """The objects reachable from ``roots`` that the other side lacks, each checked as fsck
    checks it: asked about one level at a time (``ask``: oids -> those it lacks), only the
    links of what it lacks followed (``sizes``: filled with each one's stored length).

    Raises:
        ObjectMissing, CorruptObject: this store cannot supply an intact object.
        ProtocolError: ``ask`` answered with an oid it was not asked about.
    """
    seen = set(roots)
    frontier = sorted(seen)
    found: list[str] = []
    while frontier:
        wanted: list[str] = []
        for start in range(0, len(frontier), ASK_BATCH):
            part = frontier[start : start + ASK_BATCH]
            said = ask(part)
            if not set(said) <= set(part):
                raise ProtocolError("the other side lacks objects it was not asked about")
            wanted += said
        frontier = []
        for oid in sorted(set(wanted)):
            if sizes is None:
                links = exchange.checked_links(store, oid)
            else:
                links, sizes[oid] = exchange.checked_and_sized(store, oid)
            found.append(oid)
            for target in links:
                if target not in seen:
                    seen.add(target)
                    frontier.append(target)
        frontier.sort()
    return sorted(found)


def lacks(store: Store, oids: list) -> list[str]:
    """Which of ``oids`` the store lacks (each must be an oid)."""
    from yyb.store.objects.format import is_oid

    if not isinstance(oids, list) or not all(isinstance(o, str) and is_oid(o) for o in oids):
        raise ProtocolError("lacks: expected a list of oids")
    held = store.objects.held_of(oids)
    return [oid for oid in oids if oid not in held]


# --- refs -----------------------------------------------------------------------------------


def listed(store: Store, names: list) -> dict[str, list | None]:
    """Each name's full ref -> [value, log head], or None when the store has no such ref."""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ProtocolError("ls-refs: expected a list of ref names")
    shown: dict[str, list | None] = {}
    for name in names:
        full = check_ref_name(name)
        value = store.refs.read(full)
        shown[full] = None if value is None else [value, store.refs.log_head(full)]
    return shown


# --- sending: the side that has the objects -------------------------------------------------


def send_pack(store: Store, channel: Channel, header: Header, ask, force: bool = False) -> int:
    """Send a thin bundle of ``header``'s refs: the objects the other side lacks (``force``:
    ask it to move refs that are no fast-forward). Returns how many objects it holds.

    The bundle is written straight into the channel as it is made, its size stated first
    (computed from the stored lengths the walk found), so that the other side receives while
    this side reads and hashes the objects.
    """
    sizes: dict[str, int] = {}
    oids = lacking(store, roots_of(header), ask, sizes)
    head = render_header(header)
    total = len(head) + HEAD.size + sum(sizes.values()) + HASH
    channel.send({"pack": total, "objects": len(oids), "force": force})
    out = _Counted(channel)
    try:
        pack_form.write(store, out, head, oids)
    except ProtocolError:
        raise
    except YybError as exc:  # the pack is cut short: only ending the session says so
        raise ProtocolError(f"stopped sending the pack: {exc.message}") from None
    channel.flush()
    if out.count != total:  # the stream is out of step: the other side's check refuses it
        raise ProtocolError(f"the pack was {out.count} bytes, not the {total} stated")
    return len(oids)


def roots_of(header: Header) -> list[str]:
    return sorted(set(header.refs.values()) | set(header.logs.values()))


class _Counted:
    """A file-like writer into a channel that counts the bytes written."""

    def __init__(self, channel: Channel) -> None:
        self.channel, self.count = channel, 0

    def write(self, data: bytes) -> None:
        self.channel.write_raw(data)
        self.count += len(data)


def asker(channel: Channel) -> Callable[[list[str]], list[str]]:
    """``ask`` over ``channel``: the other side answers which oids it lacks."""

    def ask(oids: list[str]) -> list[str]:
        channel.send({"lacks": oids})
        return expect(channel.receive(), "lacking")

    return ask


def receive_pack(store: Store, channel: Channel, size: int, force: bool) -> Imported:
    """Receive a thin bundle of ``size`` bytes and import it (nothing written unless all of
    it verifies and every ref move is allowed)."""
    folder = os.path.join(store.path, "tmp") if store.path else None
    if folder:
        file.ensure_dir(folder)
    path = channel.receive_file(size, folder)
    try:
        return exchange.unbundle(store, path, force, thin=True)
    finally:
        file.discard(path)


@dataclass
class Sent:
    """What a push or fetch did: the ref moves (and local copies replaced, on the receiving
    side), the objects and the bytes that crossed (framing included)."""

    imported: Imported
    objects: int
    sent: int
    received: int


def header_of(store: Store, names: list[str]) -> Header:
    """The refs to send (their values and log heads), as a bundle header."""
    return exchange.ref_tips(store, names, VERSION)


def moves_of(message: dict) -> list[Move]:
    return [Move(m["ref"], m["old"], m["new"], m["how"]) for m in expect(message, "moves")]


def said_moves(moves: list[Move]) -> list[dict]:
    return [{"ref": m.ref, "old": m.old, "new": m.new, "how": m.how} for m in moves]


def capabilities() -> list[str]:
    return list(CAPABILITIES[VERSION])


def refuse(channel: Channel, exc: YybError) -> None:
    """Tell the other side why this side stops (one line, its exit code)."""
    try:
        channel.send({"error": exc.message, "exit": exc.exit_code})
    except ProtocolError:
        pass


def check_service(message: dict, service: str) -> None:
    if message.get("protocol") != PROTOCOL or message.get("service") != service:
        raise ProtocolError(f"the other side does not speak {PROTOCOL} {service}: {message}")


__all__ = ["Channel", "ProtocolError", "RemoteRefused", "UsageError"]
