"""The click-free plumbing path (yyb.cli.fast): the same command line means the same thing
whichever path runs it, the fast path imports nothing heavy, and ``cat-object --batch``
answers a name before it waits for the next one."""

from __future__ import annotations

import hashlib
import json
import os
import select
import subprocess
import sys

import pytest
from click.testing import CliRunner

from tests.cli.test_plumbing import hostile_names
from tests.conftest import damage_packed, flip_byte, note, run_yyb
from yyb.cli import app, fast
from yyb.store import gc
from yyb.store.repo import Store


def both(store_path: str, args: list[str], input: bytes | None = None):
    """Run ``args`` through the fast path and through click: each (code, stdout, stderr);
    the fast one is None when that path declined the line."""
    results = []
    for runner in (fast.run, app.run):
        with CliRunner().isolation(input=input) as streams:
            code = runner(["--store", store_path, *args])
            sys.stdout.flush()
            sys.stderr.flush()
            out, err = streams[0].getvalue(), streams[1].getvalue()
        results.append(None if code is None else (code, out, err))
    return results


@pytest.fixture
def filled(tmp_path):
    store, _ = Store.init(str(tmp_path / "store"))
    blob = store.objects.put("blob", b"line one\n")
    big = store.objects.put("blob", os.urandom(17 << 20))  # streamed by -p and --raw
    record = store.objects.put_record(note("kept", blob=blob))
    store.refs.update("refs/notes/kept", record)
    json_file = tmp_path / "note.json"
    json_file.write_text(json.dumps(note("hashed")))
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"schema_version": 1.5}')
    (tmp_path / "folder").mkdir()
    return {
        "store": store,
        "blob": blob,
        "big": big,
        "record": record,
        "json": str(json_file),
        "bad_json": str(bad_json),
        "folder": str(tmp_path / "folder"),
        "missing": str(tmp_path / "nothing-here"),
    }


# Command lines the fast path runs itself; it must agree with click on each.
FAST = [
    ["cat-object", "-t", "{blob}"],
    ["cat-object", "-s", "{record}"],
    ["cat-object", "-e", "{blob}"],
    ["cat-object", "-e", "0" * 64],
    ["cat-object", "-p", "{blob}"],
    ["cat-object", "-p", "{record}"],
    ["cat-object", "-p", "{big}"],
    ["cat-object", "--raw", "{record}"],
    ["cat-object", "--json", "{record}"],
    ["cat-object", "--json", "{blob}"],
    ["cat-object", "-t", "refs/notes/kept"],
    ["cat-object", "-t", "notes/kept"],
    ["cat-object", "-p", "{blob6}"],
    ["cat-object", "-p", "f" * 64],
    ["cat-object", "-p", "xyz!"],
    ["cat-object", "-t", ""],
    ["cat-object", "--batch"],
    ["cat-object", "--batch-check", "--buffer"],
    ["hash-object", "{json}"],
    ["hash-object", "-w", "-t", "record", "{json}"],
    ["hash-object", "-t", "record", "{bad_json}"],
    ["hash-object", "-w", "{json}", "{json}"],
    ["hash-object", "{missing}"],
    ["hash-object", "--stdin"],
    ["hash-object", "-w", "--stdin-paths"],
]
# Command lines it leaves to click (help, mistakes, spellings it does not parse).
DECLINED = [
    ["cat-object"],
    ["cat-object", "-t"],
    ["cat-object", "-t", "-s", "{blob}"],
    ["cat-object", "--batch", "{blob}"],
    ["cat-object", "-h"],
    ["cat-object", "--help"],
    ["cat-object", "-t", "{blob}", "extra"],
    ["cat-object", "--no-such-flag", "{blob}"],
    ["hash-object"],
    ["hash-object", "-t", "tree", "{json}"],
    ["hash-object", "-tblob", "{json}"],
    ["hash-object", "--stdin", "--stdin-paths"],
    ["hash-object", "--stdin-paths", "{json}"],
    ["hash-object", "{folder}"],
    ["hash-object", "--", "{json}"],
    ["show-ref"],
    ["--version"],
]


def _expand(args: list[str], names: dict) -> list[str]:
    names = {**names, "blob6": names["blob"][:6]}
    return [a.format(**{k: v for k, v in names.items() if isinstance(v, str)}) for a in args]


@pytest.mark.parametrize("args", FAST, ids=" ".join)
def test_the_fast_path_and_click_agree(filled, args):
    line = _expand(args, filled)
    stdin = f"{filled['blob']}\n{filled['record'][:8]}\nnotes/kept\n{'0' * 64}\n".encode()
    if args == ["hash-object", "-w", "--stdin-paths"]:
        stdin = f"{filled['json']}\n".encode()
    quick, slow = both(filled["store"].path, line, input=stdin)
    assert quick is not None, "the fast path declined a line it should run"
    assert quick == slow
    assert b"Traceback" not in quick[2]


@pytest.mark.parametrize("args", DECLINED, ids=" ".join)
def test_anything_else_is_left_to_click(filled, args):
    assert fast.run(["--store", filled["store"].path, *_expand(args, filled)]) is None


