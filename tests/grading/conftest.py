"""A bench for grading tests: a repository with a bug, stand-in agents, graders and judges.

Built the way ``yyb/example.py`` builds the example. Every stand-in is a small ``/bin/sh``
script in a tools folder exposed to candidates through ``tool_policy.read_only_paths``:

- agents: one dispatcher (``tools/agent.sh``, the ``command`` harness protocol) sources the
  behaviour named by the model (``zz/<name>`` runs ``tools/behaviours/<name>``);
- graders: ``graders/<name>.sh`` (outside the tools folder), pinned by their sha256 when
  their spec is made;
- judges: scripts run by ``/bin/sh -c``, each through its own ``command`` harness
  ``judge-<name>`` (or, with ``in_tools``, files in ``tools/judges/``).

The provider ``zz`` is too short to be an identity token, so only the whole id and the
behaviour name could leak into a blinded judge payload.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.calculator import CALC_FIXED, FIX, add_calculator, task, write
from tests.conftest import RunBench, git
from yyb.evidence import chain
from yyb.store.repo import Store

# Every candidate starts this: MODEL WORKSPACE ENVELOPE PROMPT_FILE (command harness protocol).
DISPATCHER = """#!/bin/sh
MODEL="$1"; WORKSPACE="$2"; ENVELOPE="$3"; PROMPT="$4"
NAME="${MODEL#zz/}"
TOOLS="@TOOLS@"
cd "$WORKSPACE" || exit 97
envelope() {
  cat > "$ENVELOPE" <<EOF
{"schema_version": "juno_execution_envelope.v1", "provider": "zz", "model": "$NAME",
 "status": "${1:-succeeded}",
 "cost": {"completeness": "genuine_zero", "currency": "USD", "micros": 0},
 "started_ms": 0, "ended_ms": 0, "elapsed_ms": 0}
EOF
}
commit() {
  git add -A >/dev/null 2>&1
  git -c user.name=agent -c user.email=agent@example.invalid commit -qm "$1" >/dev/null 2>&1
  true
}
echo "CANDIDATE-RAN"
. "$TOOLS/behaviours/$NAME"
"""

BEHAVIOURS = {
    # Fixes the bug and commits it.
    "fixer": f"""
{FIX}
commit "fix add"
echo "changed calc.sh"
envelope succeeded
""",
    # Changes nothing.
    "idler": """
echo "looked around, changed nothing"
envelope succeeded
""",
    # Fails without a fix: nothing to grade.
    "crasher": """
envelope failed
exit 3
""",
}

# The honest grader: runs the case's test in the rebuilt workspace, answers with the protocol.
HONEST = """#!/bin/sh
if out=$(sh ./test_calc.sh 2>&1); then passed=true; else passed=false; fi
summary=$(printf '%s' "$out" | head -n 1 | tr -d '"\\\\')
printf '{"schema_version": "yylo_benchmark_grader_output.v2", "passed": %s, "summary": "%s"}\\n' \\
  "$passed" "$summary" > "$YYB_GRADER_OUTPUT"
"""
# Always passes, whatever the workspace holds.
ALWAYS_PASS = """#!/bin/sh
printf '{"schema_version": "yylo_benchmark_grader_output.v2", "passed": true}\\n' \\
  > "$YYB_GRADER_OUTPUT"
"""

# A stand-in judge for the command harness: MODEL WORKSPACE ENVELOPE PROMPT_FILE. Its answer
# is its stdout; ``envelope`` writes its execution envelope (observed identity and cost).
JUDGE_HEAD = """#!/bin/sh
MODEL="$1"; WORKSPACE="$2"; ENVELOPE="$3"; PAYLOAD="$4"
DEFAULT_COST='{"completeness": "complete", "currency": "USD", "micros": 1500}'
envelope() {  # envelope [STATUS [COST_JSON [PROVIDER [MODEL]]]]
  status="${1:-succeeded}"; cost="${2:-$DEFAULT_COST}"
  provider="${3:-${MODEL%%/*}}"; name="${4:-${MODEL#*/}}"
  cat > "$ENVELOPE" <<EOF
{"schema_version": "juno_execution_envelope.v1", "provider": "$provider",
 "model": "$name", "status": "$status", "cost": $cost, "session_id": "${SESSION-judge-session-1}",
 "started_ms": 0, "ended_ms": 0, "elapsed_ms": 0}
EOF
}
"""
JUDGE_PASS = (
    JUDGE_HEAD
    + """envelope
