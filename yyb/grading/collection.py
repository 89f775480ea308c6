"""Which listed tests exist: pytest's collection at the base with the test patch applied.

A listed id pytest cannot find does not fail alone: pytest stops the whole session before it
runs a test (exit status 4), so every listed test of the case is "not in the report". Some
published SWE-bench lists hold such ids, cut at their first space (``test_x[a b]`` listed as
``test_x[a``). ``collect`` runs ``pytest --collect-only -q`` on the listed tests' files, in
the sandbox as the ``tests`` evaluator runs its command, on the base with the test patch
applied (nothing of a candidate's), and reads the node ids it prints; ``resolve`` tells each
listed id that is not one of them apart: repaired when it begins exactly one collected id
(the truncated kind), refused otherwise. Ids without ``::`` (not pytest node ids) are not
checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from yyb.evidence import testpatch
from yyb.grading.outcome import SandboxRequest, evaluation_folders, run_sandboxed
from yyb.harness import apply, overlay, sandbox
from yyb.harness.channel import Channel
from yyb.harness.environment import build

# ``-o addopts=``: a project's own addopts (marshmallow's ``-v``) would cancel the ``-q`` that
# makes pytest print node ids, one a line, instead of its collection tree.
ARGS = ["-p", "no:cacheprovider", "-o", "addopts=", "--collect-only", "-q"]
TIMEOUT_MS = 10 * 60 * 1000
MAX_LOG = 1 << 20


@dataclass(frozen=True)
class Collected:
    """What a collection printed: the node ids, and how it ended when that was not with exit
    status 0 (``problem``: its status and its log's last line, or its timeout)."""

    ids: frozenset[str]
    problem: str | None = None


@dataclass(frozen=True)
class Unknown:
    """A listed id that is not a collected one: ``repaired`` is the collected id it stands
    for (None: refused), ``reason`` says which."""

    test_id: str
    repaired: str | None
    reason: str


def runner(command: list[str]) -> list[str] | None:
    """The part of a test command that starts pytest (``python -m pytest``, ``.../pytest``),
    or None when the command does not run pytest that way."""
    for i, arg in enumerate(command):
        if "{" in arg:  # past the runner: its options and the tests
            return None
        if arg.rsplit("/", 1)[-1] == "pytest" and (i == 0 or command[i - 1] == "-m"):
            return command[: i + 1]
    return None


def collect(
    store, pytest: list[str], base: dict, test_patch: bytes, listed: list[str], box: dict
) -> Collected:
    """Collect the files of ``listed`` with ``pytest`` (the command that starts it) on
    ``base`` (path -> (mode, blob oid), its blobs in ``store``) with ``test_patch`` applied;
    ``box`` holds the sandbox's ``protected`` roots and ``read_only`` tool paths, and the
    built ``environment`` to run on, if any.

    Raises:
        PatchError: the test patch does not apply to the base.
        UnsafeToolPath: a tool path the sandbox refuses.
    """
    entries = apply.apply(
        base,
        test_patch,
        lambda o: store.objects.get(o).body,
        lambda d: store.objects.put("blob", d),
    )
    files = testpatch.test_files(listed)
    protected = box.get("protected", [])
    tools = sandbox.tool_paths(box.get("read_only", []), protected)
    with evaluation_folders() as (folders, held):
        held.enter_context(overlay.workspace(store, None, None, entries, folders.workspace))
        channel = Channel(1)  # nothing is read from it: the ids come on stdout
        held.callback(channel.collect)
        env, _ = build(folders, box.get("read_only", []), [], {})
        ready = box.get("environment")  # a built environment (build.Ready) to collect on
        if ready is not None:
            env.update(ready.view().variables)
        argv = [*pytest, *ARGS, *files]
        request = SandboxRequest(argv, env, TIMEOUT_MS, tools, protected, environment=ready)
        outcome, result = run_sandboxed(folders, request, channel)
    text = result.log[:MAX_LOG].decode("utf-8", "replace")
    ids = {line for line in text.splitlines() if any(line.startswith(f + "::") for f in files)}
    lines = [line for line in text.splitlines() if line.strip()]
    problem = None
    if outcome.timed_out:
        problem = f"the collection ran past {TIMEOUT_MS // 1000} s"
    elif outcome.exit_code != 0:
        last = lines[-1][:200] if lines else ""
        problem = f"the collection exited with status {outcome.exit_code}: {last}"
    return Collected(frozenset(ids), problem)


def resolve(listed: list[str], collected: Collected) -> list[Unknown]:
    """Each pytest node id of ``listed`` that is not a collected id, in list order."""
    unknown = []
    for test_id in listed:
        if "::" not in test_id or test_id in collected.ids:
            continue
        begun = sorted(c for c in collected.ids if c.startswith(test_id))
        if len(begun) == 1:
            reason = f"repaired to {begun[0]!r}, the one collected test whose id it begins"
            unknown.append(Unknown(test_id, begun[0], reason))
            continue
        if begun:
            reason = f"refused: it begins {len(begun)} collected test ids ({begun[0]!r}, ...)"
        else:
            reason = "refused: no collected test has this id or one it begins"
            if collected.problem is not None:
                reason += f" ({collected.problem})"
        unknown.append(Unknown(test_id, None, reason))
    return unknown
