"""The envelope helper: the channel duties, building and checking an envelope, running a tool.

Standard library only: this file is copied into the sandbox beside the shipped adapters
(docs/adapters.md) and imports nothing of yyb. It is also importable as ``yyb.agents.envelope``
and runs as a script, ``python3 envelope.py --provider P --model M ... [-- CMD ARGS...]``, the
same command line as ``yyb envelope``.

A harness calls :func:`take_channel` before it starts any tool (it makes the process
non-dumpable and keeps the descriptor close-on-exec), builds its envelope with :func:`build`
and writes it once with :meth:`Channel.write`. Bad input raises :class:`EnvelopeError`, a
channel that cannot be taken :class:`ChannelError`; neither writes anything.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

SCHEMA_VERSION = "juno_execution_envelope.v1"
ENV_FD = "YYB_ENVELOPE_FD"
STATUSES = ("succeeded", "failed")
COMPLETENESS = ("complete", "partial", "unavailable", "not_applicable", "genuine_zero")
NO_FIGURE = ("unavailable", "not_applicable")
MAX_TEXT = 256
MAX_BYTES = 1 << 20  # the controller refuses a larger envelope
MICROS = Decimal(1_000_000)
PR_SET_DUMPABLE = 4


class EnvelopeError(ValueError):
    """An envelope field (or a command line) that cannot make a valid envelope: ``field`` names
    it (None: the input as a whole), ``reason`` says why."""

    def __init__(self, field_name: str | None, reason: str):
        super().__init__(f"{field_name}: {reason}" if field_name else reason)
        self.field = field_name
        self.reason = reason


class ChannelError(RuntimeError):
    """The envelope channel cannot be taken: no or a bad ``YYB_ENVELOPE_FD``, or prctl refused."""


def usd_to_micros(amount: object) -> int:
    """A USD amount (a decimal string, int, float or Decimal) as integer micro-USD, rounded
    half up exactly: a float goes through its shortest repr (``str``), never binary arithmetic.

    Raises:
        EnvelopeError: not a finite number >= 0 (a bool is not a number here).
    """
    if isinstance(amount, bool) or not isinstance(amount, str | int | float | Decimal):
        raise EnvelopeError("cost_usd", f"not a number: {amount!r}")
    try:
        value = Decimal(str(amount).strip())
    except InvalidOperation:
        raise EnvelopeError("cost_usd", f"not a decimal number: {amount!r}") from None
    if not value.is_finite() or value < 0:
        raise EnvelopeError("cost_usd", f"must be a finite number >= 0, got {amount!r}")
    return int((value * MICROS).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def micros_to_usd(micros: int) -> str:
    """Integer micro-USD as a plain decimal USD string (``1500000`` -> ``"1.5"``)."""
    text = format((Decimal(micros) / MICROS).normalize(), "f")
    return text


def _cost(cost_usd: object, cost_micros: object, completeness: str | None) -> dict:
    if cost_usd is not None and cost_micros is not None:
        raise EnvelopeError("cost", "give cost_usd or cost_micros, not both")
    if completeness is not None and completeness not in COMPLETENESS:
        raise EnvelopeError("cost.completeness", f"must be one of {', '.join(COMPLETENESS)}")
    micros = usd_to_micros(cost_usd) if cost_usd is not None else cost_micros
    if micros is not None and (isinstance(micros, bool) or not isinstance(micros, int)):
        raise EnvelopeError("cost_micros", f"not an integer: {micros!r}")
    if micros is not None and micros < 0:
        raise EnvelopeError("cost_micros", f"must be >= 0, got {micros}")
    if micros is None:
        if completeness not in (None, *NO_FIGURE):
            raise EnvelopeError("cost.completeness", f"{completeness} needs a cost figure")
        return {"completeness": completeness or "unavailable", "currency": "USD", "micros": None}
    if completeness in NO_FIGURE:
        raise EnvelopeError("cost.completeness", f"{completeness} takes no cost figure")
    if micros == 0:
        # A 0 is only a genuine zero when the caller says the CLI reported it as a complete
        # figure; an unqualified 0 is no figure at all (unavailable cost is null, never 0).
        if completeness in ("complete", "genuine_zero"):
            return {"completeness": "genuine_zero", "currency": "USD", "micros": 0}
        if completeness is None:
            return {"completeness": "unavailable", "currency": "USD", "micros": None}
        return {"completeness": completeness, "currency": "USD", "micros": 0}
    if completeness == "genuine_zero":
        raise EnvelopeError("cost.completeness", f"genuine_zero with a cost of {micros} micros")
    return {"completeness": completeness or "complete", "currency": "USD", "micros": micros}


def _usage(usage: dict | None) -> dict[str, int] | None:
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise EnvelopeError("usage", "must be an object of name -> integer")
    counts: dict[str, int] = {}
    for name, value in usage.items():
        if not isinstance(name, str) or not name:
            raise EnvelopeError("usage", f"a usage name must be a non-empty string: {name!r}")
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise EnvelopeError(f"usage.{name}", f"must be an integer >= 0, got {value!r}")
        counts[name] = value
    return counts


def _text(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise EnvelopeError(name, "must be a non-empty string")
    if len(value) > MAX_TEXT:
        raise EnvelopeError(name, f"at most {MAX_TEXT} characters, got {len(value)}")
    return value


def build(
    provider: str,
    model: str,
    status: str,
    usage: dict | None = None,
    cost_usd: object = None,
    cost_micros: int | None = None,
    completeness: str | None = None,
    session_id: str | None = None,
) -> dict:
    """A valid ``juno_execution_envelope.v1`` object.

    Args:
        provider: the provider that answered (1-256 characters).
        model: the model the provider said it ran (1-256 characters).
        status: ``succeeded`` or ``failed``.
        usage: name -> integer >= 0; None values are dropped.
        cost_usd: a USD amount (decimal string, int, float), converted to micros half up.
        cost_micros: integer micro-USD (not with ``cost_usd``).
        completeness: the cost's completeness; default ``complete`` with a figure above 0,
            ``unavailable`` without one. A 0 becomes ``genuine_zero`` only with ``complete``
            or ``genuine_zero`` said; an unqualified 0 is ``unavailable``.
        session_id: the harness's session name, cut to 256 characters; empty: omitted.

    Returns:
        The envelope; its timing fields are 0 (the launcher replaces them).

    Raises:
        EnvelopeError: a field that cannot be valid.
    """
    if status not in STATUSES:
        raise EnvelopeError("status", f"must be succeeded or failed, got {status!r}")
    envelope: dict = {
        "schema_version": SCHEMA_VERSION,
        "provider": _text("provider", provider),
        "model": _text("model", model),
        "status": status,
        "cost": _cost(cost_usd, cost_micros, completeness),
        "started_ms": 0,
        "ended_ms": 0,
        "elapsed_ms": 0,
    }
    counts = _usage(usage)
    if counts is not None:
        envelope["usage"] = counts
    if session_id is not None and not isinstance(session_id, str):
        raise EnvelopeError("session_id", "must be a string")
    if session_id:
        envelope["session_id"] = session_id[:MAX_TEXT]
    found = check(envelope)
    if found:
        raise EnvelopeError(None, found[0])
    return envelope


def is_count(value: object) -> bool:
    """An integer >= 0 that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check(envelope: object) -> list[str]:
    """Every way ``envelope`` breaks the rules of its schema, as ``"$.path: reason"`` texts
    (empty: valid). The rules are those of schemas/juno_execution_envelope.v1.schema.json,
    checked by hand (no jsonschema in the sandbox)."""
    if not isinstance(envelope, dict):
        return ["$: must be an object"]
    found = []
    required = ("schema_version", "provider", "model", "status", "cost")
    required += ("started_ms", "ended_ms", "elapsed_ms")
    allowed = {*required, "session_id", "usage"}
    found += [f"$.{name}: required" for name in required if name not in envelope]
    found += [f"$.{name}: not allowed" for name in sorted(set(envelope) - allowed)]
    if envelope.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        found.append(f"$.schema_version: must be {SCHEMA_VERSION}")
    for name in ("provider", "model"):
        value = envelope.get(name, "x")
        if not isinstance(value, str) or not 1 <= len(value) <= MAX_TEXT:
            found.append(f"$.{name}: must be a string of 1-{MAX_TEXT} characters")
    if envelope.get("status", "failed") not in STATUSES:
        found.append("$.status: must be succeeded or failed")
    session = envelope.get("session_id", "")
    if not isinstance(session, str) or len(session) > MAX_TEXT:
        found.append(f"$.session_id: must be a string of at most {MAX_TEXT} characters")
    usage = envelope.get("usage", {})
    if not isinstance(usage, dict) or not all(is_count(v) for v in usage.values()):
        found.append("$.usage: must map names to integers >= 0")
    for name in ("started_ms", "ended_ms", "elapsed_ms"):
        if not is_count(envelope.get(name, 0)):
            found.append(f"$.{name}: must be an integer >= 0")
    if "cost" in envelope:
        found += _cost_problems(envelope["cost"])
    return found


