"""The controller's side of the boundary protocol (docs/boundary.md, ``yyb_boundary.v1``).

Every call runs the boundary's pinned bytes from a private copy, with a request on its
standard input and one JSON answer on its standard output. Nothing here decides what an
answer means for a step (yyb/workflow/run.py does); this only says whether an answer came
and is well-formed, and why not.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
from dataclasses import dataclass

from yyb.evidence.records import DISPATCH_STATES
from yyb.harness import scratch, worktree
from yyb.harness.pinned import verified_copy
from yyb.workflow.config import Boundary

PROTOCOL = "yyb_boundary.v1"
MAX_ANSWER = 2 << 20
DEFAULT_TIMEOUT_S = 3600.0


class BoundaryFailure(Exception):
    """The boundary did not answer as the protocol says (it crashed, timed out, or printed
    something else): ``reason`` in words, ``log`` its standard error."""

    def __init__(self, reason: str, log: bytes = b""):
        super().__init__(reason)
        self.reason, self.log = reason, log


@dataclass(frozen=True)
class Answer:
    value: dict
    log: bytes


def call(
    boundary: Boundary,
    operation: str,
    request: dict,
    environ: dict[str, str],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    pass_fds: tuple[int, ...] = (),
) -> Answer:
    """Ask the boundary ``operation`` with ``request`` (the common fields are added); the
    environment is PATH and, for a dispatch, the credentials the configuration names, taken
    from ``environ`` by name; ``pass_fds`` are inherited (the held locks of a dispatch).

    Raises:
        BoundaryFailure: its bytes do not match the pin, or it did not answer properly.
    """
    document = {"protocol": PROTOCOL, "operation": operation, "journal": boundary.journal}
    document.update(request)
    env = {"PATH": environ.get("PATH", "/usr/bin:/bin")}
    if operation == "dispatch":
        env.update({n: environ[n] for n in boundary.credentials if n in environ})
    folder = scratch.folder("boundary")
    try:
        copy = os.path.join(folder, "boundary")
        problem = verified_copy(boundary.executable, boundary.sha256, copy)
        if problem is not None:
            raise BoundaryFailure(f"the boundary {problem}")
        argv = [*([boundary.interpreter] if boundary.interpreter else []), copy, operation]
        return _run(argv, json.dumps(document).encode(), env, timeout_s, pass_fds)
    finally:
        worktree.remove(folder)


def _run(argv: list[str], data: bytes, env: dict, timeout_s: float, pass_fds=()) -> Answer:
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
            pass_fds=pass_fds,
        )
    except OSError as exc:
        raise BoundaryFailure(f"the boundary could not start ({exc.strerror})") from None
    try:
        out, err = process.communicate(data, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        out, err = process.communicate()
        raise BoundaryFailure(f"the boundary did not answer within {timeout_s:g} s", err) from None
    _kill_group(process.pid)  # nothing a call started may outlive its answer
    if process.returncode != 0:
        how = (
            f"was killed by signal {-process.returncode}"
            if process.returncode < 0
            else f"exited with status {process.returncode}"
        )
        raise BoundaryFailure(f"the boundary {how}", err)
    if len(out) > MAX_ANSWER:
        raise BoundaryFailure("the boundary's answer is larger than 2 MiB", err)
    try:
        value = json.loads(out)
    except (ValueError, UnicodeDecodeError):
        raise BoundaryFailure("the boundary's answer is not one JSON object", err) from None
    if not isinstance(value, dict):
        raise BoundaryFailure("the boundary's answer is not one JSON object", err)
    return Answer(value, err)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def identify(boundary: Boundary, environ: dict) -> str:
    """The identity the boundary answers (BoundaryFailure when it answers otherwise)."""
    answer = call(boundary, "identify", {}, environ, 60.0)
    identity = answer.value.get("identity")
    if answer.value.get("protocol") != PROTOCOL or not isinstance(identity, str):
        raise BoundaryFailure(f"the boundary does not speak {PROTOCOL}", answer.log)
    return identity


@dataclass(frozen=True)
class Completed:
    """What the boundary says a dispatch ended with (from ``dispatch`` or ``status``)."""

    exit_code: int | None
    envelope: bytes | None
    output: bytes | None = None  # what the step printed (its last 256 KiB), when returned


def completed(value: dict) -> Completed:
    """The ``completed`` fields of an answer (BoundaryFailure when they are malformed)."""
    code = value.get("exit_code")
    if code is not None and type(code) is not int:
        raise BoundaryFailure("the boundary's exit_code is not an integer or null")
    printed = value.get("output_b64")
    if printed is not None:
        try:
            printed = base64.b64decode(printed, validate=True)
        except (ValueError, TypeError):
            raise BoundaryFailure("the boundary's output_b64 is not base64") from None
    encoded = value.get("envelope_b64")
    if encoded is None:
        return Completed(code, None, printed)
    if not isinstance(encoded, str):
        raise BoundaryFailure("the boundary's envelope_b64 is not a string or null")
    try:
        return Completed(code, base64.b64decode(encoded, validate=True), printed)
    except ValueError:
        # The step completed; what came back as its envelope is kept as it came, and does
        # not parse as one: a durable harness failure, like any malformed envelope.
        return Completed(code, encoded.encode(), printed)


def status(boundary: Boundary, dispatch_id: str, environ: dict) -> tuple[str, Completed | None]:
    """(the dispatch's state, what it completed with when ``completed``)."""
    answer = call(boundary, "status", {"dispatch_id": dispatch_id}, environ, 60.0)
    state = answer.value.get("state")
    if state not in DISPATCH_STATES:
        raise BoundaryFailure(f"the boundary's state {state!r} is not one of {DISPATCH_STATES}")
    if state != "completed":
        return state, None
    if answer.value.get("dispatch_id") != dispatch_id:
        raise BoundaryFailure("the boundary answered for another dispatch")
    return state, completed(answer.value)
