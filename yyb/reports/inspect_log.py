"""A plan's run as an Inspect AI eval log: one sample per attempt (docs/export.md).

Inspect's log format (``inspect_ai.log.EvalLog``, format version 2) is written here as plain
JSON values, so that ``inspect view`` and ``inspect_ai.analysis`` open a yyb run without yyb
importing Inspect: the figures are the per-experiment report's (``yyb.reports.build``), the
prompts, terminals, verdict reasons and model calls are read from the records they name. Two
containers: the ``.json`` file (the whole log as one object) and the ``.eval`` zip archive
(``header.json``, ``_journal/start.json``, ``samples/<id>_epoch_<epoch>.json``,
``summaries.json``, ``reductions.json``), the layout Inspect's own recorder writes.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime

from yyb.errors import YybError
from yyb.evidence import names, transcript
from yyb.reports import build

LOG_VERSION = 2  # Inspect's EvalLog.version
OUTCOME = "outcome"  # the scorer holding each attempt's report outcome
# Inspect's score values (inspect_ai.scorer: CORRECT, INCORRECT, NOANSWER), which its
# ``accuracy`` reads as 1, 0 and 0.
VERDICT_VALUE = {"pass": "C", "fail": "I", "safety": "I", "invalid": "N"}
OUTCOME_VALUE = {"resolved": "C", "failed": "I", "invalid": "N"}
TOKEN_FIELDS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens")
ROLES = {  # a transcript role -> Inspect's (system, user, assistant, tool)
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "function_call": "assistant",
    "tool": "tool",
    "function": "tool",
    "function_call_output": "tool",
}


@dataclass
class Run:
    """One plan read once: the report document, its facts, and records read on the way."""

    store: object
    plan_oid: str
    plan: dict
    document: dict
    facts: dict  # attempt oid -> build.Facts
    prompts: dict = field(default_factory=dict)  # case record oid -> prompt text

    @classmethod
    def read(cls, store, plan_oid: str, version: str | None = None) -> Run:
        document, facts = build.build(store, plan_oid, version)
        plan = store.objects.get_record(plan_oid)
        return cls(store, plan_oid, plan, document, {f.attempt: f for f in facts})

    def record(self, oid: str | None) -> dict | None:
        """The record ``oid``, or None when there is none or it cannot be read."""
        if not isinstance(oid, str):
            return None
        try:
            return self.store.objects.get_record(oid)
        except YybError:
            return None

    def body(self, oid: str | None) -> bytes:
        if not isinstance(oid, str):
            return b""
        try:
            return self.store.objects.get(oid).body
        except YybError:
            return b""

    def prompt(self, attempt: dict | None) -> str:
        case_oid = ((attempt or {}).get("links") or {}).get("case")
        if case_oid is None:
            return ""
        if case_oid not in self.prompts:
            case = self.record(case_oid) or {}
            text = self.body((case.get("links") or {}).get("prompt"))
            self.prompts[case_oid] = text.decode("utf-8", "replace")
        return self.prompts[case_oid]


def eval_log(store, plan_oid: str, version: str | None = None) -> dict:
    """The Inspect eval log (EvalLog's JSON value) of the experiment ``plan_oid``.

    Args:
        version: only the evaluation generations of this evaluator version (``V`` or
            ``ID@V``), as the report's pin reads them.

    Raises:
        UsageError: ``plan_oid`` is not an experiment plan in the store.
    """
    run = Run.read(store, plan_oid, version)
    rows = run.document["attempts"]
    samples = [_sample(run, index, row) for index, row in enumerate(rows)]
    complete = run.document["status"] == "complete"
    log = {
        "version": LOG_VERSION,
        "status": "success" if complete else "error",
        "eval": _spec(run, samples),
        "plan": _eval_plan(run.plan),
        "results": _results(run, samples),
        "stats": _stats(samples),
    }
    if not complete:
        log["error"] = _incomplete(run.document["doctor"])
    log["samples"] = samples
    log["reductions"] = _reductions(log["results"], samples)
    return log


def _incomplete(doctor: dict) -> dict:
    first = "; ".join(doctor.get("first_errors") or [])
    message = (
        f"the experiment's chain is incomplete: {doctor.get('complete_chains')} of "
        f"{doctor.get('attempts')} attempt chains complete" + (f" ({first})" if first else "")
    )
    return {"message": message, "traceback": "", "traceback_ansi": ""}


def _iso(ms: int | None) -> str:
    """Milliseconds since the epoch as Inspect's UTC ISO 8601 text ("" when unknown)."""
    if type(ms) is not int:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def _created(run: Run, samples: list[dict]) -> str:
    """When the plan was stored (its ref's first update), else its first attempt's start."""
    try:
        updates = list(run.store.refs.log(names.plan(run.plan_oid)))
    except YybError:
        updates = []
    if updates and type(updates[-1][1].get("time_ms")) is int:
        return _iso(updates[-1][1]["time_ms"])
    started = sorted(s["started_at"] for s in samples if s.get("started_at"))
    return started[0] if started else _iso(0)


def _spec(run: Run, samples: list[dict]) -> dict:
    plan, oid = run.plan, run.plan_oid
    models = [m["resolved"] for m in plan["models"]]
    config = {"time_limit": max(1, plan["timeout_ms"] // 1000)}
    budget = plan.get("budget") or {}
    if budget.get("currency") == "USD" and type(budget.get("per_attempt_micros")) is int:
        config["cost_limit"] = budget["per_attempt_micros"] / 1_000_000
    cases = [c["case_id"] for c in plan.get("cases") or [] if isinstance(c, dict)]
    return {
        "eval_id": oid,
        "run_id": oid,
        "created": _created(run, samples),
        "task": f"yyb/{oid[:12]}",
        "task_id": oid,
        "task_version": 0,
        "task_display_name": f"yyb {oid[:12]}" + (f" ({', '.join(cases[:3])})" if cases else ""),
        "tags": ["yyb"],
        "solver": f"yyb/{plan['candidate_harness']['id']}",
        "dataset": {
            "name": f"yyb/{oid[:12]}",
            "location": str(getattr(run.store, "path", "")) or None,
            "samples": len(samples),
            "sample_ids": [s["id"] for s in samples],
            "shuffled": False,
        },
        "model": models[0] if len(models) == 1 else "multiple",
        "config": config,
        "packages": {"yyb": str(plan.get("versions", {}).get("yyb", ""))},
        "metadata": {
            "yyb": {
                "plan": oid,
                "store": str(getattr(run.store, "path", "")),
                "status": run.document["status"],
                "grader_version": run.document.get("grader_version"),
                "models": models,
                "cases": cases,
                "attempts_per_cell": plan.get("attempts_per_cell"),
                "comparison_classification": run.document.get("comparison_classification"),
                "doctor": run.document.get("doctor"),
                "versions": plan.get("versions"),
            }
        },
    }


def _eval_plan(plan: dict) -> dict:
    harness = plan["candidate_harness"]
    step = {"solver": f"yyb/{harness['id']}", "params": harness.get("config") or {}}
    return {"name": "plan", "steps": [step], "config": {}}


def _sample(run: Run, index: int, row: dict) -> dict:
    facts = run.facts.get(row["attempt"])
    attempt = run.record(row["attempt"])
    terminal = run.record(row.get("terminal"))
    case_id = row.get("case_id") or "workflow"
    number = row.get("number") or (attempt or {}).get("attempt") or 1
    prompt = run.prompt(attempt)
    meter = run.record(((terminal or {}).get("links") or {}).get("gateway"))
    messages, last = _conversation(_calls(run, meter))
    sample = {
        "id": f"{case_id}#{index}",
        "epoch": number,
        "input": prompt,
        "target": "",
        "messages": messages or [_message("user", prompt)],
        "output": _output(last, row["model"]),
        "scores": _scores(run, row, facts, terminal),
        "metadata": _metadata(run, row, facts, terminal, number),
        "model_usage": _usage(meter, row["model"]),
        "uuid": row["attempt"][:32],
    }
    runtime = (terminal or {}).get("runtime") or {}
    if "execution" in ((terminal or {}).get("links") or {}):
        sample["started_at"] = _iso(runtime.get("started_ms"))
        sample["completed_at"] = _iso(runtime.get("ended_ms"))
    if type(row.get("wall_ms")) is int:
        sample["total_time"] = sample["working_time"] = row["wall_ms"] / 1000
    if terminal is None:
        sample["error"] = {
            "message": "no terminal the doctor gate accepts: the attempt is missing",
            "traceback": "",
            "traceback_ansi": "",
        }
    elif terminal.get("class") == "timeout":
        limit = run.plan["timeout_ms"] / 1000
        sample["limit"] = {"type": "time", "limit": limit, "reason": terminal.get("reason")}
    return sample


def _metadata(run: Run, row: dict, facts, terminal: dict | None, number: int) -> dict:
    keys = ("ordinal", "attempt", "model", "case_id", "terminal", "evidence", "terminal_class")
    meta = {key: row.get(key) for key in keys}
    meta.update(
        plan=row.get("plan", run.plan_oid),
        number=number,
        terminal_reason=(terminal or {}).get("reason"),
        verdict=row.get("verdict"),
        outcome=row.get("outcome"),
        invalid_cause=getattr(facts, "invalid_cause", None),
        candidate_cost=row.get("candidate_cost", getattr(facts, "candidate_cost", None)),
        cost_note=row.get("cost_note"),
        wall_ms=row.get("wall_ms"),
        evaluator_ms=row.get("evaluator_ms"),
        environment=row.get("environment", getattr(facts, "environment", None)),
        tokens=row.get("tokens", getattr(facts, "tokens", None)),
        evaluations=row.get("evaluations") or [],
    )
    if "superseded_by" in row:
        meta["superseded_by"] = row["superseded_by"]
    return meta


def newest(facts) -> dict[str, tuple[str, dict]]:
    """Each evaluator profile's newest generation counted: profile -> (oid, receipt facts)."""
    out: dict[str, tuple[str, dict]] = {}
    for oid, receipt in getattr(facts, "evaluations", None) or []:
        held = out.get(receipt["profile"])
        if held is None or receipt["generation"] >= held[1]["generation"]:
            out[receipt["profile"]] = (oid, receipt)
    return out


def _scores(run: Run, row: dict, facts, terminal: dict | None) -> dict:
    """The attempt's report outcome (while it is counted) and each profile's newest verdict."""
    scores = {}
    outcome = row.get("outcome")
    if outcome in OUTCOME_VALUE and not row.get("superseded_by"):
        scores[OUTCOME] = {
            "value": OUTCOME_VALUE[outcome],
            "answer": outcome,
            # The verdict's reason when graded, else the terminal's, which decided it.
            "explanation": getattr(facts, "verdict_reason", "") or (terminal or {}).get("reason"),
            "metadata": {
                "outcome": outcome,
                "verdict": row.get("verdict"),
                "terminal_class": row.get("terminal_class"),
                "invalid_cause": getattr(facts, "invalid_cause", None),
            },
        }
    for profile, (oid, receipt) in sorted(newest(facts).items()):
        evaluation = run.record(oid) or {}
        result_oid = (evaluation.get("links") or {}).get("result")
        result = run.record(result_oid) or {}
        evaluator = receipt.get("evaluator") or {}
        scores[profile] = {
            "value": VERDICT_VALUE.get(receipt["verdict"], "N"),
            "answer": receipt["verdict"],
            "explanation": result.get("reason"),
            "metadata": {
                "verdict": receipt["verdict"],
                "evaluation": oid,
                "result": result_oid,
                "generation": receipt["generation"],
                "evaluator": f"{evaluator.get('id')}@{evaluator.get('version')}",
            },
        }
    return scores


def _calls(run: Run, meter: dict | None) -> list[tuple[dict, transcript.Exchange]]:
    """The gateway's kept calls of one attempt, in order, each read as an exchange."""
    out = []
    for oid in ((meter or {}).get("links") or {}).get("calls") or []:
        call = run.record(oid)
        if call is None:
            continue
        links = call.get("links") or {}
        exchange = transcript.read(
            str(call.get("api")),
            run.body(links.get("request")),
            run.body(links.get("response")),
            bool(call.get("stream")),
        )
        out.append((call, exchange))
    return out


def _message(role: str, text: str, tool_calls=(), model: str | None = None) -> dict:
    message = {"role": ROLES.get(role, "user"), "content": text}
    if role not in ROLES:
        message["metadata"] = {"role": role}  # as the API named it
    if message["role"] == "assistant":
        message["source"] = "generate"
        if model:
            message["model"] = model
        if tool_calls:
            message["tool_calls"] = [_tool_call(call) for call in tool_calls]
    return message


def _tool_call(call: transcript.ToolCall) -> dict:
    out = {"id": "", "function": call.name, "type": "function"}  # numbered by _link_tools
    try:
        arguments = json.loads(call.arguments) if call.arguments else {}
    except ValueError:
        arguments = None
    if isinstance(arguments, dict):
        out["arguments"] = arguments
    else:
        out["arguments"] = {}
        out["parse_error"] = f"arguments are not a JSON object: {call.arguments[:200]}"
    return out


def _conversation(calls: list[tuple[dict, transcript.Exchange]]) -> tuple[list[dict], tuple]:
    """One conversation from the calls: each call's messages not already asked before it
    (an agent's every request repeats its history), then its answer; and (the last call
    answered, its answer's message), or () when none was."""
    out, seen, last = [], 0, ()
    for call, exchange in calls:
        new = exchange.asked[seen:] if len(exchange.asked) >= seen else exchange.asked
        seen = len(exchange.asked) + 1  # the answer is the next request's last-but-new turn
        out += [_message(m.role, m.text, m.tool_calls) for m in new]
        if exchange.answer is not None:
            answer = exchange.answer
            out.append(_message("assistant", answer.text, answer.tool_calls, _served(call)))
            last = (call, out[-1])
    return _link_tools(out), last


def _link_tools(messages: list[dict]) -> list[dict]:
    """Number the conversation's tool calls (``call-1``, ...) and give each tool message the
    oldest call not answered yet: the transcript keeps no call ids."""
    pending, count = [], 0
    for message in messages:
        for call in message.get("tool_calls") or []:
            count += 1
            call["id"] = f"call-{count}"
            pending.append(call)
        if message["role"] == "tool" and pending:
            call = pending.pop(0)
            message["tool_call_id"], message["function"] = call["id"], call["function"]
    return messages


def _served(call: dict) -> str | None:
    return call.get("served_model") or call.get("requested_model")


def _output(last: tuple, model: str) -> dict:
    """The last answer the gateway kept, else an empty output of the attempt's model."""
    if not last:
        return {"model": model, "choices": [], "completion": ""}
    call, message = last
    stop = "tool_calls" if message.get("tool_calls") else "stop"
    output = {
        "model": _served(call) or model,
        "choices": [{"message": message, "stop_reason": stop}],
        "completion": message["content"],
    }
    if isinstance(call.get("usage"), dict):
        output["usage"] = model_usage(call["usage"], call.get("cost"))
    return output


def model_usage(usage: dict, cost: dict | None) -> dict:
    """Inspect's ModelUsage of a gateway usage (input excludes cached, as both count it)."""
    counts = {name: usage.get(name) if type(usage.get(name)) is int else 0 for name in TOKEN_FIELDS}
    out = {
        "input_tokens": counts["input_tokens"],
        "output_tokens": counts["output_tokens"],
        "total_tokens": sum(counts.values()),
        "input_tokens_cache_read": counts["cached_input_tokens"],
        "input_tokens_cache_write": counts["cache_write_input_tokens"],
    }
    cost = cost or {}
    if cost.get("currency", "USD") == "USD" and cost.get("completeness") in (
        "complete",
        "genuine_zero",
    ):
        out["total_cost"] = cost["micros"] / 1_000_000
    return out


def _usage(meter: dict | None, model: str) -> dict:
    """Per served model (named ``provider/served``, as the terminal's observed identity is),
    the tokens and cost the gateway metered."""
    provider = model.split("/", 1)[0]
    out = {}
    for served, entry in sorted(((meter or {}).get("models") or {}).items()):
        if isinstance(entry, dict) and isinstance(entry.get("usage"), dict):
            out[f"{provider}/{served}"] = model_usage(entry["usage"], entry.get("cost"))
    return out


def _fraction(rate: dict | None) -> float | None:
    if not isinstance(rate, dict) or not rate.get("denominator"):
        return None
    return rate["numerator"] / rate["denominator"]


def _metrics(summary: dict, group: str | None = None) -> dict:
    """A report summary's rates as Inspect metrics (a rate with no attempt is left out)."""
    rates = {
        "accuracy": summary.get("rate"),
        "intent_to_treat": (summary.get("intent_to_treat") or {}).get("rate"),
        "invalidity": (summary.get("invalidity") or {}).get("rate"),
    }
    out = {}
    for name, rate in rates.items():
        value = _fraction(rate)
        if value is None:
            continue
        metric = {"name": name, "value": value, "params": {}, "metadata": {"rate": rate}}
        if group is not None:
            metric.update(name=group, group=name)
        out[name if group is None else f"{name}/{group}"] = metric
    return out


def _results(run: Run, samples: list[dict]) -> dict:
    document = run.document
    metrics = _metrics(document["totals"])
    if len(document["models"]) > 1:  # each model's rates, grouped by metric
        for summary in document["models"]:
            metrics.update(_metrics(summary, summary["model"]))
    scored = sum(1 for s in samples if OUTCOME in s["scores"])
    scores = [
        {
            "name": OUTCOME,
            "scorer": "yyb/outcome",
            "scored_samples": scored,
            "unscored_samples": len(samples) - scored,
            "params": {},
            "metrics": metrics,
            "metadata": {"interval": document["totals"].get("interval")},
        }
    ]
    catalog = run.plan["evaluators"]["catalog"]
    for profile in sorted(catalog):
        if profile == OUTCOME:
            continue  # a profile named so is a sample score, never a second summary
        scores.append(_profile_score(profile, catalog[profile], samples))
    return {
        "total_samples": len(samples),
        "completed_samples": sum(1 for s in samples if "error" not in s),
        "scores": scores,
    }


def _profile_score(profile: str, spec: dict, samples: list[dict]) -> dict:
    """One evaluator profile: the share of its newest verdicts that pass, over the counted
    attempts it graded with a pass, fail or safety verdict."""
    counted = [
        s["scores"][profile]
        for s in samples
        if profile in s["scores"] and not s["metadata"].get("superseded_by")
    ]
    decided = [score for score in counted if score["answer"] != "invalid"]
    passed = sum(1 for score in decided if score["answer"] == "pass")
    metrics = {}
    if decided:
        rate = {"numerator": passed, "denominator": len(decided)}
        metrics["accuracy"] = {
            "name": "accuracy",
            "value": passed / len(decided),
            "params": {},
            "metadata": {"rate": rate, "invalid": len(counted) - len(decided)},
        }
    return {
        "name": profile,
        "scorer": f"yyb/{spec.get('kind', 'evaluator')}/{spec.get('grader_id') or profile}",
        "scored_samples": len(counted),
        "unscored_samples": len(samples) - len(counted),
        "params": {},
        "metrics": metrics,
    }


def add_usage(total: dict, usage: dict) -> dict:
    """Two ModelUsage values summed (a cost only when both have one)."""
    out = dict(total)
    for name, value in usage.items():
        if name == "total_cost":
            continue
        out[name] = (out.get(name) or 0) + value
    if "total_cost" in total and "total_cost" in usage:
        out["total_cost"] = total["total_cost"] + usage["total_cost"]
    else:
        out.pop("total_cost", None)
    return out


def _stats(samples: list[dict]) -> dict:
    started = sorted(s["started_at"] for s in samples if s.get("started_at"))
    ended = sorted(s["completed_at"] for s in samples if s.get("completed_at"))
    usage: dict[str, dict] = {}
    for sample in samples:
        for model, used in sample["model_usage"].items():
            usage[model] = add_usage(usage[model], used) if model in usage else dict(used)
    return {
        "started_at": started[0] if started else "",
        "completed_at": ended[-1] if ended else "",
        "model_usage": usage,
    }


def _reductions(results: dict, samples: list[dict]) -> list[dict]:
    """Each scorer's sample scores as they stand: every sample id has one epoch (one attempt),
    so no score is reduced."""
    out = []
    for score in results["scores"]:
        name = score["name"]
        reduced = [
            {**s["scores"][name], "sample_id": s["id"]} for s in samples if name in s["scores"]
        ]
        out.append({"scorer": name, "reducer": None, "samples": reduced})
    return out


def to_json(log: dict) -> bytes:
    """The ``.json`` log file: the whole log as one JSON object."""
    return json.dumps(log, indent=2, ensure_ascii=False).encode() + b"\n"


def summary(sample: dict) -> dict:
    """A sample's entry in ``summaries.json`` (Inspect's EvalSampleSummary)."""
    keys = ("id", "epoch", "input", "target", "metadata", "scores", "model_usage", "uuid")
    keys += ("started_at", "completed_at", "total_time", "working_time")
    out = {key: sample[key] for key in keys if key in sample}
    out["completed"] = "error" not in sample
    out["message_count"] = len(sample["messages"])
    if "error" in sample:
        out["error"] = sample["error"]["message"]
    if "limit" in sample:
        out["limit"] = sample["limit"]["type"]
    return out


def to_eval(log: dict) -> bytes:
    """The ``.eval`` log file: a zip archive laid out as Inspect's recorder leaves one."""
    header = {k: v for k, v in log.items() if k not in ("samples", "reductions")}
    start = {k: log[k] for k in ("version", "eval", "plan")}
    members = [("_journal/start.json", start)]
    members += [(f"samples/{s['id']}_epoch_{s['epoch']}.json", s) for s in log["samples"]]
    members += [
        ("summaries.json", [summary(s) for s in log["samples"]]),
        ("reductions.json", log["reductions"]),
        ("header.json", header),
    ]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, value in members:
            # A fixed time: the same run exports to the same bytes.
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, _compact(value))
    return buffer.getvalue()


def _compact(value) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


FORMATS = {"json": to_json, "eval": to_eval}
