"""`yyb investigate`: one bounded question about one attempt, answered from retained evidence.

Nothing here dispatches, grades or writes: every answer is read from the attempt's refs (and
their update logs), its records and blobs. Each answer is text; ``bound`` cuts it to a byte
limit with a marker that says how much was left out.
"""

from __future__ import annotations

import json

from yyb.errors import InvalidArgument
from yyb.evidence import names
from yyb.evidence.attempt import AttemptHandle, Held
from yyb.evidence.kinds.grading import Evaluation, EvaluationResult
from yyb.evidence.kinds.plan import ExperimentPlan
from yyb.evidence.record import ABSENT, kind_of
from yyb.evidence.terminal import replay
from yyb.evidence.verdict import conclude

SHOWS = ("timeline", "terminal", "grader", "patch", "outputs")
LEAVES = ("intent", "execution", "terminal", "evidence")


def resolve_attempt(plan: dict, name: str, records: dict | None = None) -> str:
    """The attempt oid ``name`` means: a full oid, an unambiguous oid prefix, or an ordinal.

    Raises:
        UsageError: nothing, or more than one attempt, matches.
    """
    attempts = plan["links"]["attempts"]
    if name in attempts:
        return name
    if name.isdigit() and len(name) < 12:
        ordinal = int(name)
        if ordinal < len(attempts):
            return attempts[ordinal]  # attempts are linked in ordinal order
        raise InvalidArgument(
            "attempt", f"{name}: the plan has ordinals 0..{len(attempts) - 1}", name
        )
    matches = [a for a in attempts if a.startswith(name.lower())]
    if len(matches) == 1 and len(name) >= 4:
        return matches[0]
    if len(matches) > 1:
        raise InvalidArgument(
            "attempt", f"{name}: ambiguous, matches {len(matches)} attempts", name
        )
    raise InvalidArgument(
        "attempt", f"{name}: no attempt of the plan has this oid, prefix or ordinal", name
    )


def bound(data: bytes, max_bytes: int) -> bytes:
    """``data`` cut to at most ``max_bytes`` bytes, the cut marked with what was left out."""
    if len(data) <= max_bytes:
        return data
    marker = f"\n... [truncated: {len(data)} bytes, showing the first {{}}]\n"
    keep = max(0, max_bytes - len(marker.format(max_bytes).encode()))
    return data[:keep] + marker.format(keep).encode()


def _time(ms: int | None) -> str:
    if ms is None:
        return "-"
    import datetime

    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _refs(store, plan_oid: str, attempt_oid: str) -> list[str]:
    return store.refs.names(under=names.attempt_folder(plan_oid, attempt_oid))


def timeline(store, handle: AttemptHandle) -> str:
    """Every update of the attempt's refs in time order, plus the measured candidate run."""
    plan_oid, attempt_oid = handle.plan_oid, handle.oid
    events = []
    for name in _refs(store, plan_oid, attempt_oid):
        leaf = name.rsplit(f"{attempt_oid}/", 1)[1]
        for oid, update in store.refs.log(name):
            new = update["new"]
            kind = "-"
            if new is not None:
                kind = kind_of(store.objects.get_record(new)) or "-"
            events.append((update["time_ms"], leaf, new, kind, update["reason"], oid))
    if handle.terminal is not None:
        terminal = handle.terminal.record
        if "execution" in terminal["links"]:
            run = terminal["runtime"]
            events.append((run["started_ms"], "candidate", None, "-", "candidate started", None))
            events.append(
                (run["ended_ms"], "candidate", None, "-", f"ended ({run['wall_ms']} ms)", None)
            )
    events.sort(key=lambda e: (e[0], e[1]))
    lines = [f"attempt {attempt_oid} of plan {plan_oid}: {len(events)} event(s)"]
    for ms, leaf, new, kind, reason, update in events:
        what = f"{new} {kind}" if new else "-"
        via = f" (ref update {update[:12]})" if update else ""
        lines.append(f"{_time(ms)}  {leaf:<22} {reason}: {what}{via}")
    if not events:
        lines.append("never dispatched: no intent, no ref update")
    return "\n".join(lines) + "\n"