def _cost_problems(cost: object) -> list[str]:
    if not isinstance(cost, dict):
        return ["$.cost: must be an object"]
    found = [
        f"$.cost.{n}: required" for n in ("completeness", "currency", "micros") if n not in cost
    ]
    found += [
        f"$.cost.{n}: not allowed"
        for n in sorted(set(cost) - {"completeness", "currency", "micros"})
    ]
    completeness, micros = cost.get("completeness"), cost.get("micros")
    if completeness not in COMPLETENESS:
        found.append(f"$.cost.completeness: must be one of {', '.join(COMPLETENESS)}")
    if cost.get("currency", "USD") != "USD":
        found.append("$.cost.currency: must be USD")
    if micros is not None and not is_count(micros):
        found.append("$.cost.micros: must be null or an integer >= 0")
    elif completeness in NO_FIGURE and micros is not None:
        found.append(f"$.cost.micros: must be null when {completeness}")
    elif completeness == "genuine_zero" and micros != 0:
        found.append("$.cost.micros: must be 0 when genuine_zero")
    elif completeness in ("complete", "partial") and micros is None:
        found.append(f"$.cost.micros: must be an integer when {completeness}")
    return found


class Channel:
    """The envelope channel, taken: a close-on-exec descriptor written once."""

    def __init__(self, fd: int):
        self.fd = fd
        self.closed = False

    def write(self, envelope: dict) -> None:
        """Write ``envelope`` as one line of JSON, then close the channel.

        Raises:
            EnvelopeError: the envelope breaks its schema or is over 1 MiB (nothing written).
            ChannelError: the channel was written or closed already.
        """
        if self.closed:
            raise ChannelError("the envelope channel was written or closed already")
        found = check(envelope)
        if found:
            raise EnvelopeError(None, found[0])
        data = (json.dumps(envelope, ensure_ascii=False) + "\n").encode("utf-8")
        if len(data) > MAX_BYTES:
            raise EnvelopeError(None, f"the envelope is {len(data)} bytes, over 1 MiB")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]
        finally:
            self.close()

    def close(self) -> None:
        """Close the channel without writing (the controller then sees no envelope)."""
        if not self.closed:
            self.closed = True
            os.close(self.fd)


