"""doctor --plan against a forger: moved refs, other identities, other evaluators, paths.

Each test forges evidence in a copy of the example's store, as an attacker with the store (but
not the signing key) would, and requires doctor --plan to refuse it and the report to stay
incomplete. What only a signature can catch is in tests/signing/test_forged_bundles.py.
"""

from __future__ import annotations

from tests.conftest import Yyb
from tests.doctor.forge import attempt_of, forge, leaf, move, plant
from yyb.evidence import names
from yyb.evidence.experiment import verify_experiment


def errors(store, plan_oid):
    findings, summary = verify_experiment(store, plan_oid)
    return {f.code for f in findings if f.level == "error"}, summary


def forged_pass(store, plan_oid):
    """The idler's failed attempt turned into a pass: evaluation, terminal, evidence."""
    attempt_oid, terminal = attempt_of(store, plan_oid, "example/idler")
    assert terminal["class"] == "grader_failure"
    [receipt_oid] = terminal["links"]["evaluations"]
    receipt = store.objects.get_record(receipt_oid)
    result = forge(store, receipt["links"]["result"], verdict="pass", quality="pass", exit_code=0)
    evaluation = forge(store, receipt_oid, verdict="pass", links={"result": result})
    new_terminal = forge(
        store,
        store.refs.read(leaf(store, plan_oid, attempt_oid, "terminal")),
        **{"class": "resolved", "reason": "the candidate succeeded and the grader passed"},
    )
    evidence = forge(
        store,
        store.refs.read(leaf(store, plan_oid, attempt_oid, "evidence")),
        **{"class": "resolved"},
        links={"terminal": new_terminal},
    )
    profile = receipt["profile"]
    return attempt_oid, {
        f"refs/runs/{plan_oid}/{attempt_oid}/evaluations/{profile}": evaluation,
        leaf(store, plan_oid, attempt_oid, "terminal"): new_terminal,
        leaf(store, plan_oid, attempt_oid, "evidence"): evidence,
    }


def test_a_pass_forged_with_three_update_refs_fails_doctor_and_the_report(copy):
    store, plan_oid, plan_file = copy
    _, refs = forged_pass(store, plan_oid)
    yyb = Yyb(store.path)
    for name, oid in refs.items():  # the forger's plumbing: three update-refs
        assert yyb("update-ref", "-m", "fix", name, oid).exit_code == 0
    found, summary = errors(store, plan_oid)
    assert "rewritten-ref" in found and summary["status"] == "incomplete"
    doctor = yyb("doctor", "--plan", plan_file)
    assert doctor.exit_code == 1 and "rewritten-ref" in doctor.stdout
    report = yyb("report", "--plan", plan_file, "--no-layer")
    assert report.exit_code == 1  # the gate refuses the chain: the forged pass is not counted
    [idler] = [line for line in report.lines if line.startswith("example/idler  (all)")]
    assert idler.split()[4] == "0"  # resolved: the forged pass is not counted


def test_a_planted_terminal_that_its_evidence_does_not_decide_is_refused(copy):
    """A terminal and evidence planted below the plumbing (one update each, from nothing)
    that say resolved while the retained evaluation failed: the class does not follow from
    the evidence. (A forgery consistent all the way down, evaluation included, is what only
    a signature catches: tests/signing/test_forged_bundles.py.)"""
    store, plan_oid, _ = copy
    attempt_oid, refs = forged_pass(store, plan_oid)
    for name, oid in refs.items():
        if "/evaluations/" not in name:
            plant(store, name, oid)
    found, summary = errors(store, plan_oid)
    assert "wrong-class" in found and "rewritten-ref" not in found
    assert summary["status"] == "incomplete"


def test_a_terminal_rewritten_to_another_model_fails_on_identity(copy):
    store, plan_oid, _ = copy
    attempt_oid, terminal = attempt_of(store, plan_oid, "example/fixer")
    name = leaf(store, plan_oid, attempt_oid, "terminal")
    identity = {
        "requested": "example/other",
        "resolved": "example/other",
        "observed": "example/other",
    }
    # The forger rewrites the execution too, so that the two agree, and re-links evidence.
    execution = forge(store, terminal["links"]["execution"], identity=identity)
    forged = forge(store, store.refs.read(name), identity=identity, links={"execution": execution})
    evidence = forge(
        store,
        store.refs.read(leaf(store, plan_oid, attempt_oid, "evidence")),
        links={"terminal": forged},
    )
    plant(store, leaf(store, plan_oid, attempt_oid, "execution"), execution)
    plant(store, name, forged)
    plant(store, leaf(store, plan_oid, attempt_oid, "evidence"), evidence)
    found, summary = errors(store, plan_oid)
    # The planted refs are second creations too, which the log's replay names.
    assert found - {"log-recreated"} == {"wrong-identity"} and summary["status"] == "incomplete"


