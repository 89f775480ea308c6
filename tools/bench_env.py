#!/usr/bin/env python3
"""Environments: what building one costs, what a cached one adds to an attempt, its disk.

Measures in one run, each against a baseline measured in the same run:
  build:    `yyb --store S env build SPEC` (a child process, start-up included) of a
            ``python`` spec over the host's /usr/bin/python3 with pytest pinned (its wheels
            from this machine's package index) and of an ``oci`` spec of a busybox image built
            here (tests/harness/environments/images.py); with --rootfs also a ``rootfs`` spec
            (bookworm minbase + python3, mmdebstrap from deb.debian.org, ~30-40 s).
            Baselines: `python3 -m venv D && D/bin/python -m pip install pytest==V`,
            `umoci unpack` of the same image, the same mmdebstrap command line run directly.
  attempt:  the calculator case (tests/grading/conftest.py ``build_bench``) with a stand-in
            candidate that fixes it and the command grader that runs its test, --attempts
            attempts with no environment, on the busybox ``oci`` environment and on the host
            ``python`` environment (with --rootfs, on the rootfs too), interleaved attempt by
            attempt so that all see the same load; the difference of the medians is what an
            environment adds (target: < 100 ms). The run's preparation (which checks each
            pinned environment once) is timed apart.
  checks:   the check each use of a cached environment gets (``build.pinned``: the stamp) and
            a full verification, in-process and as `yyb env verify NAME`, against a walk that
            lstats every entry and `sha256sum` of every file.
  disk:     `du -sk` of each tree, of the pool and of the cache; a second python spec with one
            requirement more (``six``) built in the same registry: its ``build.shared_bytes``,
            the bytes not shared and how many are .pyc, the first check of the first one
            afterwards (the shared files' new links changed its stamp); unless --quick, the
            same two with SOURCE_DATE_EPOCH in their specs' variables, in a registry of
            their own.
The command line and `uptime` before and after are printed; the exit status is 1 when the
attempt target is missed. Run it as the machine's user (root), from the repository's root or
anywhere: it imports the test benches from the repository this file is in.
Usage: python tools/bench_env.py [--attempts 20] [--repeat 9] [--rootfs] [--quick] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.grading.conftest import build_bench, write  # noqa: E402  (on sys.path above)
from tests.harness.environments import images  # noqa: E402

HOST_PYTHON = "/usr/bin/python3"
EXTRA = "six"  # the one requirement the second python spec adds
TARGET_MS = 100.0
ROOTFS = {"suite": "bookworm", "packages": ["python3"]}


def fail(what: str, done: subprocess.CompletedProcess) -> None:
    sys.exit(f"{what} failed (exit {done.returncode}):\n{done.stderr.decode(errors='replace')}")


def run(argv: list[str], **kwargs) -> tuple[float, bytes]:
    """Run ``argv`` to its end; (its wall seconds, its stdout). Exits when it fails."""
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, **kwargs)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        fail(shlex.join(argv), done)
    return seconds, done.stdout


def yyb(store: str, *args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("yyb")), "--store", store, *args]


def median_ms(measure, repeat: int) -> float:
    """The median of ``repeat`` calls of ``measure`` (seconds, or None: time the call), in ms."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        given = measure()
        times.append(given if isinstance(given, float) else time.perf_counter() - start)
    return statistics.median(times) * 1000


def du_kib(*paths: str) -> int:
    """Disk use of ``paths`` together (a file hard-linked from several is counted once)."""
    _, out = run(["du", "-skc", *paths])
    return int(out.splitlines()[-1].split()[0])


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


@dataclass
class Built:
    """One `yyb env build`: the spec file, its wall time, the environment record."""

    name: str
    store: str
    spec_path: Path
    seconds: float
    oid: str
    spec_oid: str
    record: dict
    baseline: float | None = None
    baseline_what: str = ""

    @property
    def root(self) -> str:
        from yyb.harness.environments.cache import Cache

        return Cache(self.store).root(self.spec_oid)