def _non_dumpable() -> None:
    if not sys.platform.startswith("linux"):
        return  # prctl is Linux's; elsewhere there is no /proc/PID/fd to protect
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise ChannelError(f"prctl(PR_SET_DUMPABLE, 0) failed: {os.strerror(ctypes.get_errno())}")


def take_channel(fd: int | None = None) -> Channel:
    """Do the descriptor duties of docs/attempts.md and return the channel.

    Makes this process non-dumpable, duplicates the inherited descriptor (``fd``, else
    ``$YYB_ENVELOPE_FD``) to a close-on-exec one, closes the inherited one and removes
    ``YYB_ENVELOPE_FD`` from ``os.environ`` (the tools started later get neither). Call it
    before starting any tool.

    Raises:
        ChannelError: no descriptor named, not a number, not open for writing, or prctl failed.
    """
    if fd is None:
        text = os.environ.get(ENV_FD)
        if text is None:
            raise ChannelError(f"{ENV_FD} is not set: no envelope channel was given")
        if not text.isdigit():
            raise ChannelError(f"{ENV_FD}={text!r} is not a descriptor number")
        fd = int(text)
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    except OSError as exc:
        raise ChannelError(f"descriptor {fd} is not open: {exc.strerror}") from None
    if flags & os.O_ACCMODE not in (os.O_WRONLY, os.O_RDWR):
        raise ChannelError(f"descriptor {fd} is not open for writing")
    _non_dumpable()
    own = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    os.environ.pop(ENV_FD, None)
    return Channel(own)


@dataclass(frozen=True)
class Completed:
    """A tool run to its end: exit code (negative: killed by that signal), what it printed."""

    returncode: int
    stdout: bytes = b""
    stderr: bytes = b""


