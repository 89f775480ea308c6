"""LLM-judge evaluators: a bound prompt, rubric and evidence payload, judged through a harness.

The payload is built deterministically from retained evidence only (docs/grading.md), cut to
the byte limit with a marker, and, when the identity is blinded, scanned for anything that
names the candidate: a hit is a privacy failure, so the judge is never run on it. The judge's
answer is parsed strictly (a JSON object, or exactly one ``VERDICT: PASS|FAIL`` line); anything
else, a missing or mismatched judge identity, a timeout or a harness failure make the
evaluation invalid. Judge cost is kept apart from candidate cost.
"""

from __future__ import annotations

import json
import os
import re

from yyb.errors import UnsafeListing, UsageError
from yyb.evidence import cost
from yyb.grading.invocation import Invocation
from yyb.grading.outcome import Outcome
from yyb.harness import adapters, envelope, limits, manifest, sandbox, scratch, worktree
from yyb.harness.environment import Folders, build, redact
from yyb.harness.pinned import pinned_bytes, verified_copy
from yyb.store.objects import codec

DEFAULT_LIMIT = 64 * 1024
DEFAULT_TIMEOUT_MS = 10 * 60 * 1000
_VERDICT_LINE = re.compile(r"^VERDICT: (PASS|FAIL)$", re.M)


def truncate(payload: bytes, limit: int) -> bytes:
    """Cut ``payload`` to ``limit`` bytes, the last of them a marker saying how much was cut."""
    if len(payload) <= limit:
        return payload
    marker = f"\n[truncated: {{kept}} of {len(payload)} bytes shown]\n"
    room = max(0, limit - len(marker.format(kept=limit).encode()))
    return payload[:room] + marker.format(kept=room).encode()


def identity_tokens(identities: list[str]) -> list[str]:
    """Strings that would identify the candidate: whole ids and their provider/model parts."""
    tokens = set()
    for ident in identities:
        if not ident:
            continue
        ident = ident.lower()
        tokens.add(ident)
        for part in ident.replace(":", "/").split("/"):
            if len(part) >= 3:
                tokens.add(part)
    return sorted(tokens, key=lambda t: (-len(t), t))


def privacy_hit(payload: bytes, identities: list[str]) -> str | None:
    text = payload.decode("utf-8", "replace").lower()
    for token in identity_tokens(identities):
        if token in text:
            return token
    return None


def build_payload(
    store, spec: dict, truth: dict, prompt: bytes, references: list[bytes] = ()
) -> bytes:
    """The judged payload: prompt, rubric, then the selected evidence, in a fixed order, and
    in reference mode the reference material (``references``: the verified assets' bytes)."""
    parts = [*header_parts(spec, prompt), *evidence_parts(store, spec, truth)]
    if spec.get("mode") == "reference":
        for material in references:
            parts += [b"\n# Reference\n", material]
    return b"".join(parts)


def pins(spec: dict) -> tuple[list[bytes], list[dict], str | None]:
    """(the reference material's bytes, each asset's path and sha256, None), every pinned file
    of the profile (its assets, its program) checked against its sha256; else a problem."""
    references, pinned = [], []
    for asset in spec.get("assets", []):
        data, problem = pinned_bytes(asset["path"], asset["sha256"])
        if problem is not None:
            return [], [], f"the judge's reference material: {problem}"
        references.append(data)
        pinned.append({"path": asset["path"], "sha256": asset["sha256"]})
    if spec.get("executable"):
        _, problem = pinned_bytes(spec["executable"], spec["sha256"])
        if problem is not None:
            return [], [], f"the judge's pinned executable: {problem}"
    return references, pinned, None


def header_parts(spec: dict, prompt: bytes) -> list[bytes]:
    return [
        b"# Instructions\n",
        spec["prompt"].encode(),
        b"\n# Task\n",
        prompt,
        b"\n# Rubric\n",
        spec["rubric"].encode(),
        b"\n",
    ]


