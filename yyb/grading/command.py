"""Deterministic command evaluators: pinned bytes, a rebuilt workspace, a verdict channel.

Before every use the executable and each asset are re-hashed against the plan's bound SHA-256
and the verified bytes (not the paths) are copied into the evaluator's private folder, so
nothing can swap them afterwards; missing or tampered bytes make the evaluation invalid. The
final workspace is rebuilt from the store alone into a fresh folder. The evaluator runs in
the sandbox like a candidate, with its assets visible only to it and the tool policy's
read-only paths. It reads the grader input JSON file and answers through its verdict channel,
a pipe only it inherits (yyb/harness/channel.py): ``$YYB_GRADER_OUTPUT`` is ``/dev/fd/N``.
The workspace carries the base as a Git repository (yyb/harness/baserepo.py).

The code under test runs inside the evaluator and can try to forge or suppress its verdict,
so the rule (docs/grading.md) never lets an irregular end pass: killed by a signal yyb did not
send, the evaluation fails; no usable verdict, it is invalid (a cause the report attributes
to the candidate); a pass also needs exit status 0.
"""

from __future__ import annotations

import json
import os

from yyb.errors import UsageError
from yyb.evidence import environment, protect
from yyb.evidence.kinds.grading import GraderInput, GraderOutput
from yyb.evidence.records import GRADER_INPUT, GRADER_OUTPUT
from yyb.grading.invocation import Invocation
from yyb.grading.outcome import Outcome, SandboxRequest, evaluation_folders, run_sandboxed
from yyb.harness import manifest, overlay, sandbox
from yyb.harness.channel import Channel
from yyb.harness.environment import build
from yyb.harness.pinned import verified_copy
from yyb.store import schema
from yyb.store.objects import codec

INPUT = GRADER_INPUT
OUTPUT = GRADER_OUTPUT
DEFAULT_TIMEOUT_MS = 5 * 60 * 1000
MAX_OUTPUT = 1 << 20


def parse_output(data: bytes | None) -> tuple[GraderOutput | None, str | None]:
    """(grader output value, None) or (None, why the output is not usable)."""
    if not data:
        return None, "the grader wrote no verdict to its channel"
    if len(data) > MAX_OUTPUT:
        return None, "the grader output is larger than 1 MiB"
    try:
        value = codec.from_json(data)
    except Exception as exc:  # noqa: BLE001 - any parse failure is the grader's malformed output
        return None, f"the grader output is malformed ({exc})"
    if not GraderOutput.holds(value):
        return None, f"the grader output is not {OUTPUT}"
    found = schema.problem(value, OUTPUT)
    if found is not None:
        return None, f"the grader output is invalid: {found[0]}: {found[1]}"
    return GraderOutput.from_stored(value), None


def run(
    store,
    call: Invocation,
    listing_oid: str,
    patch_oid: str | None,
    header: dict,
    base_listing: str | None = None,
) -> Outcome:
    """Run one command evaluator (``call.spec``) on the final workspace named by
    ``listing_oid``, with the tool policy's read-only paths visible (and on its PATH) as a
    candidate has them, and the profile's ``protected_paths`` put back as ``base_listing`` has
    them. ``header`` (profile, grader id, version, generation, case id) opens the grader
    input."""
    spec = call.spec
    try:
        tools = sandbox.tool_paths(call.read_only, call.protected)
    except UsageError as exc:
        return Outcome.invalid(f"the evaluator cannot start: {exc}")
    with evaluation_folders() as (folders, held):
        executable = os.path.join(folders.control, "grader")
        assets = os.path.join(folders.control, "assets")
        problem = _pinned(spec, executable, assets)
        if problem is None and spec.get("protected_paths") and base_listing is None:
            problem = "its protected paths cannot be put back: the base listing is not known"
        if problem is not None:
            return Outcome.invalid(problem)
        base = manifest.entries_at(store, base_listing) if base_listing else None
        graded, protected_record = _graded(store, spec, listing_oid, base)
        mount = held.enter_context(
            overlay.workspace(store, base_listing, base, graded, folders.workspace, git=True)
        )
        channel = Channel(MAX_OUTPUT)
        held.callback(channel.collect)
        ready = call.environment
        values = {
            "workspace": ready.workspace if ready is not None else folders.workspace,
            "assets": assets,
            "input": os.path.join(folders.control, "grader-input.json"),
            "output": channel.path,
        }
        patch = store.objects.get(patch_oid).body if patch_oid else b""
        if ready is not None:
            header = dict(header, environment=environment.identity_of(ready))
        input_bytes = _write_input(folders, values, header, patch)
        env, _ = build(folders, call.read_only, [], {})
        env.update(
            YYB_GRADER_INPUT=values["input"],
            YYB_GRADER_OUTPUT=values["output"],
            YYB_GRADER_OUTPUT_FD=str(channel.fd),
            YYB_GRADER_ASSETS=assets,
        )
        if ready is not None:
            env.update(ready.view().variables)
        argv = [executable] + [_fill(a, values) for a in spec.get("argv", [])]
        timeout_ms = spec.get("timeout_ms", DEFAULT_TIMEOUT_MS)
        request = SandboxRequest(
            argv, env, timeout_ms, tools, call.protected, call.cancel, mount, ready
        )
        outcome, result = run_sandboxed(folders, request, channel, input_bytes, protected_record)
        return _verdict(outcome, result)