def test_a_corrupt_or_packed_object_reads_the_same_on_both_paths(filled):
    store = filled["store"]
    lines = [["cat-object", "-p", filled["blob"]], ["cat-object", "--batch"]]
    names = f"{filled['blob']}\n{filled['record']}\n{filled['big']}\n".encode()
    gc.gc(store)
    for line in lines:
        quick, slow = both(store.path, line, input=names)
        assert quick == slow and quick[0] == 0
    assert names.splitlines()[0] in quick[1]
    packed = next(p.path for p in Store.open(store.path).objects.packs())
    with open(packed, "rb") as handle:
        at = handle.read().index(b"blob 9\0line one\n")
    flip_byte(packed, offset=at + 8)  # inside the blob's body
    for line in lines:
        quick, slow = both(store.path, line, input=names)
        assert quick == slow and quick[0] == 1, quick


@pytest.mark.parametrize("mode", ["--batch-check", "--batch"])
def test_a_line_past_the_limit_reads_the_same_on_both_paths_and_through_a_pipe(filled, mode):
    names = hostile_names(filled["blob"])
    quick, slow = both(filled["store"].path, ["cat-object", mode], input=names)
    assert quick == slow and quick[0] == 2
    piped = run_yyb("--store", filled["store"].path, "cat-object", mode, input=names)
    assert (piped.returncode, piped.stdout) == (2, quick[1])
    assert piped.stderr.decode().splitlines() == quick[2].decode().splitlines()
    assert len(piped.stdout) < 4 * 4200


def test_global_options_and_their_variables(filled, monkeypatch):
    oid = filled["blob"]
    monkeypatch.setenv("YYB_STORE", filled["store"].path)
    for args in (
        ["cat-object", "-t", oid],
        ["--store=" + filled["store"].path, "cat-object", "-t", oid],
        ["--config", filled["missing"], "cat-object", "-t", oid],
    ):
        with CliRunner().isolation() as streams:
            assert fast.run(args) == 0
            sys.stdout.flush()
            assert streams[0].getvalue() == b"blob\n"
    monkeypatch.setenv("YYB_STORE", filled["missing"])
    with CliRunner().isolation() as streams:
        assert fast.run(["cat-object", "-t", oid]) == 2
        sys.stderr.flush()
        assert b"not a yyb store" in streams[1].getvalue()


HEAVY = (
    "click",
    "dataclasses",
    "msgpack",
    "jsonschema",
    "pygit2",
    "cryptography",
    "yyb.store.refs.store",
    # and what start-up was trimmed of (docs/performance.md, "Plumbing start-up")
    "typing",
    "json",
    "threading",
    "base64",
)


