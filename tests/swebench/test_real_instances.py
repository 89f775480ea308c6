"""Two real instances, from import to a graded plan, on environments yyb builds itself.

hukkin/tomli's fix 9e56735 as a SWE-bench row, and SWE-bench's marshmallow-code__marshmallow-1359
(tests/data/swebench/: their repositories as bundles, the rows, and the environment recipes
measured for them). ``yyb import swe-bench --environments --check-ids`` writes each case with an
environment spec, builds the environments and repairs marshmallow's test ids that the published
list cut at the first space; ``validate --gold`` finds gold resolving and the empty patch not;
one plan of gold, no change and a cheating candidate over both cases resolves only gold. No
virtual environment is made by hand, no ``--python`` is given and no profile is edited: the
profiles run plain ``python``, which only the environment has with pytest and the package.
This reaches the package index (the environments' wheels): it runs where CI does.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Yyb
from tests.grading.conftest import DISPATCHER, write
from tests.swebench.test_tests_kind import ATTACKS
from yyb.store.repo import Store

DATA = Path(__file__).parent.parent / "data" / "swebench"
IDS = ["hukkin__tomli-125", "marshmallow-code__marshmallow-1359"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    repos = root / "repos"
    for name in ("tomli", "marshmallow"):
        subprocess.run(
            ["git", "clone", "-q", str(DATA / f"{name}.bundle"), str(repos / name)], check=True
        )
    store = str(root / "store")
    yyb = Yyb(store)
    out = root / "swe"
    done = yyb(
        "import", "swe-bench", str(DATA / "instances.jsonl"), "--repos", str(repos),
        "--out", str(out), "--environments", str(DATA / "environments.json"), "--check-ids",
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    return root, yyb, out, done


def test_import_writes_environments_and_repairs_the_cut_ids(imported):
    _, _, out, done = imported
    repaired = [
        line for line in done.stderr.splitlines() if "instances.jsonl:2: PASS_TO_PASS" in line
    ]
    assert len(repaired) == 8, done.stderr
    task = (out / "cases" / f"{IDS[1]}.md").read_text()
    assert "environment: ../envs/" in task
    spec = json.loads(next((out / "envs").glob("marshmallow*.json")).read_text())
    assert spec["kind"] == "python" and "pytest==8.4.2" in spec["python"]["requirements"]
    config = json.loads((out / "yylo-benchmark.config.json").read_text())
    commands = {p: e["command"][0] for p, e in config["evaluators"].items() if e["kind"] == "tests"}
    assert set(commands.values()) == {"python"}  # nothing of this test's own interpreter


def test_gold_resolves_and_empty_does_not_on_both(imported):
    _, yyb, out, _ = imported
    config = str(out / "yylo-benchmark.config.json")
    tasks = [a for i in IDS for a in ("--task", str(out / "cases" / f"{i}.md"))]
    done = yyb("--config", config, "validate", "--gold", *tasks)
    assert done.exit_code == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all("gold=pass empty=fail" in line for line in lines), lines


def test_a_plan_of_gold_empty_and_a_cheat_resolves_only_gold(imported):
    root, yyb, out, _ = imported
    tools = root / "tools"
    write(tools / "agent.sh", DISPATCHER.replace("@TOOLS@", str(tools)), executable=True)
    for instance_id in IDS:
        hidden = out / "hidden" / instance_id / "gold.patch"
        write(tools / f"gold-{instance_id}", hidden.read_bytes())
    write(
        tools / "behaviours" / "gold",
        'case=$(sed -n "s/^id: //p" "$PROMPT" 2>/dev/null)\n'
        'for p in "$TOOLS"/gold-*; do git apply "$p" 2>/dev/null && break; done\n'
        "commit gold\nenvelope succeeded\n",
    )
    write(tools / "behaviours" / "idler", "envelope succeeded\n")
    write(tools / "behaviours" / "cheat", ATTACKS["pytest-toml"])
    config_path = out / "yylo-benchmark.config.json"
    config = json.loads(config_path.read_text())
    argv = [str(tools / "agent.sh"), "{model}", "{workspace}", "{envelope}", "{prompt_file}"]
    config["harnesses"] = {"candidate": {"kind": "command", "argv": argv}}
    config["tool_policy"]["read_only_paths"] = [str(tools)]
    config["yylo_version"] = "test"
    config_path.write_text(json.dumps(config, indent=2))
    tasks = [a for i in IDS for a in ("--task", str(out / "cases" / f"{i}.md"))]
    plan_file = str(root / "plan.json")
    made = yyb(
        "--config", str(config_path), "plan", *tasks, "--models", "zz/gold,zz/idler,zz/cheat",
        "--output", plan_file, "--json",
    )  # fmt: skip
    assert made.exit_code == 0, made.stderr
    plan = json.loads(made.stdout)["plan"]
    authorized = yyb(
        "--config", str(config_path), "authorize", "--plan", plan_file, "--expires", "+1h"
    )
    assert authorized.exit_code == 0, authorized.stderr
    ran = yyb("--config", str(config_path), "run", "--plan", plan_file, "--jobs", "2")
    assert ran.exit_code in (0, 1), ran.stderr
    store = Store.open(yyb.store_path)
    got = {}
    for _, oid in store.refs.iter_refs(f"runs/{plan}/*/terminal"):
        terminal = store.objects.get_record(oid)
        attempt = store.objects.get_record(terminal["links"]["attempt"])
        got[(attempt["case_id"], attempt["model"]["resolved"])] = terminal["class"]
    assert len(got) == 6, (got, ran.stdout, ran.stderr)
    for instance_id in IDS:
        assert got[(instance_id, "zz/gold")] == "resolved", got
        assert got[(instance_id, "zz/idler")] != "resolved", got
        assert got[(instance_id, "zz/cheat")] != "resolved", got


@pytest.mark.deep
def test_tomli_on_python_3_13_from_a_debian_root(tmp_path):
    """The same tomli row with its recipe asking for Python 3.13, which the host lacks: the
    import gives its spec a trixie root (mmdebstrap) as its base, and gold validation runs on
    that root's interpreter."""
    repos = tmp_path / "repos"
    subprocess.run(
        ["git", "clone", "-q", str(DATA / "tomli.bundle"), str(repos / "tomli")], check=True
    )
    recipes = json.loads((DATA / "environments.json").read_text())
    given = {IDS[0]: dict(recipes[IDS[0]], python="3.13", name="tomli-py313")}
    write(tmp_path / "envs.json", json.dumps(given))
    rows = [line for line in (DATA / "instances.jsonl").read_text().splitlines() if IDS[0] in line]
    write(tmp_path / "rows.jsonl", rows[0] + "\n")
    yyb = Yyb(str(tmp_path / "store"))
    out = tmp_path / "swe"
    done = yyb(
        "import", "swe-bench", str(tmp_path / "rows.jsonl"), "--repos", str(repos),
        "--out", str(out), "--environments", str(tmp_path / "envs.json"),
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    spec = json.loads((out / "envs" / "tomli-py313.json").read_text())
    assert spec["base"] == "debian-trixie-python3.13.json"
    config = str(out / "yylo-benchmark.config.json")
    checked = yyb(
        "--config", config, "validate", "--gold", "--task", str(out / "cases" / f"{IDS[0]}.md")
    )
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    assert "gold=pass empty=fail" in checked.stdout
    listed = yyb("env", "list")
    assert " rootfs cached debian-trixie-python3.13" in listed.stdout
    assert " python cached tomli-py313" in listed.stdout
