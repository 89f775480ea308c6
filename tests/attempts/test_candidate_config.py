"""What a candidate is given from its harness's configuration (settings, prompt, env, home),
which observed ids its plan accepts, and the scratch it leaves that is not its result."""

from __future__ import annotations

import json

import pytest

from yyb import config as configuration
from yyb.harness import manifest
from yyb.reports import build

# Reports what it was given, fixes the bug, leaves scratch beside its fix, and answers with
# a dated snapshot of its model's id.
REPORTER = """
echo "settings=$(cat "$YYB_SETTINGS_FILE")"
echo "flavour=$AGENT_FLAVOUR"
echo "home=$(cat "$HOME/.agentrc")"
echo "prompt-first-line=$(head -n 1 "$PROMPT")"
sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh
mkdir -p .agent-cache && echo cached > .agent-cache/state
echo "history of the chat" > .agent.chat.history.md
envelope succeeded stand "$DATED"
"""


def configure(bench, *, accept=None, scratch=None, home=True):
    data = bench.configure()
    harness = data["harnesses"]["candidate"]
    harness["settings"] = {"temperature_milli": 0, "style": "terse"}
    harness["prompt"] = "Work carefully."
    harness["env"] = {"AGENT_FLAVOUR": "vanilla"}
    if home:
        folder = bench.repo / "agent-home"
        folder.mkdir(exist_ok=True)
        (folder / ".agentrc").write_text("colour=never\n")
        harness["home"] = "agent-home"
    if scratch is not None:
        harness["scratch_paths"] = scratch
    if accept is not None:
        data["models"] = {":rep": {"id": "stand/reporter", "accept": accept}}
    bench.config_path.write_text(json.dumps(data, indent=2))


def dated(bench, model_id: str) -> str:
    script = REPORTER.replace('"$DATED"', model_id)
    return bench.behaviour("reporter", script)


def test_settings_prompt_env_and_home_reach_the_candidate_and_are_bound(bench):
    configure(bench, accept=["dated"])
    model = dated(bench, "reporter-20250929")
    plan, [result] = bench.run([model])
    assert result.terminal_class == "resolved", result.reason
    out = bench.linked(result, "stdout").decode()
    assert 'settings={"style": "terse", "temperature_milli": 0}' in out
    assert "flavour=vanilla" in out
    assert "home=colour=never" in out
    assert "prompt-first-line=Work carefully." in out
    experiment = plan.experiment
    harness = experiment["candidate_harness"]["config"]
    assert harness["env"] == {"AGENT_FLAVOUR": "vanilla"}
    # The home folder is bound by content: its listing is linked from the plan.
    listing = bench.record(experiment["links"]["harness_home"])
    assert [row[0] for row in listing["entries"]] == [".agentrc"]
    execution = bench.record(bench.terminal(result)["links"]["execution"])
    receipt = bench.record(execution["links"]["receipt"])
    assert "AGENT_FLAVOUR" in receipt["environment"]["variables"]
    assert "YYB_SETTINGS_FILE" in receipt["environment"]["variables"]
    assert bench.doctor_errors() == []


def test_the_home_folder_is_what_the_plan_bound_not_what_lies_there_at_run_time(bench):
    configure(bench)
    model = dated(bench, "reporter")
    plan = bench.plan([model])
    (bench.repo / "agent-home" / ".agentrc").write_text("colour=always\n")
    [result] = bench.execute(plan)
    assert "home=colour=never" in bench.linked(result, "stdout").decode()


def test_a_dated_id_the_plan_accepts_resolves_and_both_ids_are_recorded(bench):
    configure(bench, accept=["dated"])
    model = dated(bench, "reporter-20250929")
    plan, [result] = bench.run([":rep"])
    assert result.terminal_class == "resolved", result.reason
    identity = bench.terminal(result)["identity"]
    assert identity["resolved"] == "stand/reporter"
    assert identity["observed"] == "stand/reporter-20250929"
    assert plan.experiment["models"][0]["accept"] == ["dated"]
    assert model == "stand/reporter"
    # The plan's checks (doctor, the report's gate, regrade) hold it to the same rule.
    checked = bench.yyb("doctor", "--plan", plan.oid)
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    report, _ = build.build(bench.store, plan.oid)
    assert report["status"] == "complete"
    assert report["models"][0]["resolved"] == 1
    regraded = bench.yyb("regrade", "--plan", plan.oid, "--profile", "tests", "--dry-run")
    assert regraded.exit_code == 0, regraded.stderr


@pytest.mark.parametrize(
    "claimed", ["reporter-2025", "reporter-20250929-evil", "other-20250929", "reporterx"]
)
def test_an_id_outside_the_rule_is_refused(bench, claimed):
    configure(bench, accept=["dated"])
    dated(bench, claimed)
    _, [result] = bench.run([":rep"])
    assert result.terminal_class == "harness_failure"
    assert result.reason == (
        f"the envelope observed stand/{claimed}, not the planned stand/reporter "
        "or an id the plan accepts for it"
    )
    assert bench.terminal(result)["identity"]["observed"] is None


def test_without_a_rule_a_dated_id_stays_a_refusal(bench):
    configure(bench)
    dated(bench, "reporter-20250929")
    _, [result] = bench.run(["stand/reporter"])
    assert result.terminal_class == "harness_failure"


