"""Deterministic command evaluators: pinned bytes, a rebuilt workspace, a JSON protocol.

Before every use the executable and each asset are re-hashed against the plan's bound SHA-256
and the verified bytes (not the paths) are copied into the evaluator's private folder, so
nothing can swap them afterwards; missing or tampered bytes make the evaluation invalid. The
final workspace is rebuilt from the store alone into a fresh folder. The evaluator runs in
the sandbox like a candidate, with its assets visible only to it. It reads the grader input
JSON file and writes the grader output JSON file (docs/grading.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil

from yyb.evidence.records import GRADER_INPUT, GRADER_OUTPUT
from yyb.grading.outcome import Outcome
from yyb.harness import envelope, limits, manifest, sandbox, scratch
from yyb.harness.environment import Folders, build
from yyb.store import codec, schema

INPUT = GRADER_INPUT
OUTPUT = GRADER_OUTPUT
DEFAULT_TIMEOUT_MS = 5 * 60 * 1000
MAX_OUTPUT = 1 << 20


def verified_copy(path: str, expected: str, dest: str) -> str | None:
    """Copy ``path`` to ``dest`` if its bytes hash to ``expected``; else say why not."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return f"{path} is missing or unreadable ({exc.strerror})"
    got = hashlib.sha256(data).hexdigest()
    if got != expected:
        return f"{path} does not match its bound sha256 (found {got})"
    with open(dest, "wb") as handle:
        handle.write(data)
    os.chmod(dest, 0o755)
    return None


def parse_output(data: bytes | None) -> tuple[dict | None, str | None]:
    """(grader output value, None) or (None, why the output is not usable)."""
    if data is None:
        return None, "the grader wrote no output file"
    if len(data) > MAX_OUTPUT:
        return None, "the grader output is larger than 1 MiB"
    try:
        value = codec.from_json(data)
    except Exception as exc:  # noqa: BLE001 - any parse failure is the grader's malformed output
        return None, f"the grader output is malformed ({exc})"
    if value.get("schema_version") != OUTPUT:
        return None, f"the grader output is not {OUTPUT}"
    found = schema.problem(value, OUTPUT)
    if found is not None:
        return None, f"the grader output is invalid: {found[0]}: {found[1]}"
    return value, None


def run(
    store,
    spec: dict,
    listing_oid: str,
    patch_oid: str | None,
    grader_input: dict,
    protected: list[str],
    cancel=None,
) -> Outcome:
    """Run one command evaluator on the final workspace named by ``listing_oid``."""
    root = scratch.folder("grade")
    try:
        folders = Folders(root)
        folders.create()
        executable = os.path.join(folders.control, "grader")
        assets = os.path.join(folders.control, "assets")
        os.makedirs(assets)
        problem = verified_copy(spec["executable"], spec["sha256"], executable)
        for asset in spec.get("assets", []):
            if problem is None:
                target = os.path.join(assets, os.path.basename(asset["path"]))
                problem = verified_copy(asset["path"], asset["sha256"], target)
        if problem is not None:
            return Outcome.invalid(problem)
        manifest.rebuild(store, store.objects.get_record(listing_oid), folders.workspace)
        input_path = os.path.join(folders.control, "grader-input.json")
        output_path = os.path.join(folders.control, "grader-output.json")
        patch_path = os.path.join(folders.control, "patch.diff")
        with open(patch_path, "wb") as handle:
            handle.write(store.objects.get(patch_oid).body if patch_oid else b"")
        document = dict(
            grader_input,
            workspace=folders.workspace,
            assets=assets,
            patch_file=patch_path,
            output_file=output_path,
        )
        input_bytes = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
        with open(input_path, "wb") as handle:
            handle.write(input_bytes)
        env, _ = build(folders, [], [], {})
        env.update(
            YYB_GRADER_INPUT=input_path, YYB_GRADER_OUTPUT=output_path, YYB_GRADER_ASSETS=assets
        )
        values = {
            "workspace": folders.workspace,
            "assets": assets,
            "input": input_path,
            "output": output_path,
        }
        argv = [executable] + [_fill(a, values) for a in spec.get("argv", [])]
        box = sandbox.Sandbox(
            writable=[folders.workspace, *folders.private()],
            hidden=protected,
            cwd=folders.workspace,
            limits=limits.resolve(None),  # the code under test runs in here too
        )
        outcome, _ = box.run(argv, env, spec.get("timeout_ms", DEFAULT_TIMEOUT_MS), cancel, root)
        try:
            output = envelope.read_regular(output_path, MAX_OUTPUT)
        except (envelope.NotRegular, OSError):
            output = b"(the output path is not a readable regular file)"
        log = outcome.stdout.data + outcome.stderr.data
        result = Outcome(
            input_bytes=input_bytes,
            output_bytes=output,
            log=log,
            wall_ms=outcome.wall_ms,
            exit_code=outcome.exit_code,
        )
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
        value, problem = parse_output(output)
        if problem is not None:
            return result.with_verdict("invalid", problem, "no_verdict")
        result.details = {"checks": value.get("checks", []), "summary": value.get("summary", "")}
        if value["passed"]:
            return result.with_verdict("pass", value.get("summary") or "the grader passed")
        return result.with_verdict("fail", value.get("summary") or "the grader failed")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _fill(arg: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        arg = arg.replace("{" + name + "}", value)
    return arg
