#!/usr/bin/env python3
"""The reference boundary of the governed workflow lane (protocol ``yyb_boundary.v1``,
docs/boundary.md): the one reviewed program that runs a production-touching workflow step.

yyb pins this file by its SHA-256, copies its bytes into a private folder and runs the copy,
so it stands alone: the Python standard library and PyYAML, nothing of yyb. Run it as

    python3 reference_boundary.py OPERATION < request.json

with one JSON request on standard input; it prints one JSON answer on standard output and
exits 0 (a ``refused`` answer is an answer). A malformed request (not JSON, an unknown
operation, a missing or ill-typed field, another protocol) exits 2 with one line on standard
error. Anything else that stops it (its journal cannot be written, say) exits 1 with one line
on standard error: a boundary failure, after which yyb asks ``status``.

Operations:

- ``identify``: answers the protocol and the identity ``yyb-reference-boundary@1``.
- ``dispatch``: runs one step of a compiled workflow, at most once for ever per
  ``dispatch_id``. The journal file is created exclusively (two calls with one id cannot both
  go on), ``dispatched`` is journaled before anything else, ``launched`` immediately before the
  step starts, ``completed`` (exit status, envelope bytes and output) once it has ended. The
  step's ``run`` argv gets ``--execution-envelope PATH`` appended once, ``PATH`` a file not yet
  made in a private (0700) folder of this call, removed afterwards; its environment is this
  program's own plus ``YYB_STEP_RESOURCES`` (the request's resources, JSON), ``YYB_STEP_ID``
  and ``YYB_DISPATCH_ID``; its standard input is ``/dev/null``, and its standard output and
  error are one descriptor of one file in that same folder, so they are merged in the order
  written. The last 256 KiB of that file (all of it when smaller) are answered, in base64, as
  ``output_b64`` (null when the step could not be started); nothing of it reaches this
  program's own standard output or error.
- ``status``: what the journal proves about a dispatch: ``never_dispatched``, ``resumable``
  (nothing that could touch a resource started), ``unknown`` (the step was launched and its
  end is not journaled, or the journal cannot be read) or ``completed`` (with the journaled
  answer).

The journal is the folder the request names (made 0700 when missing): one file per dispatch,
``<journal>/<dispatch_id>.jsonl``, one JSON object per line
(``{"event": "dispatched" | "launched" | "completed", "dispatch_id": ..., "time_ms": ...}``,
``completed`` adding ``exit_code``, ``envelope_b64`` and ``output_b64``), each line appended
and ``fsync``-ed, and the folder ``fsync``-ed once the file exists, before the next action. A
last line that is not JSON was torn by a crash while it was being written, before it was
durable, and is ignored; any other unreadable line makes the dispatch ``unknown``. A
``completed`` entry without ``output_b64`` (journaled before the output was kept) is answered
with it null.

Test hooks (they stand in for crashes; unset, they change nothing): ``YYB_BOUNDARY_CRASH``
set to ``after-dispatched``, ``after-launched`` or ``after-effect`` makes ``dispatch`` end the
process at once (``os._exit(70)``) right after journaling ``dispatched``, right after
journaling ``launched`` (before the step starts), or after the step has run and before
``completed`` is journaled. The step never sees the variable.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import yaml

PROTOCOL = "yyb_boundary.v1"
IDENTITY = "yyb-reference-boundary@1"
OPERATIONS = ("identify", "dispatch", "status")

MAX_REQUEST = 1 << 20
# An answer is at most 2 MiB (docs/boundary.md). It carries, in base64 (four characters for
# every three bytes, the last three rounded up), the step's output, at most its last
# MAX_OUTPUT bytes, and the envelope. MAX_ENVELOPE is the largest envelope whose answer still
# fits beside the largest output and ANSWER_OVERHEAD characters of the answer's JSON:
#
#     4 * ceil(MAX_ENVELOPE / 3) + 4 * ceil(MAX_OUTPUT / 3) + ANSWER_OVERHEAD <= MAX_ANSWER
#
# (MAX_ENVELOPE a multiple of 3, so its base64 is exactly 4 * MAX_ENVELOPE / 3 characters).
# A bigger envelope is answered as none.
MAX_ANSWER = 2 << 20
MAX_OUTPUT = 256 << 10
ANSWER_OVERHEAD = 4 << 10
MAX_OUTPUT_B64 = 4 * -(-MAX_OUTPUT // 3)
MAX_ENVELOPE = (MAX_ANSWER - MAX_OUTPUT_B64 - ANSWER_OVERHEAD) // 4 * 3

HEX64 = re.compile(r"^[0-9a-f]{64}$")
ENVELOPE_FLAG = "--execution-envelope"
CRASH_HOOK = "YYB_BOUNDARY_CRASH"
CRASH_STATUS = 70
NOT_STARTED = 127
EVENTS = ("dispatched", "launched", "completed")


class Malformed(Exception):
    """The request breaks the protocol: exit 2."""


class Failure(Exception):
    """The boundary cannot do its part (its journal, say): exit 1."""


# Requests


def read_request(operation: str) -> dict:
    raw = sys.stdin.buffer.read(MAX_REQUEST + 1)
    if len(raw) > MAX_REQUEST:
        raise Malformed(f"the request is larger than {MAX_REQUEST} bytes")
    try:
        request = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Malformed(f"the request is not JSON: {exc}") from None
    if not isinstance(request, dict):
        raise Malformed("the request is not a JSON object")
    if request.get("protocol") != PROTOCOL:
        raise Malformed(f"the request's protocol is {request.get('protocol')!r}, not {PROTOCOL}")
    if request.get("operation") != operation:
        raise Malformed(
            f"the request's operation is {request.get('operation')!r}, but {operation!r} was called"
        )
    journal = field(request, "journal", str)
    if not os.path.isabs(journal):
        raise Malformed(f"journal must be an absolute path, not {journal!r}")
    if operation in ("dispatch", "status"):
        dispatch_id = field(request, "dispatch_id", str)
        if not HEX64.match(dispatch_id):
            raise Malformed(f"dispatch_id must be 64 lowercase hex digits, not {dispatch_id!r}")
    if operation == "dispatch":
        for name in ("plan", "attempt", "step", "workflow", "workflow_sha256"):
            field(request, name, str)
        field(request, "model", dict)
        field(request, "variables", dict)
        if not os.path.isabs(request["workflow"]):
            raise Malformed(f"workflow must be an absolute path, not {request['workflow']!r}")
        if not HEX64.match(request["workflow_sha256"]):
            raise Malformed("workflow_sha256 must be 64 lowercase hex digits")
        lock_fds = request.get("lock_fds", [])
        if not isinstance(lock_fds, list) or not all(type(fd) is int and fd > 2 for fd in lock_fds):
            raise Malformed("lock_fds must be a list of descriptor numbers above 2")
        resources = field(request, "resources", list)
        for resource in resources:
            if not (
                isinstance(resource, dict)
                and isinstance(resource.get("type"), str)
                and isinstance(resource.get("name"), str)
            ):
                raise Malformed(f"a resource must be {{type: str, name: str}}, not {resource!r}")
    return request


def field(request: dict, name: str, kind: type):
    if name not in request:
        raise Malformed(f"the request has no {name!r}")
    value = request[name]
    if not isinstance(value, kind):
        raise Malformed(f"the request's {name!r} must be a JSON {kind.__name__}")
    return value


# The journal


def journal_path(journal: str, dispatch_id: str) -> str:
    return os.path.join(journal, dispatch_id + ".jsonl")


def fsync_folder(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_journal(journal: str) -> None:
    """Make the journal folder (0700) when it is missing, each new folder made durable."""
    missing, path = [], os.path.normpath(journal)
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    if not missing:
        return
    try:
        os.makedirs(journal, mode=0o700, exist_ok=True)
        for made in reversed(missing):
            fsync_folder(os.path.dirname(made))
    except OSError as exc:
        raise Failure(f"cannot make the journal folder {journal}: {exc}") from None


def claim(journal: str, dispatch_id: str) -> int | None:
    """Create the dispatch's journal file exclusively; None when it already exists."""
    path = journal_path(journal, dispatch_id)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
    except FileExistsError:
        return None
    except OSError as exc:
        raise Failure(f"cannot create the journal file {path}: {exc}") from None
    fsync_folder(journal)
    return fd