def test_a_resolved_terminal_must_have_observed_the_planned_model(copy):
    store, plan_oid, _ = copy
    attempt_oid, terminal = attempt_of(store, plan_oid, "example/fixer")
    identity = dict(terminal["identity"], observed="vendor/cheaper-model")
    execution = forge(store, terminal["links"]["execution"], identity=identity)
    forged = forge(
        store,
        store.refs.read(leaf(store, plan_oid, attempt_oid, "terminal")),
        identity=identity,
        links={"execution": execution},
    )
    evidence = forge(
        store,
        store.refs.read(leaf(store, plan_oid, attempt_oid, "evidence")),
        links={"terminal": forged},
    )
    for which, oid in (("execution", execution), ("terminal", forged), ("evidence", evidence)):
        plant(store, leaf(store, plan_oid, attempt_oid, which), oid)
    assert errors(store, plan_oid)[0] - {"log-recreated"} == {"wrong-identity"}


def test_an_intent_for_another_harness_fails_on_identity(copy):
    store, plan_oid, _ = copy
    attempt_oid, terminal = attempt_of(store, plan_oid, "example/fixer")
    intent = forge(store, terminal["links"]["intent"], harness="another-harness")
    plant(store, leaf(store, plan_oid, attempt_oid, "intent"), intent)
    found, _ = errors(store, plan_oid)
    assert "wrong-identity" in found


def test_an_evaluation_by_another_evaluator_fails(copy):
    """A receipt whose evaluator is not the catalog's pinned one (another version, other
    bytes) is refused even when it is otherwise the exact generation 1."""
    store, plan_oid, _ = copy
    attempt_oid, terminal = attempt_of(store, plan_oid, "example/fixer")
    [receipt_oid] = terminal["links"]["evaluations"]
    receipt = store.objects.get_record(receipt_oid)
    evaluator = dict(receipt["evaluator"], bytes_sha256="f" * 64)
    forged = forge(store, receipt_oid, evaluator=evaluator)
    plant(store, f"refs/runs/{plan_oid}/{attempt_oid}/evaluations/{receipt['profile']}", forged)
    found, _ = errors(store, plan_oid)
    assert "wrong-evaluator" in found


def test_an_evaluation_ref_moved_back_is_refused(copy):
    """Generations move one at a time; a ref set back to nothing and written again is not."""
    store, plan_oid, _ = copy
    attempt_oid, terminal = attempt_of(store, plan_oid, "example/fixer")
    [receipt_oid] = terminal["links"]["evaluations"]
    name = (
        f"refs/runs/{plan_oid}/{attempt_oid}/evaluations/"
        + (store.objects.get_record(receipt_oid)["profile"])
    )
    store.refs.update(name, None, reason="forged")
    move(store, name, receipt_oid)
    assert errors(store, plan_oid)[0] == {"rewritten-ref"}


def test_a_listing_that_climbs_out_of_its_folder_is_refused(copy):
    store, plan_oid, _ = copy
    attempt_oid, terminal = attempt_of(store, plan_oid, "example/fixer")
    post = store.objects.get_record(terminal["links"]["manifest"])
    listing = store.objects.get_record(post["links"]["listing"])
    entries = [list(e) for e in listing["entries"]]
    entries[0][0] = "../../x"
    bad = forge(store, post["links"]["listing"], entries=sorted(entries))
    manifest = forge(store, terminal["links"]["manifest"], links={"listing": bad})
    execution = forge(
        store, terminal["links"]["execution"], links={"manifest": manifest, "listing": bad}
    )
    forged = forge(
        store,
        store.refs.read(leaf(store, plan_oid, attempt_oid, "terminal")),
        links={"manifest": manifest, "execution": execution},
    )
    evidence = forge(
        store,
        store.refs.read(leaf(store, plan_oid, attempt_oid, "evidence")),
        links={"terminal": forged, "manifest": manifest, "listing": bad},
    )
    for which, oid in (("execution", execution), ("terminal", forged), ("evidence", evidence)):
        plant(store, leaf(store, plan_oid, attempt_oid, which), oid)
    found, _ = errors(store, plan_oid)
    assert "unsafe-listing" in found


def test_an_evaluation_that_graded_a_tampered_test_is_refused(copy):
    """The example's grader protects test_calc.sh. A forged generation 1 that claims to have
    graded a listing in which the candidate's own test_calc.sh stands (instead of the base's)
    fails doctor: the graded listing is recomputed from the final and base listings."""
    from yyb.harness import manifest

    store, plan_oid = copy[:2]
    attempt_oid, terminal = attempt_of(store, plan_oid, "example/idler")
    receipt_oid = terminal["links"]["evaluations"][0]
    receipt = store.objects.get_record(receipt_oid)
    graded = manifest.entries_of(store.objects.get_record(receipt["links"]["graded_listing"]))
    tampered = dict(graded, **{"test_calc.sh": (0o100755, store.objects.put("blob", b"exit 0\n"))})
    forged_listing = store.objects.put_record(manifest.listing_of(tampered))
    forged = forge(store, receipt_oid, links={"graded_listing": forged_listing})
    plant(store, names.evaluation(plan_oid, attempt_oid, receipt["profile"]), forged)
    codes, _ = errors(store, plan_oid)
    assert "wrong-graded-listing" in codes, codes
    # The control: the real receipt, planted back the same way, raises no such finding.
    plant(store, names.evaluation(plan_oid, attempt_oid, receipt["profile"]), receipt_oid)
    codes, _ = errors(store, plan_oid)
    assert "wrong-graded-listing" not in codes, codes
