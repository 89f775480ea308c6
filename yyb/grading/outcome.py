"""What one evaluation produced, before it is stored as its four artifacts."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from yyb.evidence.records import EvaluationProblem
from yyb.harness import scratch, worktree
from yyb.harness.environment import Folders

VERDICTS = ("pass", "fail", "invalid")
# Exit statuses above this are read as death by signal 128 + N: bubblewrap reports a command
# killed inside it that way.
SIGNAL_EXIT = 128


@dataclass
class Outcome:
    verdict: str = "invalid"  # pass | fail | invalid (invalid: unknown quality, never pass/fail)
    reason: str = ""
    input_bytes: bytes = b""  # exactly what the evaluator was given
    output_bytes: bytes | None = None  # exactly what it answered (None: nothing)
    log: bytes = b""
    wall_ms: int = 0
    exit_code: int | None = None
    signal: int | None = None  # the signal that ended the evaluator (an exit above 128 counts)
    details: dict = field(default_factory=dict)
    judge_cost: dict | None = None
    # The gateway meters of a judge's runs, in order (a gateway plan's judges: docs/gateway.md).
    gateway: list[str] = field(default_factory=list)
    # Protected paths put back before grading (yyb/evidence/protect.py): the oid of the listing
    # graded and the protected paths the candidate had touched; None when the profile has none.
    protected: dict | None = None
    # What made an invalid verdict invalid, kept on the receipt: the report tells invalidity a
    # candidate can cause from the infrastructure's by it (yyb/evidence/invalidity.py).
    problem: EvaluationProblem | None = None

    @classmethod
    def invalid(cls, reason: str) -> Outcome:
        """An evaluation that could not start (nothing was run)."""
        return cls("invalid", reason, problem="not_started")

    def with_verdict(
        self, verdict: str, reason: str, problem: EvaluationProblem | None = None
    ) -> Outcome:
        """This outcome with ``verdict``; an invalid one names its ``problem``."""
        self.verdict, self.reason, self.problem = verdict, reason, problem
        return self


@contextlib.contextmanager
def evaluation_folders() -> Iterator[tuple[Folders, contextlib.ExitStack]]:
    """One evaluation's private folders (created) and a stack for what is made in them (its
    workspace, its channel: ``enter_context``, ``callback``). On leaving, the stack unwinds,
    last in first out, and then the folder is removed however deep the code it ran made it;
    nothing in it is read after the run, so it is never given back to the controller's uid."""
    root = scratch.folder("grade")
    with contextlib.ExitStack() as held:
        held.callback(worktree.remove, root)  # registered first: runs last
        folders = Folders(root)
        folders.create()
        yield folders, held


@dataclass(frozen=True)
class SandboxRequest:
    """One evaluator process to run in the sandbox.

    Attributes:
        argv, env: its command line and environment.
        timeout_ms: how long it may run.
        tools: the tool policy's paths, read-only (from ``sandbox.tool_paths``).
        protected: roots hidden from it.
        cancel: the run's cancel event.
        overlay: the workspace's overlay mount (harness/overlay.py), when it is one.
        environment: the built environment it runs on (build.Ready), None for the host's.
    """

    argv: list[str]
    env: dict
    timeout_ms: int
    tools: dict
    protected: list[str]
    cancel: Any = None
    overlay: Any = None
    environment: Any = None


def run_sandboxed(
    folders,
    request: SandboxRequest,
    channel,
    input_bytes: bytes = b"",
    protected_record: dict | None = None,
) -> tuple:
    """Run one evaluator process (a command evaluator, a test runner) in the sandbox: its
    workspace and private folders writable, the request's ``tools`` read-only, resource
    limits on (the code under test runs in there), ``channel`` inherited and collected once
    every holder is gone; the request's overlay, when the workspace is one, mounted.

    Returns (the supervised outcome, an ``Outcome`` with no verdict yet: what the channel
    received, the log, the exit status, and the signal that ended the process, which yyb did
    not send unless the run timed out or was cancelled). When the overlay could not be
    mounted, that ``Outcome`` is already invalid (``not_started``): the caller returns it.
    """
    from yyb.harness import limits, sandbox

    box = sandbox.Sandbox(
        writable=[folders.workspace, *folders.private()],
        hidden=request.protected,
        read_only=request.tools,
        cwd=folders.workspace,
        limits=limits.resolve(None),
        overlay=request.overlay,
    )
    if request.environment is not None:
        box = request.environment.place(box, folders.workspace)
    try:
        # The evaluation's folder is removed once the run is over and nothing in it is read
        # (its answer came through the channel): it is not given back to the controller's uid.
        outcome, resources = box.run(
            request.argv,
            request.env,
            request.timeout_ms,
            request.cancel,
            folders.root,
            pass_fds=(channel.fd,),
            give_back=False,
        )
    finally:
        received = channel.collect()
    signal = outcome.signal
    if signal is None and outcome.exit_code is not None and outcome.exit_code > SIGNAL_EXIT:
        signal = outcome.exit_code - SIGNAL_EXIT
    result = Outcome(
        input_bytes=input_bytes,
        output_bytes=received,
        log=outcome.stdout.data + outcome.stderr.data,
        wall_ms=outcome.wall_ms,
        exit_code=outcome.exit_code,
        signal=signal,
        protected=protected_record,
    )
    if resources.get("workspace_mounted") is False:
        # Nothing ran: whatever the exit status says, the evaluator never saw a workspace.
        result.with_verdict(
            "invalid",
            "the grading workspace could not be mounted; nothing was graded",
            "not_started",
        )
    return outcome, result
