#!/usr/bin/env python3
"""Throughput of redaction (``yyb.harness.redaction.Redactor``): the whole-data path
(``redact``) and the streamed one (``copy_redacted``), this tree's against another commit's.

The data is --mib MiB of printable text (a candidate's log: words, hex and base64 runs)
holding each of --secrets secrets, raw and base64-encoded at every alignment, --hits times in
all. Each round redacts the same bytes with both versions, alternating; medians are printed
with their ratio. The other version is read from git (``--against``, default HEAD~1).
Usage: python tools/bench_redaction.py [--mib 64] [--secrets 4] [--hits 64] [--rounds 5]
       [--against REV]
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(rev: str | None) -> types.ModuleType:
    """The redaction module of this tree (rev None) or of commit ``rev``."""
    if rev is None:
        sys.path.insert(0, HERE)
        from yyb.harness import redaction

        return redaction
    source = subprocess.run(
        ["git", "-C", HERE, "show", f"{rev}:yyb/harness/redaction.py"],
        capture_output=True,
        check=True,
    ).stdout
    spec = importlib.util.spec_from_loader(f"redaction_{rev}", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{rev}:redaction.py", "exec"), module.__dict__)
    return module


def data(mib: int, secrets: list[str], hits: int) -> bytes:
    rng = random.Random(7)
    words = [rng.randbytes(rng.randint(2, 12)).hex() for _ in range(500)]
    words += [base64.b64encode(rng.randbytes(rng.randint(3, 30))).decode() for _ in range(500)]
    parts, size = [], 0
    while size < mib << 20:
        line = " ".join(rng.choice(words) for _ in range(12)) + "\n"
        parts.append(line.encode())
        size += len(line)
    for i in range(hits):
        secret = secrets[i % len(secrets)].encode()
        prefix = b"x" * (i % 3)
        form = secret if i % 2 else base64.b64encode(prefix + secret + b"tail")
        parts.insert(rng.randrange(len(parts)), b"token " + form + b"\n")
    return b"".join(parts)


def timed(redactor, blob: bytes, path: str) -> tuple[float, float]:
    start = time.monotonic()
    redactor.redact(blob)
    whole = time.monotonic() - start
    fd = os.open(path, os.O_RDONLY)
    try:
        start = time.monotonic()
        redactor.copy_redacted(fd, len(blob), lambda piece: None)
        streamed = time.monotonic() - start
    finally:
        os.close(fd)
    return whole, streamed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--secrets", type=int, default=4)
    parser.add_argument("--hits", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", default="HEAD~1")
    args = parser.parse_args()
    secrets = {
        f"S{i}": f"secret-{i}-{random.Random(i).randbytes(12).hex()}" for i in range(args.secrets)
    }
    blob = data(args.mib, list(secrets.values()), args.hits)
    versions = {"this tree": load(None), args.against: load(args.against)}
    redactors = {name: module.Redactor(secrets) for name, module in versions.items()}
    outputs = {name: r.redact(blob) for name, r in redactors.items()}
    for name, out in outputs.items():
        print(f"{name}: {out.count(b'[REDACTED:')} replacements")
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in redactors}
    with tempfile.NamedTemporaryFile() as handle:
        handle.write(blob)
        handle.flush()
        for _ in range(args.rounds):
            for name, redactor in redactors.items():
                times[name].append(timed(redactor, blob, handle.name))
    medians = {}
    for name, rows in times.items():
        whole = statistics.median(r[0] for r in rows)
        streamed = statistics.median(r[1] for r in rows)
        medians[name] = (whole, streamed)
        print(
            f"{name}: redact {args.mib / whole:.0f} MiB/s ({whole:.3f} s), "
            f"copy_redacted {args.mib / streamed:.0f} MiB/s ({streamed:.3f} s)"
        )
    ours, theirs = medians["this tree"], medians[args.against]
    print(
        f"ratio (this tree / {args.against}): redact {ours[0] / theirs[0]:.2f}, "
        f"copy_redacted {ours[1] / theirs[1]:.2f}"
    )


if __name__ == "__main__":
    main()
