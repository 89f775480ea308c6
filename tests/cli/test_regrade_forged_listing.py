"""`yyb regrade` on a forged final listing: refused whole, nothing written outside.

The attacker here can write records into the store (through the store API, as an importer or a
tampered copy could) but not break SHA-256: every forged record is hash-correct and
schema-valid, and the refs are moved the ordinary way. What the regrade rebuilds must stay
inside the grader's folder all the same.
"""

from __future__ import annotations

import dataclasses
import tempfile

import pytest

from tests.grading.conftest import build_bench
from yyb.errors import UnsafeListing
from yyb.harness import manifest
from yyb.store import schema


def forge_final_listing(bench, plan, attempt: str, path: str, body: bytes) -> str:
    """Add ``path`` to the attempt's final listing, then re-link every record that reaches the
    old listing (manifest, execution, evaluation, terminal, evidence, ...) to a forged twin,
    and move the attempt's refs to the twins. Returns the forged listing's oid."""
    store = bench.store
    prefix = f"refs/runs/{plan.oid}/{attempt}/"
    evidence_oid = store.refs.read(prefix + "evidence")
    terminal = bench.record(bench.record(evidence_oid)["links"]["terminal"])
    listing_oid = bench.record(terminal["links"]["manifest"])["links"]["listing"]
    listing = bench.record(listing_oid)
    files = list(listing["links"]["files"]) + [store.objects.put("blob", body)]
    entries = listing["entries"] + [[path, 0o100644, len(files) - 1]]
    forged = dict(listing, entries=entries, links={"files": files})
    twin: dict[str, str] = {listing_oid: store.objects.put_record(forged)}

    def relink(oid: str) -> str:
        if oid not in twin:
            obj = store.objects.get(oid)
            twin[oid] = oid
            if obj.kind == "record" and "links" in (record := obj.value()):
                links = {
                    role: [relink(o) for o in value] if isinstance(value, list) else relink(value)
                    for role, value in record["links"].items()
                }
                if links != record["links"]:
                    if "added" in record:
                        record["added"] = sorted(record["added"] + [path])  # the manifest
                    twin[oid] = store.objects.put_record(dict(record, links=links))
        return twin[oid]

    for name in store.refs.names():
        if name.startswith(prefix):
            old = store.refs.read(name)
            if relink(old) != old:
                store.refs.update(name, twin[old], old=old, reason="forged")
    return twin[listing_oid]


def test_regrade_refuses_a_listing_that_climbs_out(tmp_path, monkeypatch):
    """Through the CLI the refusal may come from the chain check (which proves every listing
    with the same rule) or from the rebuild itself; below the chain check the rebuild alone
    must refuse. Either way nothing lands outside and the answer is one line, exit 1."""
    bench = build_bench(tmp_path / "bench")
    bench.configure()
    plan, (fixer,) = bench.run(["zz/fixer"])
    assert fixer.terminal_class == "resolved"
    forged = forge_final_listing(bench, plan, fixer.attempt, "../../x", b"ESCAPED\n")
    record = bench.record(forged)  # hash-correct, and valid against its schema
    assert schema.problem(record, manifest.LISTING) is None

    # The grader's folder is <temp>/yyb-grade-*/workspace: "../../x" is <temp>/x.
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    done = bench.yyb(
        "regrade", "--plan", bench.plan_file(plan), "--profile", "tests", "--progress", "none"
    )

    assert not (temp / "x").exists()
    assert list(temp.iterdir()) == []  # no grader folder left behind either
    assert done.exit_code == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("yyb: ") and "refused" in lines[0], lines
    assert [r["generation"] for _, r in bench.history(plan, fixer.attempt, "tests")] == [1]

    # One layer down, with no chain check in front: the evaluator's rebuild refuses by itself.
    evidence = bench.store.refs.read(f"refs/runs/{plan.oid}/{fixer.attempt}/evidence")
    forged_result = dataclasses.replace(fixer, terminal=bench.record(evidence)["links"]["terminal"])
    with pytest.raises(UnsafeListing) as info:
        bench.evaluate(plan, forged_result, "tests", generation=2)
    assert (info.value.oid, info.value.path) == (forged, "../../x")
    assert str(info.value) == f"file listing {forged}: refused path '../../x': a '..' component"
    assert not (temp / "x").exists() and list(temp.iterdir()) == []
