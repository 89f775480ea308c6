"""A report killed at each durable write while it stores and signs a new layer: the rerun
leaves the store clean and every layer signed (the layer's own SIGKILL sweep)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from yyb import signing


def yyb(store: str, *args: str, key: str, kill_at: int | None = None):
    env = {k: v for k, v in os.environ.items() if k != "YYB_FAULT_KILL_AT"}
    env[signing.KEY_ENV] = key
    if kill_at is not None:
        env["YYB_FAULT_KILL_AT"] = str(kill_at)
    return subprocess.run(
        [sys.executable, "-m", "yyb", "--store", store, *args],
        capture_output=True,
        timeout=120,
        env=env,
    )


def test_a_report_killed_while_signing_its_layer_is_finished_by_the_next(signed, tmp_path):
    root, public, key = signed
    plan_file = str(root / "ex" / "plan.json")
    killed_somewhere = 0
    for point in range(1, 40):
        store = str(tmp_path / f"s{point}")
        shutil.copytree(root / "store", store, symlinks=True)
        # A pinned report differs from the stored layer, so a new layer is written.
        first = yyb(
            store, "report", "--plan", plan_file, "--grader-version", "1", key=key, kill_at=point
        )
        if first.returncode != -9:
            assert first.returncode == 0, first.stderr
            break  # past the last write point
        killed_somewhere += 1
        # The next report is another one (no pin): the cut-short layer must not be lost, nor
        # its signature left half made.
        again = yyb(store, "report", "--plan", plan_file, key=key)
        assert again.returncode == 0, (point, again.stderr)
        doctor = yyb(store, "doctor", key=key)
        assert doctor.returncode == 0, (point, doctor.stdout.decode())
        layers = [
            line.split()[1]
            for line in yyb(store, "show-ref", "refs/reports", key=key).stdout.decode().splitlines()
        ]
        for ref in layers:
            checked = yyb(store, "verify-chain", "--trusted-key", public, ref, key=key)
            assert checked.returncode == 0, (point, ref, checked.stdout.decode())
    assert killed_somewhere >= 4  # the sweep reached the layer, its signature and its ref
