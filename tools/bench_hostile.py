#!/usr/bin/env python3
"""What hostile inputs cost the plumbing and the viewer, run by hand (this is not a test).

  line: `yyb cat-object --batch-check` reading one line of --line-mib MiB (default 64 and
        300) with no newline, between two real names, through a pipe: wall time from spawn
        to exit and the child's peak RSS (wait4), the answer lines checked.
  diff: `yyb view` serving `/diff/<oid>` of one blob of --blob-mib MiB (default 500) that
        looks like a patch (one file, then millions of short lines): time to the last byte,
        bytes of HTML, and the viewer process's peak RSS (VmHWM) after the requests; then
        --concurrent requests at once (default 12), with how many were answered 503.

Usage: python tools/bench_hostile.py [--line-mib 64 300] [--blob-mib 500] [--concurrent 12]
       [--only line|diff]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

MIB = 1 << 20
YYB = [sys.executable, "-m", "yyb"]


def child(argv: list[str], stdin: int, env: dict) -> tuple[float, int, bytes, bytes]:
    """Run ``argv`` to its end: (seconds, peak RSS in MiB, stdout, stderr), its output read
    by threads while wait4 reaps it."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    read: dict = {}
    readers = [
        threading.Thread(target=lambda n=n, f=f: read.__setitem__(n, f.read()))
        for n, f in (("out", proc.stdout), ("err", proc.stderr))
    ]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    for reader in readers:
        reader.join()
    proc.stdout.close()
    proc.stderr.close()
    return seconds, usage.ru_maxrss // 1024, read["out"], read["err"]


def store(root: str) -> tuple[str, dict]:
    path = os.path.join(root, "store")
    env = {**os.environ, "YYB_STORE": path}
    subprocess.run([*YYB, "store", "init"], env=env, check=True, capture_output=True)
    return path, env


def bench_line(root: str, sizes: list[int]) -> None:
    _, env = store(root)
    blob = subprocess.run(
        [*YYB, "hash-object", "-w", "--stdin"],
        input=b"x\n",
        env=env,
        check=True,
        capture_output=True,
    ).stdout.strip()
    for mib in sizes:
        read, write = os.pipe()
        feeder = threading.Thread(target=_feed, args=(write, blob, mib), daemon=True)
        feeder.start()
        seconds, rss, out, err = child([*YYB, "cat-object", "--batch-check"], read, env)
        os.close(read)
        feeder.join()
        answers = out.split(b"\n")
        good = (
            answers[0].startswith(blob)
            and answers[1].endswith(b" too-long")
            and answers[2].startswith(blob)
            and len(out) < 3 * 4200
        )
        print(
            f"batch-check, one {mib} MiB line: {seconds:6.2f} s, peak RSS {rss} MiB, "
            f"{len(out):,} bytes out, answers {'as documented' if good else 'not'}; "
            f"stderr: {err.decode().strip()[:100]}"
        )


def _feed(fd: int, blob: bytes, mib: int) -> None:
    piece = b"a" * MIB
    with os.fdopen(fd, "wb") as pipe:
        pipe.write(blob + b"\n")
        for _ in range(mib):
            pipe.write(piece)
        pipe.write(b"\n" + blob + b"\n")


def bench_diff(root: str, mib: int, concurrent: int) -> None:
    path, env = store(root)
    blob_file = os.path.join(root, "patch")
    with open(blob_file, "wb") as handle:
        handle.write(b"diff --git a/big b/big\n--- a/big\n+++ b/big\n@@ -1 +1 @@\n")
        line = b'+"<a>"\n' * (MIB // 7)
        for _ in range(mib):
            handle.write(line)
    oid = (
        subprocess.run(
            [*YYB, "hash-object", "-w", blob_file], env=env, check=True, capture_output=True
        )
        .stdout.decode()
        .strip()
    )
    os.unlink(blob_file)
    viewer = subprocess.Popen(
        [*YYB, "view"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    url = viewer.stdout.readline().decode().split()[-1] + f"diff/{oid}"
    try:
        start = time.perf_counter()
        status, size = _get(url)
        seconds = time.perf_counter() - start
        print(
            f"/diff of a {mib} MiB blob: {seconds:6.2f} s, HTTP {status}, {size:,} bytes "
            f"of HTML, viewer peak RSS {_hwm(viewer.pid)} MiB"
        )
        if not concurrent:
            return
        results: list[tuple[int, int]] = []
        threads = [
            threading.Thread(target=lambda: results.append(_get(url))) for _ in range(concurrent)
        ]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - start
        busy = sum(1 for status, _ in results if status == 503)
        print(
            f"{concurrent} at once: {seconds:6.2f} s, {concurrent - busy} answered, {busy} "
            f"503, viewer peak RSS {_hwm(viewer.pid)} MiB"
        )
    finally:
        viewer.terminate()
        viewer.wait()


def _get(url: str) -> tuple[int, int]:
    try:
        with urllib.request.urlopen(url, timeout=600) as response:
            return response.status, len(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, len(exc.read())


def _hwm(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--line-mib", type=int, nargs="+", default=[64, 300])
    parser.add_argument("--blob-mib", type=int, default=500)
    parser.add_argument("--concurrent", type=int, default=12)
    parser.add_argument("--only", choices=["line", "diff"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="yyb-hostile-") as root:
        if args.only != "diff":
            bench_line(os.path.join(root, "line"), args.line_mib)
        if args.only != "line":
            bench_diff(os.path.join(root, "diff"), args.blob_mib, args.concurrent)


if __name__ == "__main__":
    main()
