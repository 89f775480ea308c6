#!/usr/bin/env python3
"""Benchmark `yyb run --executor dask` against the local executor, on a plan of short attempts.

Run by hand (this is not a test), with the Python of the environment yyb is installed in
(``distributed`` and bubblewrap are needed):

    python tools/bench_dask.py                          # 2 models x 10 attempts, best of 3
    python tools/bench_dask.py --attempts 2 --repeat 1  # a smoke run
    python tools/bench_dask.py --sleep-ms 500           # each candidate sleeps 0.5 s first

It builds the built-in example (``yyb.example``: a shell calculator whose ``add`` subtracts, the
stand-ins example/fixer and example/idler as candidates, the example's grader) and two granted
plans of it, each in a store of its own: the measured plan, 2 models x ``--attempts``, and a
small one, 2 models x 1 attempt (with ``--sleep-ms``, the candidate harness is a script in
the example's tools folder that sleeps, then runs the stand-in). Every run gets a fresh copy
of its plan's pristine store (planned, nothing run), so every run dispatches every attempt.
For N = 1 .. ``--workers`` (default: the CPUs) it starts a Dask cluster on loopback as
tests/dask/conftest.py does: a scheduler and N workers (``--no-nanny --nthreads 1``), each a
process in a session of its own, all killed at the end, also on error. Then these
configurations run in turn, round after round, on both plans:

- local, N jobs: ``yyb run --plan P --jobs N``;
- dask, N workers: ``yyb run --plan P --executor dask --scheduler ADDRESS`` (its default
  ``--jobs``: the workers' threads, N);
- dask, N workers, ``--jobs 2N`` (information: a worker gets its next attempt while the
  controller grades the one it returned);

each timed from spawn to exit: the whole run, Python's start-up, the client's connection and
the probe of the workers included. One untimed round comes first (the workers import yyb on
their first task; the bytecode is compiled), then ``--repeat`` timed rounds, of which the best
of each is kept. The two plan sizes split a run's time into a fixed part and a part per
attempt, T(n) = F + n * m, so start-up costs stay apart from the per-attempt figures.

Targets (see docs/performance.md, "Dask executor"):

1. with N workers, at least 0.8 * N times the attempts per second of one worker, in whole runs
   and with the fixed part left out (1/m);
2. the per-attempt overhead of dask (1 worker) over local (``--jobs 1``) under 100 ms plus the
   transfer of the snapshot: (T_dask - T_local) / attempts of the whole runs, and
   m_dask - m_local.

Then a fresh controller process (``PHASES``, run ``--repeat`` times against the 1-worker
cluster) times what the dask executor adds, phase by phase: importing ``distributed``,
connecting, probing the workers, shipping an attempt (the sizes of the snapshot's pack and of
the pickled shipment too), a no-op task's round trip with and without the shipment's bytes (the
difference is the transfer), a claim queue's put and get, closing. Every run also counts the
machine's busy CPU time (/proc/stat), which is how a run of N workers on N CPUs shows whether
it was short of CPU. That count takes in whatever else runs on the machine; a wait4 count
would miss too much: what a ``yyb run`` and the children it reaps report is about 55% of what
``perf stat -e task-clock`` counts for its process tree (sandboxes, graders).

It prints Markdown tables and exits 0, or 1 when something fails to run; a missed target is
reported in the table, not in the exit status.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import (  # noqa: E402  (tools/ is put on sys.path just above)
    Report,
    Row,
    bench_env,
    describe_machine,
    describe_yyb,
    find_yyb,
    fmt_s,
    interleave,
)

# Targets (see docs/performance.md, "Dask executor").
TARGET_SCALING = 0.8  # attempts/s with N workers >= 0.8 * N times one worker's
TARGET_OVERHEAD_MS = 100.0  # per attempt, dask (1 worker) over local (--jobs 1), + transfer

MODELS = ":fixer,:idler"  # the example's two stand-ins: one fixes the bug, one does nothing
SMALL = 1  # attempts per model of the small plan
START_SECONDS = 120.0  # for the scheduler and the workers to come up
DAY_MS = 86_400_000
RETURNED = re.compile(r"^dask worker (\S+) \S+: (\d+) returned", re.MULTILINE)


# --- the example and its plans -----------------------------------------------------------


@dataclass
class Example:
    """The built-in example, built once, and per plan size (attempts per model) the pristine
    store it was planned in and its plan file."""

    config: Path
    plans: dict[int, tuple[Path, Path]]


def build_example(root: Path, sizes: Sequence[int], sleep_ms: int) -> Example:
    """``yyb.example`` under ``root``, and a granted plan of ``MODELS`` x n attempts in a store
    of its own for each n of ``sizes``; with ``sleep_ms``, every candidate sleeps that long
    before the stand-in starts."""
    from yyb import config as configuration
    from yyb.evidence import names
    from yyb.example import build
    from yyb.plans import build as plans
    from yyb.plans import grant, planfile
    from yyb.store.repo import Store

    paths = build(str(root))
    if sleep_ms:
        slow_down(Path(paths["config"]), sleep_ms)
    config = configuration.load(paths["config"])
    made = {}
    for per_model in sizes:
        store_dir, plan_file = root / f"store-{per_model}", root / f"plan-{per_model}.json"
        store, _ = Store.init(str(store_dir))
        plan = plans.task_plan(config, [paths["task"]], MODELS, per_model, "1")
        plans.write(store, plan)
        planfile.write_new(str(plan_file), planfile.render(plan.oid, plan.records))
        now = grant.now_ms()
        record = grant.grant_for(plan.oid, plan.experiment, now + DAY_MS, now)
        store.refs.update(names.grant(plan.oid), store.objects.put_record(record))
        made[per_model] = (store_dir, plan_file)
    return Example(Path(paths["config"]), made)


def slow_down(config_path: Path, sleep_ms: int) -> None:
    """Make the configuration's candidate harness a script that sleeps ``sleep_ms``, then
    execs the stand-in (in the same read-only tools folder, so the sandbox shows it)."""
    data = json.loads(config_path.read_text())
    argv = data["harnesses"]["candidate"]["argv"]
    slow = Path(argv[0]).with_name("slow-agent")
    slow.write_text(f'#!/bin/sh\nsleep {sleep_ms / 1000:.3f}\nexec {argv[0]} "$@"\n')
    slow.chmod(0o755)
    argv[0] = str(slow)
    config_path.write_text(json.dumps(data, indent=2))


def attempts_of(per_model: int) -> int:
    return len(MODELS.split(",")) * per_model


# --- the cluster -------------------------------------------------------------------------


class Cluster:
    """A Dask scheduler and ``size`` workers on loopback, as tests/dask/conftest.py starts
    them: each a process of its own (``python -m dask``) in a session of its own."""

    def __init__(self, root: Path, size: int, env: dict[str, str]) -> None:
        self.root, self.size, self.env = root, size, env
        self.file = root / "scheduler.json"
        self.procs: list[subprocess.Popen] = []
        self.address = ""

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        with open(self.root / f"{name}.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "dask", *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                env=self.env,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def _log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def start(self) -> None:
        """Start the scheduler, then the workers; return once every worker has joined."""
        from distributed import Client

        self.root.mkdir(parents=True)
        scheduler = self._start(
            "scheduler",
            *("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"),
            *("--scheduler-file", str(self.file)),
        )
        deadline = time.monotonic() + START_SECONDS
        while not self.address:
            if scheduler.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"bench: the scheduler did not start:\n{self._log('scheduler')}")
            try:
                self.address = json.loads(self.file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.05)
        for i in range(1, self.size + 1):
            self._start(
                f"w{i}",
                *("worker", "--scheduler-file", str(self.file), "--no-nanny"),
                *("--nthreads", "1", "--name", f"w{i}", "--no-dashboard"),
            )
        try:
            with Client(self.address, timeout=START_SECONDS) as client:
                client.wait_for_workers(self.size, timeout=START_SECONDS)
        except (OSError, TimeoutError) as exc:
            raise SystemExit(f"bench: the workers did not join: {exc}\n{self._log('w1')}") from None

    def stop(self) -> None:
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


# --- runs --------------------------------------------------------------------------------


# The configurations: the local executor with --jobs N; the Dask executor on N workers with
# its default --jobs (the workers' threads, N); the same with --jobs 2N, so that a worker has
# its next attempt while the controller grades the one it returned.
LOCAL, DASK, DASK_2X = "local", "dask", "dask, --jobs 2N"


@dataclass(frozen=True)
class Config:
    """One way to run a plan (``kind``, one of LOCAL, DASK, DASK_2X), ``n`` jobs or workers."""

    kind: str
    n: int
    cluster: Cluster | None = None

    @property
    def key(self) -> tuple[str, int]:
        return self.kind, self.n

    @property
    def label(self) -> str:
        if self.kind == LOCAL:
            return f"local --jobs {self.n}"
        workers = f"dask, {self.n} worker" + ("s" if self.n > 1 else "")
        return workers if self.kind == DASK else f"{workers}, --jobs {2 * self.n}"

    def args(self) -> list[str]:
        if self.cluster is None:
            return ["--jobs", str(self.n)]
        dask = ["--executor", "dask", "--scheduler", self.cluster.address]
        return dask if self.kind == DASK else [*dask, "--jobs", str(2 * self.n)]


def busy_seconds() -> float:
    """CPU time the whole machine has spent busy so far, all CPUs (the user, nice, system,
    irq and softirq columns of /proc/stat): every process and the kernel's work for them."""
    with open("/proc/stat") as handle:
        columns = handle.readline().split()[1:8]
    user, nice, system, _, _, irq, softirq = (int(value) for value in columns)
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    """One timed ``yyb run``."""

    seconds: float
    busy: float  # the machine's busy CPU time meanwhile (busy_seconds)
    terminals: str  # the summary's ``terminals:`` line
    returned: dict[str, int]  # dask: attempts returned per worker


