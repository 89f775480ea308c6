"""Remotes: named URLs of other stores, and push and fetch with them (docs/remotes.md).

A remote is ``file:///abs/path`` (or a plain path), ``ssh://[user@]host[:port]/abs/path``
or ``s3://bucket/prefix``. The first two are served by yyb's own plumbing, run on the other
side (a child process, or ``yyb --store PATH receive-pack`` / ``upload-pack`` through
``ssh``), and the two speak yyb/store/transfer.py's protocol over its stdin and stdout; a
store in a bucket has no program on its side and is written through its journal
(yyb/store/bucket/). The names live in the store's
``remotes`` file (docs/format.md, "Layout").
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from yyb.errors import UsageError, YybError
from yyb.store import file, transfer
from yyb.store.bundle.exchange import Imported, Move, Replaced
from yyb.store.bundle.reader import Header
from yyb.store.repo import REMOTES_FILE, Store

SSH_ENV = "YYB_SSH_COMMAND"  # the ssh program and its options (shell words), as GIT_SSH_COMMAND
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
SSH_URL = re.compile(
    r"ssh://(?:(?P<user>[^@/:\s]+)@)?(?P<host>[^@/:\s]+)(?::(?P<port>\d{1,5}))?(?P<path>/.*)"
)


# --- the remotes file ------------------------------------------------------------------------


def read(store: Store) -> dict[str, str]:
    """Every remote of the store: name -> URL."""
    path = os.path.join(store.path, REMOTES_FILE)
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path} is not a remotes file ({exc})") from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("url"), str)
        for k, v in value.items()
    ):
        raise UsageError(f"{path} is not a remotes file (a map of name to {{url}})")
    return {name: entry["url"] for name, entry in sorted(value.items())}


def _write(store: Store, remotes: dict[str, str]) -> None:
    data = json.dumps({n: {"url": u} for n, u in sorted(remotes.items())}, indent=2) + "\n"
    file.write_atomic(os.path.join(store.path, REMOTES_FILE), data.encode())


def add(store: Store, name: str, url: str) -> None:
    """Name ``url`` as the remote ``name``.

    Raises:
        UsageError: a malformed name or URL, or a name already taken.
    """
    if not NAME.fullmatch(name):
        raise UsageError(f"remote name {name!r}: letters, digits, '.', '_' and '-' only")
    parse(url)
    remotes = read(store)
    if name in remotes:
        raise UsageError(f"remote {name} exists already ({remotes[name]})")
    remotes[name] = url
    _write(store, remotes)


def remove(store: Store, name: str) -> None:
    remotes = read(store)
    if name not in remotes:
        raise UsageError(f"no remote {name}")
    del remotes[name]
    _write(store, remotes)


# --- URLs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Url:
    """Where a remote store is: ``kind`` file, ssh or s3 (``host`` the bucket, ``path`` the
    prefix)."""

    kind: str
    path: str
    host: str | None = None
    user: str | None = None
    port: int | None = None


def parse(url: str) -> Url:
    """The remote a URL names.

    Raises:
        UsageError: a URL of no supported form.
    """
    if url.startswith("file://"):
        path = url.removeprefix("file://")
        if not path.startswith("/"):
            raise UsageError(f"{url}: a file URL names an absolute path (file:///path)")
        return Url("file", path)
    if url.startswith("ssh://"):
        found = SSH_URL.fullmatch(url)
        if found is None:
            raise UsageError(f"{url}: expected ssh://[user@]host[:port]/absolute/path")
        port = int(found["port"]) if found["port"] else None
        if port is not None and not 0 < port < 65536:
            raise UsageError(f"{url}: port {port} is out of range")
        return Url("ssh", found["path"], found["host"], found["user"], port)
    if url.startswith("s3://"):
        from yyb.store.bucket.client import parse as parse_bucket

        where = parse_bucket(url)
        return Url("s3", where.prefix, where.bucket)
    if "://" in url:
        scheme = url.split("://", 1)[0]
        raise UsageError(f"{url}: {scheme}:// remotes are not supported (file://, ssh://, s3://)")
    return Url("file", os.path.abspath(url))


def resolve(store: Store | None, given: str) -> Url:
    """A remote's name (in ``store``'s remotes), a URL, or a path, as a ``Url``."""
    if store is not None and NAME.fullmatch(given) and not os.path.exists(given):
        named = read(store).get(given)
        if named is not None:
            return parse(named)
        if "/" not in given and "://" not in given:
            raise UsageError(f"no remote {given} (yyb remote add {given} URL), and no store there")
    return parse(given)


def command(url: Url, service: str) -> list[str]:
    """The argv that serves ``service`` (receive-pack or upload-pack) of the store at ``url``."""
    if url.kind == "file":
        return [sys.executable, "-m", "yyb", "--store", url.path, service]
    ssh = shlex.split(os.environ.get(SSH_ENV) or "ssh")
    target = f"{url.user}@{url.host}" if url.user else url.host
    port = ["-p", str(url.port)] if url.port else []
    remote = shlex.join(["yyb", "--store", url.path, service])
    return [*ssh, *port, "--", target, remote]


def bucket_location(url: Url):
    """The bucket and prefix of an s3 ``Url``."""
    from yyb.store.bucket.client import Location

    return Location(url.host, url.path)


# --- connecting -----------------------------------------------------------------------------


@contextmanager
def connect(url: Url, service: str) -> Iterator[transfer.Channel]:
    """A channel to the other side's ``service``, its hello checked; the child process is
    waited for at the end (its stderr is ours, so ssh's own complaints are seen).

    Raises:
        ProtocolError: the other side could not be started or does not speak the protocol.
    """
    if url.kind == "file":
        Store.open(url.path)  # a missing store is said here, in one line (exit 2)
    argv = command(url, service)
    try:
        child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    except OSError as exc:
        raise transfer.ProtocolError(f"cannot start {argv[0]}: {exc.strerror}") from None
    channel = transfer.Channel(child.stdout, child.stdin)
    try:
        try:
            transfer.check_service(channel.receive(), service)
        except transfer.ProtocolError as exc:
            child.kill()
            code = child.wait()
            raise transfer.ProtocolError(f"{exc.message} ({argv[0]} exited {code})") from None
        yield channel
    finally:
        for stream in (child.stdin, child.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


# --- push and fetch -------------------------------------------------------------------------


def push(store: Store, url: Url, names: list[str], force: bool = False) -> transfer.Sent:
    """Send ``names`` (refs of ``store``) and the objects the other store lacks; it moves
    each ref as a fast-forward (or, ``force``, an ordinary update).

    Raises:
        RemoteRefused: the other side refused (NotFastForward there, a ref moved meanwhile).
        ProtocolError: the connection was cut (nothing moved that was not whole).
    """
    if url.kind == "s3":
        from yyb.store.bucket import sync

        return sync.push(store, bucket_location(url), names, force)
    header = transfer.header_of(store, names)
    with connect(url, "receive-pack") as channel:
        header, same = _unchanged(channel, header)
        moves, replaced, count = [Move(n, v, v, "none") for n, v in same.items()], [], 0
        if header.refs:
            count = transfer.send_pack(store, channel, header, transfer.asker(channel), force)
            answer = channel.receive()
            moves += transfer.moves_of(answer)
            replaced = _replaced(answer)
        channel.send({"done": True})
        imported = Imported(sorted(moves, key=lambda m: m.ref), replaced)
        return transfer.Sent(imported, count, channel.sent, channel.received)


LS_BATCH = 10_000  # ref names listed in one message


def _unchanged(channel: transfer.Channel, header: Header) -> tuple[Header, dict[str, str]]:
    """``header`` without the refs the other side holds already at the same value and log
    head (asked with ls-refs), and those refs: nothing of theirs needs negotiating."""
    names = sorted(header.refs)
    shown: dict = {}
    for start in range(0, len(names), LS_BATCH):
        channel.send({"ls-refs": names[start : start + LS_BATCH]})
        shown.update(transfer.expect(channel.receive(), "refs"))
    same = {n: header.refs[n] for n in names if shown.get(n) == [header.refs[n], header.logs[n]]}
    if not same:
        return header, same
    kept = [n for n in names if n not in same]
    return (
        Header(
            header.capabilities,
            {n: header.refs[n] for n in kept},
            {n: header.logs[n] for n in kept},
            header.version,
        ),
        same,
    )


def fetch(store: Store, url: Url, names: list[str], force: bool = False) -> transfer.Sent:
    """Receive ``names`` (refs of the other store) and the objects this one lacks; move each
    here as ``bundle unbundle`` would."""
    if url.kind == "s3":
        from yyb.store.bucket import sync

        return sync.fetch(store, bucket_location(url), names, force)
    with connect(url, "upload-pack") as channel:
        channel.send({"fetch": names})
        while True:
            message = channel.receive()
            if "lacks" in message:
                channel.send({"lacking": transfer.lacks(store, message["lacks"])})
                continue
            size = transfer.expect(message, "pack")
            imported = transfer.receive_pack(store, channel, _size(size), force)
            break
        channel.send({"done": True})
        objects = message.get("objects") if isinstance(message.get("objects"), int) else 0
        return transfer.Sent(imported, objects, channel.sent, channel.received)


def _size(value) -> int:
    if not isinstance(value, int) or value < 0:
        raise transfer.ProtocolError("pack: expected a size in bytes")
    return value


def _replaced(message: dict) -> list[Replaced]:
    return [Replaced(r["oid"], r["copy"]) for r in message.get("replaced", [])]


# --- serving (the other side) ---------------------------------------------------------------


def serve(store: Store, service: str, channel: transfer.Channel) -> int:
    """Serve one session of ``service`` on ``channel`` until the other side is done (0) or
    the connection is cut (1). A refusal is told to the other side, not raised."""
    channel.send({"protocol": transfer.PROTOCOL, "service": service})
    try:
        while True:
            message = channel.receive()
            if message.get("done"):
                return 0
            try:
                _answer(store, service, channel, message)
            except transfer.ProtocolError:
                raise
            except YybError as exc:
                transfer.refuse(channel, exc)
    except transfer.ProtocolError:
        return 1


def _answer(store: Store, service: str, channel: transfer.Channel, message: dict) -> None:
    if "ls-refs" in message:
        channel.send({"refs": transfer.listed(store, message["ls-refs"])})
    elif "lacks" in message:
        channel.send({"lacking": transfer.lacks(store, message["lacks"])})
    elif service == "receive-pack" and "pack" in message:
        imported = transfer.receive_pack(
            store, channel, _size(message["pack"]), bool(message.get("force"))
        )
        replaced = [{"oid": r.oid, "copy": r.copy} for r in imported.replaced]
        channel.send({"moves": transfer.said_moves(imported.moves), "replaced": replaced})
    elif service == "upload-pack" and "fetch" in message:
        names = message["fetch"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise transfer.ProtocolError("fetch: expected a list of ref names")
        header = transfer.header_of(store, names)
        transfer.send_pack(store, channel, header, transfer.asker(channel))
    else:
        raise transfer.ProtocolError(f"{service}: an unexpected message {sorted(message)}")