def build(name: str, store: str, spec_path: Path) -> Built:
    """`yyb env build` of ``spec_path`` into ``store``, timed."""
    from yyb.store.repo import Store

    seconds, out = run(yyb(store, "env", "build", "--json", "-q", str(spec_path)))
    value = json.loads(out.decode().splitlines()[-1])
    record = Store.open(store).objects.get_record(value["environment"])
    return Built(name, store, spec_path, seconds, value["environment"], value["spec"], record)


def python_spec(name: str, requirements: list[str]) -> dict:
    return {
        "name": name,
        "kind": "python",
        "python": {"interpreter": HOST_PYTHON, "requirements": requirements},
    }


def busybox_image(root: Path) -> str:
    """An OCI layout of the host's static busybox at ``root/image``; its digest."""
    tree = images.busybox_root(str(root / "busybox-root"))
    return images.layout(str(root / "image"), [tree], {"Env": ["PATH=/bin"]}).digest


def venv_baseline(root: Path, requirements: list[str]) -> float:
    dest = tempfile.mkdtemp(dir=root)
    seconds, _ = run([HOST_PYTHON, "-m", "venv", dest])
    more, _ = run([f"{dest}/bin/python", "-m", "pip", "install", "-q", *requirements])
    shutil.rmtree(dest)
    return seconds + more


def umoci_baseline(root: Path, image: Path) -> float:
    dest = os.path.join(tempfile.mkdtemp(dir=root), "bundle")
    seconds, _ = run(["umoci", "unpack", "--image", f"{image}:latest", dest])
    shutil.rmtree(os.path.dirname(dest))
    return seconds


def mmdebstrap_baseline(root: Path) -> float:
    from yyb.harness.environments import rootfs

    dest = tempfile.mkdtemp(dir=root)
    seconds, _ = run(rootfs.argv(dict(ROOTFS, name="baseline"), dest))
    shutil.rmtree(dest)
    return seconds


@dataclass
class Variant:
    """One way of running the calculator case: its bench, its run context, attempt times."""

    name: str
    bench: object
    environment: Built | None = None
    ctx: object = None
    order: list = field(default_factory=list)
    prepare_ms: float = 0.0
    times: list = field(default_factory=list)
    check_times: list = field(default_factory=list)  # in build.check, each attempt


def variant(root: Path, name: str, spec: dict | None, built_name: str = "") -> Variant:
    """A calculator bench of its own under ``root``; with ``spec``, its case declares it
    (built by `yyb env build` first, timed)."""
    bench = build_bench(Path(tempfile.mkdtemp(prefix="bench-", dir=root)))
    chosen = Variant(name, bench)
    if spec is not None:
        spec_path = write(bench.root / "env.json", json.dumps(spec))
        text = bench.task_path.read_text().replace(
            "    grader_profile: tests\n", "    grader_profile: tests\n    environment: env.json\n"
        )
        write(bench.task_path, text)
        chosen.environment = build(built_name or name, bench.store_path, spec_path)
    bench.configure()
    return chosen


def prepare(chosen: Variant, attempts: int) -> None:
    """Plan ``attempts`` attempts of the fixing stand-in (granted), time the run's preparation
    (which checks each pinned environment)."""
    from yyb.attempts import run as attempts_run

    bench = chosen.bench
    plan = bench.plan(["zz/fixer"], attempts)
    start = time.perf_counter()
    chosen.ctx = bench.context(plan)
    chosen.prepare_ms = (time.perf_counter() - start) * 1000
    attempts_run.authorize(chosen.ctx.store, chosen.ctx.plan_oid, chosen.ctx.plan)
    chosen.order = sorted(plan.attempt_oids, key=lambda oid: plan.records[oid]["ordinal"])