def timed_run(
    yyb: str, example: Example, per_model: int, config: Config, work: Path, env: dict[str, str]
) -> Run:
    """Run the plan of ``per_model`` attempts per model on a fresh copy of its pristine store;
    check that every attempt was dispatched."""
    pristine, plan_file = example.plans[per_model]
    store = work / "run-store"
    shutil.copytree(pristine, store, symlinks=True)
    os.sync()  # the copy written out: no write-back competing with the run's own fsyncs
    argv = [yyb, "--store", str(store), "--config", str(example.config)]
    argv += ["run", "--plan", str(plan_file), *config.args()]
    busy, start = busy_seconds(), time.perf_counter()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env)
    seconds, busy = time.perf_counter() - start, busy_seconds() - busy
    shutil.rmtree(store)
    lines = done.stdout.splitlines()
    if done.returncode != 0 or f"dispatch_count: {attempts_of(per_model)}" not in lines:
        raise SystemExit(
            f"bench: {' '.join(argv)} exited {done.returncode}:\n{done.stderr}{done.stdout}"
        )
    terminals = next(line for line in lines if line.startswith("terminals:"))
    returned = {worker: int(count) for worker, count in RETURNED.findall(done.stderr)}
    return Run(seconds, busy, terminals, returned)


def background(seconds: float = 5.0) -> float:
    """The CPUs' busy time per second while nothing of this benchmark runs but its idle
    clusters: what every run's ``busy`` holds beside the run itself."""
    busy = busy_seconds()
    time.sleep(seconds)
    return (busy_seconds() - busy) / seconds


