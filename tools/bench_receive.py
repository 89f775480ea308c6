#!/usr/bin/env python3
"""What judging a Dask worker's return costs the controller, run by hand (not a test).

Builds the attempts bench of the tests (tests/attempts/conftest.py) with one more stand-in
candidate that fixes the bug and adds --files files (default 5,000), plans --repeat attempts
of it, and for each one dispatches it, ships it and runs it in this process as a worker does
(``remote.run``, the sandbox included). Then, on each genuine return, it times:

  form:     ``remote.well_formed``, the return's types and sizes;
  objects:  ``remote.check``, every object's hash, canonical form and schema;
  reach:    ``Checked.reached``, the walk from the execution record (what is written);
  receive:  the whole of ``remote.receive``: the above, the linkage and receipt checks, the
            writes to the store (fsync included) and the execution ref.

and, on a Dask cluster in this process (one worker thread), the scheduler's answer to
``Client.who_has`` for a finished task, which is how the controller learns the worker that
ran it (one round trip per attempt). It prints the medians (and the share of ``receive``
each check takes) as a Markdown table.

Usage: python tools/bench_receive.py [--files 5000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.attempts.conftest import build_bench  # noqa: E402
from yyb.attempts import remote  # noqa: E402
from yyb.attempts.dispatch import dispatch  # noqa: E402

MANY = """
i=0
while [ $i -lt {files} ]; do
  mkdir -p many/d$((i % 50)); echo "file $i" > many/d$((i % 50))/f$i.txt; i=$((i + 1))
done
sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh
envelope succeeded
"""


def timed(function, *args) -> tuple[float, object]:
    start = time.perf_counter()
    value = function(*args)
    return time.perf_counter() - start, value


def returns(root: Path, files: int, repeat: int):
    """The bench's context, and (shipment, worker, genuine return) for each attempt."""
    bench = build_bench(root)
    model = bench.behaviour("many", MANY.format(files=files))
    plan = bench.plan([model], attempts=repeat)
    ctx = bench.context(plan)
    worker = remote.Worker("w1 tcp://127.0.0.1:1", list(ctx.sandbox_verified))
    made = []
    for attempt in sorted(plan.attempt_oids, key=lambda a: plan.records[a]["ordinal"]):
        shipment = remote.ship(ctx, attempt, dispatch(ctx, attempt))
        made.append((shipment, remote.run(shipment, worker, threading.Event())))
    return ctx, worker, made


def who_has_seconds(count: int = 50) -> float | None:
    try:
        import distributed
    except ImportError:
        return None
    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0"
    ) as client:
        future = client.submit(len, b"x" * 1000, pure=False)
        future.result()
        times = [timed(client.who_has, [future])[0] for _ in range(count)]
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="yyb-bench-receive-") as top:
        ctx, worker, made = returns(Path(top) / "bench", args.files, args.repeat)
        figures: dict[str, list[float]] = {"form": [], "objects": [], "reach": [], "receive": []}
        sizes = []
        for shipment, returned in made:
            figures["form"].append(timed(remote.well_formed, returned)[0])
            seconds, checked = timed(remote.check, returned.objects)
            figures["objects"].append(seconds)
            figures["reach"].append(timed(checked.reached, ctx.store, (returned.execution,))[0])
            figures["receive"].append(timed(remote.receive, ctx, shipment, returned, worker)[0])
            sizes.append((len(returned.objects), sum(len(raw) for _, raw in returned.objects)))
    whole = statistics.median(figures["receive"])
    count, size = sizes[0]
    print(f"a return of {count:,} objects, {size:,} bytes ({args.files:,} added files); ", end="")
    print(f"medians of {len(made)}\n")
    print("| step | median | of receive |")
    print("|---|---|---|")
    for name, times in figures.items():
        median = statistics.median(times)
        print(f"| {name} | {median * 1000:.2f} ms | {median / whole:.1%} |")
    seconds = who_has_seconds()
    if seconds is not None:
        print(f"| who_has (in-process cluster) | {seconds * 1000:.2f} ms | {seconds / whole:.1%} |")


if __name__ == "__main__":
    main()