def append(fd: int, dispatch_id: str, event: str, **extra) -> None:
    entry = {"event": event, "dispatch_id": dispatch_id, "time_ms": int(time.time() * 1000)}
    entry.update(extra)
    data = (json.dumps(entry, sort_keys=True) + "\n").encode()
    try:
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
    except OSError as exc:
        raise Failure(f"cannot journal {event} for dispatch {dispatch_id}: {exc}") from None


def read_journal(journal: str, dispatch_id: str) -> list[dict] | None:
    """The dispatch's journaled events; None when it has no journal file; raises ValueError
    when the file does not read as a journal."""
    path = journal_path(journal, dispatch_id)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    entries = []
    for number, line in enumerate(lines):
        try:
            entry = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            if number == len(lines) - 1:
                break  # torn while being written: it was never durable, nothing followed it
            raise ValueError(f"line {number + 1} is not JSON") from None
        if not (
            number < len(EVENTS)
            and isinstance(entry, dict)
            and entry.get("event") == EVENTS[number]
            and entry.get("dispatch_id") == dispatch_id
        ):
            raise ValueError(f"line {number + 1} is not the journal's next event")
        if entry["event"] == "completed":
            code, envelope = entry.get("exit_code"), entry.get("envelope_b64")
            if "exit_code" not in entry or not (
                code is None or (isinstance(code, int) and not isinstance(code, bool))
            ):
                raise ValueError("the completed entry has no exit_code")
            if "envelope_b64" not in entry or not (envelope is None or isinstance(envelope, str)):
                raise ValueError("the completed entry has no envelope_b64")
            # Absent in a journal written before the output was kept: answered as null.
            output = entry.get("output_b64")
            if not (output is None or isinstance(output, str)):
                raise ValueError("the completed entry's output_b64 is neither text nor null")
        entries.append(entry)
    return entries


