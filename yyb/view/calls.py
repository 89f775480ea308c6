"""The attempt page's model calls: what the gateway metered, and each call as a conversation.

A summary (calls, outcomes, usage, cost, the ceiling), a table of the calls (API, streamed,
requested and served model, tokens, cost, time to the first byte and to the end, outcome),
and each call's new messages and answer (yyb/evidence/transcript.py), each opened on demand.
Only the messages a call adds to the one before it are shown, so a long agent loop, whose
every request repeats the whole history, reads as one conversation.
"""

from __future__ import annotations

from yyb.errors import YybError
from yyb.evidence import transcript
from yyb.view import chain, urls
from yyb.view.markup import Markup, el, facts, join, oid, pre, table, usd
from yyb.view.values import word
from yyb.view.verify import head

SHOW_BODY = 256 << 10  # bytes of a call's body read for its conversation
SHOW_MESSAGE = 8 << 10  # bytes of one message shown
SHOW_CALLS = 200  # calls shown (a longer attempt links its meter for the rest)


def meter_of(found: chain.AttemptChain) -> str | None:
    """The gateway meter the attempt's terminal links, if it links one."""
    terminal = found.role("terminal")
    meter_oid = ((terminal.value if terminal else {}).get("links") or {}).get("gateway")
    return meter_oid if isinstance(meter_oid, str) else None


def section(store, found: chain.AttemptChain) -> Markup:
    meter_oid = meter_of(found)
    if meter_oid is None:
        return el("p", "no call through the model gateway")
    try:
        meter = store.objects.get_record(meter_oid)
        calls = [store.objects.get_record(c) for c in meter["links"]["calls"][:SHOW_CALLS]]
    except (YybError, KeyError, TypeError):
        return el("p", "the gateway meter ", oid(meter_oid), " cannot be read")
    usage = meter.get("usage") or {}
    summary = facts(
        [
            ("meter", oid(meter_oid, urls.obj(meter_oid))),
            ("calls", f"{word(meter.get('calls'))} ({_outcomes(meter.get('outcomes') or {})})"),
            ("tokens", _tokens(usage)),
            ("cost", usd(meter.get("cost"))),
            ("ceiling", _ceiling(meter)),
        ]
    )
    rows = [_row(call) for call in calls]
    header = ["#", "API", "model", "tokens", "cost", "first byte", "latency", "outcome"]
    parts = [summary, table(header, rows, class_="calls")]
    if meter.get("calls", 0) > SHOW_CALLS:
        parts.append(el("p", f"showing the first {SHOW_CALLS} calls; the meter links all"))
    parts += _conversation(store, calls)
    return join(parts)


def _outcomes(outcomes: dict) -> str:
    return ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in sorted(outcomes.items()))


def _tokens(usage: dict | None) -> str:
    if not usage:
        return "-"
    line = f"{usage.get('input_tokens', 0):,} in, {usage.get('output_tokens', 0):,} out"
    if usage.get("cached_input_tokens"):
        line += f", {usage['cached_input_tokens']:,} cached"
    return line


def _ceiling(meter: dict) -> str:
    ceiling = meter.get("ceiling_micros")
    if type(ceiling) is not int:
        return "none"
    said = usd({"completeness": "complete", "micros": ceiling}).split(" ")[0]
    return said + (", reached: later calls were refused" if meter.get("ceiling_reached") else "")


def _row(call: dict) -> list:
    requested, served = call.get("requested_model") or "-", call.get("served_model") or "-"
    model = requested if requested == served else f"{requested} → {served}"
    api = f"{word(call.get('api'))}{' (streamed)' if call.get('stream') else ''}"
    first = call.get("first_byte_ms")
    return [
        word(call.get("index")),
        api,
        model,
        _tokens(call.get("usage")),
        usd(call.get("cost")),
        "-" if first is None else f"{first} ms",
        f"{word(call.get('latency_ms'))} ms",
        f"{word(call.get('outcome')).replace('_', ' ')} ({word(call.get('status'))})",
    ]


def _conversation(store, calls: list[dict]) -> list[Markup]:
    out, seen = [], 0
    for call in calls:
        links = call.get("links") or {}
        asked = head(store, links.get("request", ""), SHOW_BODY)
        answered = head(store, links.get("response", ""), SHOW_BODY)
        exchange = transcript.read(
            str(call.get("api")),
            asked[0] if asked else b"",
            answered[0] if answered else b"",
            bool(call.get("stream")),
        )
        new = exchange.asked[seen:] if len(exchange.asked) >= seen else exchange.asked
        seen = len(exchange.asked) + 1  # the answer is the next request's last-but-new turn
        turns = [_message(m) for m in new]
        if exchange.answer is not None:
            turns.append(_message(exchange.answer))
        if not exchange.readable:
            turns.append(el("p", "(part of this call's bodies could not be read as messages)"))
        title = f"call {word(call.get('index'))}: {len(new)} new message(s), then the answer"
        out.append(el("details", el("summary", title), *turns, class_="call"))
    return out


def _message(message: transcript.Message) -> Markup:
    parts = [el("p", el("b", message.role))]
    if message.text:
        parts.append(pre(message.text, SHOW_MESSAGE))
    for call in message.tool_calls:
        parts.append(el("p", "tool call ", el("code", call.name), " ", el("code", call.arguments)))
    return el("div", *parts, class_="message")
