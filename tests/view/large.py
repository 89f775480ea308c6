"""A large attempt, for the viewer's performance: the built-in example with one more stand-in
candidate, which fixes the bug and adds ``files`` files in 50 folders, run for real (sandbox,
manifest, patch, grading, terminal, evidence, report layer). tools/bench_view.py times the
viewer on it; tests/view/test_server.py holds it to docs/view.md's bound."""

from __future__ import annotations

import json
import os

AGENT = r"""#!/usr/bin/env python3
import os, sys
model, workspace, envelope, prompt = sys.argv[1:5]
channel = open(envelope, "w")
os.close(int(os.environ["YYB_ENVELOPE_FD"]))
os.chdir(workspace)
with open("calc.sh") as handle:
    text = handle.read()
with open("calc.sh", "w") as handle:
    handle.write(text.replace("$1 - $2", "$1 + $2"))
for i in range(FILES):
    folder = f"many/d{i % 50:02d}"
    os.makedirs(folder, exist_ok=True)
    with open(f"{folder}/f{i:05d}.txt", "w") as handle:
        handle.write(f"file {i}\nof the large attempt\n")
print(f"wrote {FILES} files")
channel.write('{"schema_version": "juno_execution_envelope.v1", "provider": "example", '
              '"model": "fixer", "status": "succeeded", "cost": {"completeness": '
              '"genuine_zero", "currency": "USD", "micros": 0}, "started_ms": 0, '
              '"ended_ms": 0, "elapsed_ms": 0}\n')
channel.close()
"""


def build(root: str, files: int) -> tuple[str, str, str, str]:
    """Run the large attempt under ``root``: (store path, plan, attempt, terminal class)."""
    from yyb import config as configuration
    from yyb.attempts import run as attempts_run
    from yyb.evidence import names
    from yyb.example import build as example
    from yyb.plans import build as plans
    from yyb.plans import grant
    from yyb.reports import build as report_build
    from yyb.reports import layer
    from yyb.store.repo import Store

    paths = example(root)
    agent = os.path.join(root, "tools", "large.py")
    with open(agent, "w") as handle:
        handle.write(AGENT.replace("FILES", str(files)))
    os.chmod(agent, 0o755)
    with open(paths["config"]) as handle:
        data = json.load(handle)
    data["harnesses"]["candidate"]["argv"][0] = agent
    with open(paths["config"], "w") as handle:
        json.dump(data, handle, indent=2)
    store, _ = Store.init(os.path.join(root, "store"))
    config = configuration.load(paths["config"])
    plan = plans.task_plan(config, [paths["task"]], ":fixer", 1, "2")
    plans.write(store, plan)
    now = grant.now_ms()
    record = grant.grant_for(plan.oid, plan.experiment, now + 3_600_000, now)
    store.refs.update(names.grant(plan.oid), store.objects.put_record(record), reason="bench")
    chosen = {oid: plan.records[oid] for oid in plan.attempt_oids}
    environ = {**os.environ, "YYB_SIGNING_KEY": ""}
    context = attempts_run.prepare(store, config, plan.oid, plan.experiment, chosen, environ)
    (result,) = attempts_run.run_plan(context, 1)
    report, _ = report_build.build(store, plan.oid)
    layer.store_layer(store, plan.oid, report)
    return store.path, plan.oid, plan.attempt_oids[0], result.terminal_class