# Operations


def identify(request: dict) -> dict:
    return {"protocol": PROTOCOL, "identity": IDENTITY}


def status(request: dict) -> dict:
    dispatch_id = request["dispatch_id"]
    try:
        entries = read_journal(request["journal"], dispatch_id)
    except ValueError as exc:
        sys.stderr.write(f"the journal of dispatch {dispatch_id} is unreadable: {exc}\n")
        return {"state": "unknown", "dispatch_id": dispatch_id}
    except OSError as exc:
        raise Failure(f"cannot read the journal of dispatch {dispatch_id}: {exc}") from None
    if entries is None:
        return {"state": "never_dispatched", "dispatch_id": dispatch_id}
    events = [entry["event"] for entry in entries]
    if "completed" in events:
        done = entries[events.index("completed")]
        return {
            "state": "completed",
            "dispatch_id": dispatch_id,
            "exit_code": done["exit_code"],
            "envelope_b64": done["envelope_b64"],
            "output_b64": done.get("output_b64"),
        }
    if "launched" in events:
        return {"state": "unknown", "dispatch_id": dispatch_id}
    # Only `dispatched`, or not even that: the file is the claim, and nothing was started.
    return {"state": "resumable", "dispatch_id": dispatch_id}


def crash_hook(point: str) -> None:
    if os.environ.get(CRASH_HOOK) == point:
        os._exit(CRASH_STATUS)


def refused(reason: str) -> dict:
    return {"status": "refused", "reason": reason}


def find_step(request: dict) -> list[str] | str:
    """The step's run argv, or why it cannot be run."""
    path, step = request["workflow"], request["step"]
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return f"cannot read the workflow {path}: {exc}"
    digest = hashlib.sha256(data).hexdigest()
    if digest != request["workflow_sha256"]:
        return f"the workflow {path} has SHA-256 {digest}, not {request['workflow_sha256']}"
    try:
        workflow = yaml.safe_load(data)
    except yaml.YAMLError as exc:
        return f"the workflow {path} is neither JSON nor YAML: {exc}"
    steps = workflow.get("steps") if isinstance(workflow, dict) else None
    if not isinstance(steps, list):
        return f"the workflow {path} has no list of steps"
    found = [s for s in steps if isinstance(s, dict) and s.get("id") == step]
    if not found:
        return f"the workflow {path} has no step {step!r}"
    if len(found) > 1:
        return f"the workflow {path} has {len(found)} steps {step!r}"
    run = found[0].get("run")
    if not (isinstance(run, list) and run and all(isinstance(a, str) for a in run)):
        return f"step {step!r} of the workflow {path} has no run argv"
    if any(a == ENVELOPE_FLAG or a.startswith(ENVELOPE_FLAG + "=") for a in run):
        return f"step {step!r} names {ENVELOPE_FLAG} itself: the boundary gives the only one"
    return run


