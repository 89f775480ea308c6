"""Hostile input fails cleanly: the right error type, one line, no traceback, bounded memory.

In-process checks cover the codec (random and mutated bodies, giant declared lengths, deep
nesting); real subprocesses cover the CLI over damaged object files and junk on stdin, with
each child's peak memory measured (``wait4``) and its address space capped so that a runaway
allocation fails the test instead of the machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.conftest import flip_byte, note
from yyb.cli.objects import MAX_LINE
from yyb.errors import InvalidRecord, NonCanonical
from yyb.store.objects import codec
from yyb.store.objects.format import hash_object
from yyb.store.repo import Store

# A yyb command uses ~25 MiB; a command that held a giant claim or file in memory would not fit.
MAX_RSS_MIB = 100
ADDRESS_SPACE_CAP = 1 << 30
PATIENCE = 60.0

hostile = settings(max_examples=300, derandomize=True, deadline=None)


# --- the codec ----------------------------------------------------------------------------------


def decodes_cleanly(body: bytes) -> dict | None:
    """decode() either refuses ``body`` with one NonCanonical line or returns its one value."""
    try:
        value = codec.decode(body)
    except NonCanonical as exc:
        assert exc.oid is None
        assert exc.message and "\n" not in exc.message
        return None
    assert type(value) is dict
    assert codec.encode(value) == body, "decode accepted a body that is not canonical"
    return value


@hostile
@given(st.binary(max_size=200))
@example(b"")
@example(b"\x80")
@example(b"\xc1")  # the one byte MessagePack never uses
@example(b"\x81\xa1a\xcb\x00\x00\x00\x00\x00\x00\x00\x00")  # a float
@example(b"\x81\xa1a\xd4\x01\x00")  # an ext type
@example(b"\x81\xa1a\xd6\xff\x00\x00\x00\x00")  # a timestamp ext
@example(b"\x81\xc4\x01a\xc0")  # a bin key
@example(b"\x82\xa1a\xc0\xa1a\xc0")  # a duplicate key
@example(b"\x81\xa2\xc3\x28\xc0")  # a key that is not UTF-8
def test_decode_of_random_bytes(body):
    decodes_cleanly(body)


map_openers = st.sampled_from(
    [
        b"\x81",
        b"\x82",
        b"\x8f",
        b"\xde\x00\x02",
        b"\xdf\x00\x00\x00\x01",
        b"\x81\xa1a",
        b"\x81\xa1a\x92",
        b"\x81\xa1a\x81",
    ]
)


@hostile
@given(map_openers, st.binary(max_size=120))
def test_decode_of_random_bytes_inside_a_map(opener, rest):
    """Random bytes behind a map header reach the key, value and nesting paths of the decoder."""
    decodes_cleanly(opener + rest)


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=codec.INT_MIN, max_value=codec.INT_MAX)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
keys = st.text(max_size=8).filter(lambda k: k != codec.BIN_KEY)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=20,
)
records = st.dictionaries(keys, values, min_size=1, max_size=6)


@hostile
@given(records, st.data())
def test_decode_of_damaged_canonical_bodies(value, data):
    """Flip (XOR 0xFF), drop or insert one byte of a canonical body."""
    body = codec.encode(value)
    at = data.draw(st.integers(0, len(body) - 1), label="offset")
    how = data.draw(st.sampled_from(["flip", "drop", "insert", "truncate"]), label="damage")
    if how == "flip":
        damaged = body[:at] + bytes([body[at] ^ 0xFF]) + body[at + 1 :]
    elif how == "drop":
        damaged = body[:at] + body[at + 1 :]
    elif how == "insert":
        damaged = body[:at] + bytes([data.draw(st.integers(0, 255), label="byte")]) + body[at:]
    else:
        damaged = body[:at]
    got = decodes_cleanly(damaged)
    assert got != value, "two bodies decoded to one value"


GIANT_HEADERS = {
    "map32": b"\xdf\xff\xff\xff\xff",
    "array32": b"\xdd\xff\xff\xff\xff",
    "str32": b"\xdb\xff\xff\xff\xff",
    "bin32": b"\xc6\xff\xff\xff\xff",
    "ext32": b"\xc9\xff\xff\xff\xff\x01",
    "map16": b"\xde\xff\xff",
    "array16": b"\xdc\xff\xff",
    "str16": b"\xda\xff\xff",
    "bin16": b"\xc5\xff\xff",
}
PLACES = {
    "top": b"",
    "value": b"\x81\xa1a",
    "key": b"\x81",
    "nested": b"\x81\xa1a\x91\x91\x81\xa1b",
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("claim", GIANT_HEADERS)
def test_giant_declared_lengths_are_refused_without_allocating(claim, place):
    body = PLACES[place] + GIANT_HEADERS[claim] + b"abc"
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(NonCanonical):
            codec.decode(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 1.0
    assert peak < 1 << 20, f"decoding {len(body)} bytes allocated {peak} bytes"


def test_many_giant_claims_in_a_row():
    body = b"\x81\xa1a" + b"\xdd\xff\xff\xff\xff" * 10_000
    tracemalloc.start()
    try:
        with pytest.raises(NonCanonical):
            codec.decode(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20


def nested_body(levels: int, kind: str) -> bytes:
    """A record body whose top map holds ``levels - 1`` more containers, one inside the next."""
    inner = b"\x91" if kind == "array" else b"\x81\xa1a"
    return b"\x81\xa1a" + inner * (levels - 1) + b"\xc0"


def nested_value(levels: int, kind: str) -> dict:
    """The value of nested_body(levels, kind), built without recursion."""
    leaf = None
    for _ in range(levels - 1):
        leaf = [leaf] if kind == "array" else {"a": leaf}
    return {"a": leaf}


@pytest.mark.parametrize("kind", ["array", "map"])
def test_nesting_up_to_the_limit_round_trips(kind):
    body = nested_body(codec.MAX_DEPTH, kind)
    assert codec.encode(nested_value(codec.MAX_DEPTH, kind)) == body
    assert decodes_cleanly(body) == nested_value(codec.MAX_DEPTH, kind)


@pytest.mark.parametrize("levels", [codec.MAX_DEPTH + 1, 1000, 100_000])
@pytest.mark.parametrize("kind", ["array", "map"])
def test_deep_nesting_is_refused_not_a_recursion_error(kind, levels):
    with pytest.raises(NonCanonical) as refused:
        codec.decode(nested_body(levels, kind))
    assert "\n" not in refused.value.message
    with pytest.raises(InvalidRecord) as invalid:
        codec.encode(nested_value(levels, kind))
    assert invalid.value.reason == f"nesting deeper than {codec.MAX_DEPTH} levels"
    assert invalid.value.path.startswith("$.a")
    opener, closer = ("[", "]") if kind == "array" else ('{"a":', "}")
    text = '{"a":' + opener * (levels - 1) + "null" + closer * (levels - 1) + "}"
    with pytest.raises(InvalidRecord):
        codec.from_json(text)


@hostile
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
@example(b'{"schema_version": "yyb_note.v1", "message": "\\ud800"}')
@example(b'{"a": NaN}')
@example(b'{"a": -Infinity}')
@example(b'{"a": 1e400}')
@example(b'{"a": 18446744073709551616}')
@example(b'{"a": 1, "a": 2}')
@example(b'{"a": {"$bin": "!!"}}')
@example(b"\xef\xbb\xbf{}")
@example(b"\xff\xfe{\x00}\x00")
def test_from_json_of_random_bytes(text):
    try:
        value = codec.from_json(text)
    except InvalidRecord as exc:
        assert exc.path.startswith("$") and "\n" not in exc.message
        return
    assert type(value) is dict
    codec.encode(value)


def test_from_json_of_a_huge_integer():
    with pytest.raises(InvalidRecord):
        codec.from_json('{"a": 1' + "0" * 5000 + "}")


# --- the CLI over damaged object files ----------------------------------------------------------


@dataclass
class Run:
    code: int
    out: bytes
    err: str
    rss_mib: float


def _cap_address_space() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = ADDRESS_SPACE_CAP if hard == resource.RLIM_INFINITY else min(ADDRESS_SPACE_CAP, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


# Linux carries a process's RSS high-water mark across fork and exec, so ``wait4`` on a direct
# child of this (large) test process reports at least this process's RSS. A small launcher
# process in between starts the command and reports the command's own peak.
LAUNCHER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as handle:
    handle.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
if code < 0:
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def run_many(store: Store, *commands: tuple[tuple[str, ...], bytes]) -> list[Run]:
    """Run each ``python -m yyb --store STORE ARGS`` (with its stdin) at once; measure each one.

    Each command runs under a launcher that reports the command's own peak resident memory.
    """
    with tempfile.TemporaryDirectory() as scratch:
        procs = []
        for n, (args, input) in enumerate(commands):
            streams = [open(os.path.join(scratch, f"{n}.{s}"), "w+b") for s in ("in", "out", "err")]
            streams[0].write(input)
            streams[0].seek(0)
            procs.append(
                (
                    streams,
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-c",
                            LAUNCHER,
                            os.path.join(scratch, f"{n}.rss"),
                            sys.executable,
                            "-m",
                            "yyb",
                            "--store",
                            store.path,
                            *args,
                        ],
                        stdin=streams[0],
                        stdout=streams[1],
                        stderr=streams[2],
                        preexec_fn=_cap_address_space,
                    ),
                )
            )
        runs = []
        for n, (streams, proc) in enumerate(procs):
            watchdog = threading.Timer(PATIENCE, proc.kill)
            watchdog.start()
            try:
                _, status, _ = os.wait4(proc.pid, 0)
            finally:
                watchdog.cancel()
            proc.returncode = os.waitstatus_to_exitcode(status)
            with open(os.path.join(scratch, f"{n}.rss")) as handle:
                peak_kib = int(handle.read() or 0)
            for stream in streams:
                stream.seek(0)
            runs.append(
                Run(
                    proc.returncode,
                    streams[1].read(),
                    streams[2].read().decode("utf-8", "replace"),
                    peak_kib / 1024,
                )
            )
            for stream in streams:
                stream.close()
        return runs


def run_yyb(store: Store, *args: str, input: bytes = b"") -> Run:
    """Run ``python -m yyb --store STORE ARGS`` and measure its peak resident memory."""
    return run_many(store, (args, input))[0]


def assert_one_error_line(run: Run, code: int, *needles: str) -> None:
    assert "Traceback" not in run.err, run.err
    assert run.code == code, run.err
    assert run.err.startswith("yyb: error: ") and run.err.endswith("\n"), run.err
    assert run.err.count("\n") == 1, run.err
    for needle in needles:
        assert needle in run.err
    assert run.rss_mib < MAX_RSS_MIB


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.init(str(tmp_path / "s"))[0]


def plant(store: Store, data: bytes, oid: str | None = None) -> str:
    """Write ``data`` as an object file by hand, by default under the SHA-256 of its bytes."""
    oid = oid or hashlib.sha256(data).hexdigest()
    path = Path(store.objects.path(oid))
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return oid


def object_files(store: Store) -> list[str]:
    return sorted(store.objects.iter_oids())


DAMAGED = {
    # name: (stored bytes, doctor's finding code(s), kind -t prints: header and length agree)
    "giant-blob-length": (b"blob 99999999999999999999\0abc", {"truncated"}, None),
    "giant-record-length": (b"record 99999999999999999999\0abc", {"truncated"}, None),
    "u64-max-length": (b"blob 18446744073709551615\0abc", {"truncated"}, None),
    "21-digit-length": (b"blob 999999999999999999999\0abc", {"malformed"}, None),
    "endless-digits": (b"blob " + b"9" * 100_000, {"truncated"}, None),
    "empty-file": (b"", {"truncated"}, None),
    "header-only": (b"blob 3\0", {"truncated"}, None),
    "garbage": (random.Random(7).randbytes(4096), {"truncated", "malformed"}, None),
    "giant-msgpack-claim": (b"record 8\0\xdf\xff\xff\xff\xffabc", {"non-canonical"}, "record"),
    "deep-msgpack": (
        b"record %d\0%s" % (len(nested_body(100_001, "array")), nested_body(100_001, "array")),
        {"non-canonical"},
        "record",
    ),
}


@pytest.mark.parametrize("damage", DAMAGED)
def test_damaged_object_files_fail_cleanly(store, damage):
    data, codes, kind = DAMAGED[damage]
    oid = plant(store, data)
    intact = store.objects.put("blob", b"intact\n")

    batch_input = f"{oid}\n{oid[:8]}\n{intact}\n".encode()
    shown, checked, typed, doctor, batch = run_many(
        store,
        (("cat-object", "-p", oid), b""),
        (("cat-object", "-e", oid), b""),
        (("cat-object", "-t", oid), b""),
        (("doctor",), b""),
        (("cat-object", "--batch"), batch_input),
    )
    assert_one_error_line(shown, 1, "corrupt object")

    assert_one_error_line(checked, 1, f"corrupt object {oid}")
    assert checked.out == b""

    if kind is None:
        assert_one_error_line(typed, 1, f"corrupt object {oid}")
    else:  # docs/cli.md: -t and -s check header and length only; -e and -p verify
        assert (typed.code, typed.out, typed.err) == (0, f"{kind}\n".encode(), "")
        assert typed.rss_mib < MAX_RSS_MIB

    assert doctor.code == 1 and "Traceback" not in doctor.err
    assert doctor.err.startswith("doctor: 1 problem(s)") and doctor.err.count("\n") == 1
    found = [
        line.split(" ", 2)[:2]
        for line in doctor.out.decode().splitlines()
        if line.startswith("error ")
    ]
    assert len(found) == 1 and found[0][0] == "error" and found[0][1] in codes
    assert f"error {found[0][1]} {oid}: " in doctor.out.decode()
    assert doctor.rss_mib < MAX_RSS_MIB

    if kind == "record" and damage != "giant-record-length":
        return  # header and hash are intact: batch mode reports what is stored, as git does
    assert batch.code == 1 and batch.err == ""
    assert batch.out == f"{oid} corrupt\n{oid[:8]} corrupt\n{intact} blob 7\nintact\n\n".encode()
    assert batch.rss_mib < MAX_RSS_MIB


def test_a_flipped_byte_fails_cleanly(store):
    oid = store.objects.put("blob", b"evidence\n" * 100)
    flip_byte(store.objects.path(oid), -5)
    assert_one_error_line(run_yyb(store, "cat-object", "-p", oid), 1, f"corrupt object {oid}")
    batch = run_yyb(store, "cat-object", "--batch", input=f"{oid}\n".encode())
    assert (batch.code, batch.out, batch.err) == (1, f"{oid} corrupt\n".encode(), "")
    doctor = run_yyb(store, "doctor")
    assert doctor.code == 1 and f"error hash-mismatch {oid}: " in doctor.out.decode()


@pytest.mark.parametrize("mode", ["-p", "--raw"])
@pytest.mark.parametrize("damage", ["none", "giant-blob-length"])
def test_streamed_blobs_print_the_body_only(store, mode, damage):
    if damage == "none":
        body = random.Random(3).randbytes(17 << 20)
        oid = store.objects.put("blob", body)
    else:
        body, oid = b"", plant(store, DAMAGED[damage][0])
    shown = run_yyb(store, "cat-object", mode, oid)
    head = shown.out[:40]
    assert not head.startswith(b"blob "), f"the stored header was printed: {head!r}"
    if damage == "none":
        assert (shown.code, shown.err) == (0, "")
        assert len(shown.out) == len(body) and shown.out == body


@pytest.mark.parametrize(
    "args",
    [("-p",), ("-t",), ("-e",), ("--batch",), ("doctor",)],
    ids=["-p", "-t", "-e", "--batch", "doctor"],
)
def test_a_folder_in_place_of_an_object(store, args):
    oid = hashlib.sha256(b"not a file").hexdigest()
    os.makedirs(store.objects.path(oid))
    if args == ("doctor",):
        run = run_yyb(store, "doctor")
        assert run.code == 1 and "Traceback" not in run.err
        assert f" {oid}: " in run.out.decode()
    elif args == ("--batch",):
        run = run_yyb(store, "cat-object", "--batch", input=f"{oid}\n".encode())
        assert "Traceback" not in run.err
        assert (run.code, run.out) == (1, f"{oid} corrupt\n".encode())
    else:
        assert_one_error_line(run_yyb(store, "cat-object", *args, oid), 1, oid)


@pytest.mark.parametrize("args", [("cat-object", "-p"), ("doctor",)], ids=["-p", "doctor"])
def test_trailing_bytes_are_not_read_into_memory(store, args):
    oid = hashlib.sha256(b"a sparse file").hexdigest()
    path = Path(store.objects.path(oid))
    path.parent.mkdir()
    with open(path, "wb") as handle:
        handle.write(b"blob 3\0abc")
        handle.truncate(256 << 20)  # sparse: costs no disk
    run = run_yyb(store, *args, *([oid] if args[0] == "cat-object" else []))
    assert run.code == 1 and "Traceback" not in run.err
    assert "bytes after the declared 3-byte body" in run.err + run.out.decode()
    assert run.rss_mib < MAX_RSS_MIB


# --- the CLI fed junk ---------------------------------------------------------------------------


def two_blobs_sharing_a_prefix() -> tuple[bytes, bytes, str]:
    seen: dict[str, bytes] = {}
    for i in range(100_000):
        body = f"twin {i}\n".encode()
        prefix = hash_object("blob", body)[:4]
        if prefix in seen:
            return seen[prefix], body, prefix
        seen[prefix] = body
    raise AssertionError("no 16-bit prefix collision in 100000 hashes")


def test_batch_answers_every_junk_line_and_exits_2_for_the_long_ones(store):
    first, second, prefix = two_blobs_sharing_a_prefix()
    store.objects.put("blob", first)
    store.objects.put("blob", second)
    good = store.objects.put("blob", b"good\n")
    rng = random.Random(11)
    junk = [rng.randbytes(rng.randrange(1, 300)).replace(b"\n", b"") for _ in range(60)]
    junk += [
        b"",
        b" ",
        b"\t",
        b"\r",
        b"\x00",
        b"a\x00b",
        b"\xff\xfe",
        b"\xed\xa0\x80",
        b"a" * 1_000_000,
        b"0" * 1_000_000,
        b"g" * 100_000,
        b"refs/" + b"x/" * 50_000,
        b"abc",
        b"ABCD",
        b"A" * 64,
        b"0" * 63,
        b"0" * 64,
        b"0" * 65,
        b"0" * 64 + b" ",
        b"../../etc/passwd",
        b"/etc/passwd",
        b"refs/../x",
        b"x.lock",
        b"refs/x.lock",
        b"-",
        b"--help",
        b"-p",
        b".",
        b"..",
        b"logs/refs/x",
        b"objects",
        b"format",
        good[:3].encode(),
        (good[:10] + "zz").encode(),
    ]
    lines = list(junk)
    lines.insert(len(lines) // 2, prefix.encode())
    lines.insert(len(lines) // 3, good.encode())
    lines.insert(len(lines) // 4, good[:12].encode())
    expected = []
    for line in lines:
        name = line.rstrip(b"\r\n").decode("utf-8", "replace")
        if len(line) > MAX_LINE:
            expected.append(line[:MAX_LINE].decode("utf-8", "replace").encode() + b" too-long\n")
        elif line in (good.encode(), good[:12].encode()):
            expected.append(f"{good} blob 5\n".encode() + b"good\n\n")
        elif line == prefix.encode():
            expected.append(f"{name} ambiguous\n".encode())
        else:
            expected.append(f"{name} missing\n".encode())
    run = run_yyb(store, "cat-object", "--batch", input=b"\n".join(lines) + b"\n")
    long = sum(len(line) > MAX_LINE for line in lines)
    error = f"yyb: error: {long} input lines longer than {MAX_LINE} bytes, answered too-long\n"
    assert (run.code, run.err) == (2, error)
    assert run.out == b"".join(expected)
    assert run.rss_mib < MAX_RSS_MIB


DEEP = 100_000
HOSTILE_RECORDS = {
    "random-bytes-1": random.Random(1).randbytes(64),
    "random-bytes-2": random.Random(2).randbytes(4096),
    "random-printable": bytes(random.Random(3).choices(b'{}[]":,0123456789eE.-truenl ', k=500)),
    "not-utf-8": b'{"schema_version": "yyb_note.v1", "message": "\xff\xfe"}',
    "lone-surrogate": b'{"schema_version": "yyb_note.v1", "message": "\\ud800"}',
    "nul-bytes": b'{"schema_version": "yyb_note.v1",\x00 "message": "x"}',
    "deep-arrays": b'{"schema_version": "yyb_note.v1", "message": "x", "data": {"a": '
    + b"[" * DEEP
    + b"]" * DEEP
    + b"}}",
    "deep-objects": b'{"schema_version": "yyb_note.v1", "message": "x", "data": '
    + b'{"a": ' * DEEP
    + b"1"
    + b"}" * DEEP
    + b"}",
    "65-levels": b'{"schema_version": "yyb_note.v1", "message": "x", "data": '
    + b'{"a": ' * 64
    + b"1"
    + b"}" * 64
    + b"}",
    "2**64": b'{"schema_version": "yyb_note.v1", "message": "x", "data": {"n": %d}}' % 2**64,
    "-2**63-1": b'{"schema_version": "yyb_note.v1", "message": "x", "data": {"n": %d}}'
    % (-(2**63) - 1),
    "huge-integer": pytest.param(
        b'{"schema_version": "yyb_note.v1", "message": "x", "data": {"n": 1' + b"0" * 5000 + b"}}",
    ),
    "NaN": b'{"schema_version": "yyb_note.v1", "message": "x", "data": {"n": NaN}}',
    "Infinity": b'{"schema_version": "yyb_note.v1", "message": "x", "data": {"n": Infinity}}',
    "-Infinity": b'{"schema_version": "yyb_note.v1", "message": "x", "data": {"n": -Infinity}}',
    "1e400": b'{"schema_version": "yyb_note.v1", "message": "x", "data": {"n": 1e400}}',
    "duplicate-key": b'{"schema_version": "yyb_note.v1", "message": "x", "message": "y"}',
    "bad-base64": b'{"schema_version": "yyb_note.v1", "message": "x", "data": {"$bin": "!"}}',
    "empty": b"",
    "whitespace": b" \n\t ",
    "array": b"[]",
    "unknown-schema": b'{"schema_version": "nope.v1"}',
}


@pytest.mark.parametrize("text", [v for v in HOSTILE_RECORDS.values()], ids=list(HOSTILE_RECORDS))
def test_hash_object_refuses_hostile_records(store, text):
    assert object_files(store) == []
    run = run_yyb(store, "hash-object", "-w", "-t", "record", "--stdin", input=text)
    assert_one_error_line(run, 2, "yyb: error: <stdin>: ")
    assert run.out == b""
    assert object_files(store) == [], "a refused record was written"
    assert os.listdir(os.path.join(store.path, "tmp")) == []


def test_hash_object_accepts_the_limits(store):
    """The controls for the refusals above: the edges that are allowed go through."""
    record = note("edge")
    record["data"] = {"max": 2**64 - 1, "min": -(2**63), "deep": nested_value(62, "map")}
    run = run_yyb(
        store, "hash-object", "-w", "-t", "record", "--stdin", input=json.dumps(record).encode()
    )
    assert (run.code, run.err) == (0, "")
    oid = run.out.decode().strip()
    assert object_files(store) == [oid]
    assert store.objects.get_record(oid)["data"]["max"] == 2**64 - 1
