"""A bench for attempt tests: a source repository with a bug, a config, a case, stand-in agents.

Built the way ``yyb/example.py`` builds the example, with two differences: every stand-in
agent behaviour is its own small ``/bin/sh`` snippet (``tools/behaviours/<name>``) chosen by the
model's name (``stand/<name>``), and the source repository carries things no candidate may see
(a future commit, another branch, a tag, a remote, harness-owned paths) each tagged with a
unique marker that tests look for in the retained evidence.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.calculator import CALC_FIXED, FIX, add_calculator, task, write
from tests.conftest import RunBench, git
from yyb.store.repo import Store

# The grader runs the test in the rebuilt final workspace and answers with the grader output
# protocol (docs/grading.md): JSON written to the file named by $YYB_GRADER_OUTPUT.
GRADER = """#!/bin/sh
# {comment}
if out=$(sh ./test_calc.sh 2>&1); then passed=true; else passed=false; fi
summary=$(printf '%s' "$out" | head -n 1 | tr -d '"\\\\')
format='{{"schema_version": "yylo_benchmark_grader_output.v2", "passed": %s, "summary": "%s"}}'
printf "$format\\n" "$passed" "$summary" > "$YYB_GRADER_OUTPUT"
"""


def grader(comment: str = "calc tests") -> str:
    """The grader's text; ``comment`` changes its bytes (and so its pinned sha256)."""
    return GRADER.format(comment=comment)


# The dispatcher every attempt starts: MODEL WORKSPACE ENVELOPE PROMPT_FILE (command protocol).
DISPATCHER = """#!/bin/sh
MODEL="$1"; WORKSPACE="$2"; ENVELOPE="$3"; PROMPT="$4"
NAME="${{MODEL#stand/}}"
TOOLS="{tools}"
MARK="{mark}"
. "$TOOLS/lib.sh"
cd "$WORKSPACE" || exit 97
. "$TOOLS/behaviours/$NAME"
"""

LIB = """# Shared by every behaviour.
envelope() {  # envelope STATUS [PROVIDER [MODEL [EXTRA_JSON_FIELDS]]]
  cat > "$ENVELOPE" <<EOF
{"schema_version": "juno_execution_envelope.v1", "provider": "${2:-stand}",
 "model": "${3:-$NAME}", "status": "$1",
 "cost": {"completeness": "genuine_zero", "currency": "USD", "micros": 0},
 "started_ms": 0, "ended_ms": 0, "elapsed_ms": 0${4:+, $4}}
EOF
}
commit_all() {  # keep the worktree clean: commit whatever the behaviour left behind
  git add -A >/dev/null 2>&1
  git -c user.name=agent -c user.email=agent@example.invalid commit -qm "${1:-work}" \
    >/dev/null 2>&1
  true
}
"""

BEHAVIOURS = {
    # Fixes the bug, commits it, adds a file, deletes another.
    "fixer": f"""
echo "fixer read the prompt: $(head -c 40 "$PROMPT")"
{FIX}
echo "notes of the fixer" > NOTES.md
rm -f docs/old.md
git add -A && git -c user.name=agent -c user.email=agent@example.invalid commit -qm "fix add" \\
  && echo "committed the fix"
envelope succeeded
""",
    # Looks around and changes nothing.
    "idler": """
echo "looked around, changed nothing"
envelope succeeded
""",
}


def alive(mark: str) -> list[tuple[int, str]]:
    """Processes (pid, cmdline) whose command line holds ``mark``."""
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if mark in cmdline:
            found.append((int(entry), cmdline))
    return found


