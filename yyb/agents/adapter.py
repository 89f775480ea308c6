"""The run loop every shipped adapter shares: the invocation, the CLI's start, the envelope.

Standard library only, like ``envelope.py`` beside it in the sandbox (docs/adapters.md). An
adapter module gives :func:`serve` two functions: ``plan`` (the CLI's command line) and
``observe`` (the envelope's fields from the CLI's output).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field, replace

if __package__:
    from . import envelope
else:  # run as a script beside envelope.py in the sandbox
    import envelope

INVOCATION_VERSION = "yyb_agent_invocation.v1"


class Unparsed(Exception):
    """A CLI's output that does not say what its documented format says it must."""


@dataclass(frozen=True)
class Invocation:
    """The controller's ``invocation.json``: what to run, for which planned model."""

    kind: str
    model: str
    prompt_file: str
    workspace: str
    executable: str
    args: tuple[str, ...] = ()
    settings: dict = field(default_factory=dict)
    ceiling_micros: int | None = None
    timeout_ms: int | None = None

    @property
    def provider(self) -> str:
        """The planned provider: the model id up to its first ``/``."""
        return self.model.partition("/")[0]

    @property
    def model_name(self) -> str:
        """The planned model without its ``provider/`` prefix."""
        return self.model.partition("/")[2] or self.model

    def model_argument(self, keep_provider: bool) -> str:
        """The CLI's model argument: the setting ``model_argument`` when given, else the
        planned id with (``keep_provider``, litellm style) or without its provider."""
        chosen = self.settings.get("model_argument")
        if isinstance(chosen, str) and chosen:
            return chosen
        return self.model if keep_provider else self.model_name

    def budget_usd(self) -> str | None:
        """The spend ceiling as a USD decimal string (at least one micro-USD, since several
        CLIs read 0 as no limit), or None without one."""
        if self.ceiling_micros is None:
            return None
        return envelope.micros_to_usd(max(self.ceiling_micros, 1))


def load_invocation(path: str) -> Invocation:
    """Read and check ``invocation.json``.

    Raises:
        envelope.EnvelopeError: unreadable, or a field missing or of the wrong type.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, ValueError) as exc:
        raise envelope.EnvelopeError("invocation", f"{path}: {exc}") from None
    if not isinstance(value, dict) or value.get("schema_version") != INVOCATION_VERSION:
        raise envelope.EnvelopeError("invocation", f"{path}: not a {INVOCATION_VERSION} object")
    texts = ("kind", "model", "prompt_file", "workspace", "executable")
    for name in texts:
        if not isinstance(value.get(name), str) or not value[name]:
            raise envelope.EnvelopeError(f"invocation.{name}", "must be a non-empty string")
    args, settings = value.get("args") or [], value.get("settings") or {}
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise envelope.EnvelopeError("invocation.args", "must be a list of strings")
    if not isinstance(settings, dict):
        raise envelope.EnvelopeError("invocation.settings", "must be an object")
    for name in ("ceiling_micros", "timeout_ms"):
        if value.get(name) is not None and not envelope.is_count(value[name]):
            raise envelope.EnvelopeError(f"invocation.{name}", "must be null or an integer >= 0")
    return Invocation(
        *(value[name] for name in texts),
        args=tuple(args),
        settings=settings,
        ceiling_micros=value.get("ceiling_micros"),
        timeout_ms=value.get("timeout_ms"),
    )


@dataclass(frozen=True)
class Launch:
    """How an adapter starts its CLI: the argv (``argv[0]`` as configured, a bare name is
    looked up on PATH) and variables added to the environment."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Observation:
    """What an adapter read in its CLI's output; ``model`` None: the planned model."""

    succeeded: bool
    model: str | None = None
    usage: dict | None = None
    cost_usd: object = None
    cost_micros: int | None = None
    completeness: str | None = None
    session_id: str | None = None
    reason: str | None = None