def _pump(source, sink, kept: list[bytes], limit: int) -> None:
    size = 0
    for chunk in iter(lambda: source.read1(65536), b""):
        if sink is not None:
            sink.write(chunk)
            sink.flush()
        if size < limit:
            kept.append(chunk[: limit - size])
            size += len(kept[-1])
    source.close()


def run_tool(
    argv: list[str],
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    capture: bool = True,
    limit: int = 64 << 20,
) -> Completed:
    """Run ``argv`` with stdin ``/dev/null`` (the channel is close-on-exec, so it is not
    passed on). With ``capture``, its stdout and stderr are copied to this process's own as
    they come and kept (at most ``limit`` bytes each); without, they are inherited.

    Raises:
        OSError: the tool could not be started (FileNotFoundError, PermissionError, ...).
    """
    pipe = subprocess.PIPE if capture else None
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=pipe, stderr=pipe
    )
    if not capture:
        return Completed(process.wait())
    kept: tuple[list[bytes], list[bytes]] = ([], [])
    pumps = [
        threading.Thread(target=_pump, args=(stream, sink, store, limit), daemon=True)
        for stream, sink, store in (
            (process.stdout, sys.stdout.buffer, kept[0]),
            (process.stderr, sys.stderr.buffer, kept[1]),
        )
    ]
    for pump in pumps:
        pump.start()
    for pump in pumps:
        pump.join()
    return Completed(process.wait(), b"".join(kept[0]), b"".join(kept[1]))


# --- the command line: `yyb envelope` and `python3 envelope.py` -------------------------


@dataclass(frozen=True)
class Request:
    """What one command line asks for: the fields its flags give, the JSON file to read
    (after CMD, when there is one), where to write, the command to run."""

    flags: dict = field(default_factory=dict)
    json_file: str | None = None
    to_stdout: bool = False
    command: tuple[str, ...] = ()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one EnvelopeError, not argparse's usage + exit 2
        raise EnvelopeError(None, message)


def parser(prog: str = "envelope.py") -> argparse.ArgumentParser:
    """The argument parser shared by ``yyb envelope`` and ``python3 envelope.py``."""
    p = _Parser(
        prog=prog,
        description="Write a juno_execution_envelope.v1 to the channel YYB_ENVELOPE_FD "
        "(or print it), optionally after running CMD without the channel.",
        epilog="With -- CMD ARGS...: the channel is taken first, CMD runs without it, "
        "--json FILE is read after CMD ends, the status defaults to CMD's (exit 0: "
        "succeeded), and the exit code is CMD's. Bad input: exit 2, nothing written.",
    )
    p.add_argument(
        "--json", dest="json_file", metavar="FILE", help="fields from a JSON object (- : stdin)"
    )
    p.add_argument("--provider", metavar="P")
    p.add_argument("--model", metavar="M")
    p.add_argument("--status", choices=STATUSES)
    p.add_argument("--usage", action="append", default=[], metavar="NAME=N")
    cost = p.add_mutually_exclusive_group()
    cost.add_argument("--cost-usd", metavar="X", help="USD, rounded half up to micro-USD")
    cost.add_argument("--cost-micros", metavar="N", help="integer micro-USD")
    p.add_argument("--cost-completeness", choices=COMPLETENESS, metavar="C")
    p.add_argument("--session-id", metavar="S")
    p.add_argument(
        "--print", dest="to_stdout", action="store_true", help="print, do not use the channel"
    )
    return p


def _usage_flags(pairs: list[str]) -> dict[str, int]:
    counts = {}
    for pair in pairs:
        name, sep, number = pair.partition("=")
        if not sep or not name or not number.isdigit():
            raise EnvelopeError("--usage", f"expected NAME=N (N an integer >= 0), got {pair!r}")
        counts[name] = int(number)
    return counts