echo '{"verdict": "pass", "reason": "JUDGE-RAN: it adds"}'
"""
)
JUDGE_FAIL = (
    JUDGE_HEAD
    + """envelope
echo '{"verdict": "fail", "reason": "JUDGE-RAN: it does not add"}'
"""
)


def sha256(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass
class Bench(RunBench):
    """One source repository, its config, one case (grader profile ``tests``), a store."""

    root: Path
    repo: Path
    tools: Path
    store_path: str
    task_path: Path
    base: str
    config_data: dict = field(default_factory=dict)

    # -- stand-ins ------------------------------------------------------------------------
    def behaviour(self, name: str, script: str) -> str:
        """Add a stand-in agent behaviour (sourced by the dispatcher); its model is zz/<name>."""
        write(self.tools / "behaviours" / name, script)
        return f"zz/{name}"

    def grader(self, name: str, script: str | bytes = HONEST, folder: Path | None = None) -> Path:
        """Write a grader script (by default under ``graders/``, outside the tools folder)."""
        folder = folder or self.root / "graders"
        return write(folder / f"{name}.sh", script, executable=True)

    def command(
        self, name: str, script: str | bytes = HONEST, folder: Path | None = None, **fields
    ) -> dict:
        """A command evaluator spec for a new grader script, pinned to its current bytes."""
        path = self.grader(name, script, folder)
        spec = {
            "kind": "command",
            "grader_id": f"grader-{name}",
            "version": "1",
            "executable": str(path),
            "sha256": sha256(path),
            "argv": [],
            "timeout_ms": 5_000,
            "purpose": "correctness",
            "required": True,
            "protected_paths": [],  # protects nothing unless a test names what
        }
        spec.update(fields)
        return spec

    def judge(
        self, name: str, script: str = JUDGE_PASS, in_tools: bool = False, **fields
    ) -> tuple[dict, dict]:
        """(evaluator spec, harness) of a new stand-in judge (its harness is judge-<name>).

        The judge's script is passed inline to ``/bin/sh -c``; with ``in_tools`` it is a file
        in the tools folder instead (``tools/judges/<name>.sh``), like the candidate's agent.
        """
        args = ["{model}", "{workspace}", "{envelope}", "{prompt_file}"]
        if in_tools:
            path = write(self.tools / "judges" / f"{name}.sh", script, executable=True)
            argv = [str(path), *args]
        else:
            argv = ["/bin/sh", "-c", script, f"judge-{name}", *args]
        harness = {"kind": "command", "argv": argv}
        spec = {
            "kind": "llm_judge",
            "version": "1",
            "harness": f"judge-{name}",
            "model": "judges/j1",
            "prompt": "Judge it.",
            "rubric": "Does calc add?",
            "evidence": ["patch", "outputs"],
            "identity": "blinded",
            "parsing": "strict_json",
            "timeout_ms": 5_000,
            "required": True,
            "purpose": "quality",
        }
        spec.update(fields)
        return spec, harness

    def configure(
        self,
        evaluators: dict | None = None,
        defaults: list[str] | None = None,
        timeout_ms: int = 20_000,
    ) -> dict:
        """Write the config. ``evaluators`` maps a profile to a spec, or to the (spec, harness)
        pair ``judge`` returns; the case's grader profile is ``tests``."""
        from yyb import config

        data = config.template("src", yylo_version="test")
        data["repositories"] = {"src": "."}
        data["harnesses"] = {
            "candidate": {
                "kind": "command",
                "argv": [
                    str(self.tools / "agent.sh"),
                    "{model}",
                    "{workspace}",
                    "{envelope}",
                    "{prompt_file}",
                ],
            }
        }
        catalog = {}
        for profile, value in (evaluators or {"tests": self.command("honest")}).items():
            if isinstance(value, tuple):
                value, harness = value
                data["harnesses"][value["harness"]] = harness
            catalog[profile] = value
        data["evaluators"] = catalog
        data["default_evaluators"] = list(defaults or [])
        data["attempt_timeout_ms"] = timeout_ms
        data["tool_policy"] = {"network": "denied", "read_only_paths": [str(self.tools)]}
        self.config_path.write_text(json.dumps(data, indent=2))
        self.config_data = data
        return data

    # -- planning and running -------------------------------------------------------------
    def plan_file(self, plan) -> str:
        """The plan as a plan file, for the CLI."""
        from yyb.plans import planfile

        path = str(self.root / f"plan-{plan.oid[:12]}.json")
        if not os.path.exists(path):
            planfile.write_new(path, planfile.render(plan.oid, plan.records))
        return path

    def reevaluate(self, plan, profile: str, verb: str = "regrade", **kwargs) -> list:
        """Regrade or rejudge through the library; return its rows."""
        from yyb.grading import regrade
        from yyb.grading.invocation import Controls
        from yyb.harness.sandbox import protected_roots

        store = self.store
        attempts = {oid: plan.records[oid] for oid in plan.attempt_oids}
        request = regrade.Request(profile, verb, kwargs.pop("dry_run", False))
        protected = protected_roots(store.path, self.config(), plan.experiment)
        controls = Controls(
            protected, kwargs.pop("cancel", None), kwargs.pop("environ", None) or {}
        )
        return regrade.reevaluate(
            store, plan.oid, plan.experiment, attempts, request, controls, **kwargs
        )

    def evaluate(self, plan, result, profile: str, generation: int | None = None):
        """One evaluation of a retained attempt through ``yyb.grading.evaluate`` directly;
        returns (receipt oid, receipt)."""
        from yyb.evidence.attempt import AttemptHandle
        from yyb.grading import evaluate
        from yyb.grading.invocation import Controls
        from yyb.harness.sandbox import protected_roots

        store = self.store
        handle = AttemptHandle.read(
            store, plan.oid, result.attempt, plan.experiment, plan.records[result.attempt]
        )
        identity = handle.terminal.record["identity"]
        return evaluate.evaluate(
            store,
            handle,
            profile,
            evaluate.Truth.retained(store, handle),
            [identity["requested"], identity["resolved"], identity["observed"] or ""],
            Controls(protected_roots(store.path, self.config(), plan.experiment)),
            generation=generation,
        )

    # -- evidence -------------------------------------------------------------------------
    def history(self, plan, attempt_oid: str, profile: str) -> list[tuple[str, dict]]:

        return chain.history(self.store, plan.oid, attempt_oid, profile)

    def evaluation(self, plan, result, profile: str, generation: int = -1) -> dict:
        """One generation's receipt (default: the newest) plus, under ``_oid``, ``_result``,
        ``_input``, ``_output`` and ``_log``, its oid, typed result and artifacts."""
        history = self.history(plan, result.attempt, profile)
        assert history, f"no evaluation {profile} for attempt {result.ordinal}"
        oid, receipt = history[generation]
        out = dict(receipt, _oid=oid, _result=self.record(receipt["links"]["result"]))
        out["_input"] = self.body(receipt["links"]["input"])
        for role in ("output", "log"):
            linked = receipt["links"].get(role)
            out[f"_{role}"] = self.body(linked) if linked else None
        return out

    def records_of(self, schema_version: str) -> list[str]:
        """Oids of every stored record of ``schema_version``."""
        objects = self.store.objects
        found = []
        for oid in objects.iter_oids():
            if objects.get(oid).kind != "record":
                continue
            if objects.get_record(oid)["schema_version"] == schema_version:
                found.append(oid)
        return sorted(found)

    def run_refs(self, leaf: str | None = None) -> dict[str, str]:
        """refs/runs/... name -> oid, optionally only those whose last part is ``leaf``."""
        refs = self.store.refs
        return {
            n: refs.read(n)
            for n in refs.names()
            if n.startswith("refs/runs/") and (leaf is None or n.rsplit("/", 1)[-1] == leaf)
        }


def build_bench(root: Path) -> Bench:
    """Create the source repository, tools, task and store under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    repo, tools = root / "repo", root / "tools"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    add_calculator(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calculator with a bug")
    base = git(repo, "rev-parse", "HEAD")
    write(repo / "calc.sh", CALC_FIXED, executable=True)
    git(repo, "commit", "-qam", "the fix (a future commit no candidate may see)")
    write(tools / "agent.sh", DISPATCHER.replace("@TOOLS@", str(tools)), executable=True)
    for name, script in BEHAVIOURS.items():
        write(tools / "behaviours" / name, script)
    task_path = task(root / "task.md", base, "Fix calc.sh so that the test passes.\n")
    store_path = str(root / "store")
    Store.init(store_path)
    return Bench(root, repo, tools, store_path, task_path, base)


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    return build_bench(tmp_path / "bench")