def _pinned(spec: dict, executable: str, assets: str) -> str | None:
    """Copy the evaluator's executable and assets, each verified against its pinned hash,
    into its control folder; why one could not be, or None."""
    os.makedirs(assets)
    problem = verified_copy(spec["executable"], spec["sha256"], executable)
    for asset in spec.get("assets", []):
        if problem is None:
            target = os.path.join(assets, os.path.basename(asset["path"]))
            problem = verified_copy(asset["path"], asset["sha256"], target)
    return problem


def _write_input(folders, values: dict[str, str], header: dict, patch: bytes) -> bytes:
    """Write the candidate's patch and the grader input document into the control folder;
    returns the document's exact bytes (retained as the evaluation's input)."""
    patch_path = os.path.join(folders.control, "patch.diff")
    with open(patch_path, "wb") as handle:
        handle.write(patch)
    document = GraderInput(
        **header,
        workspace=values["workspace"],
        assets=values["assets"],
        patch_file=patch_path,
        output_file=values["output"],
    ).to_value()
    input_bytes = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
    with open(values["input"], "wb") as handle:
        handle.write(input_bytes)
    return input_bytes


def _verdict(outcome, result: Outcome) -> Outcome:
    """The verdict the rule (docs/grading.md) gives the supervised ``outcome`` and what the
    evaluator's channel received (on ``result``)."""
    output, signal = result.output_bytes, result.signal
    if result.problem is not None:
        return result
    if outcome.cancelled:
        return result.with_verdict("invalid", "the evaluation was interrupted", "interrupted")
    if not outcome.cleanup_confirmed:
        return result.with_verdict(
            "invalid",
            "could not confirm the evaluator's processes ended",
            "cleanup_unconfirmed",
        )
    if outcome.timed_out:
        return result.with_verdict("invalid", "the evaluator timed out", "timed_out")
    if signal is not None:
        # yyb sends signals only on a timeout or a cancellation, handled above: this one
        # came from inside, where the code under test runs. Whatever the channel holds,
        # an evaluator that did not finish cannot pass.
        return result.with_verdict(
            "fail",
            f"the evaluator was killed by signal {signal}, which yyb did not send; "
            "an evaluator that did not finish cannot pass",
        )
    value, problem = parse_output(output)
    if problem is not None:
        return result.with_verdict("invalid", problem, "no_verdict")
    result.details = {"checks": list(value.checks or ()), "summary": value.summary or ""}
    if value.passed and outcome.exit_code != 0:
        return result.with_verdict(
            "fail",
            f"the evaluator answered pass but exited with status {outcome.exit_code}; "
            "a pass needs exit status 0",
        )
    if value.passed:
        return result.with_verdict("pass", value.summary or "the grader passed")
    return result.with_verdict("fail", value.summary or "the grader failed")


def _graded(store, spec: dict, listing_oid: str, base) -> tuple[dict, dict | None]:
    """(the entries to give the evaluator, what protecting its paths did: the stored graded
    listing's oid and the protected paths the candidate touched, or None)."""
    final = manifest.entries_at(store, listing_oid)
    patterns = spec.get("protected_paths") or []
    if not patterns:
        return final, None
    entries, touched = protect.restore(base, final, patterns)
    graded = manifest.listing_of(entries)
    return entries, {"listing": store.objects.put_record(graded), "touched": touched}


def _fill(arg: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        arg = arg.replace("{" + name + "}", value)
    return arg