def evidence_parts(store, spec: dict, truth: dict, label: str = "Candidate") -> list[bytes]:
    """One candidate's selected evidence: its patch, its added and changed files, its output
    (``label`` names the candidate in the output headings)."""
    parts = []
    selected = spec.get("evidence", ["patch"])
    if "patch" in selected and truth.get("patch"):
        parts += [b"\n# Patch\n", store.objects.get(truth["patch"]).body]
    if "final_files" in selected and truth.get("manifest"):
        post = store.objects.get_record(truth["manifest"])
        # The listing is the candidate's: proved safe before any of it is read.
        entries = manifest.entries_at(store, truth["listing"])
        for path in post["added"] + post["changed"]:
            if path not in entries:
                raise UnsafeListing(path, "the manifest names a file the listing does not hold")
            blob = store.objects.get(entries[path][1]).body
            parts += [f"\n# File {path}\n".encode(), blob]
    if "outputs" in selected:
        for name in ("stdout", "stderr"):
            if truth.get(name):
                parts += [f"\n# {label} {name}\n".encode(), store.objects.get(truth[name]).body]
    return parts


def parse_answer(text: bytes, parsing: str, pairwise: bool = False) -> tuple[str | None, str]:
    """(``pass`` | ``fail`` | None when unparseable, reason); for a pairwise judge
    (``{"winner": "A" | "B" | "tie"}``, strict JSON only) ``A``, ``B`` or ``tie``."""
    decoded = text.decode("utf-8", "replace")
    if pairwise:
        try:
            value = codec.loads_strict(decoded)
        except ValueError as exc:
            return None, f"the judge's answer is not strict JSON ({exc})"
        if not isinstance(value, dict) or value.get("winner") not in ("A", "B", "tie"):
            return None, 'the judge\'s answer lacks "winner": "A" | "B" | "tie"'
        reason = value.get("reason", "")
        return value["winner"], reason if isinstance(reason, str) else ""
    if parsing == "verdict_line":
        found = _VERDICT_LINE.findall(decoded)
        if len(found) != 1:
            return None, f"expected exactly one 'VERDICT: PASS|FAIL' line, found {len(found)}"
        return found[0].lower(), "verdict line"
    try:
        value = codec.loads_strict(decoded)
    except ValueError as exc:
        return None, f"the judge's answer is not strict JSON ({exc})"
    if not isinstance(value, dict) or value.get("verdict") not in ("pass", "fail"):
        return None, 'the judge\'s answer lacks "verdict": "pass" | "fail"'
    reason = value.get("reason", "")
    return value["verdict"], reason if isinstance(reason, str) else ""


def aggregate(verdicts: list[str], rule: str) -> str:
    if rule == "all":
        return "pass" if all(v == "pass" for v in verdicts) else "fail"
    if rule == "any":
        return "pass" if any(v == "pass" for v in verdicts) else "fail"
    passes = verdicts.count("pass")
    return "pass" if passes * 2 > len(verdicts) else "fail"


