"""`yyb regrade` on a forged final listing: refused whole, nothing written outside.

The attacker here can write records into the store (through the store API, as an importer or a
tampered copy could) but not break SHA-256: every forged record is hash-correct and
schema-valid, and the refs are moved the ordinary way. What the regrade rebuilds must stay
inside the grader's folder all the same.
"""

from __future__ import annotations

import tempfile

from tests.grading.conftest import build_bench
from yyb.harness import manifest


def relinked(record: dict, new: dict[str, str]) -> dict:
    """``record`` with every linked oid that ``new`` maps replaced by its forged twin."""
    links = {
        role: [new.get(o, o) for o in value] if isinstance(value, list) else new.get(value, value)
        for role, value in record["links"].items()
    }
    return dict(record, links=links)


def forge_final_listing(bench, plan, attempt: str, path: str, body: bytes) -> str:
    """Add ``path`` to the attempt's final listing and re-link everything above it: a new
    listing, manifest, execution, terminal and evidence, with the refs moved to them."""
    store = bench.store
    prefix = f"refs/runs/{plan.oid}/{attempt}/"
    evidence_oid = store.refs.read(prefix + "evidence")
    terminal_oid = bench.record(evidence_oid)["links"]["terminal"]
    terminal = bench.record(terminal_oid)
    manifest_oid = terminal["links"]["manifest"]
    post = bench.record(manifest_oid)
    listing_oid = post["links"]["listing"]
    listing = bench.record(listing_oid)
    files = list(listing["links"]["files"]) + [store.objects.put("blob", body)]
    entries = listing["entries"] + [[path, 0o100644, len(files) - 1]]
    new = {
        listing_oid: store.objects.put_record(
            dict(listing, entries=entries, links={"files": files})
        )
    }
    new[manifest_oid] = store.objects.put_record(
        relinked(dict(post, added=post["added"] + [path]), new)
    )
    execution_oid = store.refs.read(prefix + "execution")
    new[execution_oid] = store.objects.put_record(relinked(bench.record(execution_oid), new))
    new[terminal_oid] = store.objects.put_record(relinked(terminal, new))
    new[evidence_oid] = store.objects.put_record(relinked(bench.record(evidence_oid), new))
    for leaf, old in (
        ("execution", execution_oid),
        ("terminal", terminal_oid),
        ("evidence", evidence_oid),
    ):
        store.refs.update(prefix + leaf, new[old], old=old, reason="forged")
    return new[listing_oid]


def test_regrade_refuses_a_listing_that_climbs_out(tmp_path, monkeypatch):
    bench = build_bench(tmp_path / "bench")
    bench.configure()
    plan, (fixer,) = bench.run(["zz/fixer"])
    assert fixer.terminal_class == "resolved"
    forged = forge_final_listing(bench, plan, fixer.attempt, "../../x", b"ESCAPED\n")
    assert manifest.LISTING == bench.record(forged)["schema_version"]

    # The grader's folder is <temp>/yyb-grade-*/workspace: "../../x" is <temp>/x.
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    done = bench.yyb("regrade", "--plan", bench.plan_file(plan), "--profile", "tests")

    assert not (temp / "x").exists()
    assert list(temp.iterdir()) == []  # the grader's folder is gone too
    assert done.exit_code == 1
    assert done.stderr.splitlines() == [
        f"yyb: error: file listing {forged}: refused path '../../x': a '..' component"
    ]
    assert "Traceback" not in done.stderr
    assert [r["generation"] for _, r in bench.history(plan, fixer.attempt, "tests")] == [1]
