"""The release-readiness command and its receipt: identities, determinism, refusal of a dirty
checkout, doctor's re-derivation of every claim from the retained attempts, bundles."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.conftest import Yyb
from tests.readiness.conftest import BUILD, GivenBuild, by_case, checkout, copy_of_yyb
from yyb import __version__
from yyb.errors import UsageError
from yyb.evidence import names
from yyb.readiness import identity, run, verify
from yyb.store.repo import Store


@pytest.fixture
def clean_build(tmp_path, monkeypatch) -> Path:
    """yyb as if it ran from a clean checkout of its own (this one may not be clean)."""
    top = copy_of_yyb(tmp_path / "checkout")
    monkeypatch.setattr(identity, "PACKAGE_DIR", str(top / "yyb"))
    return top


def test_the_command_passes_twice_with_one_receipt(clean_build, tmp_path):
    yyb = Yyb(str(tmp_path / "store"))
    output = tmp_path / "receipt.json"
    first = yyb("release-readiness", "--output", str(output))
    assert first.exit_code == 0, (first.stdout, first.stderr)
    assert "coverage   complete" in first.stdout
    written = json.loads(output.read_text())
    commit = os.popen(f"git -C {clean_build} rev-parse HEAD").read().strip()
    modules = written["receipt"]["yyb"]["modules"]
    assert modules["count"] > 10  # every yyb module that ran, by its bytes
    expected = {"kind": "checkout", "version": __version__, "commit": commit, "modules": modules}
    assert written["receipt"]["yyb"] == expected
    again = yyb("release-readiness", "--json")
    assert again.exit_code == 0, again.stderr
    document = json.loads(again.stdout)
    assert document["oid"] == written["oid"]  # the same build and host: the same receipt
    assert document["receipt"] == written["receipt"]
    store = Store.open(yyb.store_path)
    assert store.refs.read(names.READINESS_LATEST) == written["oid"]
    log = list(store.refs.log(names.READINESS_LATEST))
    assert len(log) == 2  # the times of both runs live in the ref log
    # Each run's attempts are retained: the runs refs name the second run's plans.
    assert set(document["runs"]) == {"suite", "timeout", "cancel"}
    for part, plan_oid in document["runs"].items():
        assert store.refs.read(names.readiness_run(written["oid"], part)) == plan_oid
    doctor = yyb("doctor")
    assert doctor.exit_code == 0, doctor.stdout
    assert "readiness" not in doctor.stdout
    # The existing output file is never overwritten.
    refused = yyb("release-readiness", "--output", str(output))
    assert refused.exit_code == 2 and "never overwritten" in refused.stderr


def test_a_dirty_checkout_is_refused_with_one_line(tmp_path, monkeypatch):
    top = checkout(tmp_path / "checkout", {"yyb/__init__.py": ""})
    (top / "yyb" / "patched.py").write_text("print('not committed')\n")
    monkeypatch.setattr(identity, "PACKAGE_DIR", str(top / "yyb"))
    yyb = Yyb(str(tmp_path / "store"))
    result = yyb("release-readiness")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not clean" in lines[0] and "yyb/patched.py" in lines[0]
    assert not os.path.exists(yyb.store_path)  # nothing was written
    (top / "yyb" / "patched.py").unlink()
    (top / "yyb" / "__init__.py").write_text("changed = True\n")  # a tracked change, too
    with pytest.raises(identity.DirtyCheckout):
        identity.build()


def _fake_dist(tmp_path: Path, body: bytes):
    from importlib import metadata

    site = tmp_path / "site"
    (site / "fake").mkdir(parents=True)
    (site / "fake" / "__init__.py").write_bytes(body)
    info = site / "fake-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake\nVersion: 1.2\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
    record = f"fake/__init__.py,sha256={digest},{len(body)}\nfake-1.2.dist-info/RECORD,,\n"
    (info / "RECORD").write_text(record)
    return metadata.PathDistribution(info), site, record


def test_an_installed_distribution_is_bound_by_its_checked_record(tmp_path):
    dist, site, record = _fake_dist(tmp_path, b"VALUE = 1\n")
    found = identity.distribution("fake", dist)
    assert found == {
        "kind": "distribution",
        "name": "fake",
        "version": "1.2",
        "record_sha256": hashlib.sha256(record.encode()).hexdigest(),
        "files_checked": 1,
    }
    (site / "fake" / "__init__.py").write_bytes(b"VALUE = 2\n")  # changed after installing
    with pytest.raises(UsageError, match="differs from its RECORD"):
        identity.distribution("fake", dist)


def test_a_package_outside_any_checkout_is_the_installed_distribution(tmp_path, monkeypatch):
    from importlib import metadata

    dist, _, _ = _fake_dist(tmp_path, b"VALUE = 1\n")
    monkeypatch.setattr(metadata, "distribution", lambda name: dist)
    package = tmp_path / "site" / "fake"
    assert identity.build(str(package)).record["name"] == "fake"  # no repository around it
    # Inside a repository that does not track it (a virtualenv in a checkout): the same.
    top = checkout(tmp_path / "project", {"README.md": "x\n"})
    venv = top / "venv" / "yyb"
    venv.mkdir(parents=True)
    (venv / "__init__.py").write_text("")
    assert identity.build(str(venv)).record["name"] == "fake"


def test_configured_harnesses_are_bound_and_a_missing_one_fails(tmp_path):
    from yyb import config

    program = tmp_path / "tools" / "harness"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo 'stand-in harness 1.2.3'\n")
    program.chmod(0o755)
    data = config.template("x", yylo_version="x")
    data["harnesses"] = {
        "candidate": {"kind": "command", "argv": [str(program), "{prompt_file}"]},
        "gone": {"kind": "command", "argv": [str(tmp_path / "nowhere"), "{prompt_file}"]},
    }
    data["default_candidate_harness"] = "candidate"
    data["tool_policy"] = {"network": "denied", "read_only_paths": [str(program.parent)]}
    loaded = config.Config(str(tmp_path / "config.json"), data)
    found = identity.harnesses(loaded, [])
    assert found[0] == {
        "id": "candidate",
        "kind": "command",
        "default": True,
        "path": str(program),
        "sha256": hashlib.sha256(program.read_bytes()).hexdigest(),
        "version": "stand-in harness 1.2.3",
    }
    assert found[1]["id"] == "gone" and "not installed" in found[1]["problem"]
    checks = [{"passed": True, "observed": {"class": "resolved", "verdicts": []}, "case": "x"}]
    covered = {"missing": []}
    assert verify.verdict(checks, covered, found[:1]) is True
    assert verify.verdict(checks, covered, found) is False


def test_an_offline_run_of_a_plan_that_could_spend_is_refused():
    from yyb.attempts.context import authorize
    from yyb.plans.grant import GrantError

    plan = {
        "budget": {"currency": "USD", "total_micros": 1},
        "tool_policy": {"network": "allowed"},
        "evaluators": {"selected": [], "catalog": {}},
    }
    with pytest.raises(GrantError, match="network"):
        authorize(None, "0" * 64, plan, offline=True)
    plan["tool_policy"]["network"] = "denied"
    plan["evaluators"] = {"selected": ["j"], "catalog": {"j": {"kind": "llm_judge"}}}
    with pytest.raises(GrantError, match="judge"):
        authorize(None, "0" * 64, plan, offline=True)
    plan["evaluators"] = {"selected": [], "catalog": {}}
    authorize(None, "0" * 64, plan, offline=True)  # nothing it starts can spend


# --- doctor: every claim is re-derived --------------------------------------------------------


def _forge(store, outcome, case: str, refs: bool = True, **observed) -> str:
    """A receipt whose ``case`` observed something else, made consistent everywhere but in
    the evidence (check records, coverage and verdict all recomputed), with its receipt and
    runs refs unless ``refs`` is false."""
    records = []
    for record in outcome.checks:
        if record["case"] == case:
            seen = {**record["observed"], **observed}
            changed = seen.pop("changed", [])
            record = verify.check_record(verify.BY_NAME[case], seen, changed)
        records.append(record)
    oids = [store.objects.put_record(r) for r in records]
    canary = outcome.receipt["links"]["canary"]
    receipt = run.receipt_record(
        outcome.receipt["yyb"],
        outcome.receipt["host"],
        outcome.receipt["harnesses"],
        records,
        oids,
        canary,
    )
    oid = store.objects.put_record(receipt)
    if refs:
        store.refs.update(names.readiness_receipt(oid), oid)
        for part, plan_oid in outcome.plans.items():
            store.refs.update(names.readiness_run(oid, part), plan_oid)
    return oid


def codes(store) -> list[tuple[str, str]]:
    return sorted((f.code, f.subject) for f in verify.doctor(store) if f.level == "error")


def test_doctor_rederives_each_check_from_the_retained_attempts(readiness):
    outcome = readiness.run()
    store = readiness.store
    assert codes(store) == []
    # A failing attempt claimed as passing: consistent records, but not the evidence.
    forged = _forge(store, outcome, "grader-failure", **{"class": "resolved"})
    assert ("readiness-evidence", forged) in codes(store)
    # A probe's findings erased from a check whose attempt printed them.
    record = by_case(outcome)["leak-home"]
    assert record["observed"]["findings"] == []
    stdout_claim = _forge(store, outcome, "leak-home", findings=["visible: .netrc"])
    assert ("readiness-evidence", stdout_claim) in codes(store)


def test_doctor_refuses_a_receipt_whose_verdict_or_coverage_is_typed_in(readiness):
    outcome = readiness.run()
    store = readiness.store
    failing = by_case(outcome)
    failing["timeout"] = dict(failing["timeout"], passed=False)  # a failed check...
    oids = [store.objects.put_record(failing[r["case"]]) for r in outcome.checks]
    receipt = dict(outcome.receipt, links=dict(outcome.receipt["links"], checks=oids))
    oid = store.objects.put_record(receipt)  # ...under a receipt that still says passed
    store.refs.update(names.readiness_receipt(oid), oid)
    found = {code for code, subject in codes(store) if subject == oid}
    assert {"readiness-check", "readiness-coverage", "readiness-leakage"} - found == {
        "readiness-leakage"
    }
    assert "readiness-verdict" in found


def test_a_bundle_carries_a_receipt_and_its_runs(readiness, tmp_path):
    outcome = readiness.run()
    source = Yyb(readiness.store.path)
    path = tmp_path / "readiness.bundle"
    made = source("bundle", "create", str(path), "--readiness", "latest")
    assert made.exit_code == 0, made.stderr
    target = Yyb(str(tmp_path / "elsewhere"))
    Store.init(target.store_path)
    assert target("bundle", "unbundle", str(path)).exit_code == 0
    elsewhere = Store.open(target.store_path)
    assert elsewhere.refs.read(names.readiness_receipt(outcome.oid)) == outcome.oid
    assert codes(elsewhere) == []
    doctor = target("doctor")
    assert doctor.exit_code == 0, doctor.stdout
    # Carried without its runs, it is noted, not failed.
    bare = tmp_path / "bare.bundle"
    assert (
        source("bundle", "create", str(bare), names.readiness_receipt(outcome.oid)).exit_code == 0
    )
    third = Yyb(str(tmp_path / "third"))
    Store.init(third.store_path)
    assert third("bundle", "unbundle", str(bare)).exit_code == 0
    notes = [f.code for f in verify.doctor(Store.open(third.store_path))]
    assert notes == ["readiness-no-runs"]
    missing = source("bundle", "create", str(tmp_path / "x.bundle"), "--readiness", "0" * 64)
    assert missing.exit_code == 2 and "no release-readiness receipt" in missing.stderr


def test_in_process_runs_use_the_given_build(readiness):
    outcome = readiness.run()
    assert outcome.receipt["yyb"] == BUILD


def test_a_host_without_the_sandbox_is_refused_before_anything_is_written(
    clean_build, tmp_path, monkeypatch
):
    import shutil

    from yyb.harness import sandbox

    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "git").symlink_to(shutil.which("git"))
    monkeypatch.setenv("PATH", str(tools))  # git, and no bwrap
    sandbox.bwrap_path.cache_clear()
    try:
        yyb = Yyb(str(tmp_path / "store"))
        result = yyb("release-readiness")
    finally:
        sandbox.bwrap_path.cache_clear()
    assert result.exit_code == 1, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "sandbox unavailable" in lines[0], result.stderr
    assert not os.path.exists(yyb.store_path)


def test_doctor_checks_the_receipt_latest_names(readiness):
    """A forger points ``latest`` at a receipt of its own whose check failed (consistent in
    itself, but named by no receipt ref and carrying no runs): doctor finds it."""
    outcome = readiness.run()
    store = readiness.store
    forged = _forge(store, outcome, "timeout", refs=False, **{"class": "resolved"})
    assert store.objects.get_record(forged)["passed"] is False
    store.refs.update(names.READINESS_LATEST, forged)
    found = codes(store)
    assert ("readiness-unnamed", forged) in found
    assert ("readiness-failed", forged) in found
    # Named by its own receipt ref too, a failed receipt behind latest is still a problem.
    store.refs.update(names.readiness_receipt(forged), forged)
    assert ("readiness-failed", forged) in codes(store)
    # Behind any other ref of the folder, a record that is no receipt is found as well.
    store.refs.update(f"{names.READINESS}/stray", outcome.receipt["links"]["checks"][0])
    assert ("wrong-record", outcome.receipt["links"]["checks"][0]) in codes(store)
    # Once latest names a passing receipt again, the failed one is history: a note.
    store.refs.update(names.READINESS_LATEST, outcome.oid)
    notes = [(f.level, f.code) for f in verify.doctor(store) if f.subject == forged]
    assert ("info", "readiness-failed") in notes


@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="needs the host's python3")
def test_the_suite_passes_on_an_environment_and_the_receipt_names_it(readiness, tmp_path):
    """Every case of the suite (its leakage probes included) runs on a python environment over
    the host's interpreter, the stand-in and graders on its ``python3``: each check passes, and
    the receipt and every run's plan name the one environment."""
    import json

    from yyb.evidence import environment

    spec = tmp_path / "env.json"
    spec.write_text(
        json.dumps(
            {"name": "readiness", "kind": "python", "python": {"interpreter": "/usr/bin/python3"}}
        )
    )
    outcome = run.release_readiness(
        readiness.store, None, dict(os.environ), build=GivenBuild(),
        environment=environment.load(str(spec)),
    )  # fmt: skip
    failed = [c["case"] for c in outcome.checks if not c["passed"]]
    assert failed == [] and outcome.receipt["passed"], failed
    pin = outcome.receipt["environment"]
    for plan_oid in outcome.plans.values():
        assert readiness.store.objects.get_record(plan_oid)["environments"] == [pin]
    store = readiness.store
    for plan_oid in outcome.plans.values():
        for case_oid in store.objects.get_record(plan_oid)["links"]["cases"]:
            assert store.objects.get_record(case_oid)["environment"] == pin["spec"]
