"""Grading on an overlay workspace (yyb/harness/overlay.py), tried as an attacker would.

Evaluations of one base share a pristine lower layer, so a grader (or the code under test in
it) that defaces its workspace must not change what the next evaluation sees; the step that
mounts the overlay must hand the sandbox nothing but the workspace; and a mount that fails is
the infrastructure's (``not_started``), which the code under test cannot claim for itself to
turn its failure into an excluded invalid attempt. Where no overlay can be mounted the same
graders run on a rebuilt workspace and the same verdicts must come out.
"""

from __future__ import annotations

import pytest

from yyb.harness import overlay as mounts

PASSING = '{"schema_version": "yylo_benchmark_grader_output.v2", "passed": %s, "summary": "%s"}'

# Grades honestly, but only passes a workspace that no earlier evaluation touched; then
# defaces it every way it can (bytes in place, deletions, a renamed file, new files, modes).
VANDAL = f"""#!/bin/sh
clean=yes
[ -e VANDALISED ] && clean=no
grep -q VANDAL README.md && clean=no
[ -f test_calc.sh ] || clean=no
if sh ./test_calc.sh >/dev/null 2>&1 && [ "$clean" = yes ]; then p=true; else p=false; fi
defaced=no
echo VANDAL >> README.md && chmod 000 README.md && rm test_calc.sh && \\
  mv calc.sh calc.moved && touch VANDALISED && defaced=yes
printf '{PASSING}' "$p" "clean=$clean defaced=$defaced" > "$YYB_GRADER_OUTPUT"
"""


# Reports every descriptor it holds besides 0, 1, 2 and its verdict channel.
DESCRIPTORS = """#!/usr/bin/env python3
import json, os
channel = int(os.environ["YYB_GRADER_OUTPUT_FD"])
held = sorted(int(n) for n in os.listdir("/proc/self/fd"))
extra = [n for n in held if n > 2 and n != channel and os.path.exists(f"/proc/self/fd/{n}")]
os.write(channel, json.dumps({"schema_version": "yylo_benchmark_grader_output.v2",
                              "passed": not extra, "summary": f"extra={extra}"}).encode())
"""


def count_mounts(monkeypatch) -> list:
    made = []
    real = mounts.Mount.prefix

    def prefix(self, mark_fd):
        made.append(self)
        return real(self, mark_fd)

    monkeypatch.setattr(mounts.Mount, "prefix", prefix)
    return made


@pytest.mark.parametrize("overlay", [True, False], ids=["overlay", "rebuilt"])
def test_a_grader_that_defaces_its_workspace_cannot_reach_the_next_one(bench, monkeypatch, overlay):
    if overlay and not mounts.usable():
        pytest.skip("no overlay can be mounted here")
    if not overlay:
        monkeypatch.setattr(mounts, "usable", lambda: False)
    made = count_mounts(monkeypatch)
    bench.configure({"tests": bench.command("vandal", VANDAL)})
    plan, results = bench.run(["zz/fixer", "zz/idler"], attempts=2)
    want = ["pass" if r.model.endswith("fixer") else "fail" for r in results]
    verdicts = [bench.evaluation(plan, r, "tests")["verdict"] for r in results]
    assert sorted(want) == ["fail", "fail", "pass", "pass"]
    assert verdicts == want, [r.reason for r in results]
    # Regrading every attempt, after four defacings, still sees each as it was.
    bench.reevaluate(plan, "tests")
    again = [bench.evaluation(plan, r, "tests") for r in results]
    assert [e["verdict"] for e in again] == want
    assert all(b"clean=yes defaced=yes" in e["_output"] for e in again)
    assert len(made) == (8 if overlay else 0)
    if overlay:
        assert len({m.lower for m in made}) == 1, "one pristine base serves every evaluation"


def test_the_grader_inherits_no_descriptor_but_its_channel(bench, monkeypatch):
    made = count_mounts(monkeypatch)
    bench.configure({"tests": bench.command("fds", DESCRIPTORS)})
    plan, (result,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, result, "tests")
    assert e["verdict"] == "pass", e["_output"]
    assert len(made) == (1 if mounts.usable() else 0)


def test_a_mount_that_fails_is_the_infrastructures_not_the_candidates(bench, monkeypatch):
    if not mounts.usable():
        pytest.skip("no overlay can be mounted here")
    monkeypatch.setattr(mounts, "OPTIONS", "no_such_overlay_option=1")
    bench.configure({"tests": bench.command("honest")})
    plan, (result,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, result, "tests")
    assert e["verdict"] == "invalid" and e["problem"] == "not_started"
    assert "could not be mounted" in e["_result"]["reason"]
    assert result.terminal_class != "resolved"


# The code under test says what the mount step says when it fails, and exits as it does.
IMPOSTOR = """cat > calc.sh <<'CALC'
#!/bin/sh
echo "yyb: the grading workspace could not be mounted" >&2
kill -9 $PPID 2>/dev/null
exit 125
CALC
commit 'claim the mount failed'
envelope succeeded
"""


def test_code_under_test_cannot_pass_itself_off_as_a_failed_mount(bench):
    bench.configure({"tests": bench.command("honest")})
    model = bench.behaviour("impostor", IMPOSTOR)
    plan, (result,) = bench.run([model])
    e = bench.evaluation(plan, result, "tests")
    assert e.get("problem") != "not_started"
    assert e["verdict"] == "fail", e["reason"]