@dataclass
class Fit:
    """T(n) = fixed + n * per_attempt through the best runs of the two plan sizes, and the
    machine's busy CPU time per attempt the same way, the background taken out."""

    fixed: float
    per_attempt: float
    cpu: float

    @classmethod
    def of(cls, small: Run, large: Run, n_small: int, n_large: int, idle: float) -> Fit:
        step = n_large - n_small
        per_attempt = (large.seconds - small.seconds) / step
        cpu = (large.busy - small.busy) / step - idle * per_attempt
        return cls(small.seconds - n_small * per_attempt, per_attempt, cpu)


def fastest(runs: list[Run]) -> Run:
    return min(runs, key=lambda r: r.seconds)


# --- the dask controller's phases --------------------------------------------------------

# A fresh controller process, timing what the Dask executor adds to a run, phase by phase.
# argv: store, configuration, plan file, scheduler address, samples per median.
PHASES = """
import itertools, json, os, pickle, statistics, sys, time

from yyb import config
from yyb.attempts import run as attempts
from yyb.plans import planfile
from yyb.store.repo import Store

store_path, config_path, plan_path, address, samples = sys.argv[1:6]
took = {}


def timed(key, call):
    start = time.perf_counter()
    value = call()
    took[key] = time.perf_counter() - start
    return value


def median(key, call):
    times = []
    for _ in range(int(samples)):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    took[key] = statistics.median(times)


start = time.perf_counter()
import distributed
from yyb.attempts import dask_run, remote
took["import"] = time.perf_counter() - start

plan_oid, records = planfile.load(plan_path)
plan = records[plan_oid]
chosen = {oid: records[oid] for oid in plan["links"]["attempts"]}
environ = dict(os.environ)
ctx = attempts.prepare(
    Store.open(store_path), config.load(config_path), plan_oid, plan, chosen, environ
)
executor = dask_run.DaskExecutor(address, environ)
timed("connect", executor.__enter__)
timed("probe", lambda: executor.probe(ctx))
attempt = next(iter(chosen))
shipment = timed("ship_first", lambda: remote.ship(ctx, attempt, attempt))
median("ship", lambda: remote.ship(ctx, attempt, attempt))
payload = pickle.dumps(shipment)
client = executor.client
median("task", lambda: client.submit(len, b"", pure=False).result())
median("task_shipment", lambda: client.submit(len, payload, pure=False).result())
names = itertools.count()


def claim():
    queue = distributed.Queue(f"yyb-bench-claim-{next(names)}", client=client, maxsize=1)
    queue.put("token")
    queue.get(timeout=5)


median("claim", claim)
timed("close", lambda: executor.__exit__(None, None, None))
took["pack_bytes"] = len(shipment.snapshot.pack)
took["shipment_bytes"] = len(payload)
print(json.dumps(took))
"""