@pytest.mark.parametrize("packed", [False, True])
def test_plumbing_imports_nothing_heavy(filled, packed):
    if packed:
        gc.gc(filled["store"])
    script = (
        "import sys\n"
        "from yyb.cli import fast\n"
        f"code = fast.run(['--store', {filled['store'].path!r}, 'cat-object', '-p', "
        f"{filled['blob']!r}])\n"
        "sys.stdout.flush()\n"
        f"heavy = sorted(m for m in sys.modules if m in {HEAVY!r})\n"
        "print(code, heavy, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert done.stdout == b"line one\n"
    assert done.stderr.decode().strip() == "0 []"


def test_batch_answers_a_name_before_it_waits_for_the_next(filled):
    """An interactive reader writes one name and waits for its answer: the answers are
    flushed whenever yyb would wait, not only when the output buffer fills."""
    store = filled["store"]
    gc.gc(store)
    names = [filled["blob"], filled["record"], "0" * 64]
    child = subprocess.Popen(
        [sys.executable, "-m", "yyb", "--store", store.path, "cat-object", "--batch-check"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        for name in names:
            child.stdin.write(name.encode() + b"\n")
            child.stdin.flush()
            ready, _, _ = select.select([child.stdout], [], [], 30)
            assert ready, f"no answer to {name} while yyb waits for more names"
            line = os.read(child.stdout.fileno(), 4096).decode()
            assert line.startswith(name) and line.endswith("\n") and line.count("\n") == 1
        child.stdin.close()
        assert child.wait(timeout=30) == 0
    finally:
        child.kill()
        child.wait()


@pytest.fixture
def packed_many(tmp_path):
    """A packed store of 1,500 blobs and a record, one blob damaged in its pack; with the
    names a batch reader asks for: every oid, shuffled, and missing, abbreviated and junk
    names among them."""
    store, _ = Store.init(str(tmp_path / "store"))
    blobs = [store.objects.put("blob", os.urandom(i % 700) + b"%d" % i) for i in range(1500)]
    record = store.objects.put_record(note("kept"))
    damaged = store.objects.put("blob", b"the damaged body")
    damage_packed(store, b"the damaged body", 4)
    names = [*blobs, record, damaged, "0" * 64, blobs[3][:12], "not a name", ""]
    names.sort(key=lambda name: hashlib.sha256(name.encode()).digest())
    return store.path, names, damaged


def batch(store_path: str, mode: str, text: bytes, workers: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, YYB_WORKERS=workers)
    command = [sys.executable, "-m", "yyb", "--store", store_path, "cat-object", mode]
    return subprocess.run(command, input=text, capture_output=True, env=env, timeout=120)


@pytest.mark.parametrize("mode", ["--batch", "--batch-check"])
def test_batch_with_a_helper_answers_as_without(packed_many, mode):
    """The same answers, byte for byte, whether a helper process proves a share of the
    objects (YYB_WORKERS=2) or the reader proves them all (YYB_WORKERS=1)."""
    store_path, names, damaged = packed_many
    text = "".join(name + "\n" for name in names).encode()
    alone, helped = batch(store_path, mode, text, "1"), batch(store_path, mode, text, "2")
    assert alone.returncode == helped.returncode == 1  # the damaged blob
    assert alone.stderr == helped.stderr == b""
    assert helped.stdout == alone.stdout
    lines = helped.stdout.split(b"\n") if mode == "--batch-check" else []
    assert f"{damaged} corrupt".encode() in helped.stdout
    if lines:
        assert len(lines) == len(names) + 1 and lines[-1] == b""


def test_batch_with_a_helper_answers_each_chunk_before_it_waits(packed_many):
    """A reader that writes 400 names at once and waits for their answers gets them: the
    next chunk is begun early only when its names are already there."""
    store_path, names, damaged = packed_many
    names = [name for name in names if len(name) == 64 and name != damaged][:1200]
    child = subprocess.Popen(
        [sys.executable, "-m", "yyb", "--store", store_path, "cat-object", "--batch-check"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=dict(os.environ, YYB_WORKERS="2"),
    )
    try:
        for start in range(0, len(names), 400):
            part = names[start : start + 400]
            child.stdin.write("".join(name + "\n" for name in part).encode())
            child.stdin.flush()
            answers = b""
            while answers.count(b"\n") < len(part):
                ready, _, _ = select.select([child.stdout], [], [], 30)
                assert ready, "no answers while yyb waits for more names"
                answers += os.read(child.stdout.fileno(), 1 << 16)
            got = [line.split()[0].decode() for line in answers.splitlines()]
            assert got == part
        child.stdin.close()
        assert child.wait(timeout=30) == 0
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("most", [1, 7, 4096])
def test_gathered_answers_survive_writes_cut_short(tmp_path, monkeypatch, most):
    """``writev`` may write less than asked (a signal, a full pipe): what is left goes out
    next, in order, empty pieces and views included."""
    from yyb.cli import objects

    real = os.writev
    calls = []

    def short(fd, buffers):
        calls.append(len(buffers))
        data = b"".join(bytes(b) for b in buffers)[: max(1, most - len(calls) % 3)]
        return real(fd, [data])

    monkeypatch.setattr(os, "writev", short)
    monkeypatch.setattr(objects, "GATHER", 5)
    body = memoryview(os.urandom(3000))
    parts = [b"head\n", body[10:900], b"", b"\n", b"x" * 50, body[900:], b"", b"\n"] * 3
    with open(tmp_path / "out", "wb") as out:
        out.write(b"buffered first ")
        objects._write_parts(out, parts)
    assert (tmp_path / "out").read_bytes() == b"buffered first " + b"".join(parts)
    assert len(calls) > len(parts) // 5


def _doctor_both_ways(path: str, *flags: str) -> tuple[tuple, tuple, str]:
    """``doctor`` of ``path`` on the fast path and through click: (code, stdout, stderr)
    each, and which modules the fast one left out."""
    runs = []
    for way in ("fast", "app"):
        script = (
            "import sys\n"
            f"from yyb.cli import {way}\n"
            f"code = {way}.run(['--store', {path!r}, 'doctor', *{list(flags)!r}])\n"
            "sys.stdout.flush()\n"
            "print('click' in sys.modules, file=sys.stderr)\n"
            "sys.exit(code)\n"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
        runs.append((done.returncode, done.stdout, done.stderr))
    return runs[0], runs[1], runs[0][2].decode().splitlines()[-1]


@pytest.mark.parametrize("flags", [(), ("--json",)])
def test_doctor_on_the_fast_path_says_what_click_says(packed_many, flags):
    """A damaged pack and a dangling record: the same findings, summary and exit code, and
    the fast one never loads click."""
    path = packed_many[0]
    fast_run, click_run, fast_loaded_click = _doctor_both_ways(path, *flags)
    assert fast_run[0] == click_run[0] == 1
    assert fast_run[1] == click_run[1] and b"bad-pack" in fast_run[1]
    assert fast_run[2].splitlines()[:-1] == click_run[2].splitlines()[:-1]
    assert fast_loaded_click == "False"


def test_doctor_of_no_store_says_so_the_same_way(tmp_path):
    fast_run, click_run, _ = _doctor_both_ways(str(tmp_path / "none"))
    assert fast_run[0] == click_run[0] == 2
    assert fast_run[2].splitlines()[:-1] == click_run[2].splitlines()[:-1]
    assert b"not a yyb store" in fast_run[2]