def _linked(store, handle: AttemptHandle, oid: str) -> dict:
    """The record ``oid`` a terminal links, from the handle when it holds that one."""
    held = [h for h in (handle.execution, *_first_generations(handle)) if h is not None]
    for found in held:
        if found.oid == oid:
            return found.record
    return store.objects.get_record(oid)


def _first_generations(handle: AttemptHandle) -> list[Held]:
    return [chain[0] for chain in handle.chains.values() if chain]


def terminal_answer(store, handle: AttemptHandle) -> str:
    """Why the attempt's terminal class is what it is: class, reason, execution facts."""
    from yyb.evidence.terminal import gradeable

    if handle.terminal is None:
        why = "dispatched but never closed" if handle.intent else "never dispatched"
        return f"attempt {handle.oid}: no terminal ({why}; 'yyb run' closes it)\n"
    oid, terminal = handle.terminal
    lines = [
        f"terminal {oid}",
        f"class: {terminal['class']}",
        f"reason: {terminal['reason']}",
        f"exit: {json.dumps(terminal['exit'], sort_keys=True)}",
        f"identity: {json.dumps(terminal['identity'], sort_keys=True)}",
        f"runtime: {json.dumps(terminal['runtime'], sort_keys=True)}",
    ]
    execution_oid = terminal["links"].get("execution")
    if execution_oid:
        execution = _linked(store, handle, execution_oid)
        lines.append(f"execution {execution_oid} facts:")
        lines += [f"  {k}: {json.dumps(v)}" for k, v in sorted(execution["facts"].items())]
    else:
        lines.append("no execution record: the attempt closed before its candidate ran")
    not_gradeable = gradeable(terminal, handle.attempt["model"])
    lines.append("gradeable: yes" if not_gradeable is None else f"gradeable: no ({not_gradeable})")
    cls, reason = _replay(store, handle, execution_oid)
    lines.append(
        f"terminal table row (docs/attempts.md, replayed from the retained facts): {cls}: {reason}"
    )
    agrees = cls == terminal["class"]
    lines.append("agrees with the stored terminal: " + ("yes" if agrees else "NO"))
    return "\n".join(lines) + "\n"


def _replay(store, handle: AttemptHandle, execution_oid: str | None) -> tuple[str, str]:
    """The first row of the terminal table that applies to the retained facts."""
    terminal = handle.terminal.record
    if execution_oid is None:
        # Closed before the candidate ran: the stored reason is the only retained fact.
        return terminal["class"], terminal["reason"]
    facts = _linked(store, handle, execution_oid)["facts"]
    linked = terminal["links"].get("evaluations", [])
    return replay(facts, [_linked(store, handle, oid) for oid in linked])


def _generation_lines(store, profile: str, oid: str, receipt: Evaluation, each: int) -> list[str]:
    """One evaluation generation: its verdict, its result, its log and output tails."""
    ev, links = receipt.evaluator, receipt.links
    lines = [
        f"{profile} generation {receipt.generation}: {receipt.verdict} "
        f"(evaluator {ev.id}@{ev.version}, {receipt.wall_ms} ms) receipt {oid}"
    ]
    if links.result:
        result = EvaluationResult.read(store.objects, links.result)
        lines.append(f"  reason: {result.reason}")
        ended = f"  exit status: {result.exit_code}"
        if result.signal is not ABSENT:
            ended += f" (killed by signal {result.signal})"
        lines.append(ended)
        lines += _checks(result.details.get("checks") or [])
    if receipt.problem:
        lines.append(f"  invalid because: {receipt.problem}")
    if links.log:
        tail = store.objects.get(links.log).body[-each:]
        lines.append(f"  log {links.log} (last {len(tail)} bytes):")
        lines += ["    " + line for line in tail.decode(errors="replace").splitlines()]
    if links.output:
        body = bound(store.objects.get(links.output).body, each)
        lines.append(f"  output {links.output}:")
        lines += ["    " + line for line in body.decode(errors="replace").splitlines()]
    else:
        lines.append("  no grader output retained")
    return lines