def wait_for(predicate, timeout: float = 20.0, step: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


@dataclass
class Bench(RunBench):
    """One source repository, its config, one case, stand-in agents and a store."""

    root: Path
    repo: Path
    tools: Path
    store_path: str
    task_path: Path
    base: str
    later: str
    mark: str  # unique number used in every stand-in's sleeps (leftover-process scans)
    markers: dict[str, str] = field(default_factory=dict)  # what must never leak -> its text
    grader_text: str = field(default_factory=grader)

    def limited(self, limits: dict) -> Bench:
        """Configured, with ``limits`` as the tool policy's resource limits."""
        self.configure()
        data = json.loads(self.config_path.read_text())
        data["tool_policy"]["limits"] = limits
        self.config_path.write_text(json.dumps(data, indent=2))
        return self

    def behaviour(self, name: str, script: str) -> str:
        """Add a stand-in behaviour; its model is ``stand/<name>``."""
        write(self.tools / "behaviours" / name, script)
        return f"stand/{name}"

    def configure(
        self,
        timeout_ms: int = 60_000,
        secrets: list[str] | None = None,
        read_only_paths: list[str] | None = None,
        grader: str | None = None,
        excluded_paths: list[str] | None = None,
        network: str = "denied",
    ) -> dict:
        from yyb import config

        if grader is not None:
            self.grader_text = grader
        grader_path = self.root / "graders" / "grader.sh"  # apart from the tools
        write(grader_path, self.grader_text, executable=True)
        data = config.template("src", yylo_version="test")
        data["repositories"] = {"src": "."}
        if excluded_paths is not None:
            data["workspace"]["excluded_paths"] = excluded_paths
        harness = {
            "kind": "command",
            "argv": [
                str(self.tools / "agent.sh"),
                "{model}",
                "{workspace}",
                "{envelope}",
                "{prompt_file}",
            ],
        }
        if secrets:
            harness["secrets"] = secrets
        data["harnesses"] = {"candidate": harness}
        data["evaluators"] = {
            "tests": {
                "kind": "command",
                "grader_id": "calc-tests",
                "version": "1",
                "executable": str(grader_path),
                "sha256": hashlib.sha256(self.grader_text.encode()).hexdigest(),
                "argv": [],
                "timeout_ms": 30_000,
                "purpose": "correctness",
                "protected_paths": [],
            }
        }
        data["attempt_timeout_ms"] = timeout_ms
        data["tool_policy"] = {
            "network": network,
            "read_only_paths": [str(self.tools), *(read_only_paths or [])],
        }
        self.config_path.write_text(json.dumps(data, indent=2))
        return data

    def through_gateway(self, providers: dict, prices: dict | None = None, **harness) -> dict:
        """Configure the candidates to reach their models through the gateway
        (docs/gateway.md, "In a plan"): ``providers`` as the config names them, ``prices``
        written as the price table file; ``harness`` fields added to the candidate's."""
        data = self.configure(network="gateway")
        data["gateway"] = {"providers": providers}
        if prices is not None:
            (self.repo / "prices.json").write_text(json.dumps(prices))
            data["gateway"]["prices"] = "prices.json"
        data["harnesses"]["candidate"].update(harness)
        self.config_path.write_text(json.dumps(data, indent=2))
        return data

    def plan_file(self, models: list[str], attempts: int = 1, authorize: bool = True) -> str:
        """Plan through the CLI into a plan file (and authorize it); return the file."""
        out = str(self.root / f"plan-{uuid.uuid4().hex[:8]}.json")
        done = self.yyb(
            "plan",
            "--task",
            str(self.task_path),
            "--models",
            ",".join(models),
            "--attempts",
            str(attempts),
            "--max-usd",
            "2",
            "--output",
            out,
        )
        assert done.exit_code == 0, done.stderr
        if authorize:
            granted = self.yyb("authorize", "--plan", out, "--expires", "+1h")
            assert granted.exit_code == 0, granted.stderr
        return out

    def subprocess_argv(self, *args: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "yyb",
            "--store",
            self.store_path,
            "--config",
            str(self.config_path),
            *args,
        ]

    # -- evidence -------------------------------------------------------------------------
    def linked(self, result, role: str) -> bytes:
        return self.body(self.terminal(result)["links"][role])

    def every_object(self) -> dict[str, bytes]:
        """oid -> stored body, for every object in the store."""
        objects = self.store.objects
        return {oid: objects.get(oid).body for oid in objects.iter_oids()}

    def holding(self, text: str | bytes, skip: set[str] = frozenset()) -> list[str]:
        """Oids of stored objects whose body holds ``text``."""
        needle = text.encode() if isinstance(text, str) else text
        return [
            oid for oid, body in self.every_object().items() if oid not in skip and needle in body
        ]

    def run_refs(self) -> list[str]:
        """Every ref under refs/runs/ (intents, terminals, evidence)."""
        return [n for n in self.store.refs.names() if n.startswith("refs/runs/")]

    def attempt_roots(self) -> list[str]:
        """Attempt folders of this bench's running candidates (from their command lines)."""
        roots = []
        for _, cmdline in alive(str(self.tools / "agent.sh")):
            parts = cmdline.split()
            i = parts.index(str(self.tools / "agent.sh"))
            if len(parts) > i + 2 and parts[i + 2].endswith("/workspace"):
                roots.append(os.path.dirname(parts[i + 2]))
        return sorted(set(roots))

    def alive(self) -> list[tuple[int, str]]:
        return alive(self.mark)

    def kill_controller(self, plan: str, running: int, settle_s: float = 10) -> list[str]:
        """Start ``yyb run --plan PLAN``, SIGKILL it once ``running`` stand-in processes are
        alive (the controller dies without a chance to write anything), wait ``settle_s`` for
        its candidates to go, and remove the attempt folders it could not; returns them."""
        import subprocess

        proc = subprocess.Popen(
            self.subprocess_argv("run", "--plan", plan),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        roots = []
        try:
            assert wait_for(lambda: len(self.alive()) >= running), "the candidate never started"
            roots = self.attempt_roots()
            proc.kill()
            proc.wait(timeout=30)
            assert wait_for(lambda: self.alive() == [], timeout=settle_s), self.alive()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for root in roots:  # the dead controller could not remove its attempt folder
                shutil.rmtree(root, ignore_errors=True)
        return roots


def build_bench(root: Path) -> Bench:
    """Create the source repository, tools, task and store under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    repo, tools = root / "repo", root / "tools"
    repo.mkdir()
    tag = uuid.uuid4().hex[:12]
    markers = {
        "future": f"FUTURE-COMMIT-{tag}",
        "branch": f"OTHER-BRANCH-{tag}",
        "excluded": f"HARNESS-OWNED-{tag}",
        "history": f"OLD-HISTORY-{tag}",
    }
    git(repo, "init", "-q", "-b", "main")
    write(repo / "history.txt", f"{markers['history']}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "an older commit")
    (repo / "history.txt").unlink()
    add_calculator(repo)
    write(repo / "docs" / "old.md", "old notes\n")
    write(repo / ".yylo-benchmark" / "registry" / "note.txt", f"{markers['excluded']}\n")
    write(repo / ".juno_task" / "task.md", f"{markers['excluded']}\n")
    write(repo / "yylo-benchmark.config.json", json.dumps({"old": markers["excluded"]}))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calculator with a bug")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "v1")
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo / "feature.txt", f"{markers['branch']}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "another branch")
    git(repo, "checkout", "-q", "main")
    write(repo / "calc.sh", CALC_FIXED + f"# {markers['future']}\n", executable=True)
    write(repo / "FUTURE.md", f"{markers['future']}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"the fix {markers['future']}")
    later = git(repo, "rev-parse", "HEAD")
    git(repo, "remote", "add", "origin", "https://example.invalid/calc.git")
    git(repo, "config", "core.hooksPath", ".githooks")
    write(repo / ".git" / "hooks" / "post-checkout", f"#!/bin/sh\ntouch {root}/hooked\n", True)
    mark = str(900_000 + int.from_bytes(os.urandom(3), "big") % 99_999)
    write(tools / "agent.sh", DISPATCHER.format(tools=tools, mark=mark), executable=True)
    write(tools / "lib.sh", LIB)
    for name, script in BEHAVIOURS.items():
        write(tools / "behaviours" / name, script)
    task_path = task(root / "task.md", base)
    store_path = str(root / "store")
    Store.init(store_path)
    bench = Bench(root, repo, tools, store_path, task_path, base, later, mark, markers)
    bench.configure()
    return bench


@pytest.fixture
def bench(tmp_path: Path):
    made = build_bench(tmp_path / "bench")
    yield made
    leftover = made.alive()
    for pid, _ in leftover:  # never leave a stray process for the next test
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    assert not leftover, f"processes outlived the test: {leftover}"


@pytest.fixture
def outside_bench():
    """A bench whose repository, store and tools are outside the system temp folder.

    The sandbox masks the whole temp folder, which would hide a bench under it even if the
    registry or the source repository were missing from the masks; this one is not.
    """
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
    if base is None or os.path.realpath(base).startswith(
        os.path.realpath(tempfile.gettempdir()) + "/"
    ):
        pytest.skip("no writable folder outside the temp folder")
    root = Path(tempfile.mkdtemp(prefix="yyb-bench-", dir=base))
    try:
        made = build_bench(root / "bench")
        yield made
        leftover = made.alive()
        for pid, _ in leftover:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        assert not leftover, f"processes outlived the test: {leftover}"
    finally:
        shutil.rmtree(root, ignore_errors=True)
