"""The envelope helper: building (rounding, completeness, bounds), checking by hand against
the real schema, the channel duties, and its command line (``python3 envelope.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from yyb.agents import envelope
from yyb.agents.envelope import EnvelopeError, build
from yyb.store import schema

HELPER = envelope.__file__
SCHEMA = envelope.SCHEMA_VERSION


@pytest.mark.parametrize(
    "amount, micros",
    [
        ("0.0000015", 2),  # half up, not to even
        ("0.0000025", 3),
        ("0.0000014999", 1),
        (0.1234565, 123457),  # the float's shortest repr, not its binary value (...4564999)
        (1.15, 1150000),
        ("12", 12000000),
        (0, 0),
        (Decimal("0.0000005"), 1),
    ],
)
def test_usd_converts_to_micros_half_up_exactly(amount, micros):
    assert envelope.usd_to_micros(amount) == micros


@pytest.mark.parametrize("amount", [-0.01, "abc", "nan", "inf", True, None, [1]])
def test_usd_that_is_not_a_finite_amount_is_refused(amount):
    with pytest.raises(EnvelopeError):
        envelope.usd_to_micros(amount)


def test_micros_print_as_plain_usd():
    assert [envelope.micros_to_usd(m) for m in (2_500_000, 10_000_000, 1, 0)] == [
        "2.5",
        "10",
        "0.000001",
        "0",
    ]


@pytest.mark.parametrize(
    "kwargs, cost",
    [
        ({}, {"completeness": "unavailable", "micros": None}),
        ({"completeness": "not_applicable"}, {"completeness": "not_applicable", "micros": None}),
        ({"cost_usd": "0.0000015"}, {"completeness": "complete", "micros": 2}),
        ({"cost_micros": 7, "completeness": "partial"}, {"completeness": "partial", "micros": 7}),
        # a 0 is a genuine zero only when the caller says it is a complete figure
        ({"cost_usd": 0}, {"completeness": "unavailable", "micros": None}),
        (
            {"cost_usd": 0.0, "completeness": "complete"},
            {"completeness": "genuine_zero", "micros": 0},
        ),
        (
            {"cost_micros": 0, "completeness": "genuine_zero"},
            {"completeness": "genuine_zero", "micros": 0},
        ),
        ({"cost_micros": 0, "completeness": "partial"}, {"completeness": "partial", "micros": 0}),
    ],
)
def test_cost_and_its_completeness(kwargs, cost):
    built = build("anthropic", "claude-sonnet-4-5", "succeeded", **kwargs)
    assert built["cost"] == {**cost, "currency": "USD"}
    assert schema.problems(built, SCHEMA) == []


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"cost_usd": "1", "cost_micros": 1}, "cost"),
        ({"completeness": "complete"}, "cost.completeness"),  # complete with no figure
        ({"cost_micros": 5, "completeness": "unavailable"}, "cost.completeness"),
        ({"cost_micros": 5, "completeness": "genuine_zero"}, "cost.completeness"),
        ({"completeness": "exact"}, "cost.completeness"),
        ({"cost_micros": -1}, "cost_micros"),
        ({"cost_micros": True}, "cost_micros"),
        ({"usage": {"input_tokens": -1}}, "usage.input_tokens"),
        ({"usage": {"input_tokens": True}}, "usage.input_tokens"),
        ({"usage": {"input_tokens": 1.5}}, "usage.input_tokens"),
        ({"usage": [1]}, "usage"),
        ({"session_id": 5}, "session_id"),
    ],
)
def test_fields_that_cannot_be_valid_are_refused(kwargs, field):
    with pytest.raises(EnvelopeError) as caught:
        build("anthropic", "m", "succeeded", **kwargs)
    assert caught.value.field == field


@pytest.mark.parametrize(
    "args, field",
    [
        (("", "m", "succeeded"), "provider"),
        (("p", "", "succeeded"), "model"),
        (("p", "m" * 257, "succeeded"), "model"),
        (("p", "m", "done"), "status"),
    ],
)
def test_identity_and_status_are_bounded(args, field):
    with pytest.raises(EnvelopeError) as caught:
        build(*args)
    assert caught.value.field == field


def test_usage_drops_none_and_a_long_session_id_is_cut():
    built = build("p", "m" * 256, "failed", {"a": 1, "b": None}, session_id="s" * 300)
    assert built["usage"] == {"a": 1}
    assert built["session_id"] == "s" * 256
    assert "session_id" not in build("p", "m", "failed", session_id="")
    assert schema.problems(built, SCHEMA) == []


@given(
    provider=st.text(min_size=1, max_size=256),
    model=st.text(min_size=1, max_size=256),
    status=st.sampled_from(envelope.STATUSES),
    usage=st.none() | st.dictionaries(st.text(min_size=1), st.none() | st.integers(0, 2**53)),
    micros=st.none() | st.integers(0, 10**12),
    completeness=st.none() | st.sampled_from(envelope.COMPLETENESS),
    session=st.none() | st.text(max_size=300),
)
@example("p", "m", "failed", None, 0, "complete", None)
def test_what_build_returns_the_real_schema_accepts(
    provider, model, status, usage, micros, completeness, session
):
    try:
        built = build(provider, model, status, usage, None, micros, completeness, session)
    except EnvelopeError:
        return
    assert schema.problems(built, SCHEMA) == []
    assert envelope.check(built) == []


@pytest.mark.parametrize(
    "change",
    [
        {"extra": 1},
        {"schema_version": "juno_execution_envelope.v2"},
        {"provider": ""},
        {"status": "ok"},
        {"started_ms": -1},
        {"usage": {"a": -1}},
        {"session_id": "s" * 257},
        {"cost": {"completeness": "unavailable", "currency": "USD", "micros": 0}},
        {"cost": {"completeness": "genuine_zero", "currency": "USD", "micros": 3}},
        {"cost": {"completeness": "complete", "currency": "USD", "micros": None}},
        {"cost": {"completeness": "complete", "currency": "EUR", "micros": 3}},
        {"cost": {"completeness": "complete", "micros": 3}},
    ],
)
def test_the_hand_check_refuses_what_the_schema_refuses(change):
    good = build("p", "m", "succeeded", cost_micros=3)
    bad = {**good, **change}
    assert schema.problems(bad, SCHEMA) != []
    assert envelope.check(bad) != []


def take_channel_in_a_child(variable: str | None) -> dict:
    """Run take_channel in a child given a pipe; what it saw (dumpable, descriptors)."""
    read, write = os.pipe()
    code = f"""