def grader_answer(store, handle: AttemptHandle, each: int) -> str:
    """Each evaluation generation's verdict and its grader output (``each`` bytes at most)."""
    lines = []
    histories = handle.histories()
    for profile in sorted(handle.plan["evaluators"]["catalog"]):
        for oid, value in handle.generations(profile):
            receipt = Evaluation.from_stored(value)  # the chain's history proved its kind
            lines += _generation_lines(store, profile, oid, receipt, each)
    if not histories:
        return f"attempt {handle.oid}: no evaluation retained\n"
    verdict, reason = conclude(histories)
    lines.append(f"current verdict: {verdict} ({reason})")
    return "\n".join(lines) + "\n"


def _checks(checks: list) -> list[str]:
    """One line per check of an evaluation result (a ``tests`` evaluator's: one per listed
    test, with the list it is on), failures with their detail."""
    if not checks:
        return []
    passed = sum(1 for check in checks if check.get("passed"))
    lines = [f"  checks: {passed} of {len(checks)} passed"]
    for check in checks:
        mark = "pass" if check.get("passed") else "FAIL"
        where = f" ({check['list']})" if check.get("list") else ""
        detail = "" if check.get("passed") else f": {check.get('detail', '')}"
        lines.append(f"    {mark} {check.get('name')}{where}{detail}")
    return lines


def _blob(store, handle: AttemptHandle, role: str) -> tuple[str, bytes] | None:
    if handle.terminal is None or role not in handle.terminal.record["links"]:
        return None
    oid = handle.terminal.record["links"][role]
    return oid, store.objects.get(oid).body


def patch_answer(store, handle: AttemptHandle) -> bytes:
    """The candidate's retained patch, as it was stored."""
    found = _blob(store, handle, "patch")
    if found is None:
        return f"attempt {handle.oid}: no patch retained\n".encode()
    return found[1]


def outputs_answer(store, handle: AttemptHandle, each: int) -> bytes:
    """The candidate's retained stdout and stderr, ``each`` bytes of each at most."""
    parts = []
    for role in ("stdout", "stderr"):
        found = _blob(store, handle, role)
        if found is None:
            parts.append(f"== {role}: not retained\n".encode())
            continue
        oid, body = found
        parts.append(f"== {role} {oid} ({len(body)} bytes retained)\n".encode())
        parts.append(bound(body, each))
        if body and not body.endswith(b"\n"):
            parts.append(b"\n")
    return b"".join(parts)


def answer(store, handle: AttemptHandle, show: str, max_bytes: int) -> bytes:
    """The bounded answer to ``show`` about the handle's attempt."""
    if show == "timeline":
        data = timeline(store, handle).encode()
    elif show == "terminal":
        data = terminal_answer(store, handle).encode()
    elif show == "grader":
        data = grader_answer(store, handle, max(64, max_bytes // 2)).encode()
    elif show == "patch":
        data = patch_answer(store, handle)
    elif show == "outputs":
        data = outputs_answer(store, handle, max(64, max_bytes // 2))
    else:
        raise InvalidArgument("show", f"{show}: choose one of {', '.join(SHOWS)}", show)
    return bound(data, max_bytes)


def investigate(store, plan_oid: str, attempt_name: str, show: str, max_bytes: int) -> bytes:
    """The answer to ``show`` about the plan's attempt named ``attempt_name`` (its oid, an
    unambiguous prefix of it, or its ordinal), read from retained evidence only.

    Raises:
        InvalidArgument: no such plan in the store, not an experiment plan, or no such attempt.
    """
    if not store.objects.contains(plan_oid):
        raise InvalidArgument("plan", f"{plan_oid} is not in the store {store.path}", plan_oid)
    plan = store.objects.get_record(plan_oid)
    if not ExperimentPlan.holds(plan):
        raise InvalidArgument("plan", f"{plan_oid} is not an experiment plan", plan_oid)
    attempt_oid = resolve_attempt(plan, attempt_name)
    handle = AttemptHandle.read(store, plan_oid, attempt_oid, plan)
    return answer(store, handle, show, max_bytes)
