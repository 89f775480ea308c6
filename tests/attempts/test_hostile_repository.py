"""A candidate's repository is data: the controller reads its final Git state without obeying it.

Each stand-in below leaves a repository set up to make the unsandboxed controller read the
host (``core.worktree``, a ``.git`` that leads to another repository, alternates), run a
command (fsmonitor, hooks), or spend without bound (a flood of refs, folders nested past
Python's recursion limit). Each must end in its own terminal, with what was not read recorded
in the manifest, and the run must go on to the next attempt.
"""

from __future__ import annotations

import uuid

import pytest


def _manifest(bench, result) -> dict:
    return bench.record(bench.terminal(result)["links"]["manifest"])


def _listing_paths(bench, post: dict) -> list[str]:
    return [entry[0] for entry in bench.record(post["links"]["listing"])["entries"]]


def test_core_worktree_and_commands_in_the_candidates_config_are_not_obeyed(bench):
    host = bench.root / "host"
    host.mkdir()
    marker = f"HOST-FILE-{uuid.uuid4().hex[:12]}"
    (host / marker).write_text("a host file\n")
    ran = bench.root / "command-ran"
    model = bench.behaviour(
        "worktree",
        f"""
git config core.worktree "{host}"
git config core.fsmonitor "touch {ran}"
git config core.hooksPath "{host}"
git config include.path "{host}/{marker}"
envelope succeeded
""",
    )
    _, [result] = bench.run([model])
    assert result.terminal_class == "grader_failure", result.reason
    post = _manifest(bench, result)
    assert post["git"]["readable"] is True, post["git"]
    assert post["git"]["status"] == []  # the workspace, unchanged, not the host folder
    assert bench.holding(marker) == [], "a host file name reached the evidence"
    assert not ran.exists()
    assert "calc.sh" in _listing_paths(bench, post)


@pytest.mark.parametrize(
    "script",
    [
        'rm -rf .git\nprintf "gitdir: %s\\n" "{repo}/.git" > .git\n',
        'rm -rf .git\nln -s "{repo}/.git" .git\n',
        'printf "%s\\n" "{repo}/.git" > .git/commondir\n',
        'printf "%s\\n" "{repo}/.git/objects" > .git/objects/info/alternates\n'
        'printf "%s\\n" "{later}" > .git/HEAD\n',
    ],
    ids=["gitdir-file", "gitdir-symlink", "commondir", "alternates"],
)
def test_git_state_never_leads_to_another_repository(bench, script):
    model = bench.behaviour(
        "elsewhere",
        "mkdir -p .git/objects/info\n"
        + script.format(repo=bench.repo, later=bench.later)
        + "envelope succeeded\n",
    )
    _, [result] = bench.run([model])
    assert result.terminal_class == "grader_failure", result.reason
    # The source repository's other branch, its future files and (unless the candidate wrote
    # it itself) its future commit stay out of the evidence.
    assert bench.holding("refs/heads/feature") == []
    assert bench.holding("FUTURE.md") == []
    if "{later}" not in script:
        assert bench.holding(bench.later) == []
    assert bench.holding(bench.markers["future"]) == []


FLOOD = """
head=$(git rev-parse HEAD)
awk -v h="$head" 'BEGIN {
  pad = sprintf("%0200d", 0)
  for (i = 0; i < 350000; i++) printf "%s refs/tags/%s-%d\\n", h, pad, i
}' >> .git/packed-refs
envelope succeeded
"""


def test_a_flood_of_refs_is_that_attempts_problem_and_the_run_goes_on(bench):
    flooder = bench.behaviour("flooder", FLOOD)
    _, (flooded, after) = bench.run([flooder, "stand/idler"])
    assert flooded.terminal_class == "grader_failure", flooded.reason
    assert after.terminal_class == "grader_failure", after.reason  # dispatched and concluded
    git = _manifest(bench, flooded)["git"]
    assert git["readable"] is True
    assert git["head"]["ref"] == "refs/heads/main"
    assert len(git["refs"]) <= 10_000
    assert any("packed-refs" in what for what, _ in git["unread"]), git["unread"]


def test_folders_nested_past_the_recursion_limit_are_omitted_not_fatal(bench):
    model = bench.behaviour(
        "nester",
        """
i=0
while [ $i -lt 1100 ]; do mkdir d && cd d || exit 1; i=$((i+1)); done
echo deep > deep.txt
cd "$WORKSPACE"
echo shallow > shallow.txt
envelope succeeded
""",
    )
    _, [result] = bench.run([model])
    assert result.terminal_class == "grader_failure", result.reason
    post = _manifest(bench, result)
    paths = _listing_paths(bench, post)
    assert "shallow.txt" in paths and "calc.sh" in paths
    assert not any(p.endswith("deep.txt") for p in paths)
    assert any("levels" in reason for _, reason in post["omitted"]), post["omitted"]
