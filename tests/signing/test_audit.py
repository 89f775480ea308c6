"""The auditor's path (docs/audit.md): a bundle and a public key prove an experiment offline."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

from tests.conftest import Yyb, flip_byte
from yyb import signing
from yyb.store.repo import Store


def test_auditor_path_and_one_flipped_byte(tmp_path, monkeypatch):
    key_path = str(tmp_path / "signing.key")
    public = signing.generate_key(key_path)
    monkeypatch.setenv(signing.KEY_ENV, key_path)
    source = Yyb(str(tmp_path / "source"))
    example = tmp_path / "example"
    assert source("example", "--dir", str(example), "--attempts", "1").exit_code == 0
    monkeypatch.setenv(signing.KEY_ENV, "")
    heads = [
        line.split()[1]
        for line in source("show-ref").lines
        if line.endswith("/terminal") or "/evaluations/" in line
    ]
    assert heads
    path = str(tmp_path / "evidence.bundle")
    assert source("bundle", "create", path, "--all").exit_code == 0

    # On a machine that never saw the source store: only the bundle and the public key.
    audit = Yyb(str(tmp_path / "audit"))
    Store.init(audit.store_path)
    assert audit("bundle", "verify", path).exit_code == 0
    assert audit("bundle", "unbundle", path).exit_code == 0
    for ref in heads:
        checked = audit("verify-chain", "--trusted-key", public, ref)
        assert checked.exit_code == 0, checked.stdout
    assert audit("doctor").exit_code == 0
    assert audit("doctor", "--plan", str(example / "plan.json")).exit_code == 0

    # One flipped byte inside the first object's body (version 2: a pack after the header,
    # 20 bytes of pack head, then "<kind> <size>\0<body>"): every step that reads it fails.
    data = Path(path).read_bytes()
    assert data.startswith(b"yyb-bundle 2\n")
    start = data.index(b"\n\n") + 2 + 20
    flip_byte(path, data.index(b"\0", start) + 2)
    fresh = Yyb(str(tmp_path / "fresh"))
    Store.init(fresh.store_path)
    for args in (("bundle", "verify", path), ("bundle", "unbundle", path)):
        failed = fresh(*args)
        assert failed.exit_code == 1 and failed.stderr.count("\n") == 1, failed.stderr
        assert failed.stderr.startswith("yyb: error: "), failed.stderr
    assert Store.open(fresh.store_path).refs.names() == []
    failed = fresh("verify-chain", "--trusted-key", public, heads[0])
    assert failed.exit_code == 1 and heads[0] in failed.stderr


def test_a_rewritten_terminal_loses_its_signature(tmp_path):
    """Evidence changed and re-bundled: the bundle is self-consistent, the signature is not."""
    store = Store.init(str(tmp_path / "s"))[0]
    from tests.conftest import note

    key_path = str(tmp_path / "k.key")
    public = signing.generate_key(key_path)
    honest = store.objects.put_record(note("resolved"))
    store.refs.update("refs/runs/p/a/terminal", honest)
    sig = signing.sign(store, honest, signing.load_private(key_path))
    forged = store.objects.put_record(note("resolved, honestly"))
    store.refs.update("refs/runs/p/a/terminal", forged)
    # The forger points the signature ref of the new object at the old signature.
    store.refs.update(f"refs/signatures/{forged}", sig)
    run = Yyb(store.path)
    path = str(tmp_path / "b.bundle")
    assert run("bundle", "create", path, "--all").exit_code == 0
    assert run("bundle", "verify", path).exit_code == 0
    result = run("verify-chain", "--trusted-key", public, "runs/p/a/terminal")
    assert result.exit_code == 1
    assert result.lines[-1].startswith(f"error bad-signature {forged}:")
    assert f"signs {honest}, not {forged}" in result.lines[-1]


def test_a_plan_bundle_carries_the_signatures_of_every_generation_and_layer(tmp_path, monkeypatch):
    """After a regrade and a second report layer, the heads link records whose signature refs
    are no ref's tip any more: generation-1 receipts, the first layer. --plan carries them."""
    from tests.grading.conftest import build_bench

    key_path = str(tmp_path / "signing.key")
    public = signing.generate_key(key_path)
    monkeypatch.setenv(signing.KEY_ENV, key_path)
    bench = build_bench(tmp_path / "bench")
    bench.configure()
    plan, _ = bench.run(["zz/fixer", "zz/idler"])
    plan_file = bench.plan_file(plan)
    for args in (("report",), ("regrade", "--profile", "tests"), ("report",)):
        done = bench.yyb(*args, "--plan", plan_file)
        assert done.exit_code == 0, done.stderr
    monkeypatch.setenv(signing.KEY_ENV, "")
    layers = list(bench.store.refs.log(f"refs/reports/{plan.oid}"))
    assert len(layers) == 2
    path = str(tmp_path / "plan.bundle")
    created = bench.yyb("bundle", "create", path, "--plan", plan_file)
    assert created.exit_code == 0, created.stderr

    audit = Yyb(str(tmp_path / "audit"))
    Store.init(audit.store_path)
    assert audit("bundle", "unbundle", path).exit_code == 0
    heads = [
        line.split()[1]
        for line in audit("show-ref", "refs/runs", "refs/reports").lines
        if line.endswith("/terminal") or "/evaluations/" in line or "/reports/" in line
    ]
    assert len(heads) == 5  # two terminals, two evaluation refs, one report ref
    for ref in heads:
        checked = audit("verify-chain", "--trusted-key", public, ref)
        assert checked.exit_code == 0, (ref, checked.stdout)
    # Nothing beyond the experiment: every bundled signature signs one of its records.
    signed = {
        name.rsplit("/", 1)[1]
        for name in Store.open(audit.store_path).refs.names()
        if name.startswith("refs/signatures/")
    }
    # The checkpoints of the producer's log come with their signed notes (bundle create
    # --plan): one per signed report, each linked by the checkpoint ref's chain.
    audited = Store.open(audit.store_path)
    notes = {
        audited.objects.get_record(update["new"])["links"]["note"]
        for _, update in audited.refs.log("refs/transparency/checkpoint")
    }
    assert len(notes) == 2 and notes <= signed
    signed -= notes
    assert len(signed) == 2 + 4 + 2  # terminals, both generations of receipts, both layers


