"""The reference boundary (docs/boundary.md), run as yyb runs it: a copy of its file, by path,
in a process of its own. A dispatch runs its step once and never again, journaled before it
acts and before the effect; status tells what the journal proves, crashes included; the
step's envelope comes back through the one place it was given, and what it printed (its two
streams merged, at most the last 256 KiB) comes back beside it; a malformed request is one
line and exit 2."""

from __future__ import annotations

import ast
import base64
import hashlib
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "yyb" / "workflow" / "reference_boundary.py"
PROTOCOL = "yyb_boundary.v1"
IDENTITY = "yyb-reference-boundary@1"

ENVELOPE = {
    "schema_version": "juno_execution_envelope.v1",
    "provider": "zz",
    "model": "m1",
    "status": "succeeded",
    "cost": {"completeness": "genuine_zero", "currency": "USD", "micros": 0},
    "started_ms": 0,
    "ended_ms": 0,
    "elapsed_ms": 0,
}

# The stand-in agent `yy`: appends its dispatch id to each resource file it is given, records
# what it was started with, and writes its envelope where the boundary said. AGENT_MODE
# (comma-separated) changes what it does: junk (prints to stdout, then stderr), interleaved
# (stdout, stderr, stdout), big-output (BIG_OUTPUT to stdout), no-envelope, kill (SIGKILLs
# itself), sleep (waits a moment first); AGENT_ENVELOPE_SIZE pads its envelope with leading
# spaces to that many bytes; AGENT_EXIT is its exit status.
AGENT = """\
import json, os, signal, sys, time
args = sys.argv[1:]
modes = os.environ.get("AGENT_MODE", "").split(",")
if "sleep" in modes:
    time.sleep(0.3)
envelope = args[args.index("--execution-envelope") + 1]
record = os.environ.get("AGENT_RECORD")
if record:
    folder = os.path.dirname(envelope)
    with open(record, "a") as handle:
        handle.write(json.dumps({
            "argv": args,
            "step": os.environ.get("YYB_STEP_ID"),
            "dispatch": os.environ.get("YYB_DISPATCH_ID"),
            "crash_hook": os.environ.get("YYB_BOUNDARY_CRASH"),
            "envelope_existed": os.path.exists(envelope),
            "folder_mode": os.stat(folder).st_mode & 0o777,
            "folder": {name: os.stat(os.path.join(folder, name)).st_ino
                       for name in os.listdir(folder)},
            "stdout_ino": os.fstat(1).st_ino,
            "stderr_ino": os.fstat(2).st_ino,
        }) + "\\n")
for resource in json.loads(os.environ["YYB_STEP_RESOURCES"]):
    with open(resource["name"], "a") as handle:
        handle.write(os.environ["YYB_DISPATCH_ID"] + "\\n")
if "junk" in modes:
    print("junk on stdout {not json", flush=True)
    print("and on stderr", file=sys.stderr, flush=True)
if "interleaved" in modes:
    for n, stream in enumerate([sys.stdout, sys.stderr, sys.stdout, sys.stderr, sys.stdout]):
        print(f"{stream.name} {n}", file=stream, flush=True)
if "big-output" in modes:
    sys.stdout.buffer.write(BIG_OUTPUT)
    sys.stdout.flush()
size = os.environ.get("AGENT_ENVELOPE_SIZE")
if size:
    text = json.dumps(ENVELOPE)
    with open(envelope, "w") as handle:
        handle.write(" " * (int(size) - len(text)) + text)
elif "no-envelope" not in modes:
    with open(envelope, "w") as handle:
        json.dump(ENVELOPE, handle)
if "kill" in modes:
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(int(os.environ.get("AGENT_EXIT", "0")))
"""