def read_envelope(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            sys.stderr.write("the execution envelope is not a regular file\n")
            return None
        chunks, size = [], 0
        while size <= MAX_ENVELOPE:
            chunk = os.read(fd, MAX_ENVELOPE + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > MAX_ENVELOPE:
        sys.stderr.write(f"the execution envelope is larger than {MAX_ENVELOPE} bytes\n")
        return None
    return b"".join(chunks) or None


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def open_output(path: str) -> int:
    """Make the file the step's standard output and error both go to: new, private."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, flags, 0o600)
    except OSError as exc:
        raise Failure(f"cannot make the step's output file {path}: {exc}") from None


def read_output(fd: int) -> bytes:
    """The last MAX_OUTPUT bytes of the output file (all of it when smaller), read through the
    descriptor the step was given, as long as the file was when the step had ended."""
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - MAX_OUTPUT)
        chunks, offset = [], start
        while offset < size:
            chunk = os.pread(fd, size - offset, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
    except OSError as exc:
        raise Failure(f"cannot read the step's output: {exc}") from None
    return b"".join(chunks)


def run_step(run: list[str], envelope: str, output: int, request: dict) -> tuple[bool, int | None]:
    """Run the step, its standard output and error both ``output``: whether it started, and
    its exit status (None when a signal ended it, NOT_STARTED when it could not be started)."""
    env = dict(os.environ)
    env.pop(CRASH_HOOK, None)
    env["YYB_STEP_RESOURCES"] = json.dumps(request["resources"])
    env["YYB_STEP_ID"] = request["step"]
    env["YYB_DISPATCH_ID"] = request["dispatch_id"]
    try:
        done = subprocess.run(
            [*run, ENVELOPE_FLAG, envelope],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            env=env,
            check=False,
            pass_fds=tuple(fd for fd in request.get("lock_fds", []) if _open(fd)),
        )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        sys.stderr.write(f"cannot start step {request['step']!r}: {exc}\n")
        return False, NOT_STARTED
    return True, None if done.returncode < 0 else done.returncode


def dispatch(request: dict) -> dict:
    journal, dispatch_id = request["journal"], request["dispatch_id"]
    ensure_journal(journal)
    fd = claim(journal, dispatch_id)
    if fd is None:
        return refused(f"dispatch {dispatch_id} is already in the journal")
    try:
        append(fd, dispatch_id, "dispatched")
        crash_hook("after-dispatched")
        run = find_step(request)
        if isinstance(run, str):
            return refused(run)
        private = tempfile.mkdtemp(prefix="yyb-boundary-")  # 0700
        output = None
        try:
            envelope = os.path.join(private, "envelope.json")
            output = open_output(os.path.join(private, "output"))
            append(fd, dispatch_id, "launched")
            crash_hook("after-launched")
            started, exit_code = run_step(run, envelope, output, request)
            printed = read_output(output) if started else None
            data = read_envelope(envelope)
        finally:
            if output is not None:
                os.close(output)
            shutil.rmtree(private, ignore_errors=True)
        crash_hook("after-effect")
        envelope_b64 = None if data is None else base64.b64encode(data).decode("ascii")
        output_b64 = None if printed is None else base64.b64encode(printed).decode("ascii")
        append(
            fd,
            dispatch_id,
            "completed",
            exit_code=exit_code,
            envelope_b64=envelope_b64,
            output_b64=output_b64,
        )
        return {
            "status": "completed",
            "exit_code": exit_code,
            "envelope_b64": envelope_b64,
            "output_b64": output_b64,
        }
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    """Answer one call: ``argv`` is the arguments after the program's name."""
    try:
        if len(argv) != 1 or argv[0] not in OPERATIONS:
            raise Malformed(
                f"usage: reference_boundary.py {{{','.join(OPERATIONS)}}} < request.json"
                + (f" (not {' '.join(argv)!r})" if argv else "")
            )
        operation = argv[0]
        request = read_request(operation)
        answer = {"identify": identify, "dispatch": dispatch, "status": status}[operation](request)
    except Malformed as exc:
        sys.stderr.write(f"malformed request: {one_line(exc)}\n")
        return 2
    except Failure as exc:
        sys.stderr.write(f"boundary failure: {one_line(exc)}\n")
        return 1
    except Exception as exc:  # never a traceback: one line, a boundary failure
        sys.stderr.write(f"boundary failure: {type(exc).__name__}: {one_line(exc)}\n")
        return 1
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
