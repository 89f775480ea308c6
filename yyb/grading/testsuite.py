"""The built-in ``tests`` evaluator: SWE-bench's semantics, run in the sandbox.

A ``tests`` profile names a test command; each case it grades names a hidden test patch and
its ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` tests (``tests`` on the case record, the patch
linked as ``test_patch``: bound by hash into the case and so the plan, and never in the
prompt or a candidate's workspace). To grade, the candidate's final listing has the profile's
protected paths and every path the test patch touches put back as the base has them, and the
test patch applied on top, all on listings (yyb/evidence/testpatch.py); that listing is
rebuilt into a fresh folder, and the command runs there in the sandbox with the tool policy's
read-only paths, as a command evaluator does. It writes a JUnit XML report to ``{junit}``,
which is ``/dev/fd/N``: the write end of a pipe only the runner inherits, as a command
evaluator's verdict channel is (yyb/harness/channel.py). Nothing can be taken back from a
pipe, so code under test that writes a report of its own, before or after the runner's, spoils
it; the report is read as hostile input (yyb/grading/junit.py). A profile whose ``runner`` is
a log runner (``pytest-log``, ``django``, ``sympy``) is graded by the status lines the command
prints instead, as SWE-bench grades (yyb/grading/testlog.py): those lines are the code under
test's to print, which is why ``junit`` is the default (docs/grading.md, "Log runners").

The verdict (docs/grading.md, "The tests kind"): ``pass`` only when every listed test is
reported passed. A test that did not run, was skipped, failed or errored, or is missing from
the report is not passed. A runner killed by a signal yyb did not send, one that ran past its
timeout, or one that left no readable report yields ``fail``: each can be brought about by the
code under test, which must gain nothing by it. Only what the candidate cannot cause is
invalid: a run cancelled, processes not confirmed ended, an evaluator that could not start.
"""

from __future__ import annotations

import hashlib
import json

from yyb.errors import UsageError
from yyb.evidence import environment, testpatch
from yyb.grading import junit, testlog
from yyb.grading.invocation import Invocation
from yyb.grading.outcome import Outcome, SandboxRequest, evaluation_folders, run_sandboxed
from yyb.harness import apply, manifest, overlay, sandbox
from yyb.harness.channel import Channel
from yyb.harness.environment import build

DEFAULT_TIMEOUT_MS = 30 * 60 * 1000
# pytest's exit status when it refuses its arguments: one listed id it cannot find is enough,
# and it then runs no test at all.
REFUSED_ARGUMENTS = 4
DEFAULT_RUNNER = "junit"


def run(
    store,
    call: Invocation,
    case: dict | None,
    listing_oid: str,
    base_listing: str | None,
    header: dict,
) -> Outcome:
    """Run the ``tests`` profile ``call.spec`` on the final workspace named by ``listing_oid``
    for ``case`` (its record, whose ``tests`` and ``links.test_patch`` say what to run);
    ``header`` (profile, grader id, version, generation, case id) opens the retained input.
    """
    spec = call.spec
    refused = _unready(store, case, base_listing)
    if refused is not None:
        return Outcome.invalid(refused)
    tests, patch_oid = case["tests"], case["links"]["test_patch"]
    patch = store.objects.get(patch_oid).body
    try:
        tools = sandbox.tool_paths(call.read_only, call.protected)
    except UsageError as exc:
        return Outcome.invalid(f"the evaluator cannot start: {exc}")
    listed = [*tests["fail_to_pass"], *tests["pass_to_pass"]]
    base = manifest.entries_at(store, base_listing)
    final = manifest.entries_at(store, listing_oid)
    try:
        entries, touched = testpatch.graded(
            base,
            final,
            spec.get("protected_paths") or [],
            patch,
            listed,
            lambda oid: store.objects.get(oid).body,
            lambda data: store.objects.put("blob", data),
        )
    except apply.PatchError as exc:
        return Outcome.invalid(f"the test patch does not apply to the base: {exc}")
    graded = manifest.listing_of(entries)
    protected_record = {"listing": store.objects.put_record(graded), "touched": touched}
    with evaluation_folders() as (folders, held):
        mount = held.enter_context(
            overlay.workspace(store, base_listing, base, entries, folders.workspace)
        )
        channel = Channel(junit.MAX_REPORT)
        held.callback(channel.collect)
        ready = call.environment
        shown = ready.workspace if ready is not None else folders.workspace
        runner = spec.get("runner", DEFAULT_RUNNER)
        argv = fill(spec["command"], shown, channel.path, listed, labels(runner, patch))
        document = dict(
            header,
            kind="tests",
            command=argv,
            fail_to_pass=tests["fail_to_pass"],
            pass_to_pass=tests["pass_to_pass"],
            test_patch=patch_oid,
            workspace=shown,
            junit=channel.path,
            **({"environment": environment.identity_of(ready)} if ready is not None else {}),
        )
        if runner != DEFAULT_RUNNER:
            document["runner"] = runner
        input_bytes = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
        env, _ = build(folders, call.read_only, [], {})
        env["YYB_JUNIT_FD"] = str(channel.fd)
        if ready is not None:
            env.update(ready.view().variables)
        timeout_ms = spec.get("timeout_ms", DEFAULT_TIMEOUT_MS)
        request = SandboxRequest(
            argv, env, timeout_ms, tools, call.protected, call.cancel, mount, ready
        )
        outcome, result = run_sandboxed(folders, request, channel, input_bytes, protected_record)
        return _answered(result, outcome, tests, runner)