def run(store, call: Invocation, truth: dict, prompt: bytes, identities: list[str]) -> Outcome:
    """Judge one attempt: build and check the payload, run the judge, parse and aggregate.

    The judge (``call.spec`` through ``call.harness``) sees the tool policy's read-only
    folders (where judge programs live), may use the network (it reaches its provider), and
    gets its harness's secrets by name; its answers are redacted of their values.
    """
    spec = call.spec
    references, pinned, problem = pins(spec)
    if problem is not None:
        return Outcome.invalid(problem)
    try:
        payload = build_payload(store, spec, truth, prompt, references)
    except UnsafeListing as exc:
        return Outcome.invalid(f"the final workspace cannot be shown to the judge: {exc}")
    blinded = spec.get("identity", "blinded") == "blinded"
    if not blinded:
        payload = (
            f"# Candidate\n{identities[1] if len(identities) > 1 else ''}\n".encode() + payload
        )
    payload = truncate(payload, spec.get("byte_limit", DEFAULT_LIMIT))
    outcome = Outcome(input_bytes=payload)
    if blinded:
        hit = privacy_hit(payload, identities)
        if hit is not None:
            return outcome.with_verdict(
                "invalid",
                f"privacy failure: the blinded payload "
                f"names the candidate ({hit!r}); the judge was not run",
            )
    payloads = [payload] * spec.get("repetitions", 1)
    answers, problem = repeat(outcome, call, payloads)
    if problem is not None:
        return outcome.with_verdict("invalid", problem)
    verdicts = [a["verdict"] for a in answers]
    outcome.details = {
        "verdicts": verdicts,
        "aggregation": spec.get("aggregation", "majority"),
        "mode": spec.get("mode", "single"),
        "references": pinned,
        "identities": [a["identity"] for a in answers],
    }
    verdict = aggregate(verdicts, spec.get("aggregation", "majority"))
    return outcome.with_verdict(verdict, f"judge verdicts {verdicts}")


def repeat(
    outcome: Outcome, call: Invocation, payloads: list[bytes]
) -> tuple[list[dict], str | None]:
    """Run the judge once per payload, in order, keeping every answer on ``outcome`` (its
    output, wall time and summed cost); stop at the first that has a problem. Returns (the
    answers, that problem or None)."""
    answers, costs = [], []
    problem = None
    for payload in payloads:
        answer = _judge_once(
            call.spec,
            call.harness or {},
            payload,
            call.protected,
            call.cancel,
            list(call.read_only),
            dict(call.secrets),
            call.gateway,
        )
        answers.append({k: v for k, v in answer.items() if k not in ("cost", "gateway")})
        outcome.wall_ms += answer["wall_ms"]
        costs.append(answer["cost"])
        if answer.get("gateway"):
            outcome.gateway.append(answer["gateway"])
        if answer["problem"]:
            problem = answer["problem"]
            break
    outcome.output_bytes = json.dumps(answers, sort_keys=True).encode()
    outcome.judge_cost = cost.sum_runs(costs)
    return answers, problem


def _unanswered(spec: dict) -> dict:
    """A judge run's answer before anything is known of it."""
    return {
        "stdout": "",
        "stderr": "",
        "exit_code": None,
        "wall_ms": 0,
        "verdict": None,
        "reason": "",
        "problem": None,
        "cost": {"completeness": "unavailable", "currency": "USD", "micros": None},
        # requested is the profile's model, resolved the same exact id (a judge's model is
        # never a selector), observed what its envelope reported.
        "identity": {
            "requested": spec["model"],
            "resolved": spec["model"],
            "observed": None,
            "session_id": None,
        },
    }


def _control_files(spec: dict, folders: Folders) -> tuple[dict[str, str], str | None]:
    """Write the judge's settings and copy its pinned executable (when it has one) into the
    control folder; returns (the placeholders they fill, why the executable could not be
    copied or None)."""
    extra = {"settings_file": os.path.join(folders.control, "settings.json")}
    with open(extra["settings_file"], "w") as handle:
        json.dump(spec.get("settings", {}), handle, sort_keys=True)
    if spec.get("executable"):
        extra["judge"] = os.path.join(folders.control, "judge")
        problem = verified_copy(spec["executable"], spec["sha256"], extra["judge"])
        if problem is not None:
            return extra, f"the judge's pinned executable: {problem}"
    return extra, None


