"""The grading seam: a deterministic command evaluator run on a rebuild of the final workspace.

The executable and every asset are re-hashed against the plan's bound SHA-256 before use and
copied (the verified bytes, not the path) into the grader's private folder, so nothing can
swap them afterwards. The workspace is rebuilt from the store alone into a fresh folder: the
grader never sees the folder the candidate touched. Exit 0 passes; any other exit fails; a
missing or tampered grader, a timeout, or unconfirmed cleanup make the verdict invalid.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass

from yyb.harness import manifest, sandbox, supervise
from yyb.harness.environment import Folders, build

GRADE = "yylo_benchmark_grade.v2"
DEFAULT_TIMEOUT_MS = 5 * 60 * 1000


@dataclass
class Verdict:
    verdict: str  # pass | fail | invalid
    reason: str
    oid: str | None = None


def _verified_copy(path: str, expected: str, dest: str) -> str | None:
    """Copy ``path`` to ``dest`` if its bytes hash to ``expected``; else say why not."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return f"{path} is unreadable or missing ({exc.strerror})"
    got = hashlib.sha256(data).hexdigest()
    if got != expected:
        return f"{path} does not match its bound sha256 (found {got})"
    with open(dest, "wb") as handle:
        handle.write(data)
    os.chmod(dest, 0o755)
    return None


def grade(
    store,
    evaluator_id: str,
    spec: dict,
    listing_oid: str,
    manifest_oid: str,
    protected: list[str],
    base_dir: str,
    cancel=None,
) -> Verdict:
    """Run the evaluator ``evaluator_id`` and store a grade record; return its verdict."""

    def record(verdict: str, reason: str, extra: dict, links: dict) -> Verdict:
        value = {
            "schema_version": GRADE,
            "evaluator": evaluator_id,
            "kind": spec.get("kind"),
            "grader_id": spec.get("grader_id", evaluator_id),
            "version": spec.get("version", ""),
            "executable_sha256": spec.get("sha256"),
            "verdict": verdict,
            "reason": reason,
            **extra,
            "links": {"manifest": manifest_oid, **links},
        }
        return Verdict(verdict, reason, store.objects.put_record(value))

    if spec.get("kind") != "command":
        return record(
            "invalid",
            f"evaluator kind {spec.get('kind')!r} is not run at this seam",
            {"exit_code": None, "wall_ms": 0},
            {},
        )
    root = tempfile.mkdtemp(prefix="yyb-grade-", dir=base_dir)
    try:
        folders = Folders(root)
        folders.create()
        executable = os.path.join(folders.control, "grader")
        problem = _verified_copy(spec["executable"], spec["sha256"], executable)
        assets = os.path.join(folders.control, "assets")
        os.makedirs(assets)
        for asset in spec.get("assets", []):
            if problem is None:
                problem = _verified_copy(
                    asset["path"],
                    asset["sha256"],
                    os.path.join(assets, os.path.basename(asset["path"])),
                )
        if problem is not None:
            return record("invalid", problem, {"exit_code": None, "wall_ms": 0}, {})
        manifest.rebuild(store, store.objects.get_record(listing_oid), folders.workspace)
        env, _ = build(folders, [], protected, [], {})
        env["YYB_GRADER_ASSETS"] = assets
        values = {"workspace": folders.workspace, "assets": assets}
        argv = [executable] + [a.format(**values) if "{" in a else a for a in spec["argv"]]
        box = sandbox.Sandbox(
            writable=[folders.workspace, *folders.private()],
            masked=protected,
            cwd=folders.workspace,
        )
        outcome = supervise.run(
            box.argv(argv), env, None, spec.get("timeout_ms", DEFAULT_TIMEOUT_MS), cancel
        )
        output = store.objects.put("blob", outcome.stdout.data + outcome.stderr.data)
        extra = {"exit_code": outcome.exit_code, "wall_ms": outcome.wall_ms}
        if outcome.cancelled:
            return record("invalid", "grading was interrupted", extra, {"output": output})
        if not outcome.cleanup_confirmed:
            return record(
                "invalid",
                "could not confirm the grader's processes ended",
                extra,
                {"output": output},
            )
        if outcome.timed_out:
            return record("invalid", "the grader timed out", extra, {"output": output})
        if outcome.exit_code == 0:
            return record("pass", "the grader exited 0", extra, {"output": output})
        return record("fail", f"the grader exited {outcome.exit_code}", extra, {"output": output})
    finally:
        shutil.rmtree(root, ignore_errors=True)