PHASE_LABELS = {
    "import": "`import distributed` and `yyb.attempts.dask_run` (yyb's run modules loaded)",
    "connect": "connect: the client, the heartbeat variable set (`DaskExecutor.__enter__`)",
    "probe": "probe every worker (`DaskExecutor.probe`: sandbox probe, harness, version)",
    "ship_first": "ship the first attempt (`remote.ship`: the base's export built)",
    "ship": "ship an attempt, the export cached (median)",
    "task": "a no-op task's round trip, `client.submit(len, b'').result()` (median)",
    "task_shipment": "the same with the pickled shipment as argument (median)",
    "claim": "a claim queue made, put and taken, from the controller's client (median)",
    "close": "close: heartbeat stopped, `stop` set, client closed (`__exit__`)",
}


def phases(
    example: Example, per_model: int, cluster: Cluster, samples: int, work: Path, env: dict
) -> dict[str, float]:
    """One run of ``PHASES`` against ``cluster``, on a copy of the plan's pristine store."""
    pristine, plan_file = example.plans[per_model]
    store = work / "phases-store"
    shutil.copytree(pristine, store, symlinks=True)
    argv = [sys.executable, "-c", PHASES, str(store), str(example.config), str(plan_file)]
    done = subprocess.run(
        [*argv, cluster.address, str(samples)], capture_output=True, text=True, env=env
    )
    shutil.rmtree(store)
    if done.returncode != 0:
        raise SystemExit(f"bench: the phases child exited {done.returncode}:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


# --- the report --------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def rate(attempts: float, seconds: float) -> str:
    return f"{attempts / seconds:.2f}/s"


def compare(
    report: Report,
    fast: Config,
    slow: Config,
    best: dict[tuple[str, int], Run],
    fits: dict[tuple[str, int], Fit],
    n_large: int,
    target: float | None,
    per_attempt: bool = True,
) -> None:
    """Rows of ``fast``'s attempts per second against ``slow``'s: whole runs and, with
    ``per_attempt``, the fixed part left out; met when the ratio is at least ``target``
    (None: information)."""
    versus = f"vs {slow.label}" + (", info" if target is None else "")

    def row(what: str, yours: str, theirs: str, ratio: float) -> None:
        report.add(
            Row(
                f"{fast.label}: attempts/s, {what} ({versus})",
                yours,
                theirs,
                f"{ratio:.2f}x",
                "—" if target is None else f">= {target:.1f}x",
                None if target is None else ratio >= target,
            )
        )

    a, b = best[fast.key], best[slow.key]
    row(
        f"whole runs of {n_large}",
        f"{rate(n_large, a.seconds)} ({fmt_s(a.seconds)})",
        f"{rate(n_large, b.seconds)} ({fmt_s(b.seconds)})",
        b.seconds / a.seconds,
    )
    if not per_attempt:
        return
    a_fit, b_fit = fits[fast.key], fits[slow.key]
    row(
        "the fixed part left out",
        f"{rate(1, a_fit.per_attempt)} ({ms(a_fit.per_attempt)} an attempt)",
        f"{rate(1, b_fit.per_attempt)} ({ms(b_fit.per_attempt)} an attempt)",
        b_fit.per_attempt / a_fit.per_attempt,
    )


def report_scaling(
    report: Report,
    configs: list[Config],
    best: dict[tuple[str, int], Run],
    fits: dict[tuple[str, int], Fit],
    n_large: int,
) -> None:
    """N workers against one (the target), local --jobs N against --jobs 1 beside it (what
    this machine gives the same plan without Dask), and dask with --jobs 2N (info)."""
    first = {c.kind: c for c in configs if c.n == 1}
    compare(report, first[DASK], first[LOCAL], best, fits, n_large, None, per_attempt=False)
    for config in configs:
        if config.n > 1 and config.kind == DASK:
            target = TARGET_SCALING * config.n
            compare(report, config, first[DASK], best, fits, n_large, target)
        elif config.n > 1:
            compare(report, config, first[config.kind], best, fits, n_large, None)
        if config.kind == DASK_2X:
            plain = next(c for c in configs if c.key == (DASK, config.n))
            compare(report, config, plain, best, fits, n_large, None, per_attempt=False)


def report_overhead(
    report: Report,
    local: Config,
    dask: Config,
    best: dict,
    fits: dict,
    n_large: int,
    transfer: float,
) -> None:
    """Per-attempt overhead of dask (1 worker) over local (--jobs 1), and the fixed part."""
    limit = TARGET_OVERHEAD_MS / 1000 + max(transfer, 0.0)
    target = f"< {TARGET_OVERHEAD_MS:.0f} ms + transfer ({ms(max(transfer, 0.0))})"
    t_local, t_dask = best[local.key].seconds, best[dask.key].seconds
    whole = (t_dask - t_local) / n_large
    report.add(
        Row(
            f"per-attempt overhead, {dask.label} over {local.label}, whole runs of {n_large} "
            "((T_dask - T_local) / attempts, the fixed part spread)",
            ms(whole),
            f"local: {fmt_s(t_local)}; dask: {fmt_s(t_dask)}",
            f"{t_dask / t_local:.2f}x time",
            target,
            whole < limit,
        )
    )
    f_local, f_dask = fits[local.key], fits[dask.key]
    marginal = f_dask.per_attempt - f_local.per_attempt
    report.add(
        Row(
            "per-attempt overhead, the fixed part left out (m_dask - m_local)",
            ms(marginal),
            f"local: {ms(f_local.per_attempt)} an attempt; dask: {ms(f_dask.per_attempt)}",
            f"{f_dask.per_attempt / f_local.per_attempt:.2f}x time",
            target,
            marginal < limit,
        )
    )
    report.add(
        Row(
            f"fixed part of a run, {dask.label} over {local.label} (F_dask - F_local, info)",
            ms(f_dask.fixed - f_local.fixed),
            f"local: {ms(f_local.fixed)}; dask: {ms(f_dask.fixed)}",
            f"{f_dask.fixed / f_local.fixed:.2f}x time",
            "—",
            None,
        )
    )


def phases_table(found: dict[str, float], samples: int) -> str:
    lines = [
        f"| Phase of the dask controller (fresh process; medians of {samples}) | Best time |",
        "|---|---|",
    ]
    lines += [f"| {label} | {found[key] * 1000:.1f} ms |" for key, label in PHASE_LABELS.items()]
    lines.append(f"| the snapshot's pack (`Shipped.pack`) | {found['pack_bytes']:,.0f} B |")
    lines.append(
        f"| the pickled shipment (objects and snapshot) | {found['shipment_bytes']:,.0f} B |"
    )
    return "\n".join(lines)


def runs_line(label: str, runs: list[Run]) -> str:
    return f"{label}: " + ", ".join(f"{r.seconds:.2f}" for r in runs) + " s"


def yyb_state() -> str:
    """describe_yyb, and a digest of the uncommitted changes to yyb/'s tracked files (if
    any): others may change the tree while this runs."""
    import yyb

    tree = Path(yyb.__file__).resolve().parents[1]
    diff = subprocess.run(
        ["git", "-C", str(tree), "diff", "HEAD", "--", "yyb"], capture_output=True
    ).stdout
    digest = f", diff {hashlib.sha256(diff).hexdigest()[:12]}" if diff else ""
    return describe_yyb() + digest


# --- main --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--attempts",
        type=int,
        default=10,
        help="attempts per model of the measured plan (2 models; default 10)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="clusters of 1 .. this many workers (default: the CPUs)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="timed rounds, every configuration in turn; the best of each is kept (default 3)",
    )
    parser.add_argument(
        "--sleep-ms",
        type=int,
        default=0,
        help="every candidate sleeps this long before it starts (default 0: short attempts)",
    )
    parser.add_argument(
        "--samples", type=int, default=20, help="samples of each median of the phases (20)"
    )
    parser.add_argument("--workdir", help="scratch folder (default: a new temp folder, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--yyb", help="the yyb executable (default: next to sys.executable)")
    args = parser.parse_args(argv)
    if args.attempts <= SMALL:
        parser.error(f"--attempts must be above {SMALL} (the small plan's)")
    if min(args.workers, args.repeat, args.samples) < 1:
        parser.error("--workers, --repeat and --samples must be positive")
    if args.sleep_ms < 0:
        parser.error("--sleep-ms cannot be negative")
    return args


