"""A governed setup on the same machine widens nothing an isolated attempt may see or do.

An isolated candidate, run while a governed configuration, its boundary journal, lock store,
production files and credential exist (the credential set in the controller's environment),
tries to read each of them, to write into the lock store, and to find the credential in its
environment. Everything it manages is printed; nothing may be, and nothing it writes may
reach the host's lock store.
"""

from __future__ import annotations

from tests.grading.conftest import build_bench
from tests.workflow.conftest import build

PROBE = """
for path in @PATHS@; do
  if [ -e "$path" ]; then echo "SAW $path"; fi
  if cat "$path" >/dev/null 2>&1; then echo "READ $path"; fi
done
env | grep -q OPS_TOKEN && echo "SAW OPS_TOKEN"
env | grep -q s3cret && echo "SAW the credential"
touch @LOCKS@/file/CANDIDATE-WAS-HERE 2>/dev/null
echo "probe done"
envelope succeeded
"""


def test_an_isolated_attempt_sees_nothing_of_the_governed_lane(tmp_path, monkeypatch):
    governed = build(tmp_path / "governed", monkeypatch)
    plan = governed.plan("zz/good", steps="first")
    assert governed.run(plan).exit_code == 0  # the journal and the ledger now exist
    journal = next(governed.journal().glob("*.jsonl"))
    paths = [
        governed.config_path,
        journal,
        governed.resources["ledger"],
        governed.root / "state" / "locks",
        governed.policy,
        governed.store_path,
    ]
    bench = build_bench(tmp_path / "isolated")
    bench.configure()
    script = PROBE.replace("@PATHS@", " ".join(f"'{p}'" for p in paths)).replace(
        "@LOCKS@", str(governed.root / "state" / "locks")
    )
    model = bench.behaviour("prober", script)
    _, (result,) = bench.run([model])
    stdout = bench.body(bench.terminal(result)["links"]["stdout"])
    assert b"probe done" in stdout, stdout
    assert b"SAW" not in stdout and b"READ" not in stdout, stdout
    # What it wrote landed in its own private view, never in the host's lock store.
    assert not (governed.root / "state" / "locks" / "file" / "CANDIDATE-WAS-HERE").exists()
    assert governed.lines("ledger") and len(governed.lines("ledger")) == 1
