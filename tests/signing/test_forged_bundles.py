"""An auditor holding only a bundle and the public key catches each forgery of a run's
evidence: an evaluation, a terminal, evidence, a dropped signature, another identity.

The forger has the producer's store but not its key, and works below the plumbing (refs
planted with a chain of one update, tests/doctor/forge.py), so that only content checks and
signatures can catch it. Each forgery is bundled with ``bundle create --plan`` and checked the
way docs/audit.md says: unbundle into a new store, ``verify-chain --trusted-key`` on every
terminal and evaluation ref, ``doctor --plan``.
"""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import Yyb
from tests.doctor.forge import attempt_of, consistent_pass, forge, leaf, plant
from yyb import signing
from yyb.store.repo import Store


@pytest.fixture
def source(signed, tmp_path):
    root, public, key = signed
    shutil.copytree(root / "store", tmp_path / "store", symlinks=True)
    store = Store.open(str(tmp_path / "store"))
    plan_oid = next(n.split("/")[2] for n in store.refs.names() if n.startswith("refs/plans/"))
    return store, plan_oid, str(root / "ex" / "plan.json"), public, key


def audit(store, plan_file: str, public: str, tmp_path) -> dict[str, list[str]]:
    """The auditor's path over a --plan bundle of ``store``: failing step -> its error lines."""
    bundle = str(tmp_path / "evidence.bundle")
    assert Yyb(store.path)("bundle", "create", bundle, "--plan", plan_file).exit_code == 0
    auditor = Yyb(str(tmp_path / "audit"))
    Store.init(auditor.store_path)
    assert auditor("bundle", "unbundle", bundle).exit_code == 0
    failed: dict[str, list[str]] = {}
    heads = [
        line.split()[1]
        for line in auditor("show-ref", "refs/runs").lines
        if line.endswith("/terminal") or "/evaluations/" in line
    ]
    assert heads
    for ref in heads:
        checked = auditor("verify-chain", "--trusted-key", public, ref)
        if checked.exit_code != 0:
            failed[ref] = [line for line in checked.lines if line.startswith("error")]
    doctor = auditor("doctor", "--plan", plan_file)
    if doctor.exit_code != 0:
        failed["doctor --plan"] = [line for line in doctor.lines if line.startswith("error")]
    return failed


def test_the_genuine_bundle_passes(source, tmp_path):
    store, _, plan_file, public, _ = source
    assert audit(store, plan_file, public, tmp_path) == {}


def forged_pass(store, plan_oid):
    """The idler's failure as a pass, consistent all the way down, each ref planted."""
    attempt_oid, refs = consistent_pass(store, plan_oid)
    for name, oid in refs.items():
        plant(store, name, oid)
    evaluation, forged, _ = refs.values()
    return attempt_oid, evaluation, forged


def test_a_forged_evaluation_and_terminal_are_unsigned(source, tmp_path):
    store, plan_oid, plan_file, public, _ = source
    attempt_oid, evaluation, terminal = forged_pass(store, plan_oid)
    failed = audit(store, plan_file, public, tmp_path)
    assert "doctor --plan" not in failed  # consistent: only the signatures tell
    lines = " ".join(line for found in failed.values() for line in found)
    assert f"unsigned {evaluation}" in lines and f"unsigned {terminal}" in lines
    assert set(failed) == {
        leaf(store, plan_oid, attempt_oid, "terminal"),
        next(r for r in failed if "/evaluations/" in r),
    }


def test_forged_evidence_is_caught(source, tmp_path):
    """Evidence is not signed itself: it must agree with the signed terminal it links."""
    store, plan_oid, plan_file, public, _ = source
    attempt_oid, terminal = attempt_of(store, plan_oid, "example/idler")
    name = leaf(store, plan_oid, attempt_oid, "evidence")
    plant(store, name, forge(store, store.refs.read(name), **{"class": "resolved"}))
    failed = audit(store, plan_file, public, tmp_path)
    assert list(failed) == ["doctor --plan"]
    assert any("wrong-link" in line for line in failed["doctor --plan"])


def test_a_dropped_signature_is_caught(source, tmp_path):
    store, plan_oid, plan_file, public, _ = source
    attempt_oid, _ = attempt_of(store, plan_oid, "example/fixer")
    oid = store.refs.read(leaf(store, plan_oid, attempt_oid, "terminal"))
    store.refs.update(f"refs/signatures/{oid}", None, reason="dropped")
    failed = audit(store, plan_file, public, tmp_path)
    lines = " ".join(line for found in failed.values() for line in found)
    assert f"unsigned {oid}" in lines


def test_another_identity_is_caught_even_when_signed(source, tmp_path):
    """A terminal and execution rewritten to another model and signed with the real key (a
    harness that reported the wrong model, or a stolen key): doctor --plan refuses it."""
    store, plan_oid, plan_file, public, key = source
    attempt_oid, terminal = attempt_of(store, plan_oid, "example/fixer")
    identity = {"requested": "x/other", "resolved": "x/other", "observed": "x/other"}
    execution = forge(store, terminal["links"]["execution"], identity=identity)
    name = leaf(store, plan_oid, attempt_oid, "terminal")
    forged = forge(store, store.refs.read(name), identity=identity, links={"execution": execution})
    evidence = forge(
        store,
        store.refs.read(leaf(store, plan_oid, attempt_oid, "evidence")),
        links={"terminal": forged},
    )
    signing.sign(store, forged, signing.load_private(key))
    for which, oid in (("execution", execution), ("terminal", forged), ("evidence", evidence)):
        plant(store, leaf(store, plan_oid, attempt_oid, which), oid)
    failed = audit(store, plan_file, public, tmp_path)
    assert list(failed) == ["doctor --plan"]
    assert any("wrong-identity" in line for line in failed["doctor --plan"])
