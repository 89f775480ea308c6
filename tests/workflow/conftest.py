"""A governed bench: a tracked project with a three-step workflow and its policy, two files
standing in for production resources, the package's reference boundary pinned in a governed
configuration, and a stand-in `yy` agent whose behaviour its model names.

Stand-in models (``zz/<behaviour>``): ``good`` succeeds; ``bad`` reports failure; ``liar``
reports another model in its envelope; ``mute`` writes no envelope; ``garbled`` writes one that
is not JSON. Each appends ``<step> <model> <dispatch id>`` to every resource file it is given,
so a test can count what touched production.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Yyb, git

WORKFLOW = """name: daily_ops
steps:
  - id: first
    run: [yy, pi, --prompt, "Tidy the queue"]
  - id: second
    run: [yy, pi, --model, someone/else, --prompt, "Publish the digest"]
  - id: notify
    run: [sh, -c, "echo done"]
"""

AGENT = r"""#!PYTHON
import json, os, sys
args = sys.argv[1:]
model = args[args.index("--model") + 1]
path = args[args.index("--execution-envelope") + 1]
assert args.count("--execution-envelope") == 1
provider, _, name = model.partition("/")
for resource in json.loads(os.environ.get("YYB_STEP_RESOURCES", "[]")):
    with open(resource["name"], "a") as handle:
        handle.write(f"{os.environ['YYB_STEP_ID']} {model} {os.environ['YYB_DISPATCH_ID']}\n")
status = "failed" if name == "bad" else "succeeded"
reported = "other" if name == "liar" else name
envelope = {"schema_version": "juno_execution_envelope.v1", "provider": provider,
            "model": reported, "status": status,
            "cost": {"completeness": "genuine_zero", "currency": "USD", "micros": 0},
            "started_ms": 0, "ended_ms": 0, "elapsed_ms": 0}
if name == "garbled":
    open(path, "w").write("{not json")
elif name != "mute":
    open(path, "w").write(json.dumps(envelope))
