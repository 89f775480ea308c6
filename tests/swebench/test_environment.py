"""A case that declares a ``python`` environment runs on it, with no venv made by hand.

The mathkit case (tests/swebench/conftest.py) declares a spec: the host's /usr/bin/python3
with pytest pinned and the package installed editable at the base commit. Its ``tests``
profile calls plain ``python -m pytest``, and the tool policy shows nothing of this test's own
interpreter: what pytest the grader runs, and which Python, come from the environment alone.
Candidates and graders see the workspace at /testbed and the virtual environment at
/yyb/python; the plan, the receipt, the grader's input and the compatibility key name the
environment; a file changed in the built tree is found before anything is dispatched.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.grading.conftest import write
from tests.swebench.conftest import command, task_text
from tests.swebench.test_tests_kind import ATTACKS, GOLD

PYTHON = "/usr/bin/python3"
pytestmark = pytest.mark.skipif(
    not os.path.exists(PYTHON)
    or subprocess.run([PYTHON, "-m", "venv", "--help"], capture_output=True).returncode != 0,
    reason="the host has no /usr/bin/python3 with venv",
)
# Where the candidate says it is and what runs its Python.
WHERE = (
    "pwd > where.txt\npython -c 'import sys; print(sys.prefix)' >> where.txt\n"
    "python -c 'import pytest; print(pytest.__file__)' >> where.txt\n"
    "commit where\nenvelope succeeded\n"
)


def spec(pytest_version: str, base: str) -> dict:
    return {
        "name": "mathkit-py3",
        "kind": "python",
        "python": {
            "interpreter": PYTHON,
            "requirements": [f"pytest=={pytest_version}"],
            "install": ["python -m pip install -q -e ."],
            "install_commit": base,
        },
    }


@pytest.fixture(scope="module")
def env_bench(tmp_path_factory):
    from tests.swebench.conftest import build_tests_bench

    bench = build_tests_bench(tmp_path_factory.mktemp("env") / "bench")
    write(bench.root / "env.json", json.dumps(spec(pytest.__version__, bench.base)))
    text = task_text("mean-floors", bench.base, bench.package)
    text = text.replace(
        "    grader_profile: tests\n", "    grader_profile: tests\n    environment: env.json\n"
    )
    write(bench.task_path, text)
    profile = bench.tests_profile(command=command("python"))  # the environment's python
    data = bench.configure({"tests": profile})
    bench.config_data = data  # no tool path of this interpreter: the environment has pytest
    names = ["gold", "idler", "where", "pytest-toml"]
    for name, script in [("gold", GOLD), ("idler", "envelope succeeded\n"), ("where", WHERE)]:
        bench.behaviour(name, script)
    bench.behaviour("pytest-toml", ATTACKS["pytest-toml"])
    plan, results = bench.run([f"zz/{n}" for n in names], jobs=2)
    return bench, plan, dict(zip(names, results, strict=True))


def test_gold_resolves_and_the_others_do_not_on_the_environment(env_bench):
    _, _, results = env_bench
    assert results["gold"].terminal_class == "resolved", results["gold"].reason
    assert results["idler"].terminal_class == "grader_failure"
    assert results["pytest-toml"].terminal_class == "grader_failure"


def test_the_candidate_sees_the_workspace_at_testbed_and_the_environments_python(env_bench):
    bench, _, results = env_bench
    patch = bench.body(bench.terminal(results["where"])["links"]["patch"]).decode()
    assert "+/testbed\n" in patch
    assert "+/yyb/python\n" in patch
    assert "+/yyb/python/lib/python3" in patch  # pytest is the environment's


def test_the_plan_receipt_and_key_name_the_environment(env_bench):
    bench, plan, results = env_bench
    pins = plan.experiment["environments"]
    assert len(pins) == 1 and set(pins[0]) == {"spec", "manifest_sha256", "environment"}
    built = bench.record(pins[0]["environment"])
    assert built["manifest_sha256"] == pins[0]["manifest_sha256"]
    assert built["links"]["spec"] == pins[0]["spec"]
    receipt = bench.record(bench.terminal(results["gold"])["links"]["receipt"])
    assert receipt["built_environment"] == pins[0]
    e = bench.evaluation(plan, results["gold"], "tests")
    assert json.loads(e["_input"])["environment"] == pins[0]
    assert json.loads(e["_input"])["workspace"] == "/testbed"


def test_a_changed_file_in_the_built_tree_is_found_before_dispatch(env_bench, tmp_path):
    from yyb.errors import EnvironmentMismatch
    from yyb.harness.environments.cache import Cache

    bench, _, _ = env_bench
    plan = bench.plan(["zz/gold"])
    pin = plan.experiment["environments"][0]
    root = Cache(bench.store_path).root(pin["spec"])
    target = os.path.join(root, "bin", "activate")
    mode = os.stat(target).st_mode
    os.chmod(target, 0o644)
    try:
        with open(target, "a") as handle:
            handle.write("# changed\n")
        with pytest.raises(EnvironmentMismatch) as caught:
            bench.context(plan)
        assert caught.value.path == "bin/activate"
    finally:
        with open(target, "rb") as handle:
            data = handle.read()
        with open(target, "wb") as handle:
            handle.write(data.removesuffix(b"# changed\n"))
        os.chmod(target, mode)
    bench.context(plan)  # put back as it was: the full check passes and stamps it again


def test_the_store_with_an_environment_cache_checks_clean(env_bench):
    bench, _, _ = env_bench
    assert bench.doctor_errors() == []


def test_doctor_names_a_changed_environment_tree(env_bench):
    from yyb.harness.environments.cache import Cache
    from yyb.readiness import doctor

    bench, plan, _ = env_bench
    root = Cache(bench.store_path).root(plan.experiment["environments"][0]["spec"])
    extra = os.path.join(root, "planted")
    with open(extra, "w") as handle:
        handle.write("x\n")
    try:
        found = [f for f in doctor.findings(bench.store) if f.code.startswith("environment")]
        assert [(f.level, f.code) for f in found] == [("error", "environment-mismatch")]
        assert "planted: not in the manifest" in found[0].detail
    finally:
        os.unlink(extra)
    assert not [f for f in doctor.findings(bench.store) if f.level == "error"]
