"""yyb run --executor dask against a real scheduler and workers on loopback."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time

from tests.attempts.conftest import wait_for
from tests.dask.conftest import Cluster, start_cluster
from yyb.evidence import names


@contextlib.contextmanager
def socket_port():
    """A loopback port nothing listens on (held bound, not listening, while in use)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def run_cli(bench, address: str, plan: str, *extra: str, env: dict | None = None):
    return subprocess.run(
        bench.subprocess_argv(
            "run", "--plan", plan, "--executor", "dask", "--scheduler", address, *extra
        ),
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def plan_oid(bench, plan_file: str) -> str:
    import json

    return json.loads(open(plan_file).read())["plan"]


def terminals(bench, plan: str) -> dict[int, dict]:
    """ordinal -> terminal record, for every attempt of the plan that has one."""
    store = bench.store
    oid = plan_oid(bench, plan)
    out = {}
    for attempt in store.objects.get_record(oid)["links"]["attempts"]:
        ref = store.refs.read(names.attempt(oid, attempt, "terminal"))
        if ref is not None:
            record = store.objects.get_record(ref)
            out[record["ordinal"]] = record
    return out


def intents(bench, plan: str) -> int:
    store = bench.store
    oid = plan_oid(bench, plan)
    attempts = store.objects.get_record(oid)["links"]["attempts"]
    return sum(store.refs.read(names.attempt(oid, a, "intent")) is not None for a in attempts)


def doctor_clean(bench, plan: str, undispatched: int = 0) -> None:
    """doctor finds nothing wrong; doctor --plan finds only the ``undispatched`` attempts."""
    done = subprocess.run(bench.subprocess_argv("doctor"), capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run(
        bench.subprocess_argv("doctor", "--plan", plan), capture_output=True, text=True
    )
    problems = [line for line in done.stdout.splitlines() if line.startswith("error ")]
    assert len(problems) == undispatched, done.stdout + done.stderr
    assert all(line.endswith("never dispatched (no intent)") for line in problems), problems
    assert done.returncode == (1 if undispatched else 0), done.stdout + done.stderr


def test_a_dask_run_matches_a_local_run(dask_bench, cluster, starts, tmp_path):
    """Same plan, two stores: the local executor and two Dask workers reach the same
    terminals and verdicts; every attempt says where it ran; doctor is clean."""
    bench = dask_bench
    plan = bench.plan_file(["stand/reporter", "stand/idler"], attempts=2)
    local_store = str(tmp_path / "local-store")
    shutil.copytree(bench.store_path, local_store)  # planned and granted, nothing run
    done = run_cli(bench, cluster.address, plan)
    assert done.returncode == 0, done.stderr
    assert "dispatch_count: 4" in done.stdout
    assert "dask worker w1" in done.stderr and "dask worker w2" in done.stderr
    dask_terminals = terminals(bench, plan)
    assert starts.count == 2, starts.lines  # the reporter's two attempts, each started once

    env = dict(os.environ)
    argv = bench.subprocess_argv("run", "--plan", plan)
    argv[argv.index("--store") + 1] = local_store
    local = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert local.returncode == 0, local.stderr
    from yyb.store.repo import Store

    store = Store.open(local_store)
    oid = plan_oid(bench, plan)
    local_terminals = {}
    for attempt in store.objects.get_record(oid)["links"]["attempts"]:
        record = store.objects.get_record(store.refs.read(names.attempt(oid, attempt, "terminal")))
        local_terminals[record["ordinal"]] = record

    def outcome(record: dict, objects) -> tuple:
        verdicts = [objects.get_record(e)["verdict"] for e in record["links"]["evaluations"]]
        return record["class"], record["identity"]["observed"], verdicts

    assert {k: outcome(v, bench.store.objects) for k, v in dask_terminals.items()} == {
        k: outcome(v, store.objects) for k, v in local_terminals.items()
    }
    assert sorted(r["class"] for r in dask_terminals.values()) == [
        "grader_failure",
        "grader_failure",
        "resolved",
        "resolved",
    ]
    workers = set()
    for record in dask_terminals.values():
        receipt = bench.store.objects.get_record(record["links"]["receipt"])
        assert receipt["schema_version"] == "yylo_benchmark_workspace_receipt.v3"
        assert receipt["executor"]["kind"] == "dask"
        assert receipt["sandbox"]["verified"], receipt["sandbox"]
        workers.add(receipt["executor"]["worker"].split()[0])
    assert workers <= {"w1", "w2"} and workers
    # The run leaves nothing of its own on the scheduler: no claim queue, no heartbeat.
    from distributed import Client

    def leftovers(dask_scheduler) -> list[str]:
        queues = list(dask_scheduler.extensions["queues"].queues)
        variables = list(dask_scheduler.extensions["variables"].variables)
        return [n for n in queues + variables if n.startswith("yyb-")]

    with Client(cluster.address, timeout=30) as client:
        assert client.run_on_scheduler(leftovers) == []
    for record in local_terminals.values():
        receipt = store.objects.get_record(record["links"]["receipt"])
        assert receipt["executor"] == {
            "kind": "local",
            "host": receipt["executor"]["host"],
            "worker": None,
        }
    doctor_clean(bench, plan)


def started_run(bench, address: str, plan: str, starts, count: int = 1, env=None):
    """The controller as a process, once ``count`` candidates reported their start."""
    proc = subprocess.Popen(
        bench.subprocess_argv("run", "--plan", plan, "--executor", "dask", "--scheduler", address),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )

    # A sleeping candidate in flight is seen two ways: its start report and its process (the
    # report comes first, but on a loaded machine it may be late; a lost one fails the counts).
    def started() -> bool:
        return max(starts.count, len(bench.alive())) >= count or proc.poll() is not None

    if not wait_for(started, timeout=120):
        proc.kill()
        raise AssertionError("no candidate started")
    # A candidate seen by its process has sent its report already (the report comes before
    # the sleep); give the listener's reader threads time to count it before any kill.
    wait_for(lambda: starts.count >= count or proc.poll() is not None, timeout=30)
    assert proc.poll() is None, proc.communicate()
    return proc


def rerun_the_rest(bench, address: str, plan: str) -> dict[int, dict]:
    """Run the plan again, its candidates no longer sleeping: exactly the one attempt never
    dispatched runs (and resolves); the two closed ones stay closed. Returns the terminals."""
    (bench.tools / "sleep-on").unlink()
    again = run_cli(bench, address, plan)
    assert again.returncode == 0, again.stderr
    assert "dispatch_count: 1" in again.stdout
    final = terminals(bench, plan)
    assert sorted(r["class"] for r in final.values()) == [
        "harness_failure",
        "harness_failure",
        "resolved",
    ]
    return final


def closed(record: dict) -> bool:
    return record["class"] == "harness_failure" and "never dispatched again" in record["reason"]


def test_killing_a_worker_mid_attempt(dask_bench, cluster, starts):
    """Dask runs the task again on the other worker; its claim is gone, so the candidate is
    not started twice and the attempt is closed as an indeterminate harness failure."""
    bench = dask_bench
    plan = bench.plan_file(["stand/sleeper"], attempts=1)
    proc = started_run(bench, cluster.address, plan, starts)
    candidates = wait_for(bench.alive)
    victims = {cluster.running(pid) for pid, _ in candidates}
    assert len(victims) == 1 and victims <= {"w1", "w2"}, (candidates, victims)
    (bench.tools / "sleep-on").unlink()  # a candidate started again would finish at once
    cluster.kill(victims.pop())
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    assert wait_for(lambda: not bench.alive(), timeout=10) is True
    (record,) = terminals(bench, plan).values()
    assert closed(record), record
    assert "claim was taken already" in record["reason"], record["reason"]
    time.sleep(1)
    assert starts.count == 1, starts.lines
    assert "dispatch_count: 1" in out
    doctor_clean(bench, plan)


def test_killing_the_scheduler_mid_attempt(dask_bench, cluster, starts, tmp_path):
    """In-flight attempts are closed, the rest stay undispatched, the workers' watchdogs
    stop their candidates; a rerun on a new cluster dispatches only what was never
    dispatched."""
    bench = dask_bench
    env = dict(os.environ, YYB_DASK_STALE_SECONDS="3")
    plan = bench.plan_file(["stand/sleeper"], attempts=3)
    proc = started_run(bench, cluster.address, plan, starts, count=2, env=env)
    cluster.kill("scheduler")
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, err
    assert "was lost" in err and "1 attempts not dispatched" in err, err
    assert "Traceback" not in err
    # The workers live on without a scheduler; their watchdogs cancel the candidates.
    assert wait_for(lambda: not bench.alive(), timeout=30) is True
    first = terminals(bench, plan)
    assert len(first) == 2 and all(closed(r) for r in first.values()), first
    assert intents(bench, plan) == 2

    second = start_cluster(tmp_path / "second", workers=1)
    try:
        final = rerun_the_rest(bench, second.address, plan)
    finally:
        second.stop()
    assert {k: final[k] for k in first} == first  # nothing retained was rewritten
    assert starts.count == 3, starts.lines  # each attempt's candidate started once
    doctor_clean(bench, plan)


def test_sigkill_of_the_controller_mid_run(dask_bench, cluster, starts):
    """The watchdogs stop the orphaned candidates; recover closes the dispatched attempts,
    and the next run dispatches only the one never dispatched."""
    bench = dask_bench
    env = dict(os.environ, YYB_DASK_STALE_SECONDS="3")
    plan = bench.plan_file(["stand/sleeper"], attempts=3)
    proc = started_run(bench, cluster.address, plan, starts, count=2, env=env)
    os.killpg(proc.pid, 9)
    proc.wait()
    assert wait_for(lambda: not bench.alive(), timeout=30) is True
    assert intents(bench, plan) == 2 and terminals(bench, plan) == {}

    recovered = bench.yyb("recover", "--plan", plan)
    assert recovered.exit_code == 0, recovered.stderr
    assert recovered.stdout.count("closed as indeterminate") == 2
    assert recovered.stdout.count("left for yyb run") == 1

    rerun_the_rest(bench, cluster.address, plan)
    time.sleep(1)
    assert starts.count == 3, starts.lines
    doctor_clean(bench, plan)


def test_a_worker_that_cannot_run_attempts_is_refused_before_any_dispatch(
    dask_bench, cluster, starts
):
    """The harness needs a secret the controller has and the workers do not: the probe
    refuses the run before any intent is written (secrets are never shipped)."""
    bench = dask_bench
    bench.configure(network="allowed", secrets=["YYB_TEST_ONLY_SECRET"])
    plan = bench.plan_file(["stand/reporter"], attempts=1)
    env = dict(os.environ, YYB_TEST_ONLY_SECRET="s3cret-value")
    done = run_cli(bench, cluster.address, plan, env=env)
    assert done.returncode == 2, done.stderr
    assert "cannot run attempts" in done.stderr and "YYB_TEST_ONLY_SECRET" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert intents(bench, plan) == 0 and starts.count == 0


def test_no_scheduler_is_one_line_and_no_dispatch(dask_bench):
    bench = dask_bench
    plan = bench.plan_file(["stand/reporter"], attempts=1)
    with socket_port() as port:
        done = run_cli(bench, f"tcp://127.0.0.1:{port}", plan, env=dict(os.environ))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("yyb: error: cannot reach the Dask scheduler"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert intents(bench, plan) == 0


def test_losing_every_worker_does_not_hang_the_controller(dask_bench, cluster, starts):
    """Tasks may run only on the workers the run probed: with all of them gone the attempt
    in flight is closed and the rest stay undispatched, instead of waiting for ever."""
    bench = dask_bench
    env = dict(os.environ, YYB_DASK_STALE_SECONDS="2")
    plan = bench.plan_file(["stand/sleeper"], attempts=3)
    proc = started_run(bench, cluster.address, plan, starts, count=2, env=env)
    cluster.kill("w1")
    cluster.kill("w2")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "every worker this run probed left" in err and "1 attempts not dispatched" in err
    first = terminals(bench, plan)
    assert len(first) == 2 and all(closed(r) for r in first.values()), first
    assert wait_for(lambda: not bench.alive(), timeout=10) is True
    assert starts.count == 2, starts.lines
    doctor_clean(bench, plan, undispatched=1)


def test_sigterm_cancels_remote_candidates_like_local_ones(dask_bench, cluster, starts):
    """Ctrl-C (here SIGTERM) on the controller: the heartbeat says stop, the workers cancel
    their candidates, and the attempts come back cancelled, as in a local run."""
    bench = dask_bench
    plan = bench.plan_file(["stand/sleeper"], attempts=3)
    proc = started_run(bench, cluster.address, plan, starts, count=2)
    os.killpg(proc.pid, 15)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    final = terminals(bench, plan)
    assert sorted(r["class"] for r in final.values()) == ["cancelled", "cancelled"], final
    assert "skipped" in out  # the third was never dispatched
    assert intents(bench, plan) == 2 and starts.count == 2
    assert wait_for(lambda: not bench.alive(), timeout=10) is True
    doctor_clean(bench, plan, undispatched=1)


def test_progress_on_a_terminal_says_where_the_cluster_stands(dask_bench, cluster):
    """On a terminal, each attempt's line is followed by the cluster's: in flight, returned
    per worker, lost."""
    bench = dask_bench
    plan = bench.plan_file(["stand/idler"], attempts=2)
    primary, secondary = os.openpty()
    try:
        done = subprocess.run(
            bench.subprocess_argv(
                "run", "--plan", plan, "--executor", "dask", "--scheduler", cluster.address
            ),
            stdout=subprocess.PIPE,
            stderr=secondary,
            timeout=120,
        )
        os.close(secondary)
        shown = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(primary)
    assert done.returncode == 0, shown
    # Live progress redraws its status line in place (carriage return, erase line): what a
    # person sees of each line is what follows the erase.
    lines = [line.replace("\x1b[K", "") for line in shown.decode().splitlines()]
    progress = [line for line in lines if line.startswith("  dask: running ")]
    assert len(progress) == 2, lines
    assert any(line.startswith("[2/2] ") for line in lines), lines
    assert progress[-1].endswith("lost 0") and "running 0" in progress[-1], progress
    returned = progress[-1].split("returned ", 1)[1].split(", lost")[0]
    assert sum(int(part.split()[1]) for part in returned.split(", ")) == 2, progress


# A worker whose attempts fail with an OSError of the worker's own (a full disk, say): a
# stand-in injected at interpreter start, before the worker imports anything of yyb's.
FAULTY_WORKER = """
import yyb.attempts.remote as remote

def run(shipment, worker, cancel):
    raise OSError(28, "No space left on device (injected)")

remote.run = run
"""


def injected(tmp_path, code: str) -> dict:
    """The environment of a worker that runs ``code`` at interpreter start."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(code)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(inject), os.environ.get("PYTHONPATH")]))
    return env


def run_on_workers(bench, tmp_path, workers: dict, attempts: int):
    """Run ``attempts`` attempts of the fixer on a new cluster of ``workers`` (name -> the
    worker's environment, None for the test's); return the plan file and the finished
    controller."""
    root = tmp_path / "cluster"
    root.mkdir()
    cluster = Cluster(root)
    try:
        cluster.start_scheduler()
        for name, env in workers.items():
            cluster.start_worker(name, env=env)
        cluster.wait_for_workers(len(workers))
        plan = bench.plan_file(["stand/fixer"], attempts=attempts)
        return plan, run_cli(bench, cluster.address, plan)
    finally:
        cluster.stop()


def test_a_task_failing_on_its_worker_closes_only_its_attempt(dask_bench, tmp_path):
    """An error raised by the task on a worker (here an OSError, the class a lost connection
    raises too) closes that attempt only: the run goes on, the other worker's attempts
    resolve."""
    bench = dask_bench
    workers = {"w1": None, "w2": injected(tmp_path, FAULTY_WORKER)}
    plan, done = run_on_workers(bench, tmp_path, workers, attempts=4)
    assert done.returncode == 0, done.stderr
    assert "dispatch_count: 4" in done.stdout and "was lost" not in done.stderr
    final = terminals(bench, plan).values()
    failed = [r for r in final if r["class"] != "resolved"]
    assert failed, done.stderr  # w2 took at least one attempt
    assert all(
        closed(r) and "the task failed on worker w2" in r["reason"] and "OSError" in r["reason"]
        for r in failed
    ), failed
    assert any(r["class"] == "resolved" for r in final)
    doctor_clean(bench, plan)


# A worker that answers its first tasks with what no honest worker returns, then runs the
# last one genuinely: a stand-in injected at interpreter start, as FAULTY_WORKER is.
HOSTILE_WORKER = """
import dataclasses, itertools
import yyb.attempts.remote as remote

genuine = remote.run
tasks = itertools.count()

def run(shipment, worker, cancel):
    task = next(tasks)
    if task == 0:
        return {"execution": None, "early": {"environment": "a dict"}, "worker": worker.name}
    if task == 1:
        return None
    if task == 2:
        return object()
    if task == 3:
        return remote.Returned("0" * 64, objects=7, worker=worker.name)
    if task == 4:  # another worker's name, in its receipt and in its return alike
        return genuine(shipment, dataclasses.replace(worker, name="w9 tcp://10.0.0.9:1"), cancel)
    return genuine(shipment, worker, cancel)

remote.run = run
"""


def test_a_hostile_workers_returns_are_refused_and_the_run_goes_on(dask_bench, tmp_path):
    """A worker returns a dict, None, a bare object, a Returned whose objects are a number,
    and a genuine run under another worker's name: each is refused and its attempt closed,
    without a traceback, and the run goes on to accept the honest last return."""
    bench = dask_bench
    workers = {"w1": injected(tmp_path, HOSTILE_WORKER)}
    plan, done = run_on_workers(bench, tmp_path, workers, attempts=6)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "dispatch_count: 6" in done.stdout, done.stderr
    final = [record for _, record in sorted(terminals(bench, plan).items())]
    assert len(final) == 6, final
    words = [
        "a value of type dict, not a Returned",
        "returned None, not a Returned",
        "a value of type object, not a Returned",
        "objects are a value of type int",
        "but the task ran on w1 tcp://",
    ]
    for record, said in zip(final, words, strict=False):
        assert closed(record) and "return was refused" in record["reason"], record
        assert said in record["reason"], record["reason"]
    assert final[-1]["class"] == "resolved", final[-1]
    assert "dask worker w1 tcp://127.0.0.1:" in done.stderr and ": 1 returned, 5 refused" in (
        done.stderr
    ), done.stderr
    doctor_clean(bench, plan)
