"""docs/agents.md runs as written: every ``sh`` block, in order, in a fresh folder, reaches a
report in which the stand-in agent resolved its case."""

from __future__ import annotations

import subprocess

from tests.conftest import doc_blocks, doc_shell


def test_docs_agents_md_runs_as_written(tmp_path):
    blocks = doc_blocks("agents.md")
    assert len(blocks) >= 6
    env, work = doc_shell(tmp_path)
    done = subprocess.run(
        ["sh", "-e", "-c", "\n".join(blocks)], cwd=work, env=env, capture_output=True, timeout=600
    )
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, (out, err)
    assert "terminals: resolved 2\n" in out, out
    (row,) = [line for line in out.splitlines() if line.startswith("demo/fixer  (all)")]
    assert row.split()[2:6] == ["2", "2", "2", "2/2"], row  # attempts, valid, resolved, rate
