"""Code under test cannot forge its grader's verdict.

The candidate fixes nothing; instead it rewrites the code the grader's test runs (calc.sh) to
attack the grader from inside: write a passing verdict where the grader's output goes, then
kill the grader (or not). The verdict travels through a pipe only the grader process holds
(yyb/harness/channel.py), and the rule of yyb/grading/command.py never lets an irregular end
pass. None of these candidates may end ``resolved``.
"""

from __future__ import annotations

import pytest

from tests.grading.conftest import HONEST

PASSING = '{"schema_version": "yylo_benchmark_grader_output.v2", "passed": true}'


def cheater(bench, name: str, calc: str) -> str:
    """A candidate whose whole work is replacing calc.sh with ``calc``."""
    script = (
        f"cat > calc.sh <<'CALC'\n#!/bin/sh\n{calc}\nCALC\ncommit 'cheat'\nenvelope succeeded\n"
    )
    return bench.behaviour(name, script)


FORGE = f"""printf '%s' '{PASSING}' > "$YYB_GRADER_OUTPUT" 2>/dev/null
printf '%s' '{PASSING}' > "/dev/fd/$YYB_GRADER_OUTPUT_FD" 2>/dev/null
echo 0"""
ATTACKS = {
    # Forge, then kill every process it may signal: the grader dies before it answers.
    "forge and kill -9": FORGE + "\nkill -9 -1",
    "forge and kill -TERM": FORGE + "\nkill -TERM -1",
    # Forge and let the grader go on: it answers too.
    "forge only": FORGE,
    # Forge from a process that outlives the test, after the grader's own answer.
    "forge later": f"(sleep 1; {FORGE.splitlines()[0]}) >/dev/null 2>&1 &\necho 0",
}

# A grader that keeps its channel from the code it runs, as docs/grading.md asks: it is
# non-dumpable and starts the test without the descriptor (Python closes it by default).
CAREFUL = """#!/usr/bin/env python3
import ctypes, json, os, subprocess
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
channel = os.fdopen(int(os.environ["YYB_GRADER_OUTPUT_FD"]), "w")
done = subprocess.run(["sh", "./test_calc.sh"], capture_output=True, text=True)
summary = (done.stdout + done.stderr).splitlines()[:1]
channel.write(json.dumps({"schema_version": "yylo_benchmark_grader_output.v2",
                          "passed": done.returncode == 0, "summary": " ".join(summary)}))
"""


@pytest.mark.parametrize("grader", ["shell grader", "careful grader"])
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_code_under_test_cannot_forge_a_pass(bench, attack, grader):
    script = HONEST if grader == "shell grader" else CAREFUL
    bench.configure({"tests": bench.command("g", script)})
    model = cheater(bench, "cheater", ATTACKS[attack])
    plan, (result,) = bench.run([model])
    e = bench.evaluation(plan, result, "tests")
    assert result.terminal_class != "resolved", result.reason
    assert e["verdict"] != "pass"
    if attack.startswith("forge and kill"):
        # Killed from inside: a fail, not an invalid attempt the report would leave out.
        assert e["verdict"] == "fail" and e["_result"].get("signal") in (9, 15)
        assert result.terminal_class == "grader_failure"
    elif grader == "careful grader":
        # The forgery never reached the channel: the grader's own answer stands.
        assert e["verdict"] == "fail" and e["_output"].count(b"schema_version") == 1


def test_the_same_grader_passes_an_honest_fix(bench):
    """The control: the careful grader does pass a real fix, so the refusals above are the
    rule's, not a grader that can never pass."""
    bench.configure({"tests": bench.command("g", CAREFUL)})
    plan, (fixer,) = bench.run(["zz/fixer"])
    assert fixer.terminal_class == "resolved", fixer.reason