def _judge_once(
    spec: dict,
    harness: dict,
    payload: bytes,
    protected: list[str],
    cancel,
    read_only: list[str],
    secrets: dict[str, str],
    gateway=None,
) -> dict:
    """One judge run on ``payload``: its answer (output, identity, cost, verdict, problem);
    through ``gateway`` (grading.invocation.JudgeAccess) when given, whose meter then stands
    for its cost (``answer["gateway"]``: the meter's oid)."""
    root = scratch.folder("judge")
    answer = _unanswered(spec)
    opened = None
    try:
        folders = Folders(root)
        folders.create()
        os.makedirs(folders.workspace)
        extra, problem = _control_files(spec, folders)
        if problem is not None:
            answer["problem"] = problem
            return answer
        channel = envelope.channel()
        try:
            places = adapters.Places(folders.workspace, folders.control, channel.path)
            argv = adapters.invocation(harness, spec["model"], places, payload, extra=extra)
            tools = sandbox.tool_paths(read_only, protected)
        except UsageError as exc:
            channel.collect()
            answer["problem"] = f"the judge harness cannot start: {exc}"
            return answer
        env, _ = build(folders, read_only, sorted(secrets), secrets, harness.get("env"))
        env[envelope.FD_ENV] = str(channel.fd)
        env["YYB_JUDGE_SETTINGS_FILE"] = extra["settings_file"]
        if gateway is not None:  # last: the gateway's URL and token stand over any other
            opened = gateway.open(spec["model"])
            env.update(opened.variables)
            secrets = {**secrets, **opened.secrets}
        box = sandbox.Sandbox(
            writable=[folders.workspace, *folders.private()],
            hidden=protected,
            read_only=tools,
            network=opened is None,
            cwd=folders.workspace,
            limits=limits.resolve(None),
            gateway=opened.port if opened is not None else None,
        )
        timeout_ms = spec.get("timeout_ms", DEFAULT_TIMEOUT_MS)
        try:
            ran, _ = box.run(argv, env, timeout_ms, cancel, root, pass_fds=(channel.fd,))
        finally:
            written = channel.collect()
            metered, opened = (gateway.close(opened) if opened is not None else None), None
        answer = _answered(answer, spec, ran, written, secrets)
        if metered is not None:  # the gateway's stands, whatever the envelope said
            answer["cost"], answer["gateway"] = metered.cost, metered.meter
        return answer
    finally:
        if opened is not None:  # the sandbox never started: retire its token all the same
            gateway.close(opened)
        worktree.remove(root)  # however deep the code it ran made it


def _answered(answer: dict, spec: dict, ran, written: bytes | None, secrets: dict) -> dict:
    """``answer`` filled from the supervised judge run ``ran`` and the envelope it
    ``written``: its problem when the run, its identity or its output is not usable."""
    stdout = redact(ran.stdout.data, secrets)
    answer.update(
        stdout=stdout.decode("utf-8", "replace"),
        stderr=redact(ran.stderr.data, secrets).decode("utf-8", "replace")[-4096:],
        exit_code=ran.exit_code,
        wall_ms=ran.wall_ms,
    )
    if ran.cancelled or ran.timed_out or not ran.cleanup_confirmed:
        answer["problem"] = "the judge timed out or was interrupted"
        return answer
    value, problem = envelope.read(written, ran.started_ms, ran.ended_ms)
    if value is None:
        answer["problem"] = f"judge identity or session missing: {problem}"
        return answer
    answer["identity"].update(observed=envelope.observed(value), session_id=value.get("session_id"))
    if not value.get("session_id"):
        answer["problem"] = "judge identity or session missing: the envelope names no session"
        return answer
    if envelope.observed(value) != spec["model"].lower():
        answer["problem"] = (
            f"the judge envelope observed {envelope.observed(value)}, not {spec['model']}"
        )
        return answer
    answer["cost"] = dict(value["cost"])  # an envelope refused above claims no cost
    if ran.exit_code != 0 or value["status"] != "succeeded":
        answer["problem"] = f"the judge harness failed (exit {ran.exit_code})"
        return answer
    verdict, reason = parse_answer(
        stdout, spec.get("parsing", "strict_json"), spec.get("mode") == "pairwise"
    )
    if verdict is None:
        answer["problem"] = f"malformed judge output: {reason}"
        return answer
    answer.update(verdict=verdict, reason=reason)
    return answer
