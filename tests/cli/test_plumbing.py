"""The plumbing CLI: outputs, exit codes and errors are an interface."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from tests.conftest import Yyb, flip_byte, run_yyb
from yyb.store.objects.format import ZERO_OID, hash_object

NOTE = '{"schema_version": "yyb_note.v1", "message": "hi"}'


def one_error_line(result, code: int, needle: str) -> None:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("yyb: error: ") and needle in lines[0], lines[0]
    assert "Traceback" not in result.stderr


def test_hash_object_matches_the_format(yyb, tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes(b"hello\n")
    result = yyb("hash-object", str(f))
    assert result.exit_code == 0
    assert result.lines == [hashlib.sha256(b"blob 6\x00hello\n").hexdigest()]
    assert not os.path.exists(os.path.join(yyb.store_path, "objects", result.lines[0][:2]))


def test_hash_object_write_and_many_files(yyb, tmp_path, disk_store):
    paths = []
    for i in range(3):
        p = tmp_path / f"f{i}"
        p.write_bytes(f"{i}".encode())
        paths.append(str(p))
    result = yyb("hash-object", "-w", *paths)
    assert result.lines == [hash_object("blob", f"{i}".encode()) for i in range(3)]
    assert all(disk_store.objects.contains(o) for o in result.lines)


def test_hash_object_stdin_and_stdin_paths(yyb, tmp_path):
    assert yyb("hash-object", "--stdin", input=b"abc").lines == [hash_object("blob", b"abc")]
    a, b = tmp_path / "a", tmp_path / "b b"
    a.write_bytes(b"1")
    b.write_bytes(b"2")
    expected = [hash_object("blob", b"1"), hash_object("blob", b"2")]
    assert yyb("hash-object", "--stdin-paths", input=f"{a}\n{b}\n").lines == expected
    assert yyb("hash-object", "--stdin-paths", "-z", input=f"{a}\0{b}\0").lines == expected


def test_hash_object_record(yyb, tmp_path, disk_store):
    f = tmp_path / "n.json"
    f.write_text(NOTE)
    result = yyb("hash-object", "-w", "-t", "record", str(f))
    assert result.exit_code == 0
    assert disk_store.objects.get_record(result.lines[0]) == json.loads(NOTE)


@pytest.mark.parametrize(
    "text, needle",
    [
        ('{"schema_version": "yyb_note.v1", "message": 1.5}', "$.message: 1.5 is a float"),
        (
            '{"schema_version": "yyb_note.v1", "message": "a", "message": "b"}',
            "$.message: duplicate key",
        ),
        ('{"message": "a"}', "$.schema_version: missing"),
        ('{"schema_version": "yyb_note.v1"}', "'message' is a required property"),
        ('{"schema_version": "nope.v1"}', "no schema is known"),
        ("not json", "not valid JSON"),
        ('{"schema_version": "yyb_note.v1", "message": "x", "links": {"a": "b"}}', "$.links.a"),
    ],
)
def test_hash_object_bad_records(yyb, disk_store, text, needle):
    result = yyb("hash-object", "-w", "-t", "record", "--stdin", input=text)
    one_error_line(result, 2, needle)
    assert list(disk_store.objects.iter_oids()) == []


def test_hash_object_usage_errors(yyb, tmp_path):
    one_error_line(yyb("hash-object"), 2, "nothing to hash")
    one_error_line(yyb("hash-object", str(tmp_path / "missing")), 2, "cannot read")
    one_error_line(yyb("hash-object", "-t", "tree", "--stdin", input=b""), 2, "tree")


@pytest.fixture
def objs(disk_store):
    blob = disk_store.objects.put("blob", b"line one\n")
    rec = disk_store.objects.put_record(
        {
            "schema_version": "yyb_note.v1",
            "message": "m",
            "data": {"b": b"\x00\xff"},
            "links": {"log": blob},
        }
    )
    disk_store.refs.update("notes/n", rec, reason="first")
    return {"blob": blob, "rec": rec}


def test_cat_object_modes(yyb, objs):
    blob, rec = objs["blob"], objs["rec"]
    assert yyb("cat-object", "-t", blob).lines == ["blob"]
    assert yyb("cat-object", "-t", "notes/n").lines == ["record"]
    assert yyb("cat-object", "-s", blob).lines == ["9"]
    assert yyb("cat-object", "-p", blob).stdout_bytes == b"line one\n"
    assert yyb("cat-object", "--raw", blob[:6]).stdout_bytes == b"line one\n"
    pretty = json.loads(yyb("cat-object", "-p", rec).stdout)
    assert pretty["data"] == {"b": {"$bin": "AP8="}}
    compact = yyb("cat-object", "--json", rec)
    assert len(compact.lines) == 1 and json.loads(compact.stdout) == pretty
    raw = yyb("cat-object", "--raw", rec).stdout_bytes
    assert hash_object("record", raw) == rec
    assert yyb("cat-object", "-e", rec).exit_code == 0


def test_cat_object_failures(yyb, objs, disk_store):
    one_error_line(yyb("cat-object", "--json", objs["blob"]), 2, "is a blob")
    one_error_line(yyb("cat-object", "-p", "f" * 64), 1, "object not found")
    one_error_line(yyb("cat-object", "-p", "xyz!"), 2, "invalid ref name")
    one_error_line(yyb("cat-object", "-p", objs["blob"], "--batch"), 2, "--batch")
    missing = yyb("cat-object", "-e", "0" * 64)
    assert (missing.exit_code, missing.stdout, missing.stderr) == (1, "", "")
    flip_byte(disk_store.objects.path(objs["blob"]))
    one_error_line(yyb("cat-object", "-e", objs["blob"]), 1, "hash")
    one_error_line(yyb("cat-object", "-p", objs["blob"]), 1, "hash")


def test_cat_object_batch(yyb, objs, disk_store):
    blob, rec = objs["blob"], objs["rec"]
    names = f"{blob}\n{rec[:10]}\nnotes/n\n{'0' * 64}\nnot a name\n"
    result = yyb("cat-object", "--batch-check", input=names)
    size = len(disk_store.objects.get(rec).body)
    assert result.lines == [
        f"{blob} blob 9",
        f"{rec} record {size}",
        f"{rec} record {size}",
        f"{'0' * 64} missing",
        "not a name missing",
    ]
    full = yyb("cat-object", "--batch", input=f"{blob}\n").stdout_bytes
    assert full == f"{blob} blob 9\n".encode() + b"line one\n\n"
    flip_byte(disk_store.objects.path(blob))
    broken = yyb("cat-object", "--batch-check", input=f"{blob}\n")
    assert (broken.exit_code, broken.lines) == (1, [f"{blob} corrupt"])


def hostile_names(blob: str) -> bytes:
    """What a hostile feeder of a batch reader writes: a name, a 3 MiB line, a name, a line
    one byte over the limit and, last, a long line the input ends in without a newline."""
    return b"\n".join(
        [blob.encode(), b"a" * (3 << 20), blob.encode(), b"b" * 4097, b"c" * (1 << 20)]
    )


@pytest.mark.parametrize("mode", ["--batch-check", "--batch"])
def test_a_batch_line_past_the_limit_is_answered_too_long_and_the_stream_goes_on(yyb, objs, mode):
    blob = objs["blob"]
    result = yyb("cat-object", mode, input=hostile_names(blob))
    one_error_line(result, 2, "3 input lines longer than 4096 bytes")
    answer = f"{blob} blob 9" if mode == "--batch-check" else f"{blob} blob 9\nline one\n"
    assert result.stdout_bytes.split(b"\n")[:-1] == [
        *answer.encode().split(b"\n"),
        b"a" * 4096 + b" too-long",
        *answer.encode().split(b"\n"),
        b"b" * 4096 + b" too-long",
        b"c" * 4096 + b" too-long",
    ]
    at_most = b"d" * 4095 + b"\r\n" + b"e" * 4096  # 4096 bytes before each LF, CR included
    exactly = yyb("cat-object", "--batch-check", input=at_most)
    assert (exactly.exit_code, exactly.lines) == (
        0,
        ["d" * 4095 + " missing", "e" * 4096 + " missing"],
    )


def test_update_ref_show_ref_rev_parse_log(yyb, objs):
    blob, rec = objs["blob"], objs["rec"]
    moved = yyb("update-ref", "-m", "to the blob", "--old", rec, "notes/n", blob)
    assert moved.exit_code == 0 and len(moved.lines) == 1
    assert yyb("show-ref").lines == [f"{blob} refs/notes/n"]
    assert yyb("show-ref", "nothing").exit_code == 1
    assert yyb("rev-parse", "notes/n", rec[:8]).lines == [blob, rec]
    log = yyb("log", "notes/n").lines
    assert log[0] == f"{moved.lines[0]} {rec} {blob} " + log[0].split()[3] + "\tto the blob"
    assert log[1].split()[1:3] == [ZERO_OID, rec]
    entries = json.loads(yyb("log", "--json", "refs/notes/n").stdout)
    assert [e["reason"] for e in entries] == ["to the blob", "first"]


def test_update_ref_failures(yyb, objs):
    blob, rec = objs["blob"], objs["rec"]
    one_error_line(yyb("update-ref", "--old", blob, "notes/n", blob), 1, "not the expected")
    one_error_line(yyb("update-ref", "--old", ZERO_OID, "notes/n", blob), 1, "not the expected")
    one_error_line(yyb("update-ref", "../evil", blob), 2, "invalid ref name")
    one_error_line(yyb("update-ref", "notes/x", "f" * 64), 1, "object not found")
    one_error_line(yyb("update-ref", "-m", "a\tb", "notes/x", blob), 2, "one line")
    one_error_line(yyb("update-ref", "notes/x"), 2, "either OID or --delete")
    assert yyb("update-ref", "--old", ZERO_OID, "notes/new", rec).exit_code == 0
    assert yyb("update-ref", "-d", "notes/new").exit_code == 0
    assert yyb("show-ref", "notes/new").exit_code == 1


def test_verify_chain_and_doctor(yyb, objs, disk_store):
    assert yyb("verify-chain", "notes/n").exit_code == 0
    clean = yyb("doctor")
    assert (clean.exit_code, clean.stdout) == (0, "")
    flip_byte(disk_store.objects.path(objs["blob"]))
    vc = yyb("verify-chain", "notes/n")
    assert vc.exit_code == 1
    assert vc.lines == [
        f"error hash-mismatch {objs['blob']}: stored bytes hash to " + vc.lines[0].rsplit(" ", 1)[1]
    ]
    dr = yyb("doctor", "--json")
    assert dr.exit_code == 1
    assert [(f["code"], f["subject"]) for f in json.loads(dr.stdout)] == [
        ("hash-mismatch", objs["blob"])
    ]


def test_store_init_and_path(tmp_path):
    target = str(tmp_path / "new")
    y = Yyb(target)
    assert y("store", "path").lines == [target]
    one_error_line(y("doctor"), 2, "not a yyb store")
    created = y("store", "init")
    assert created.lines == [target] and "created" in created.stderr
    assert y("doctor").exit_code == 0


def test_default_store_lives_outside_the_repository(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "YYB_STORE"}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    done = run_yyb("store", "path", env=env, cwd=str(repo / ".git"))
    path = done.stdout.decode().strip()
    assert path.startswith(str(tmp_path / "state" / "yyb" / "stores" / "repo-"))
    assert not path.startswith(str(repo))
    outside = run_yyb("store", "path", env=env, cwd=str(tmp_path))
    assert outside.returncode == 2 and b"not inside a Git repository" in outside.stderr


def test_pipeline_of_real_processes(tmp_path):
    store = str(tmp_path / "s")
    assert run_yyb("--store", store, "store", "init").returncode == 0
    files = []
    for i in range(5):
        p = tmp_path / f"in{i}"
        p.write_bytes(os.urandom(100))
        files.append(str(p))
    hashed = run_yyb(
        "--store", store, "hash-object", "-w", "--stdin-paths", input="\n".join(files).encode()
    )
    assert hashed.returncode == 0
    batch = run_yyb("--store", store, "cat-object", "--batch-check", input=hashed.stdout)
    assert [line.split()[1] for line in batch.stdout.decode().splitlines()] == ["blob"] * 5


def test_unknown_command_and_no_traceback():
    done = run_yyb("frobnicate")
    assert done.returncode == 2
    assert b"Traceback" not in done.stderr and done.stderr.count(b"\n") == 1


def test_batch_names_are_read_as_whole_lines_however_the_reads_cut_them():
    """Names against the plain reading of the whole input, over reads of random sizes."""
    import io
    import random

    from yyb.cli.objects import MAX_LINE, Names, TooLong

    class Trickle(io.BytesIO):
        def __init__(self, data: bytes, seed: int):
            super().__init__(data)
            self.random = random.Random(seed)

        def read1(self, size: int = -1) -> bytes:
            return super().read1(min(size, self.random.choice([1, 7, 4096, 5000, 1 << 16])))

    pieces = [b"", b"\r", b"\r\r", b"x", b"a" * 64, b"b" * MAX_LINE, b"c" * (MAX_LINE - 1)]
    pieces += [b"d" * (MAX_LINE + 1), b"e" * (3 * MAX_LINE), b"f" * 70000]
    for seed in range(40):
        chooser = random.Random(seed)
        lines = [b"".join(chooser.choices(pieces, k=chooser.randint(1, 3))) for _ in range(30)]
        data = b"\n".join(lines) + chooser.choice([b"", b"\n"])
        expected = [
            TooLong(line[:MAX_LINE]) if len(line) > MAX_LINE else line.rstrip(b"\r")
            for line in (data[:-1] if data.endswith(b"\n") else data).split(b"\n")
        ]
        names = Names(Trickle(data, seed))
        got = [name for chunk in names for name in chunk]
        assert got == expected
        assert [type(name) for name in got] == [type(name) for name in expected]
        assert names.too_long == sum(type(name) is TooLong for name in expected)
