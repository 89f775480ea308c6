"""Object plumbing: hash-object and cat-object."""

from __future__ import annotations

import json
import os
import sys
from typing import BinaryIO

import click

from yyb.cli.context import open_store
from yyb.errors import CorruptObject, NotFound, UsageError, YybError
from yyb.store import codec
from yyb.store.object_store import STREAM_THRESHOLD, hash_stream, record_body, spool
from yyb.store.objects import hash_object as oid_of


def _hash_one(stream: BinaryIO, size: int | None, kind: str, store, label: str) -> str:
    if kind == "record":
        data = stream.read()
        try:
            body = record_body(codec.from_json(data))
        except YybError as exc:
            raise UsageError(f"{label}: {exc.message}") from None
        return store.objects.put("record", body) if store else oid_of("record", body)
    if size is None:
        stream, size = spool(stream, os.path.join(store.path, "tmp") if store else None)
    if store:
        return store.objects.put_blob_file(stream, size)
    return hash_stream("blob", stream, size)


def _open_input(path: str) -> tuple[BinaryIO, int]:
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    info = os.fstat(handle.fileno())
    if not os.path.stat.S_ISREG(info.st_mode):
        handle.close()
        raise UsageError(f"cannot read {path}: not a regular file")
    return handle, info.st_size


@click.command("hash-object")
@click.option("-w", "write", is_flag=True, help="Write the object into the store.")
@click.option(
    "-t",
    "kind",
    type=click.Choice(["blob", "record"]),
    default="blob",
    show_default=True,
    help="record: the input is JSON, stored canonically.",
)
@click.option("--stdin", "from_stdin", is_flag=True, help="Read one object from standard input.")
@click.option("--stdin-paths", is_flag=True, help="Read file paths from standard input.")
@click.option("-z", "nul", is_flag=True, help="With --stdin-paths: paths end with NUL.")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.pass_context
def hash_object(ctx, write, kind, from_stdin, stdin_paths, nul, files):
    """Print the oid of each input (one per line), writing it to the store with -w.

    A record's JSON may not hold floats or duplicate keys and must name a schema_version
    whose schema accepts it.
    """
    if from_stdin and stdin_paths:
        raise click.UsageError("--stdin and --stdin-paths exclude each other")
    if stdin_paths and files:
        raise click.UsageError("--stdin-paths takes no FILE arguments")
    if not (from_stdin or stdin_paths or files):
        raise click.UsageError("nothing to hash: give FILE..., --stdin or --stdin-paths")
    store = open_store(ctx) if write else None
    out = sys.stdout
    if from_stdin:
        out.write(_hash_one(sys.stdin.buffer, None, kind, store, "<stdin>") + "\n")
    if stdin_paths:
        data = sys.stdin.buffer.read()
        names = data.split(b"\0" if nul else b"\n")
        if names and names[-1] == b"":
            names.pop()
        files = [os.fsdecode(n) for n in names]
    for path in files:
        handle, size = _open_input(path)
        with handle:
            out.write(_hash_one(handle, size, kind, store, path) + "\n")
        out.flush()


def _pretty(kind: str, body: bytes, oid: str) -> bytes:
    if kind == "blob":
        return body
    value = codec.decode(body, oid)
    return (json.dumps(codec.to_json(value), indent=2, ensure_ascii=False) + "\n").encode()


@click.command("cat-object")
@click.option("-t", "mode", flag_value="type", help="Print the kind (blob or record).")
@click.option("-s", "mode", flag_value="size", help="Print the body size in bytes.")
@click.option(
    "-e",
    "mode",
    flag_value="exists",
    help="No output; exit 0 only if the object exists and is valid.",
)
@click.option("-p", "mode", flag_value="pretty", help="Blob bytes, or a record as JSON.")
@click.option("--json", "mode", flag_value="json", help="A record as one line of JSON.")
@click.option("--raw", "mode", flag_value="raw", help="The body bytes exactly as hashed.")
@click.option(
    "--batch",
    "mode",
    flag_value="batch",
    help="For each name on stdin: '<oid> <kind> <size>' LF body LF.",
)
@click.option(
    "--batch-check",
    "mode",
    flag_value="batch-check",
    help="For each name on stdin: '<oid> <kind> <size>'.",
)
@click.option("--buffer", is_flag=True, help="With --batch*: do not flush after each object.")
@click.argument("name", required=False)
@click.pass_context
def cat_object(ctx, mode, buffer, name):
    """Show an object named by NAME (full oid, 4+ hex abbreviation, or ref).

    Missing names give '<name> missing' in batch mode, 'ambiguous' and 'corrupt' likewise;
    a corrupt object makes the batch exit 1 at the end.
    """
    if mode is None:
        raise click.UsageError("choose one of -t -s -e -p --json --raw --batch --batch-check")
    batch = mode in ("batch", "batch-check")
    if batch == (name is not None):
        raise click.UsageError(
            "--batch and --batch-check read names from stdin; the other modes take one NAME"
        )
    store = open_store(ctx)
    if batch:
        return _batch(store, mode == "batch", not buffer)
    if mode == "exists":
        try:
            store.objects.get(store.rev_parse(name))
        except NotFound:
            return 1
        except CorruptObject as exc:
            click.echo(f"yyb: error: {exc.message}", err=True)
            return 1
        return 0
    oid = store.rev_parse(name)
    if mode in ("type", "size"):
        kind, size, stream = store.objects.open_body(oid)
        stream.close()
        click.echo(kind if mode == "type" else size)
        return 0
    kind, size, stream = store.objects.open_body(oid)
    with stream:
        if size > STREAM_THRESHOLD and mode in ("raw", "pretty") and kind == "blob":
            return _stream_verified(oid, kind, size, stream)
    obj = store.objects.get(oid)
    if mode == "json":
        if obj.kind != "record":
            raise UsageError(f"{oid} is a blob; --json shows records (use -p or --raw)")
        sys.stdout.write(
            json.dumps(codec.to_json(obj.value()), ensure_ascii=False, separators=(",", ":")) + "\n"
        )
        return 0
    data = obj.body if mode == "raw" else _pretty(obj.kind, obj.body, oid)
    sys.stdout.buffer.write(data)
    return 0


def _stream_verified(oid: str, kind: str, size: int, stream: BinaryIO) -> int:
    """Copy a large body to stdout, then fail (exit 1) if it did not hash to ``oid``."""
    got = hash_stream(kind, stream, size, sys.stdout.buffer, with_header=False)
    sys.stdout.buffer.flush()
    if got != oid:
        raise CorruptObject(
            oid, f"bytes hash to {got} (output above is not trustworthy)", "hash-mismatch"
        )
    return 0


def _batch(store, with_body: bool, flush: bool) -> int:
    out = sys.stdout.buffer
    status = 0
    for line in sys.stdin.buffer:
        name = line.rstrip(b"\r\n").decode("utf-8", "replace")
        try:
            oid = store.rev_parse(name)
            obj = store.objects.get(oid)
            kind, body = obj.kind, obj.body
        except NotFound:
            out.write(f"{name} missing\n".encode())
        except CorruptObject:
            out.write(f"{name} corrupt\n".encode())
            status = 1
        except UsageError as exc:
            word = "ambiguous" if getattr(exc, "candidates", None) else "missing"
            out.write(f"{name} {word}\n".encode())
        else:
            out.write(f"{oid} {kind} {len(body)}\n".encode())
            if with_body:
                out.write(body)
                out.write(b"\n")
        if flush:
            out.flush()
    return status