def notes(
    report: Report,
    configs: list[Config],
    sizes: Sequence[int],
    runs: dict[tuple[str, int, int], list[Run]],
    warm: dict[tuple[str, int, int], Run],
    fits: dict[tuple[str, int], Fit],
    idle: float,
) -> None:
    """Every run's time; which worker returned what; the fit and the CPU time per attempt."""
    cpus = os.cpu_count() or 1
    for config in configs:
        for per_model in sizes:
            key = (*config.key, per_model)
            report.notes.append(
                runs_line(f"{config.label}, {attempts_of(per_model)} attempts", runs[key])
                + f" (untimed round: {warm[key].seconds:.2f} s)"
            )
    for config in configs:
        if config.cluster is not None:
            spread = fastest(runs[(*config.key, sizes[-1])]).returned
            shown = ", ".join(f"{w} {k}" for w, k in sorted(spread.items())) or "not reported"
            report.notes.append(f"{config.label}, attempts returned in its best large run: {shown}")
    report.notes.append(
        f"the machine's background, its clusters idle: {idle:.0%} of a CPU busy, taken out of "
        "the CPU figures below"
    )
    for config in configs:
        fit = fits[config.key]
        large = fastest(runs[(*config.key, sizes[-1])])
        used = (large.busy - idle * large.seconds) / (large.seconds * cpus)
        report.notes.append(
            f"{config.label}: fixed part {fmt_s(fit.fixed)}, {ms(fit.per_attempt)} an attempt; "
            f"machine CPU {ms(fit.cpu)} an attempt (so at most {cpus / fit.cpu:.1f} attempts/s "
            f"on {cpus} CPUs); its best large run kept {used:.0%} of the CPUs busy"
        )
    terminals = fastest(runs[(*configs[0].key, sizes[-1])]).terminals
    report.notes.append(f"every run of the large plan ended with {terminals}")