def _answered(result: Outcome, outcome, tests: dict, runner: str) -> Outcome:
    """The verdict on what the runner answered: its report on the channel, or its log."""
    if runner == DEFAULT_RUNNER:
        return verdict(result, outcome, tests, result.output_bytes)
    # stderr too: unittest (Django's runtests.py) prints its results there
    log = outcome.stdout.data + b"\n" + outcome.stderr.data
    cut = outcome.stdout.truncated or outcome.stderr.truncated
    return verdict(result, outcome, tests, log, runner, cut)


def _unready(store, case: dict | None, base_listing: str | None) -> str | None:
    """Why the case cannot be graded (no tests, no base listing, its test patch missing or
    not the bound bytes), or None."""
    tests = (case or {}).get("tests")
    if not tests:
        return "the case names no tests (FAIL_TO_PASS, PASS_TO_PASS)"
    if base_listing is None:
        return "its protected paths cannot be put back: no base listing"
    patch_oid = case["links"].get("test_patch")
    if patch_oid is None or not store.objects.contains(patch_oid):
        return "the case's test patch is not in the store"
    if hashlib.sha256(store.objects.get(patch_oid).body).hexdigest() != tests["test_patch_sha256"]:
        return "the case's test patch does not match its bound sha256"
    return None


def fill(
    command: list[str],
    workspace: str,
    junit_path: str,
    listed: list[str],
    labels: list[str] = (),
) -> list[str]:
    """The argv of ``command``: ``{tests}`` (a whole argument) becomes the listed test ids,
    ``{labels}`` (a whole argument) the test patch's labels (``labels``), ``{junit}`` the
    report channel's path and ``{workspace}`` the workspace's."""
    argv = []
    for arg in command:
        if arg == "{tests}":
            argv += listed
        elif arg == "{labels}":
            argv += labels
        else:
            argv.append(arg.replace("{junit}", junit_path).replace("{workspace}", workspace))
    return argv


def labels(runner: str, patch: bytes) -> list[str]:
    """What a runner is given to run the tests the test patch touches, as SWE-bench gives it:
    Django's ``runtests.py`` the touched test modules under ``tests/`` as dotted labels
    (``tests/admin_views/test_forms.py`` is ``admin_views.test_forms``); every other runner
    the touched Python files' paths."""
    files = sorted(p for p in apply.paths(patch) if p.endswith(".py"))
    if runner == "django":
        return [
            p.removeprefix("tests/").removesuffix(".py").replace("/", ".")
            for p in files
            if p.startswith("tests/")
        ]
    return files


def verdict(
    result: Outcome,
    outcome,
    tests: dict,
    report: bytes | None,
    runner: str = DEFAULT_RUNNER,
    cut: bool = False,
) -> Outcome:
    """The verdict rule of the tests kind, first match (docs/grading.md, "The tests kind").

    ``report`` is what the runner answered: the JUnit report received on the channel for the
    ``junit`` runner, else the runner's log (``cut``: the capture kept only its beginning).
    """
    if result.problem is not None:
        return result  # decided before the rule: the evaluator never ran (run_sandboxed)
    if outcome.cancelled:
        return result.with_verdict("invalid", "the evaluation was interrupted", "interrupted")
    if not outcome.cleanup_confirmed:
        return result.with_verdict(
            "invalid", "could not confirm the test runner's processes ended", "cleanup_unconfirmed"
        )
    if outcome.timed_out:
        return result.with_verdict(
            "fail",
            "the tests did not finish within the timeout; a test that did not finish is not passed",
        )
    if result.signal is not None:
        return result.with_verdict(
            "fail",
            f"the test runner was killed by signal {result.signal}, which yyb did not send; "
            "a runner that did not finish cannot pass",
        )
    read = _results(runner, report, outcome.exit_code)
    if isinstance(read, str):
        return result.with_verdict("fail", read)
    check, reported = read
    checks = []
    for which, key in (("FAIL_TO_PASS", "fail_to_pass"), ("PASS_TO_PASS", "pass_to_pass")):
        for test_id in tests[key]:
            passed, detail = check(test_id)
            checks.append({"name": test_id, "passed": passed, "detail": detail, "list": which})
    failing = [c for c in checks if not c["passed"]]
    summary = (
        f"{len(checks) - len(failing)} of {len(checks)} listed tests passed"
        f" ({sum(c['list'] == 'FAIL_TO_PASS' and c['passed'] for c in checks)} of "
        f"{len(tests['fail_to_pass'])} FAIL_TO_PASS)"
    )
    if cut:
        summary += "; the log was cut at its capture limit: a test reported after it is missing"
    result.details = {"checks": checks, "summary": summary, "reported": reported}
    pytest = runner in (DEFAULT_RUNNER, "pytest-log")
    if pytest and not reported and outcome.exit_code == REFUSED_ARGUMENTS:
        return result.with_verdict(
            "fail",
            f"the test runner ran no test: it exited with status {REFUSED_ARGUMENTS}, pytest's "
            f"refusal of its arguments (a listed id it cannot find stops the session); {summary}",
        )
    if failing:
        first = failing[0]
        return result.with_verdict(
            "fail", f"{summary}; first not passed: {first['name']}: {first['detail']}"
        )
    return result.with_verdict("pass", summary)


def _results(runner: str, report: bytes | None, exit_code: int | None):
    """(a listed test id -> (passed, detail), how many tests the report or log has), or why
    there is nothing to check the listed tests against."""
    if runner != DEFAULT_RUNNER:
        index = testlog.Index(testlog.parse(runner, report or b""))
        return index.check, len(index.found)
    if report is None:
        return f"the test runner wrote no report (exit status {exit_code})"
    try:
        cases = junit.read(report)
    except junit.ReportError as exc:
        return exc.reason
    found = junit.index(cases)
    return (lambda test_id: junit.check(test_id, found)), len(cases)