def reported_cost(value: object, zero_is_complete: bool = False) -> tuple[object, str | None]:
    """A CLI's reported USD cost as (cost_usd, completeness) for ``envelope.build``: a number
    above 0 is ``complete``; 0 is ``genuine_zero`` only with ``zero_is_complete`` (the caller knows
    the CLI meant it as a complete figure), else no figure, as is anything not a number >= 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        return None, None
    if value == 0:
        return (0, "genuine_zero") if zero_is_complete else (None, None)
    return value, "complete"


def json_lines(data: bytes) -> list[dict]:
    """The JSON objects of a JSON Lines text, lines that are not one skipped."""
    found = []
    for line in data.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append(value)
    return found


def _locate(executable: str) -> str | None:
    if os.sep in executable:
        return executable if os.access(executable, os.X_OK) else None
    return shutil.which(executable)


def _attempt(invocation: Invocation, prompt: str, scratch: str, plan, observe) -> Observation:
    launch = plan(invocation, prompt, scratch)
    executable = _locate(launch.argv[0])
    if executable is None:
        return Observation(False, reason=f"{launch.argv[0]}: not found or not executable")
    try:
        completed = envelope.run_tool(
            [executable, *launch.argv[1:]],
            cwd=invocation.workspace,
            env={**os.environ, **launch.env},
        )
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in an argument
        reason = getattr(exc, "strerror", None) or exc
        return Observation(False, reason=f"cannot start {executable}: {reason}")
    try:
        seen = observe(invocation, completed, scratch)
    except Unparsed as exc:
        if completed.returncode != 0:
            status = f"{launch.argv[0]} exited with status {completed.returncode}"
            return Observation(False, reason=f"{status} ({exc})")
        return Observation(False, reason=f"unreadable output of {launch.argv[0]}: {exc}")
    except Exception as exc:  # any surprise in the output is a failed run, not a traceback
        return Observation(False, reason=f"reading the output failed: {type(exc).__name__}: {exc}")
    if completed.returncode != 0 and (seen.succeeded or seen.reason is None):
        reason = seen.reason or f"{launch.argv[0]} exited with status {completed.returncode}"
        return replace(seen, succeeded=False, reason=reason)
    return seen


def _write(channel: envelope.Channel, invocation: Invocation, seen: Observation) -> Observation:
    """Write what was seen; what no envelope can hold (an over-long model id, a usage map
    over 1 MiB) becomes a failed envelope of the planned model, cost unavailable."""
    try:
        channel.write(
            envelope.build(
                invocation.provider,
                seen.model or invocation.model_name,
                "succeeded" if seen.succeeded else "failed",
                seen.usage,
                seen.cost_usd,
                seen.cost_micros,
                seen.completeness,
                seen.session_id,
            )
        )
        return seen
    except envelope.EnvelopeError as exc:
        seen = Observation(False, reason=f"the CLI reported what no envelope can hold: {exc}")
    channel.write(envelope.build(invocation.provider, invocation.model_name, "failed"))
    return seen


def serve(argv: list[str], kind: str, plan, observe) -> int:
    """Run one adapter: take the channel, read ``argv[0]`` (invocation.json) and its prompt,
    start the CLI ``plan`` describes in the workspace, ``observe`` its output, write the
    envelope. A CLI that cannot start or whose output cannot be read still gets an envelope
    (failed, cost unavailable) and one stderr line.

    Args:
        argv: the adapter's arguments, the invocation file first.
        kind: the adapter's kind, for its messages.
        plan: (invocation, prompt text, scratch folder) -> Launch.
        observe: (invocation, Completed, scratch folder) -> Observation; may raise Unparsed.

    Returns:
        0 when the envelope says succeeded, 1 when failed, 2 when none could be written.
    """
    try:
        channel = envelope.take_channel()
    except envelope.ChannelError as exc:
        sys.stderr.write(f"{kind}: error: {exc}\n")
        return 2
    try:
        if not argv:
            raise envelope.EnvelopeError(None, "usage: ADAPTER invocation.json")
        invocation = load_invocation(argv[0])
        with open(invocation.prompt_file, encoding="utf-8") as handle:
            prompt = handle.read()
    except (envelope.EnvelopeError, OSError, UnicodeDecodeError) as exc:
        sys.stderr.write(f"{kind}: error: {exc}\n")
        channel.close()
        return 2
    scratch = tempfile.mkdtemp(prefix=f"yyb-{kind}-")
    try:
        seen = _attempt(invocation, prompt, scratch, plan, observe)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    seen = _write(channel, invocation, seen)
    if seen.reason:
        sys.stderr.write(f"{kind}: {' '.join(seen.reason.split())}\n")
    return 0 if seen.succeeded else 1