def test_scratch_is_out_of_the_patch_and_the_graded_listing_and_kept_as_evidence(bench):
    configure(bench, scratch=[".agent*", ".agent-cache/"])
    dated(bench, "reporter")
    plan, [result] = bench.run(["stand/reporter"])
    assert result.terminal_class == "resolved", result.reason
    terminal = bench.terminal(result)
    patch = bench.linked(result, "patch").decode()
    assert "calc.sh" in patch and ".agent" not in patch
    execution = bench.record(terminal["links"]["execution"])
    post = bench.record(execution["links"]["manifest"])
    graded = manifest.entries_at(bench.store, post["links"]["listing"])
    assert not [path for path in graded if path.startswith(".agent")]
    assert post["scratch"] == [".agent-cache/state", ".agent.chat.history.md"]
    aside = manifest.entries_at(bench.store, post["links"]["scratch"])
    assert bench.body(aside[".agent.chat.history.md"][1]) == b"history of the chat\n"
    assert plan.experiment["scratch_paths"] == [".agent*", ".agent-cache/"]
    receipt = bench.record(execution["links"]["receipt"])
    assert receipt["scratch_paths"] == [".agent*", ".agent-cache/"]
    # What the grader is given: the manifest's graded listing, rebuilt, without the scratch.
    evaluation = bench.record(terminal["links"]["evaluations"][0])
    assert evaluation["links"]["manifest"] == execution["links"]["manifest"]
    assert "graded_listing" not in evaluation["links"]
    assert b".agent" not in bench.body(evaluation["links"]["input"])
    assert bench.doctor_errors() == []
    # The viewer shows what was set aside, apart from the final listing.
    from yyb.view import attempt as view

    _, shown = view.page(bench.store, [], plan.oid, result.attempt)
    shown = str(shown)
    assert "set aside as scratch, not graded (2)" in shown
    assert shown.rindex(".agent.chat.history.md") > shown.index("set aside as scratch")


@pytest.mark.parametrize(
    "harness, problem",
    [
        ({"env": {"PATH": "/x"}}, "/harnesses/candidate/env/PATH"),
        ({"env": {"YYB_ENVELOPE_FD": "3"}}, "/harnesses/candidate/env/YYB_ENVELOPE_FD"),
        ({"env": {"TOKEN": "x"}, "secrets": ["TOKEN"]}, "/harnesses/candidate/env/TOKEN"),
    ],
)
def test_the_configuration_refuses_env_the_launcher_owns(bench, harness, problem):
    data = bench.configure()
    data["harnesses"]["candidate"].update(harness)
    with pytest.raises(configuration.ConfigError) as caught:
        configuration.parse(json.dumps(data), "c.json")
    assert caught.value.problems[0][0] == problem


def test_the_configuration_refuses_a_bad_rule_and_disagreeing_rules(bench):
    data = bench.configure()
    data["models"] = {":a": {"id": "p/m", "accept": ["not an id"]}}
    with pytest.raises(configuration.ConfigError) as caught:
        configuration.parse(json.dumps(data), "c.json")
    assert caught.value.problems[0][0] == "/models/:a/accept/0"
    data["models"] = {":a": {"id": "p/m", "accept": ["dated"]}, ":b": {"id": "p/m"}}
    with pytest.raises(configuration.ConfigError) as caught:
        configuration.parse(json.dumps(data), "c.json")
    assert caught.value.problems[0][0] == "/models/:b/accept"


# A tool the harness starts tries to replace the envelope helper before the harness runs it.
REPLACER = """
helper=$(command -v yyb-envelope)
if printf '#!/bin/sh\\necho forged\\n' > "$helper" 2>/dev/null; then echo replaced; fi
if touch "$(dirname "$helper")/other" 2>/dev/null; then echo added; fi
exec yyb-envelope --provider stand --model replacer --cost-micros 0 \\
  --cost-completeness genuine_zero -- sh -c 'sed -i "s/\\$1 - \\$2/\\$1 + \\$2/" calc.sh'
"""


def test_the_envelope_helper_cannot_be_replaced_inside_the_sandbox(bench):
    bench.configure()
    model = bench.behaviour("replacer", REPLACER)
    _, [result] = bench.run([model])
    out = bench.linked(result, "stdout").decode()
    assert "replaced" not in out and "added" not in out, out
    assert result.terminal_class == "resolved", result.reason


# Works inside a folder the harness declares as scratch: a file of the base it changes there
# is its result, a file it adds is not.
INSIDE_SCRATCH = """
echo "changed by the candidate" >> docs/old.md
echo "added by the candidate" > docs/new.md
envelope succeeded
"""


def test_a_base_file_under_a_scratch_path_stays_the_candidates_result(bench):
    configure(bench, scratch=["docs/"], home=False)
    model = bench.behaviour("inside", INSIDE_SCRATCH)
    _, [result] = bench.run([model])
    patch = bench.linked(result, "patch").decode()
    assert "docs/old.md" in patch and "changed by the candidate" in patch
    assert "docs/new.md" not in patch
    execution = bench.record(bench.terminal(result)["links"]["execution"])
    post = bench.record(execution["links"]["manifest"])
    assert post["scratch"] == ["docs/new.md"]
    assert "docs/old.md" in post["changed"]