def measure(
    yyb: str,
    example: Example,
    configs: list[Config],
    sizes: Sequence[int],
    repeat: int,
    work: Path,
    env: dict[str, str],
) -> tuple[dict[tuple[str, int, int], list[Run]], dict[tuple[str, int, int], Run]]:
    """The untimed round, then ``repeat`` timed rounds of every configuration on every
    plan size, in turn; (timed runs, warm-up run) by (kind, n, attempts per model)."""
    pairs = [(config, per_model) for config in configs for per_model in sizes]
    keys = [(*config.key, per_model) for config, per_model in pairs]
    measures = [
        functools.partial(timed_run, yyb, example, per_model, config, work, env)
        for config, per_model in pairs
    ]
    print("[warm-up] every configuration once, untimed", file=sys.stderr)
    warm = {key: measure() for key, measure in zip(keys, measures, strict=True)}
    print(f"[runs] {len(keys)} configurations, best of {repeat}", file=sys.stderr)
    timed = interleave(repeat, *measures)
    return dict(zip(keys, timed, strict=True)), warm


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    yyb = find_yyb(args.yyb)
    # A SIGTERM unwinds like Ctrl-C, so the clusters are killed on the way out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    work = Path(args.workdir or tempfile.mkdtemp(prefix="yyb-bench-dask-"))
    work.mkdir(parents=True, exist_ok=True)
    env = bench_env(work)
    env["HOME"] = str(work / "home")  # a run's sandbox hides HOME: not the example's tools
    (work / "home").mkdir(exist_ok=True)
    load_before = os.getloadavg()
    yyb_before = yyb_state()
    sizes = (SMALL, args.attempts)
    n_small, n_large = attempts_of(SMALL), attempts_of(args.attempts)
    print(f"bench: yyb {yyb}, scratch {work}", file=sys.stderr)
    clusters: list[Cluster] = []
    try:
        example = build_example(work / "example", sizes, args.sleep_ms)
        configs = []
        for n in range(1, args.workers + 1):
            print(f"[cluster] a scheduler and {n} workers", file=sys.stderr)
            cluster = Cluster(work / f"cluster-{n}", n, env)
            clusters.append(cluster)
            cluster.start()
            configs += [Config(LOCAL, n), Config(DASK, n, cluster), Config(DASK_2X, n, cluster)]
        print("[background] 5 s of the machine with the clusters idle", file=sys.stderr)
        idle = background()
        runs, warm = measure(yyb, example, configs, sizes, args.repeat, work, env)
        idle = (idle + background()) / 2
        print(f"[phases] the dask controller's phases, {args.repeat} times", file=sys.stderr)
        found = [
            phases(example, args.attempts, clusters[0], args.samples, work, env)
            for _ in range(args.repeat)
        ]
    finally:
        for cluster in clusters:
            cluster.stop()
        if not (args.keep or args.workdir):
            shutil.rmtree(work, ignore_errors=True)

    for per_model in sizes:
        seen = {r.terminals for key, taken in runs.items() if key[2] == per_model for r in taken}
        if len(seen) != 1:
            raise SystemExit(f"bench: the runs of one plan ended differently: {sorted(seen)}")
    fits: dict[tuple[str, int], Fit] = {}
    best: dict[tuple[str, int], Run] = {}
    for config in configs:
        small = fastest(runs[(*config.key, SMALL)])
        best[config.key] = large = fastest(runs[(*config.key, args.attempts)])
        fits[config.key] = Fit.of(small, large, n_small, n_large, idle)
    phase = {key: min(f[key] for f in found) for key in found[0]}
    report = Report()
    report_scaling(report, configs, best, fits, n_large)
    transfer = phase["task_shipment"] - phase["task"]
    first = {config.kind: config for config in configs if config.n == 1}
    report_overhead(report, first[LOCAL], first[DASK], best, fits, n_large, transfer)
    notes(report, configs, sizes, runs, warm, fits, idle)
    if yyb_state() != yyb_before:
        report.notes.append(f"yyb changed during the run; at its start it was {yyb_before}")

    print()
    print("\n".join(describe_machine(load_before)))
    print(f"- yyb tree: {yyb_state()}")
    print(
        f"- the built-in example, 2 models x {args.attempts} attempts ({n_large}) and "
        f"2 x {SMALL} ({n_small}), candidates sleeping {args.sleep_ms} ms first; a fresh copy "
        f"of the planned store for each run; best of {args.repeat} rounds after one untimed "
        "round, configurations in turn; whole runs timed from spawn to exit (Python start-up, "
        "connection, probe, grading included)"
    )
    for note in report.notes:
        print(f"- {note}")
    print()
    print(report.markdown())
    print()
    print(phases_table(phase, args.samples))
    print()
    print(report.verdict())
    return 0


if __name__ == "__main__":
    sys.exit(main())
