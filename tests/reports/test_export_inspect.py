"""`yyb export inspect`: a run as an Inspect AI eval log, read back by Inspect's own readers
(docs/export.md)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.conftest import Yyb
from yyb.reports import build, inspect_log
from yyb.store.repo import Store

inspect_log_reader = pytest.importorskip("inspect_ai.log")

VALUE = {"pass": "C", "fail": "I", "safety": "I", "invalid": "N"}


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """One run of the example (2 models x 2 attempts): (root, store path, plan oid)."""
    root = tmp_path_factory.mktemp("export") / "ex"
    done = Yyb(str(root / "store"))("example", "--dir", str(root), "--attempts", "2")
    assert done.exit_code == 0, done.stdout + done.stderr
    store = Store.open(str(root / "store"))
    (plan_oid,) = [n.split("/")[2] for n in store.refs.names() if n.startswith("refs/plans/")]
    return root, str(root / "store"), plan_oid


def export(example, *args: str, store: str | None = None):
    root, store_path, plan_oid = example
    return Yyb(store or store_path)("export", "inspect", plan_oid, *args)


@pytest.mark.parametrize("fmt", ["json", "eval"])
def test_the_log_has_one_sample_per_attempt_scored_as_the_report(example, tmp_path, fmt):
    root, store_path, plan_oid = example
    path = tmp_path / f"run.{fmt}"
    done = export(example, "--output", str(path))
    assert done.exit_code == 0, done.stderr
    assert done.stderr == f"inspect log written to {path} (4 samples)\n"
    store = Store.open(store_path)
    document, _ = build.build(store, plan_oid)
    plan = store.objects.get_record(plan_oid)

    log = inspect_log_reader.read_eval_log(str(path))
    assert log.status == "success" and log.error is None
    assert log.eval.run_id == plan_oid and log.eval.model == "multiple"
    assert log.eval.metadata["yyb"]["plan"] == plan_oid
    assert len(log.samples) == plan["attempt_count"] == len(document["attempts"]) == 4
    assert log.results.total_samples == log.results.completed_samples == 4
    rows = {row["attempt"]: row for row in document["attempts"]}
    prompt = (root / "task.md").read_text()
    for sample in log.samples:
        row = rows[sample.metadata["attempt"]]
        assert sample.id == f"calc-add#{row['ordinal']}" and sample.epoch == row["number"]
        assert sample.metadata["model"] == row["model"] and sample.output.model == row["model"]
        assert sample.input and sample.input in prompt  # the case's prompt, as the candidate got it
        assert [m.role for m in sample.messages] == ["user"]  # no gateway: no model calls kept
        assert sample.scores["outcome"].value == {"resolved": "C", "failed": "I"}[row["outcome"]]
        (profile,) = row["verdicts"]
        score = sample.scores[profile]
        assert score.value == VALUE[row["verdicts"][profile]]
        assert score.metadata["evaluation"] == row["evaluations"][-1]
        assert score.explanation  # the grader's reason
    (outcome, tests) = log.results.scores
    totals = document["totals"]["rate"]
    assert outcome.metrics["accuracy"].value == totals["numerator"] / totals["denominator"] == 0.5
    for summary in document["models"]:
        metric = outcome.metrics[f"accuracy/{summary['model']}"]
        assert metric.group == "accuracy" and metric.value in (0.0, 1.0)
        assert metric.value == summary["rate"]["numerator"] / summary["rate"]["denominator"]
    assert tests.name == "tests" and tests.metrics["accuracy"].value == 0.5


def test_inspects_dataframes_read_the_eval_log(example, tmp_path):
    analysis = pytest.importorskip("inspect_ai.analysis")
    _, store_path, plan_oid = example
    path = tmp_path / "run.eval"
    assert export(example, "--output", str(path)).exit_code == 0
    samples = analysis.samples_df(str(path))
    assert len(samples) == 4
    assert sorted(samples["score_outcome"]) == ["C", "C", "I", "I"]
    assert set(samples["metadata_model"]) == {"example/fixer", "example/idler"}
    evals = analysis.evals_df(str(path))
    assert len(evals) == 1 and evals["score_outcome_accuracy"][0] == 0.5
    assert evals["run_id"][0] == plan_oid


def test_the_same_run_exports_to_the_same_bytes(example):
    _, store_path, plan_oid = example
    store = Store.open(store_path)
    first = inspect_log.to_eval(inspect_log.eval_log(store, plan_oid))
    assert first == inspect_log.to_eval(inspect_log.eval_log(store, plan_oid))
    assert first[:4] == b"PK\x03\x04"


def test_stdout_carries_the_json_log(example):
    done = export(example)
    assert done.exit_code == 0, done.stderr
    log = json.loads(done.stdout)
    assert log["version"] == 2 and len(log["samples"]) == 4


@pytest.mark.parametrize(
    "args, message",
    [
        (("--format", "eval", "--output", "run.json"), "--format eval into"),
        (("--output", "no-such-folder/run.eval"), "does not exist"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(example, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    done = export(example, *args)
    assert done.exit_code == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr
    assert "Traceback" not in done.stderr and os.listdir(tmp_path) == []


def test_a_pin_scores_only_what_that_grader_version_graded(example):
    graded = json.loads(export(example, "--grader-version", "example-tests@1").stdout)
    assert all(set(s["scores"]) == {"outcome", "tests"} for s in graded["samples"])
    done = export(example, "--grader-version", "9")
    assert done.exit_code == 0, done.stderr
    log = json.loads(done.stdout)
    assert log["eval"]["metadata"]["yyb"]["grader_version"] == "9"
    assert [s["metadata"]["outcome"] for s in log["samples"]] == ["not_graded_by_pin"] * 4
    assert all(s["scores"] == {} for s in log["samples"])
    outcome = log["results"]["scores"][0]
    assert outcome["scored_samples"] == 0 and "accuracy" not in outcome["metrics"]


def test_an_existing_file_is_never_overwritten(example, tmp_path):
    path = tmp_path / "run.eval"
    path.write_text("mine")
    done = export(example, "--output", str(path))
    assert done.exit_code == 2 and "never overwritten" in done.stderr
    assert path.read_text() == "mine"


def test_an_unknown_plan_is_one_line(example):
    _, store_path, _ = example
    done = Yyb(store_path)("export", "inspect", "no-such-plan")
    assert done.exit_code in (1, 2)  # as yyb report --plan says it (docs/cli.md)
    assert done.stderr.count("\n") == 1 and "no-such-plan" in done.stderr


def test_json_says_what_was_written(example, tmp_path):
    _, _, plan_oid = example
    path = tmp_path / "run.eval"
    done = export(example, "--output", str(path), "--json")
    assert done.exit_code == 0, done.stderr
    said = json.loads(done.stdout)
    assert said == {
        "output": str(path),
        "format": "eval",
        "plan": plan_oid,
        "status": "success",
        "samples": 4,
    }
    assert path.read_bytes()[:4] == b"PK\x03\x04"
    refused = export(example, "--json")
    assert refused.exit_code == 2 and "--output" in refused.stderr


def test_an_incomplete_experiment_is_an_error_log_with_its_missing_attempt(example, tmp_path):
    root, store_path, plan_oid = example
    shutil.copytree(store_path, tmp_path / "store", symlinks=True)
    store = Store.open(str(tmp_path / "store"))
    attempt = store.objects.get_record(plan_oid)["links"]["attempts"][0]
    os.unlink(tmp_path / "store" / "refs" / "runs" / plan_oid / attempt / "terminal")
    path = tmp_path / "run.eval"
    done = export(example, "--output", str(path), store=str(tmp_path / "store"))
    assert done.exit_code == 1
    assert "incomplete" in done.stderr.splitlines()[-1]
    log = inspect_log_reader.read_eval_log(str(path))
    assert log.status == "error" and "incomplete" in log.error.message
    assert len(log.samples) == 4 and log.results.completed_samples == 3
    (missing,) = [s for s in log.samples if s.metadata["attempt"] == attempt]
    assert missing.error is not None and "outcome" not in missing.scores


# -- through the gateway: the kept calls are the transcript -----------------------------------

# Calls the model twice, the way an agent loop does: a plain call answered with a tool call,
# then (streamed) the whole history again with the tool's result.
AGENT = r"""
import json, os, urllib.request
base, key = os.environ["OPENAI_BASE_URL"], os.environ["STAND_API_KEY"]
def call(messages, stream):
    body = {"model": "client", "stream": stream, "messages": messages}
    request = urllib.request.Request(base + "/chat/completions", json.dumps(body).encode(),
        {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.read().decode()
ask = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "Fix calc.sh."}]
first = json.loads(call(ask, False))["choices"][0]["message"]
ask += [first, {"role": "tool", "tool_call_id": first["tool_calls"][0]["id"],
                "content": "FAIL: 2 3 printed -1"}]