# What the big-output agent prints: more than the 256 KiB kept, no two 256 KiB windows alike.
KEPT = 256 << 10
BIG_OUTPUT = b"".join(b"%07d\n" % n for n in range(KEPT // 8 + 5000)) + b"the end"


def load_boundary():
    spec = importlib.util.spec_from_file_location("reference_boundary_under_test", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def did(n: int) -> str:
    return hashlib.sha256(f"dispatch {n}".encode()).hexdigest()


class World:
    """A journal, a stand-in agent first on PATH, a compiled workflow, one resource file,
    and the boundary's file copied elsewhere (it must run alone, by path)."""

    def __init__(self, root: Path):
        self.root = root
        self.boundary = root / "pinned" / "boundary.py"
        self.boundary.parent.mkdir()
        shutil.copyfile(SOURCE, self.boundary)
        self.journal = root / "state" / "journal"
        self.bin = root / "bin"
        self.bin.mkdir()
        agent = self.bin / "yy"
        agent.write_text(
            f"#!{sys.executable}\n"
            + f"ENVELOPE = {ENVELOPE!r}\n"
            + f"BIG_OUTPUT = {BIG_OUTPUT!r}\n"
            + AGENT,
            encoding="utf-8",
        )
        agent.chmod(0o755)
        self.resource = root / "orders.db"
        self.resource.write_text("")
        self.record = root / "agent.jsonl"
        run = ["yy", "pi", "--model", "zz/m1"]
        self.write_workflow({"name": "w", "steps": [{"id": "first", "run": run}]})

    def write_workflow(self, workflow: dict | str, name: str = "workflow.json") -> None:
        self.workflow = self.root / name
        text = workflow if isinstance(workflow, str) else json.dumps(workflow)
        self.workflow.write_text(text, encoding="utf-8")

    def env(self, **extra: str) -> dict:
        env = dict(os.environ)
        env.pop("YYB_BOUNDARY_CRASH", None)
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["AGENT_RECORD"] = str(self.record)
        env.update(extra)
        return env

    def request(self, operation: str, **fields) -> dict:
        request = {"protocol": PROTOCOL, "operation": operation, "journal": str(self.journal)}
        if operation == "dispatch":
            request.update(
                dispatch_id=did(1),
                plan="p" * 40,
                attempt="a" * 40,
                step="first",
                model={"requested": "zz/m1", "resolved": "zz/m1"},
                workflow=str(self.workflow),
                workflow_sha256=hashlib.sha256(self.workflow.read_bytes()).hexdigest(),
                variables={"region": "eu"},
                resources=[{"type": "database", "name": str(self.resource)}],
            )
        if operation == "status":
            request["dispatch_id"] = did(1)
        request.update(fields)
        return request

    def popen(self, argv: list[str], **env: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, str(self.boundary), *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env(**env),
            cwd=self.root,
        )

    def call_raw(self, argv: list[str], data: bytes, **env: str) -> subprocess.CompletedProcess:
        process = self.popen(argv, **env)
        out, err = process.communicate(data, timeout=60)
        return subprocess.CompletedProcess(argv, process.returncode, out, err)

    def call(self, operation: str, request: dict | None = None, **env: str) -> dict:
        request = self.request(operation) if request is None else request
        done = self.call_raw([operation], json.dumps(request).encode(), **env)
        assert done.returncode == 0, done.stderr.decode()
        assert b"Traceback" not in done.stderr
        answer = json.loads(done.stdout)  # exactly one JSON object: nothing else
        assert isinstance(answer, dict)
        return answer

    def dispatch(self, **fields) -> dict:
        return self.call("dispatch", self.request("dispatch", **fields))

    def status(self, dispatch_id: str = did(1)) -> dict:
        return self.call("status", self.request("status", dispatch_id=dispatch_id))

    def lines(self, dispatch_id: str = did(1)) -> list[dict]:
        text = (self.journal / f"{dispatch_id}.jsonl").read_text()
        return [json.loads(line) for line in text.splitlines()]

    def events(self, dispatch_id: str = did(1)) -> list[str]:
        return [line["event"] for line in self.lines(dispatch_id)]

    def touched(self) -> list[str]:
        return self.resource.read_text().splitlines()

    def records(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def envelope_of(answer: dict) -> dict:
    return json.loads(base64.b64decode(answer["envelope_b64"]))


def tail(data: bytes) -> tuple[int, bytes, str]:
    """Big output, compared cheaply: its size, its first line, its digest."""
    return len(data), data[: data.find(b"\n") + 1], hashlib.sha256(data).hexdigest()


def output_of(answer: dict) -> bytes:
    assert isinstance(answer["output_b64"], str)
    return base64.b64decode(answer["output_b64"], validate=True)


# The program itself


def test_the_boundary_imports_nothing_of_yyb():
    tree = ast.parse(SOURCE.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import needs the package"
            imported.add(node.module.split(".")[0])
    outside = {name for name in imported if name not in sys.stdlib_module_names}
    assert outside == {"yaml"}
    assert SOURCE.read_text(encoding="utf-8").startswith("#!/usr/bin/env python3\n")


def test_identify(world):
    assert world.call("identify") == {"protocol": PROTOCOL, "identity": IDENTITY}
    assert not world.journal.exists()


# Dispatch


def test_a_dispatch_runs_its_step_once_and_journals_each_event_in_order(world):
    answer = world.dispatch()
    assert answer["status"] == "completed"
    assert answer["exit_code"] == 0
    assert envelope_of(answer) == ENVELOPE
    assert answer["output_b64"] == ""  # it printed nothing
    assert world.touched() == [did(1)]

    lines = world.lines()
    assert [line["event"] for line in lines] == ["dispatched", "launched", "completed"]
    for line in lines:
        assert line["dispatch_id"] == did(1)
        assert isinstance(line["time_ms"], int)
    assert lines[0]["time_ms"] <= lines[1]["time_ms"] <= lines[2]["time_ms"]
    assert lines[2]["exit_code"] == 0
    assert lines[2]["envelope_b64"] == answer["envelope_b64"]
    assert lines[2]["output_b64"] == ""
    assert stat.S_IMODE(world.journal.stat().st_mode) == 0o700

    # The step got its argv with one envelope place appended, in a private folder of its own
    # that did not exist before it and is gone after; its id and dispatch in the environment.
    (record,) = world.records()
    argv = record["argv"]
    assert argv[:-1] == ["pi", "--model", "zz/m1", "--execution-envelope"]
    assert argv.count("--execution-envelope") == 1
    assert os.path.isabs(argv[-1])
    assert record["envelope_existed"] is False
    assert record["folder_mode"] == 0o700
    assert not os.path.exists(os.path.dirname(argv[-1]))
    assert record["step"] == "first" and record["dispatch"] == did(1)
    # Its standard output and error are one file, in that same folder.
    assert record["stdout_ino"] == record["stderr_ino"]
    assert list(record["folder"].values()) == [record["stdout_ino"]]
    assert os.path.basename(argv[-1]) not in record["folder"]


def test_the_same_dispatch_is_refused_and_touches_nothing(world):
    assert world.dispatch()["status"] == "completed"
    journal = (world.journal / f"{did(1)}.jsonl").read_bytes()
    answer = world.dispatch()
    assert answer == {"status": "refused", "reason": f"dispatch {did(1)} is already in the journal"}
    assert world.touched() == [did(1)]
    assert len(world.records()) == 1
    assert (world.journal / f"{did(1)}.jsonl").read_bytes() == journal
    # Another dispatch id runs.
    assert world.dispatch(dispatch_id=did(2))["status"] == "completed"
    assert world.touched() == [did(1), did(2)]


def test_a_dispatch_makes_a_missing_journal_folder_private(world):
    assert not world.journal.exists()
    world.dispatch()
    assert world.journal.is_dir()
    assert stat.S_IMODE(world.journal.stat().st_mode) == 0o700


def test_the_steps_stdout_does_not_pollute_the_answer(world):
    done = world.call_raw(
        ["dispatch"], json.dumps(world.request("dispatch")).encode(), AGENT_MODE="junk"
    )
    assert done.returncode == 0
    answer = json.loads(done.stdout)  # one JSON object, nothing around it
    assert answer["status"] == "completed" and envelope_of(answer) == ENVELOPE
    assert output_of(answer) == b"junk on stdout {not json\nand on stderr\n"
    # The step's output is in the answer only: not around it, not on the boundary's stderr.
    assert b"junk" not in done.stdout.replace(answer["output_b64"].encode(), b"")
    assert b"junk" not in done.stderr and b"and on stderr" not in done.stderr


def test_the_steps_two_streams_come_back_merged_in_order(world):
    answer = world.call("dispatch", AGENT_MODE="interleaved")
    printed = b"<stdout> 0\n<stderr> 1\n<stdout> 2\n<stderr> 3\n<stdout> 4\n"
    assert output_of(answer) == printed
    assert world.lines()[-1]["output_b64"] == answer["output_b64"]
    assert world.status() == {
        "state": "completed",
        "dispatch_id": did(1),
        "exit_code": 0,
        "envelope_b64": answer["envelope_b64"],
        "output_b64": answer["output_b64"],
    }
    assert output_of(world.status()) == printed


def test_an_output_over_256_kib_is_cut_to_its_last_256_kib(world):
    assert len(BIG_OUTPUT) > KEPT
    answer = world.call("dispatch", AGENT_MODE="big-output")
    assert tail(output_of(answer)) == tail(BIG_OUTPUT[-KEPT:])
    assert tail(output_of(world.status())) == tail(BIG_OUTPUT[-KEPT:])
    assert envelope_of(answer) == ENVELOPE


def test_an_output_of_exactly_256_kib_is_kept_whole(world):
    exact = world.root / "exact"
    exact.write_bytes(BIG_OUTPUT[-KEPT:])
    script = "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())"
    run = [sys.executable, "-c", script, str(exact)]
    world.write_workflow({"name": "w", "steps": [{"id": "first", "run": run}]})
    answer = world.dispatch()
    assert answer["exit_code"] == 0
    assert tail(output_of(answer)) == tail(BIG_OUTPUT[-KEPT:])


def test_a_step_that_writes_no_envelope(world):
    answer = world.call("dispatch", AGENT_MODE="no-envelope")
    assert answer == {"status": "completed", "exit_code": 0, "envelope_b64": None, "output_b64": ""}
    assert world.lines()[-1]["envelope_b64"] is None
    assert world.touched() == [did(1)]


def test_the_largest_envelope_and_output_fit_in_an_answer(world):
    boundary = load_boundary()
    assert boundary.MAX_ANSWER == 2 << 20 and boundary.MAX_OUTPUT == KEPT
    size = boundary.MAX_ENVELOPE
    done = world.call_raw(
        ["dispatch"],
        json.dumps(world.request("dispatch")).encode(),
        AGENT_MODE="big-output",
        AGENT_ENVELOPE_SIZE=str(size),
    )
    assert done.returncode == 0, done.stderr
    # Room for at least 4 KiB more of the answer's JSON.
    assert len(done.stdout) + (4 << 10) - 200 <= boundary.MAX_ANSWER
    answer = json.loads(done.stdout)
    assert len(base64.b64decode(answer["envelope_b64"])) == size
    assert envelope_of(answer) == ENVELOPE
    assert tail(output_of(answer)) == tail(BIG_OUTPUT[-KEPT:])


def test_an_envelope_too_big_for_an_answer_is_answered_as_none(world):
    size = load_boundary().MAX_ENVELOPE + 1
    done = world.call_raw(
        ["dispatch"],
        json.dumps(world.request("dispatch")).encode(),
        AGENT_ENVELOPE_SIZE=str(size),
    )
    assert done.returncode == 0
    assert len(done.stdout) <= 2 << 20
    assert json.loads(done.stdout) == {
        "status": "completed",
        "exit_code": 0,
        "envelope_b64": None,
        "output_b64": "",
    }


def test_the_steps_exit_status_is_answered(world):
    answer = world.call("dispatch", AGENT_EXIT="3")
    assert answer["exit_code"] == 3 and envelope_of(answer) == ENVELOPE
    assert world.lines()[-1]["exit_code"] == 3
    assert world.status() == {
        "state": "completed",
        "dispatch_id": did(1),
        "exit_code": 3,
        "envelope_b64": answer["envelope_b64"],
        "output_b64": "",
    }


def test_a_step_killed_by_a_signal_has_no_exit_status(world):
    answer = world.call("dispatch", AGENT_MODE="kill")
    assert answer["status"] == "completed"
    assert answer["exit_code"] is None
    assert envelope_of(answer) == ENVELOPE
    assert world.lines()[-1]["exit_code"] is None


def test_a_step_killed_by_a_signal_keeps_what_it_printed(world):
    answer = world.call("dispatch", AGENT_MODE="interleaved,kill")
    assert answer["exit_code"] is None
    assert output_of(answer).endswith(b"<stdout> 4\n")


def test_a_step_that_cannot_start_exits_127_after_launched_with_no_output(world):
    world.write_workflow({"name": "w", "steps": [{"id": "first", "run": ["no-such-yy-here"]}]})
    answer = world.dispatch()
    assert answer == {
        "status": "completed",
        "exit_code": 127,
        "envelope_b64": None,
        "output_b64": None,
    }
    assert world.events() == ["dispatched", "launched", "completed"]
    assert world.lines()[-1]["output_b64"] is None
    assert world.status()["output_b64"] is None


def test_a_step_that_started_and_exits_127_has_its_output(world):
    run = [sys.executable, "-c", "print('command not found'); raise SystemExit(127)"]
    world.write_workflow({"name": "w", "steps": [{"id": "first", "run": run}]})
    answer = world.dispatch()
    assert answer["exit_code"] == 127
    assert output_of(answer) == b"command not found\n"


def test_a_workflow_whose_bytes_differ_is_refused_and_nothing_runs(world):
    request = world.request("dispatch")
    world.workflow.write_text(world.workflow.read_text().replace("zz/m1", "zz/m2"))
    answer = world.call("dispatch", request)
    assert answer["status"] == "refused"
    assert "SHA-256" in answer["reason"]
    assert world.touched() == [] and world.records() == []
    # The dispatch was used: journaled, never launched.
    assert world.events() == ["dispatched"]
    assert world.status() == {"state": "resumable", "dispatch_id": did(1)}
    assert world.call("dispatch", request)["reason"].endswith("is already in the journal")


def test_a_step_not_in_the_workflow_is_refused(world):
    answer = world.dispatch(step="second")
    assert answer["status"] == "refused" and "'second'" in answer["reason"]
    assert world.touched() == [] and world.records() == []
    assert world.events() == ["dispatched"]


def test_a_step_that_names_its_own_envelope_place_is_refused(world):
    run = ["yy", "pi", "--execution-envelope", "/tmp/elsewhere"]
    world.write_workflow({"name": "w", "steps": [{"id": "first", "run": run}]})
    answer = world.dispatch()
    assert answer["status"] == "refused" and "--execution-envelope" in answer["reason"]
    assert world.touched() == []


def test_a_yaml_workflow(world):
    world.write_workflow(
        "name: w\nsteps:\n  - id: other\n    run: [false]\n"
        "  - id: first\n    run: [yy, pi, --model, zz/m1]\n",
        name="workflow.yaml",
    )
    answer = world.dispatch()
    assert answer["exit_code"] == 0 and envelope_of(answer) == ENVELOPE
    assert world.records()[0]["argv"][:3] == ["pi", "--model", "zz/m1"]


def test_every_resource_is_given_to_the_step(world):
    other = world.root / "queue"
    resources = [
        {"type": "database", "name": str(world.resource)},
        {"type": "queue", "name": str(other)},
    ]
    world.dispatch(resources=resources)
    assert world.touched() == [did(1)]
    assert other.read_text().splitlines() == [did(1)]


# Status


def test_status_of_a_dispatch_never_made(world):
    assert world.status() == {"state": "never_dispatched", "dispatch_id": did(1)}
    world.journal.mkdir(parents=True)
    assert world.status() == {"state": "never_dispatched", "dispatch_id": did(1)}


def test_status_of_a_completed_dispatch_is_its_answer(world):
    answer = world.call("dispatch", AGENT_MODE="junk")
    assert world.status() == {
        "state": "completed",
        "dispatch_id": did(1),
        "exit_code": 0,
        "envelope_b64": answer["envelope_b64"],
        "output_b64": answer["output_b64"],
    }
    assert output_of(world.status()) == b"junk on stdout {not json\nand on stderr\n"
    assert world.status(did(2))["state"] == "never_dispatched"


def crash(world: World, point: str) -> subprocess.CompletedProcess:
    done = world.call_raw(
        ["dispatch"], json.dumps(world.request("dispatch")).encode(), YYB_BOUNDARY_CRASH=point
    )
    assert done.returncode == 70
    assert done.stdout == b""
    return done


def test_a_crash_after_dispatched_is_resumable_and_never_dispatched_again(world):
    crash(world, "after-dispatched")
    assert world.events() == ["dispatched"]
    assert world.touched() == [] and world.records() == []
    assert world.status() == {"state": "resumable", "dispatch_id": did(1)}
    assert world.dispatch()["status"] == "refused"
    assert world.touched() == []


def test_a_crash_after_launched_is_unknown(world):
    crash(world, "after-launched")
    assert world.events() == ["dispatched", "launched"]
    assert world.touched() == []
    assert world.status() == {"state": "unknown", "dispatch_id": did(1)}
    assert world.dispatch()["status"] == "refused"


def test_a_crash_after_the_effect_is_unknown(world):
    crash(world, "after-effect")
    assert world.touched() == [did(1)]
    assert world.events() == ["dispatched", "launched"]
    assert world.status() == {"state": "unknown", "dispatch_id": did(1)}
    assert world.dispatch()["status"] == "refused"
    assert world.touched() == [did(1)]


def test_the_crash_hook_is_not_passed_to_the_step(world):
    crash(world, "after-effect")
    assert world.records()[0]["crash_hook"] is None


def write_journal(world: World, text: str, dispatch_id: str = did(1)) -> None:
    world.journal.mkdir(parents=True, exist_ok=True)
    (world.journal / f"{dispatch_id}.jsonl").write_text(text)


def entry(event: str, dispatch_id: str = did(1), **extra) -> str:
    return json.dumps({"event": event, "dispatch_id": dispatch_id, "time_ms": 1, **extra}) + "\n"


def test_a_torn_last_line_is_ignored(world):
    write_journal(world, entry("dispatched") + '{"event": "laun')
    assert world.status() == {"state": "resumable", "dispatch_id": did(1)}
    completed = entry("completed", exit_code=0, envelope_b64=None)
    write_journal(world, entry("dispatched") + entry("launched") + completed[:30])
    assert world.status() == {"state": "unknown", "dispatch_id": did(1)}
    write_journal(world, entry("dispatched") + entry("launched") + completed + "{")
    assert world.status()["state"] == "completed"
    # A journal file holding only a torn line still claims its dispatch.
    write_journal(world, '{"ev')
    assert world.status() == {"state": "resumable", "dispatch_id": did(1)}
    assert world.dispatch()["status"] == "refused"
    assert world.touched() == []


def test_a_completed_entry_journaled_before_output_was_kept_answers_no_output(world):
    envelope_b64 = base64.b64encode(json.dumps(ENVELOPE).encode()).decode()
    completed = entry("completed", exit_code=0, envelope_b64=envelope_b64)
    write_journal(world, entry("dispatched") + entry("launched") + completed)
    assert world.status() == {
        "state": "completed",
        "dispatch_id": did(1),
        "exit_code": 0,
        "envelope_b64": envelope_b64,
        "output_b64": None,
    }


@pytest.mark.parametrize(
    "text",
    [
        entry("dispatched") + "garbage\n" + entry("launched"),
        "garbage\n" + entry("dispatched"),
        entry("dispatched") + entry("dispatched"),
        entry("dispatched") + entry("completed", exit_code=0, envelope_b64=None),
        entry("dispatched", did(2)),
        entry("dispatched") + entry("launched") + entry("completed", exit_code="0"),
        entry("dispatched") + entry("launched") + entry("completed", exit_code=0),
        entry("dispatched")
        + entry("launched")
        + entry("completed", exit_code=0, envelope_b64=None, output_b64=7),
        entry("dispatched")
        + entry("launched")
        + entry("completed", exit_code=0, envelope_b64=None, output_b64=["a"]),
        "[1]\n",
    ],
    ids=[
        "corrupt-middle",
        "corrupt-first",
        "twice",
        "completed-unlaunched",
        "other-dispatch",
        "bad-exit-code",
        "no-envelope-field",
        "output-a-number",
        "output-a-list",
        "not-an-object",
    ],
)
def test_a_journal_that_does_not_read_is_unknown(world, text):
    write_journal(world, text)
    assert world.status() == {"state": "unknown", "dispatch_id": did(1)}


# Concurrency


def test_two_dispatches_of_one_id_at_once_run_it_once(world):
    for n in range(1, 5):
        request = json.dumps(world.request("dispatch", dispatch_id=did(n))).encode()
        processes = [world.popen(["dispatch"], AGENT_MODE="sleep") for _ in range(2)]
        results: list = [None, None]

        def feed(i: int, processes=processes, request=request, results=results) -> None:
            results[i] = processes[i].communicate(request, timeout=60)

        threads = [threading.Thread(target=feed, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [p.returncode for p in processes] == [0, 0], [r[1] for r in results]
        statuses = sorted(json.loads(out)["status"] for out, _ in results)
        assert statuses == ["completed", "refused"]
        assert world.touched().count(did(n)) == 1
        assert world.events(did(n)) == ["dispatched", "launched", "completed"]
    assert len(world.records()) == 4


# Malformed requests


def malformed_cases(world: World) -> list[tuple[list[str], bytes]]:
    def dump(operation: str, /, **changes) -> bytes:
        request = world.request(operation)
        for name, value in changes.items():
            if value is None:
                request.pop(name)
            else:
                request[name] = value
        return json.dumps(request).encode()

    identify = dump("identify")
    return [
        (["dispatch"], b"{not json"),
        (["dispatch"], b"[1, 2]"),
        (["dispatch"], b"\xff\xfe"),
        (["launch"], identify),
        ([], identify),
        (["identify", "extra"], identify),
        (["identify"], dump("identify", protocol="yyb_boundary.v2")),
        (["identify"], dump("identify", protocol=None)),
        (["identify"], dump("identify", operation="status")),
        (["identify"], dump("identify", journal=None)),
        (["identify"], dump("identify", journal="state/journal")),
        (["status"], dump("status", dispatch_id=None)),
        (["status"], dump("status", dispatch_id=did(1).upper())),
        (["status"], dump("status", dispatch_id=did(1)[:63])),
        (["status"], dump("status", dispatch_id="../" + did(1)[3:])),
        (["dispatch"], dump("dispatch", dispatch_id="x" * 64)),
        (["dispatch"], dump("dispatch", workflow=None)),
        (["dispatch"], dump("dispatch", step=None)),
        (["dispatch"], dump("dispatch", resources=None)),
        (["dispatch"], dump("dispatch", resources=[{"type": "database"}])),
        (["dispatch"], dump("dispatch", workflow="workflow.json")),
        (["dispatch"], dump("dispatch", workflow_sha256="00")),
        (["dispatch"], dump("dispatch", variables=[])),
    ]


def test_a_malformed_request_is_one_line_and_exit_2(world):
    for argv, data in malformed_cases(world):
        done = world.call_raw(argv, data)
        assert done.returncode == 2, (argv, data, done.stderr)
        assert done.stdout == b"", (argv, data)
        err = done.stderr.decode()
        assert err.endswith("\n") and err.count("\n") == 1, (argv, data, err)
        assert "Traceback" not in err
    assert world.touched() == [] and world.records() == []
    assert not world.journal.exists() or not any(world.journal.iterdir())