sys.exit(1 if name == "bad" else 0)
"""


@dataclass
class Governed:
    root: Path
    project: Path
    config_path: Path
    store_path: str
    resources: dict  # name -> Path of the file standing in for it
    env: dict

    @property
    def workflow(self) -> Path:
        return self.project / ".juno_task" / "workflows" / "daily_ops.yaml"

    @property
    def policy(self) -> Path:
        return self.project / ".juno_task" / "specs" / "benchmark" / "policy.yaml"

    def yyb(self, *args: str):
        return Yyb(self.store_path)("--config", str(self.config_path), *args)

    def make_plan(self, out, *options: str, policy=None):
        """``yyb workflow plan`` of this workflow and ``policy`` (default: the bench's)."""
        return self.yyb(
            "workflow",
            "plan",
            "--workflow",
            str(self.workflow),
            "--steps-file",
            str(policy or self.policy),
            "--output",
            str(out),
            *options,
        )

    def plan(self, models: str, steps: str = "first,second", attempts: int = 1) -> str:
        """A plan file made and authorized."""
        out = self.root / f"plan-{hashlib.sha256((models + steps).encode()).hexdigest()[:8]}.json"
        done = self.make_plan(
            out, "--steps", steps, "--models", models, "--attempts", str(attempts)
        )
        assert done.exit_code == 0, done.stderr
        assert self.yyb("workflow", "authorize", "--plan", str(out)).exit_code == 0
        return str(out)

    def run(self, plan: str, *extra: str):
        return self.yyb("workflow", "run", "--plan", plan, "--steps-file", str(self.policy), *extra)

    def recover(self, plan: str, *extra: str):
        return self.yyb(
            "workflow", "recover", "--plan", plan, "--steps-file", str(self.policy), *extra
        )

    def lines(self, resource: str) -> list[str]:
        path = self.resources[resource]
        return path.read_text().splitlines() if path.exists() else []

    def journal(self) -> Path:
        return self.root / "state" / "journal"

    def histories(self, plan: str, ref_of) -> list[list[dict]]:
        """Per step attempt in plan order, the records of the chain ``ref_of(plan oid,
        attempt oid)`` names, oldest first (each links the one before as ``previous``)."""
        from yyb.store.repo import Store

        store = Store.open(self.store_path)
        oid = json.loads(Path(plan).read_text())["plan"]
        found = []
        for attempt in store.objects.get_record(oid)["links"]["attempts"]:
            ref, chain = store.refs.read(ref_of(oid, attempt)), []
            while ref:
                chain.append(store.objects.get_record(ref))
                ref = chain[-1]["links"].get("previous")
            found.append(chain[::-1])
        return found


# A stand-in judge (command harness: MODEL WORKSPACE ENVELOPE PAYLOAD): passes a step that
# exited 0, fails one that did not; its envelope names the judge model it was given.
JUDGE = r"""#!/bin/sh
MODEL="$1"; ENVELOPE="$3"; PAYLOAD="$4"
cat > "$ENVELOPE" <<EOF
{"schema_version": "juno_execution_envelope.v1", "provider": "${MODEL%%/*}",
 "model": "${MODEL#*/}", "status": "succeeded", "session_id": "judge-session",
 "cost": {"completeness": "complete", "currency": "USD", "micros": 700},
 "started_ms": 0, "ended_ms": 0, "elapsed_ms": 0}
EOF
if grep -q "^Exit status: 0$" "$PAYLOAD"; then v=pass; else v=fail; fi
echo "{\"verdict\": \"$v\", \"reason\": \"judged\"}"
"""


def build(
    root: Path, monkeypatch=None, retry_safe_second: bool = False, judged: bool = False
) -> Governed:
    root.mkdir(parents=True, exist_ok=True)
    project = root / "project"
    (project / ".juno_task" / "workflows").mkdir(parents=True)
    (project / ".juno_task" / "specs" / "benchmark").mkdir(parents=True)
    production = root / "production"
    production.mkdir()
    resources = {"ledger": production / "ledger.txt", "digest": production / "digest.txt"}
    (project / ".juno_task" / "workflows" / "daily_ops.yaml").write_text(WORKFLOW)
    policy = {
        "steps": {
            "first": {
                "retry_safe": True,
                "recovery_budget": 1,
                "resources": [{"type": "file", "name": str(resources["ledger"])}],
                **({"judge": "quality"} if judged else {}),
            },
            "notify": {"retry_safe": True},
            "second": {
                "retry_safe": retry_safe_second,
                "resources": [
                    {"type": "file", "name": str(resources["ledger"])},
                    {"type": "file", "name": str(resources["digest"])},
                ],
            },
        }
    }
    (project / ".juno_task" / "specs" / "benchmark" / "policy.yaml").write_text(
        json.dumps(policy, indent=2)
    )
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "workflow and policy")
    tools = root / "tools"
    tools.mkdir()
    agent = tools / "yy"
    agent.write_text(AGENT.replace("PYTHON", sys.executable))
    agent.chmod(0o755)
    (tools / "judge.sh").write_text(JUDGE)
    boundary = Path(__file__).resolve().parents[2] / "yyb" / "workflow" / "reference_boundary.py"
    (root / "state").mkdir()
    (root / "state" / "locks").mkdir()
    config = {
        "schema_version": "juno_benchmark_config.v1",
        "yylo_version": "test",
        "project": "project",
        "boundary": {
            "executable": str(boundary),
            "sha256": hashlib.sha256(boundary.read_bytes()).hexdigest(),
            "identity": "yyb-reference-boundary@1",
            "interpreter": sys.executable,
            "journal": "state/journal",
            "credentials": ["OPS_TOKEN"],
        },
        "lock_store": "state/locks",
        "tool_paths": ["tools"],
        "judges": {
            "quality": {
                "model": "judges/j1",
                "prompt": "Judge the step.",
                "rubric": "Did the step do its work?",
                "timeout_ms": 20_000,
                "harness": {
                    "kind": "command",
                    "argv": [
                        "/bin/sh",
                        str(tools / "judge.sh"),
                        "{model}",
                        "{workspace}",
                        "{envelope}",
                        "{prompt_file}",
                    ],
                },
            }
        },
    }
    config_path = root / "juno-benchmark.config.json"
    config_path.write_text(json.dumps(config, indent=2))
    env = {"PATH": f"{tools}:{os.environ.get('PATH', '/usr/bin:/bin')}", "OPS_TOKEN": "s3cret"}
    if monkeypatch is not None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
    return Governed(root, project, config_path, str(root / "store"), resources, env)


@pytest.fixture
def governed(tmp_path, monkeypatch) -> Governed:
    return build(tmp_path / "governed", monkeypatch)