print(call(ask, True)[:60])
"""
TURNS = {
    "turns": [
        {"tool_calls": [{"name": "run", "arguments": {"cmd": "sh test_calc.sh"}}]},
        {"text": "Fixed add."},
    ],
    "served_model": "client",
    "fallback": {"text": "nothing more"},
}


@pytest.fixture(scope="module")
def metered(tmp_path_factory):
    """One attempt of a gateway plan whose candidate made two calls: (bench, plan, result)."""
    from tests.agents.model_server import Server
    from tests.attempts import test_gateway_run as gateway
    from tests.attempts.conftest import build_bench
    from tests.calculator import FIX, write

    with pytest.MonkeyPatch.context() as env, Server(TURNS) as provider:
        env.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        env.setenv("TMPDIR", str(tmp_path_factory.mktemp("tmp")))
        bench = build_bench(tmp_path_factory.mktemp("gateway") / "bench")
        model = gateway.gateway_bench(
            bench, provider, behaviour=f'python3 "$TOOLS/client.py"\n{FIX}\nenvelope succeeded\n'
        )
        write(bench.tools / "client.py", AGENT)
        plan = bench.plan([model])
        (result,) = gateway.run(bench, plan)
    return bench, plan, result


def test_a_metered_attempt_has_its_calls_as_messages_and_its_usage(metered):
    bench, plan, result = metered
    terminal = bench.terminal(result)
    assert terminal["class"] == "resolved", terminal["reason"]
    meter = bench.record(terminal["links"]["gateway"])
    assert meter["calls"] == 2

    log = inspect_log.eval_log(bench.store, plan.oid)
    (sample,) = log["samples"]
    roles = [(m["role"], m["content"]) for m in sample["messages"]]
    assert roles == [
        ("system", "You fix bugs."),
        ("user", "Fix calc.sh."),
        ("assistant", ""),
        ("tool", "FAIL: 2 3 printed -1"),
        ("assistant", "Fixed add."),
    ]
    (call,) = sample["messages"][2]["tool_calls"]
    assert call["function"] == "run" and call["arguments"] == {"cmd": "sh test_calc.sh"}
    assert sample["messages"][3]["tool_call_id"] == call["id"] == "call-1"  # its result
    assert sample["output"]["completion"] == "Fixed add."
    usage = meter["models"]["client"]["usage"]
    used = sample["model_usage"]["stand/client"]
    assert used["input_tokens"] == usage["input_tokens"] > 0
    assert used["output_tokens"] == usage["output_tokens"] > 0
    assert used["total_cost"] == meter["cost"]["micros"] / 1_000_000
    assert log["stats"]["model_usage"] == sample["model_usage"]
    assert sample["metadata"]["tokens"]["input_tokens"] == meter["usage"]["input_tokens"]

    path = bench.root / "metered.eval"
    path.write_bytes(inspect_log.to_eval(log))
    (read,) = inspect_log_reader.read_eval_log(str(path)).samples
    assert [m.role for m in read.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert read.messages[2].tool_calls[0].arguments == {"cmd": "sh test_calc.sh"}
    assert read.model_usage["stand/client"].input_tokens == usage["input_tokens"]
    assert read.output.completion == "Fixed add." and read.output.model == "client"
    assert read.messages[3].tool_call_id == read.messages[2].tool_calls[0].id