@pytest.fixture(scope="module")
def audit_runs(tmp_path_factory) -> list[str]:
    """Run every command of docs/audit.md as written by sh -e in a fresh folder: the
    producer's block, the auditor's, then the two that check with other tools (their
    ``python3`` one with in-toto installed); return each block's output. The auditor's loops
    print ``FAILED: <ref>`` for any ref that fails instead of stopping."""
    import subprocess

    from tests.conftest import doc_blocks, doc_shell

    pytest.importorskip("in_toto")
    blocks = doc_blocks("audit.md")
    assert len(blocks) == 4
    env, work = doc_shell(tmp_path_factory.mktemp("audit-md"))
    python = Path(env["PATH"].split(":")[0]) / "python3"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    outputs = []
    for block in blocks:
        done = subprocess.run(
            ["sh", "-e", "-c", block], cwd=work, env=env, capture_output=True, timeout=300
        )
        assert done.returncode == 0, (block, done.stdout.decode(), done.stderr.decode())
        outputs.append(done.stdout.decode())
    return outputs


@pytest.fixture(scope="module")
def audit_md(audit_runs) -> str:
    return audit_runs[1]


def test_docs_audit_md_checks_with_other_tools(audit_runs):
    """The in-toto library verifies a terminal's envelope, and the verifier key made from the
    public key alone is the one yyb prints for the checkpoint's origin."""
    from yyb import signing

    (verified,) = audit_runs[2].splitlines()
    assert verified.startswith("verified: yylo_benchmark_terminal.v2 ")
    (vkey,) = audit_runs[3].splitlines()
    name, _, _ = vkey.split("+", 2)
    assert name.startswith("yyb/")
    public = base64.b64decode(vkey.split("+", 2)[2])[1:].hex()
    assert vkey == signing.note_verifier_key(name, public)


def test_docs_audit_md_runs_as_written(audit_md):
    shown = [line.split() for line in audit_md.splitlines()]  # show-ref: '<oid> <ref>'
    listed = [w[1] for w in shown if len(w) == 2 and len(w[0]) == 64 and w[1].startswith("refs/")]
    assert sum(ref.endswith("/terminal") for ref in listed) == 2
    assert sum("/evaluations/" in ref for ref in listed) == 2
    assert sum(ref.startswith("refs/reports/") for ref in listed) == 1
    failed = [line for line in audit_md.splitlines() if line.startswith("FAILED: ")]
    assert [line for line in failed if "refs/reports/" not in line] == []


def test_docs_audit_md_verifies_the_report_layer(audit_md):
    assert [line for line in audit_md.splitlines() if line.startswith("FAILED: ")] == []