class CheckClock:
    """Time spent in ``build.check`` (a pinned environment's check: its stamp) while entered;
    ``build.pinned`` calls it by its module-level name, so replacing that name times it."""

    def __init__(self) -> None:
        from yyb.harness.environments import build as builder

        self.module, self.original, self.seconds = builder, builder.check, 0.0

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.original(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    def __enter__(self) -> CheckClock:
        self.seconds = 0.0
        self.module.check = self.timed
        return self

    def __exit__(self, *exc) -> None:
        self.module.check = self.original


def run_interleaved(variants: list[Variant]) -> None:
    """Each attempt of each variant in turn, timed, and the time of its environment checks;
    exits on any terminal but resolved."""
    from yyb.attempts import run as attempts_run

    for index in range(len(variants[0].order)):
        for chosen in variants:
            start = time.perf_counter()
            with CheckClock() as clock:
                result = attempts_run.run_attempt(chosen.ctx, chosen.order[index])
            chosen.times.append((time.perf_counter() - start) * 1000)
            chosen.check_times.append(clock.seconds * 1000)
            if result.terminal_class != "resolved":
                sys.exit(
                    f"{chosen.name}: attempt {index + 1} {result.terminal_class}: {result.reason}"
                )


@dataclass
class Checked:
    name: str
    files: int
    stamp_ms: float
    walk_ms: float
    full_ms: float
    cli_ms: float
    sha256sum_ms: float


def walk(root: str) -> None:
    """Every entry lstat'ed, as cheaply as Python walks a tree: the floor of any stamp."""
    for here, dirs, names in os.walk(root):
        for name in dirs + names:
            os.lstat(os.path.join(here, name))


def checked(store, oid: str):
    """``build.pinned`` as a new process's first use finds it: its once-per-process memory
    of environments already checked forgotten first."""
    from yyb.harness.environments import build as builder

    builder.forget()
    return builder.pinned(store, oid)


def checks(built: Built, repeat: int) -> Checked:
    """The stamp check, a full verification and their baselines on ``built``'s tree."""
    from yyb.harness.environments import build as builder
    from yyb.store.repo import Store

    store = Store.open(built.store)
    checked(store, built.oid)  # a stamp written by a full check, if it was stale
    stamp = median_ms(lambda: checked(store, built.oid), repeat)
    floor = median_ms(lambda: walk(built.root), repeat)
    full = median_ms(lambda: builder.pinned(store, built.oid, full=True), max(3, repeat // 3))
    verify = yyb(built.store, "env", "verify", built.record["name"])
    cli = median_ms(lambda: run(verify)[0], max(3, repeat // 3))
    listing = f"find {shlex.quote(built.root)} -type f -print0 | xargs -0 sha256sum > /dev/null"
    hashed = median_ms(lambda: run(["sh", "-c", listing])[0], max(3, repeat // 3))
    files = built.record["file_count"]
    return Checked(built.name, files, stamp, floor, full, cli, hashed)


@dataclass
class Shared:
    """A second python spec with one requirement more, built in the registry of the first."""

    second: Built
    first_check_ms: float  # the first one's next check: the new links changed its stamp
    stamp_ms: float  # and the one after, stamped again
    unshared: tuple[int, int]  # bytes at the same path in both trees not shared, and of .pyc
    dated: tuple[Built, Built] | None = None  # the same two with SOURCE_DATE_EPOCH set


def python_pair(store: str, folder: Path, pin: str, variables: dict) -> tuple[Built, Built]:
    """The python spec of ``pin``, then that with one requirement more, built into ``store``
    with ``variables``."""
    first = dict(python_spec("python", [pin]), variables=variables)
    second = dict(python_spec("python-six", [pin, EXTRA]), variables=variables)
    paths = [write(folder / f"dated-{s['name']}.json", json.dumps(s)) for s in (first, second)]
    return build("python", store, paths[0]), build("python + six", store, paths[1])


def unshared(first: str, second: str) -> tuple[int, int]:
    """Bytes of regular files at the same path in both trees that are not one file, and how
    many of those bytes are .pyc files."""
    size = pyc = 0
    for here, _, names in os.walk(second):
        for name in names:
            path = os.path.join(here, name)
            other = os.path.join(first, os.path.relpath(path, second))
            info = os.lstat(path)
            if not os.path.isfile(other) or os.path.islink(path) or os.path.samefile(path, other):
                continue
            size += info.st_size
            pyc += info.st_size if name.endswith(".pyc") else 0
    return size, pyc


def sharing(first: Built, pin: str, repeat: int, dated: bool) -> Shared:
    """Build the spec with one requirement more beside ``first``; with ``dated``, also both
    with SOURCE_DATE_EPOCH in the spec's variables, in a registry of their own."""
    from yyb.store.repo import Store

    spec = python_spec("python-six", [pin, EXTRA])
    second = build(
        "python + six", first.store, write(first.spec_path.with_name("six.json"), json.dumps(spec))
    )
    store = Store.open(first.store)
    start = time.perf_counter()
    checked(store, first.oid)
    first_check = (time.perf_counter() - start) * 1000
    stamp = median_ms(lambda: checked(store, first.oid), repeat)
    shared = Shared(second, first_check, stamp, unshared(first.root, second.root))
    if dated:
        folder = first.spec_path.parent
        epoch = {"SOURCE_DATE_EPOCH": "1764633600"}
        shared.dated = python_pair(str(folder / "dated-store"), folder, pin, epoch)
    return shared


def print_builds(builds: list[Built]) -> None:
    print("| kind | `yyb env build` | baseline | ratio | files | `du -sk` of the tree |")
    print("|---|---|---|---|---|---|")
    for b in builds:
        base = f"{b.baseline:.2f} s ({b.baseline_what})" if b.baseline else "-"
        ratio = f"{b.seconds / b.baseline:.2f}x" if b.baseline else "-"
        print(
            f"| {b.name} | {b.seconds:.2f} s (record: {b.record['build']['build_ms']} ms) | "
            f"{base} | {ratio} | {b.record['file_count']:,} | {du_kib(b.root):,} KiB |"
        )


def print_attempts(variants: list[Variant]) -> bool:
    """The per-attempt table; whether every environment met the target."""
    none = statistics.median(variants[0].times)
    met = True
    head = [f"calculator case, {len(variants[0].times)} attempts each", "median", "mean"]
    head += ["beyond no environment (medians)", "of which environment checks", "run preparation"]
    print("\n| " + " | ".join(head) + " |\n" + "|---" * len(head) + "|")
    for chosen in variants:
        mid = statistics.median(chosen.times)
        extra = mid - none
        verdict = ""
        if chosen.environment is not None:
            ok = extra < TARGET_MS
            met = met and ok
            verdict = f" (target < {TARGET_MS:.0f} ms: {'met' if ok else 'MISSED'})"
        print(
            f"| {chosen.name} | {mid:.0f} ms | {statistics.mean(chosen.times):.0f} ms | "
            f"{extra:+.0f} ms{verdict} | {statistics.median(chosen.check_times):.0f} ms | "
            f"{chosen.prepare_ms:.0f} ms |"
        )
    for chosen in variants:
        print(f"| each attempt, {chosen.name} | {' '.join(f'{t:.0f}' for t in chosen.times)} ms |")
    return met


def print_checks(rows: list[Checked]) -> None:
    head = ["environment", "files", "stamp check (`build.pinned`)", "walk + lstat"]
    head += ["full check in-process", "`yyb env verify NAME`", "`sha256sum` of every file"]
    print("\n| " + " | ".join(head) + " |\n" + "|---" * len(head) + "|")
    for r in rows:
        print(
            f"| {r.name} | {r.files:,} | {r.stamp_ms:.1f} ms ({r.stamp_ms / r.walk_ms:.1f}x) | "
            f"{r.walk_ms:.1f} ms | {r.full_ms:.0f} ms | {r.cli_ms:.0f} ms "
            f"({r.cli_ms / r.sha256sum_ms:.2f}x) | {r.sha256sum_ms:.0f} ms |"
        )


def beside(built: Built) -> int:
    """`du -sk` of what the build left in its cache folder beside its tree."""
    folder = os.path.dirname(built.root)
    return du_kib(*[os.path.join(folder, n) for n in os.listdir(folder) if n != "root"])


def share_row(second: Built) -> str:
    value, size = second.record["build"]["shared_bytes"], second.record["size_bytes"]
    return f"{value:,} / {size:,} bytes ({value / size:.1%})"


def disk_rows(builds: list[Built], shared: Shared) -> list[tuple[str, str]]:
    from yyb.harness.environments.cache import Cache

    first, second = next(b for b in builds if b.name == "python"), shared.second
    cache = Cache(first.store)
    one, two = du_kib(first.root), du_kib(second.root)
    size, pyc = shared.unshared
    left = f"{beside(first):,} + {beside(second):,} KiB"
    rows = [
        (f"{second.name}: `yyb env build` in the registry of the first", f"{second.seconds:.2f} s"),
        (f"{second.name}: `build.shared_bytes` / `size_bytes`", share_row(second)),
        ("bytes at the same path in both, not shared (of which .pyc)", f"{size:,} ({pyc:,})"),
        ("`du -sk` each python tree alone: first + second", f"{one:,} + {two:,} KiB"),
        ("`du -sk` both trees together", f"{du_kib(first.root, second.root):,} KiB"),
        ("`du -sk` the pool", f"{du_kib(cache.pool):,} KiB"),
        ("`du -sk` the whole cache (`environments/`)", f"{du_kib(cache.top):,} KiB"),
        ("beside each tree in its folder (wheels, build folders, log)", left),
        ("the first's next check (its stamp changed: full)", f"{shared.first_check_ms:.0f} ms"),
        ("the first's check after that (stamped again)", f"{shared.stamp_ms:.1f} ms"),
    ]
    if shared.dated:
        dated_one, dated_two = shared.dated
        together = du_kib(dated_one.root, dated_two.root)
        rows.append(("SOURCE_DATE_EPOCH set: `shared_bytes` / `size_bytes`", share_row(dated_two)))
        rows.append(("SOURCE_DATE_EPOCH set: `du -sk` both trees together", f"{together:,} KiB"))
    for b in builds:
        if b.store != first.store:
            pool = du_kib(Cache(b.store).pool)
            rows.append((f"{b.name}: `du -sk` the pool of its registry", f"{pool:,} KiB"))
    return rows


def print_disk(builds: list[Built], shared: Shared) -> None:
    print("\n| disk and sharing | value |\n|---|---|")
    for label, value in disk_rows(builds, shared):
        print(f"| {label} | {value} |")


def measure(root: Path, args) -> bool:
    """Every measurement, printed; whether the attempt target was met."""
    import pytest

    pin = f"pytest=={pytest.__version__}"
    image = busybox_image(root)
    oci_spec = {
        "name": "busybox",
        "kind": "oci",
        "oci": {"image": image},
        "source": str(root / "image"),
    }
    cases = [
        ("no environment", None, ""),
        ("oci (busybox)", oci_spec, "oci"),
        ("python (host /usr/bin/python3)", python_spec("python", [pin]), "python"),
    ]
    if args.rootfs:
        spec = {"name": "bookworm-python3", "kind": "rootfs", "rootfs": ROOTFS}
        cases.append(("rootfs (bookworm minbase + python3)", spec, "rootfs"))
    variants = [variant(root, *case) for case in cases]
    builds = [v.environment for v in variants[1:]]
    baselines = [
        (umoci_baseline(root, root / "image"), "`umoci unpack`"),
        (venv_baseline(root, [pin]), "venv + pip install"),
    ]
    if args.rootfs:
        baselines.append((mmdebstrap_baseline(root), "mmdebstrap"))
    for built, (seconds, what) in zip(builds, baselines, strict=True):
        built.baseline, built.baseline_what = seconds, what
    for chosen in variants:
        prepare(chosen, args.attempts)
    run_interleaved(variants)
    rows = [checks(b, args.repeat) for b in builds]
    shared = sharing(builds[1], pin, args.repeat, not args.quick)
    print_builds(builds)
    met = print_attempts(variants)
    print_checks(rows)
    print_disk(builds, shared)
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=20, help="attempts of each variant")
    parser.add_argument("--repeat", type=int, default=9, help="repeats of each check")
    parser.add_argument("--rootfs", action="store_true", help="also build a rootfs (~40 s)")
    parser.add_argument(
        "--quick", action="store_true", help="3 attempts, 3 repeats, no SOURCE_DATE_EPOCH pair"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()
    if args.quick:
        args.attempts, args.repeat = 3, 3
    print(f"command: {shlex.join([os.path.basename(sys.executable), *sys.argv])}")
    print(f"load before: {load()}\n")
    root = Path(tempfile.mkdtemp(prefix="yyb-bench-env-"))
    try:
        met = measure(root, args)
    finally:
        if args.keep:
            print(f"\nkept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\nload after: {load()}")
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