import ctypes, json, os, sys
sys.path.insert(0, {os.path.dirname(HELPER)!r})
import envelope
before = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)
try:
    channel = envelope.take_channel()
except envelope.ChannelError as exc:
    print(json.dumps({{"error": str(exc)}}))
    sys.exit(0)
after = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)
import fcntl
facts = {{"before": before, "after": after, "inherited_open": True,
    "cloexec": bool(fcntl.fcntl(channel.fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC),
    "variable": os.environ.get("YYB_ENVELOPE_FD")}}
try:
    os.fstat({write})
except OSError:
    facts["inherited_open"] = False
channel.write(envelope.build("p", "m", "succeeded"))
print(json.dumps(facts))
"""
    env = {k: v for k, v in os.environ.items() if k != "YYB_ENVELOPE_FD"}
    if variable is not None:
        env["YYB_ENVELOPE_FD"] = variable.format(fd=write)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, pass_fds=(write,), capture_output=True, text=True
    )
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        written = handle.read()
    facts = json.loads(done.stdout)
    facts["written"] = json.loads(written) if written else None
    return facts


def test_take_channel_makes_the_process_non_dumpable_and_keeps_the_descriptor():
    facts = take_channel_in_a_child("{fd}")
    assert (facts["before"], facts["after"]) == (1, 0)
    assert facts["cloexec"] is True
    assert facts["inherited_open"] is False  # the inherited number is closed
    assert facts["variable"] is None  # and no longer named to the tools started later
    assert facts["written"]["model"] == "m"


@pytest.mark.parametrize("variable", [None, "x", "999", "-1"])
def test_take_channel_refuses_no_or_a_bad_descriptor(variable):
    facts = take_channel_in_a_child(variable)
    assert "error" in facts and "YYB_ENVELOPE_FD" in facts["error"] or "999" in facts["error"]
    assert facts["written"] is None


def test_a_read_only_descriptor_is_not_a_channel():
    read, write = os.pipe()
    try:
        with pytest.raises(envelope.ChannelError, match="not open for writing"):
            envelope.take_channel(read)
    finally:
        os.close(read)
        os.close(write)


def test_a_channel_is_written_once():
    read, write = os.pipe()
    channel = envelope.Channel(write)
    channel.write(build("p", "m", "failed"))
    with pytest.raises(envelope.ChannelError):
        channel.write(build("p", "m", "failed"))
    with os.fdopen(read, "rb") as handle:
        assert json.loads(handle.read())["status"] == "failed"


def test_an_oversized_envelope_is_not_written():
    read, write = os.pipe()
    channel = envelope.Channel(write)
    big = build("p", "m", "failed", {f"n{i}": i for i in range(70000)})
    with pytest.raises(EnvelopeError, match="over 1 MiB"):
        channel.write(big)
    assert not channel.closed  # a refused envelope may be replaced by another
    channel.close()
    with os.fdopen(read, "rb") as handle:
        assert handle.read() == b""


def script(*args: str, fd: bool = True, cwd: str | None = None):
    """``python3 -E -s envelope.py ARGS`` with a real pipe as its channel: (exit code, what
    the channel got, stdout, stderr)."""
    read, write = os.pipe()
    env = {**os.environ, "YYB_ENVELOPE_FD": str(write)} if fd else dict(os.environ)
    done = subprocess.run(
        [sys.executable, "-E", "-s", HELPER, *args],
        env=env,
        pass_fds=(write,),
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        data = handle.read()
    return done.returncode, json.loads(data) if data else None, done.stdout, done.stderr


def test_the_script_writes_flags_to_the_channel():
    code, written, out, err = script(
        "--provider", "openai", "--model", "gpt-5-codex", "--status", "succeeded",
        "--usage", "input_tokens=10", "--usage", "output_tokens=3", "--cost-usd", "0.0000015",
        "--session-id", "t1",
    )  # fmt: skip
    assert (code, out, err) == (0, "", "")
    assert written["usage"] == {"input_tokens": 10, "output_tokens": 3}
    assert written["cost"] == {"completeness": "complete", "currency": "USD", "micros": 2}
    assert written["session_id"] == "t1"


def test_the_script_refuses_bad_input_with_one_line_and_writes_nothing():
    code, written, out, err = script("--provider", "p", "--model", "m", "--status", "maybe")
    assert (code, written, out) == (2, None, "")
    assert err.count("\n") == 1 and err.startswith("envelope.py: error:")


def test_the_script_without_a_channel_says_so():
    code, written, out, err = script(
        "--provider", "p", "--model", "m", "--status", "failed", fd=False
    )
    assert code == 2 and "YYB_ENVELOPE_FD is not set" in err
