"""--progress on the long commands besides ``yyb run``: each run on a real small store.

Per command, in one test (one store): ``--progress plain`` with a real file as stderr says
k/N lines; ``--progress none`` says no progress; and with no --progress under a pseudo-terminal
(``auto``) the status line is redrawn in place (``\\r\\x1b[K``). The progress is on stderr
only: stdout is the same in every mode, and ``--json`` stays one JSON document.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sys
import threading

import pytest

from tests.conftest import Yyb
from yyb.cli.progress import CLEAR

STEP = re.compile(r"^\[(\d+)/(\d+)\] ", re.M)


def call(args: list[str], stderr) -> tuple[int, str]:
    """Run the CLI in this process with ``stderr`` as sys.stderr: (exit code, stdout)."""
    from yyb.cli import main

    out = io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, stderr
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdout, sys.stderr = saved
    return code, out.getvalue()


def to_file(tmp_path, args: list[str]) -> tuple[int, str, str]:
    """``args`` with a file as stderr: (exit code, stdout, the file's text)."""
    path = tmp_path / f"stderr-{len(os.listdir(tmp_path))}.txt"
    with open(path, "w", encoding="utf-8") as stream:
        code, out = call(args, stream)
    return code, out, path.read_text(encoding="utf-8")


def on_terminal(args: list[str]) -> tuple[int, str, str]:
    """``args`` with a pseudo-terminal as stderr: (exit code, stdout, what the terminal got)."""
    master, slave = os.openpty()
    got: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal's other end is closed
                return
            if not data:
                return
            got.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    stream = open(slave, "w", encoding="utf-8")
    try:
        assert stream.isatty()
        code, out = call(args, stream)
    finally:
        stream.close()
    reader.join(10)
    os.close(master)
    return code, out, b"".join(got).decode("utf-8", "replace")


def steps(text: str) -> list[tuple[int, int]]:
    return [(int(k), int(n)) for k, n in STEP.findall(text)]


def assert_three_modes(tmp_path, args: list[str], total: int, same_stdout: bool = True) -> str:
    """The command ``args`` in plain (a file), none and auto on a terminal; returns the plain
    stderr. ``total``: the N every k/N line has."""
    code, plain_out, plain = to_file(tmp_path, [*args, "--progress", "plain"])
    assert code == 0, plain
    assert CLEAR not in plain
    counted = steps(plain)
    assert counted and all(n == total for _, n in counted), plain
    assert max(k for k, _ in counted) == total, plain
    code, none_out, quiet = to_file(tmp_path, [*args, "--progress", "none"])
    assert code == 0, quiet
    assert steps(quiet) == [] and quiet == ""
    code, live_out, live = on_terminal(args)
    assert code == 0, live
    assert CLEAR in live and live.endswith(CLEAR), live[-200:]
    assert f"{CLEAR}[{total}/{total}]" in live
    if same_stdout:
        assert plain_out == none_out == live_out
    return plain


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """A finished example (2 agents x 1 attempt): its folder."""
    root = tmp_path_factory.mktemp("example") / "ex"
    done = Yyb(str(root / "store"))("example", "--dir", str(root), "--attempts", "1")
    assert done.exit_code == 0, done.stderr
    return root


def test_regrade_tells_each_attempt_of_the_pass(example, tmp_path):
    args = ["--store", str(example / "store"), "regrade", "--plan", str(example / "plan.json")]
    args += ["--profile", "tests"]
    plain = assert_three_modes(tmp_path, args, 2, same_stdout=False)  # a generation each
    assert re.search(
        r"^\[1/2\] #0 calc-add example/fixer: evaluated pass; elapsed \d+s", plain, re.M
    )
    assert re.search(r"^\[2/2\] #1 calc-add example/idler: evaluated fail; elapsed", plain, re.M)
    code, out, err = to_file(tmp_path, [*args, "--json", "--progress", "plain"])
    assert code == 0 and json.loads(out)["dispatch_count"] == 0 and steps(err) == [(1, 2), (2, 2)]


def test_gc_tells_its_phases_and_the_objects_each_has_done(example, tmp_path):
    def gc(name: str, *more: str, terminal: bool = False) -> tuple[int, str, str]:
        """gc on a copy of the example's store; its stdout with the copy's path as S."""
        store = str(shutil.copytree(example / "store", tmp_path / name))
        args = ["--store", store, "gc", *more]
        code, out, err = on_terminal(args) if terminal else to_file(tmp_path, args)
        return code, out.replace(store, "S"), err

    loose = len([f for d in (example / "store" / "objects").iterdir() if len(d.name) == 2
                 for f in d.iterdir()])  # fmt: skip
    code, out, plain = gc("a", "--progress", "plain")
    assert code == 0, plain
    assert out.startswith(f"{loose} objects packed, {loose} loose files removed\nS/objects/pack/")
    said = re.sub(r"elapsed \d+s", "elapsed T", plain).splitlines()
    assert said == [
        "listing",
        f"[{loose}/{loose}] listing done; elapsed T",
        f"packing: {loose}",
        f"[{loose}/{loose}] packing done; elapsed T",
        "verifying",
        "verifying done; elapsed T",
        f"removing: {loose}",
        f"[{loose}/{loose}] removing done; elapsed T",
        "packing refs",
        "packing refs done; elapsed T",
    ], plain
    code, quiet_out, quiet = gc("b", "--progress", "none")
    assert code == 0 and quiet == "" and quiet_out == out
    code, live_out, live = gc("c", terminal=True)
    assert code == 0 and live_out == out
    assert f"{CLEAR}[{loose}/{loose}] packing done;" in live and live.endswith(CLEAR)
    code, doc, err = gc("d", "--json")
    assert code == 0 and json.loads(doc)["packed"] == loose and "packing" in err


def test_rejudge_tells_each_attempt_of_the_pass(tmp_path):
    from tests.grading.conftest import JUDGE_PASS, build_bench

    bench = build_bench(tmp_path / "bench")
    bench.configure({"tests": bench.command("honest"), "judge": bench.judge("j", JUDGE_PASS)})
    plan, _ = bench.run(["zz/fixer", "zz/idler"])
    args = ["--store", bench.store_path, "--config", str(bench.config_path), "rejudge"]
    args += ["--plan", bench.plan_file(plan), "--profile", "judge"]
    plain = assert_three_modes(tmp_path, args, 2, same_stdout=False)
    assert re.search(r"^\[1/2\] #0 calc-add zz/fixer: evaluated pass; elapsed", plain, re.M), plain


def test_validate_gold_tells_each_case(tmp_path, monkeypatch):
    from tests.swebench.conftest import build_tests_bench
    from yyb.grading import gold

    bench = build_tests_bench(tmp_path / "bench")
    bench.configure_tests()
    args = ["--store", bench.store_path, "--config", str(bench.config_path), "validate"]
    args += ["--gold", "--task", str(bench.task_path)]
    code, out, plain = to_file(tmp_path, [*args, "--progress", "plain"])
    assert code == 0, plain
    assert plain.splitlines() == [
        f"[0/1] started {bench.task_path}",
        *(line for line in plain.splitlines()[1:] if line.startswith("[1/1] mean-floors ok;")),
    ], plain
    assert out.split()[:4] == ["mean-floors", "ok", "gold=pass", "empty=fail"]
    # Another real validation would add seconds each: none and live are told the same answer.
    answer = bench.store.refs.read("refs/validations/mean-floors")
    record = bench.store.objects.get_record(answer)
    monkeypatch.setattr(gold, "validate", lambda *_, **__: (answer, record))
    code, quiet_out, quiet = to_file(tmp_path, [*args, "--progress", "none"])
    assert code == 0 and quiet == "" and quiet_out == out
    code, live_out, live = on_terminal(args)
    assert code == 0 and live_out == out
    assert f"{CLEAR}[1/1] mean-floors ok\r\n" in live and live.endswith(CLEAR), live


def test_env_build_tells_each_spec_and_its_steps(tmp_path):
    from tests.harness.environments.test_build import busybox_spec

    spec = busybox_spec(tmp_path)
    args = ["--store", str(tmp_path / "store"), "env", "build", spec]
    plain = assert_three_modes(tmp_path, args, 1)
    lines = plain.splitlines()
    assert lines[0] == "[0/1] started busybox"
    assert any(line.startswith("environment busybox: unpacking 1 layers") for line in lines)
    assert lines[-1].startswith("[1/1] busybox ")
    code, _, quiet = to_file(tmp_path, [*args, "-q"])
    assert code == 0 and quiet == ""


class _Build:
    """A bound build of a checkout (this one may be dirty while the tests run)."""

    def identity(self) -> dict:
        modules = {"count": 1, "sha256": "0" * 64}
        return {"kind": "checkout", "version": "0.0.0", "commit": "0" * 40, "modules": modules}


def test_release_readiness_tells_each_attempt_of_its_suite(tmp_path, monkeypatch):
    from yyb.readiness import identity, run, suite

    # Two cases of the suite's first part: the progress of real attempts, not a receipt.
    chosen = ("readiness-resolved", "readiness-model-failure")
    monkeypatch.setattr(run, "CASES", tuple(c for c in suite.CASES if c.case_id in chosen))
    monkeypatch.setattr(run, "PARTS", ("suite",))
    monkeypatch.setattr(identity, "build", _Build)
    args = ["--store", str(tmp_path / "store"), "release-readiness"]
    code, out, plain = to_file(tmp_path, [*args, "--progress", "plain"])
    assert code == 1 and "coverage   missing" in out, plain  # most of the suite left out
    assert steps(plain)[-1] == (2, 2) and "started #0 readiness-" in plain, plain
    code, quiet_out, quiet = to_file(tmp_path, [*args, "--progress", "none"])
    assert code == 1 and quiet == "" and quiet_out == out
    code, out, live = on_terminal([*args, "--json"])
    assert code == 1 and json.loads(out)["receipt"]["passed"] is False
    assert CLEAR in live and f"{CLEAR}[2/2]" in live and live.endswith(CLEAR)