def parse(argv: list[str], prog: str = "envelope.py") -> Request:
    """A command line as a :class:`Request`; everything after ``--`` is the command.

    Raises:
        EnvelopeError: a flag refused.
    """
    argv = list(argv)
    command: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1 :]
        if not command:
            raise EnvelopeError("--", "no command after --")
    args = parser(prog).parse_args(argv)
    flags: dict = {}
    for name in ("provider", "model", "status", "cost_usd", "session_id"):
        if getattr(args, name) is not None:
            flags[name] = getattr(args, name)
    if args.cost_micros is not None:
        if not args.cost_micros.isdigit():
            raise EnvelopeError(
                "--cost-micros", f"must be an integer >= 0, got {args.cost_micros!r}"
            )
        flags["cost_micros"] = int(args.cost_micros)
    if args.cost_completeness is not None:
        flags["completeness"] = args.cost_completeness
    if args.usage:
        flags["usage"] = _usage_flags(args.usage)
    if args.json_file == "-" and command:
        raise EnvelopeError("--json", "- (stdin) cannot be read after a command")
    return Request(flags, args.json_file, args.to_stdout, tuple(command))


JSON_FIELDS = {"provider", "model", "status", "usage", "session_id", "cost_usd", "cost_micros"}
IGNORED = {"schema_version", "started_ms", "ended_ms", "elapsed_ms", "currency"}


def _json_fields(path: str) -> dict:
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        value = json.loads(text)
    except OSError as exc:
        raise EnvelopeError("--json", f"{path}: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise EnvelopeError("--json", f"{path}: not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise EnvelopeError("--json", f"{path}: must hold one JSON object")
    cost = value.pop("cost", None)
    if isinstance(cost, dict):  # the envelope's own cost shape
        if cost.get("micros") is not None:
            value["cost_micros"] = cost["micros"]
        if cost.get("completeness") is not None:
            value["completeness"] = cost["completeness"]
    elif cost is not None:
        raise EnvelopeError("--json", f"{path}: cost must be an object")
    if "cost_completeness" in value:
        value["completeness"] = value.pop("cost_completeness")
    unknown = set(value) - JSON_FIELDS - IGNORED - {"completeness"}
    if unknown:
        raise EnvelopeError("--json", f"{path}: unknown field {sorted(unknown)[0]!r}")
    return {k: v for k, v in value.items() if k not in IGNORED}


def _envelope(request: Request, default_status: str | None) -> dict:
    fields = _json_fields(request.json_file) if request.json_file else {}
    if "usage" in fields and "usage" in request.flags:
        fields["usage"] = {**fields["usage"], **request.flags["usage"]}
        flags = {k: v for k, v in request.flags.items() if k != "usage"}
    else:
        flags = request.flags
    if "cost_usd" in flags or "cost_micros" in flags:  # a flag's cost replaces the file's
        fields = {k: v for k, v in fields.items() if k not in ("cost_usd", "cost_micros")}
    fields.update(flags)
    fields.setdefault("status", default_status)
    for name in ("provider", "model", "status"):
        if fields.get(name) is None:
            raise EnvelopeError(name, "required (a flag or the --json object)")
    return build(**fields)


def execute(request: Request, prog: str = "envelope") -> int:
    """Carry out ``request``: take the channel (unless printing), run the command, write the
    envelope; the exit code (the command's, when there is one).

    Raises:
        EnvelopeError: a field refused (nothing is written; the channel is closed).
        ChannelError: the channel cannot be taken.
    """
    if not request.command:
        envelope = _envelope(request, None)
        if request.to_stdout:
            sys.stdout.write(json.dumps(envelope, ensure_ascii=False) + "\n")
            return 0
        take_channel().write(envelope)
        return 0
    if request.json_file is None:
        _envelope(request, "succeeded")  # refuse bad flags before the command runs
    channel = None if request.to_stdout else take_channel()
    try:
        code = run_tool(list(request.command), capture=False).returncode
    except OSError as exc:
        sys.stderr.write(f"{prog}: cannot run {request.command[0]}: {exc.strerror}\n")
        code = 127
    try:
        envelope = _envelope(request, "succeeded" if code == 0 else "failed")
    except EnvelopeError:
        if channel is not None:
            channel.close()
        raise
    if channel is None:
        sys.stdout.write(json.dumps(envelope, ensure_ascii=False) + "\n")
    else:
        channel.write(envelope)
    return code if code >= 0 else 128 - code


def main(argv: list[str] | None = None) -> int:
    """``python3 envelope.py ...``: bad input is one stderr line and exit 2."""
    try:
        return execute(parse(sys.argv[1:] if argv is None else argv), "envelope.py")
    except (EnvelopeError, ChannelError) as exc:
        sys.stderr.write(f"envelope.py: error: {exc}\n")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
