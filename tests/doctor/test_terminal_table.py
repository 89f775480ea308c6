"""The terminal table as docs/attempts.md writes it, in `facts.*` terms, is the one the code
decides by: an auditor's replay from the doc agrees with `terminal.replay` on every fact."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from yyb.evidence.terminal import replay

DOC = Path(__file__).resolve().parents[2] / "docs" / "attempts.md"

# The "in `facts`" column of the table, row by row, as an auditor reads it.
ROWS = {
    1: "`cancelled` is true",
    4: "`cleanup_confirmed` is false",
    5: "`timed_out` is true",
    6: "`limit` is a string and not *clean*",
    7: "`envelope_problem` is a string",
    8: "`signal` is an integer",
    9: '`exit_code` is not 0, or `envelope_status` is not `"succeeded"`',
}


def documented_rows() -> dict[int, tuple[str, str]]:
    table = DOC.read_text().split("## The terminal table", 1)[1].split("\n\n", 2)[2]
    found = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].isdigit():
            found[int(cells[0])] = (cells[2], cells[3])
    return found


def test_the_doc_states_each_row_as_a_condition_on_facts():
    rows = documented_rows()
    assert sorted(rows) == list(range(1, 14))
    for number, condition in ROWS.items():
        assert rows[number][0] == condition, number


def auditor(facts: dict, verdict: str | None) -> str:
    """The table, written from the doc alone."""
    clean = (
        not facts["cancelled"]
        and not facts["timed_out"]
        and facts["envelope_problem"] is None
        and facts["cleanup_confirmed"]
        and facts["exit_code"] == 0
        and facts["envelope_status"] == "succeeded"
    )
    if facts["cancelled"]:
        return "cancelled"
    if not facts["cleanup_confirmed"]:
        return "harness_failure"
    if facts["timed_out"]:
        return "timeout"
    if facts.get("limit") is not None and not clean:
        return "model_failure"
    if facts["envelope_problem"] is not None:
        return "harness_failure"
    if facts["signal"] is not None:
        return "model_failure"
    if facts["exit_code"] != 0 or facts["envelope_status"] != "succeeded":
        return "model_failure"
    verdict = verdict or "pass"  # no evaluator selected
    return {
        "safety": "safety_failure",
        "invalid": "harness_failure",
        "fail": "grader_failure",
        "pass": "resolved",
    }[verdict]


def evaluation(verdict: str) -> dict:
    purpose = "safety" if verdict == "safety" else "correctness"
    return {
        "profile": "p",
        "kind": "command",
        "generation": 1,
        "required": True,
        "purpose": purpose,
        "verdict": "fail" if verdict == "safety" else verdict,
    }


FACTS = st.fixed_dictionaries(
    {
        "cancelled": st.booleans(),
        "timed_out": st.booleans(),
        "cleanup_confirmed": st.booleans(),
        "exit_code": st.one_of(st.none(), st.sampled_from([0, 0, 1, 137])),
        "signal": st.one_of(st.none(), st.sampled_from([9, 25])),
        "envelope_problem": st.one_of(st.none(), st.just("no envelope")),
        "envelope_status": st.sampled_from([None, "succeeded", "succeeded", "failed"]),
    },
    optional={"limit": st.one_of(st.none(), st.just("memory"))},
)


@given(FACTS, st.sampled_from([None, "pass", "fail", "invalid", "safety"]))
@example(
    {
        "cancelled": False,
        "timed_out": False,
        "cleanup_confirmed": True,
        "exit_code": 0,
        "signal": None,
        "envelope_problem": None,
        "envelope_status": "succeeded",
        "limit": "memory",
    },
    "pass",
)
def test_a_replay_from_the_doc_agrees_with_the_code(facts, verdict):
    linked = [evaluation(verdict)] if verdict else []
    decided, _ = replay(dict(facts), linked)
    assert decided == auditor(facts, verdict)
    assert re.fullmatch(r"[a-z_]+", decided)
