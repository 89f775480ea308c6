"""A --plan that names no plan file and nothing in the store: one line, exit 2, however the
path is spelled (it was an invalid ref name, exit 2, or a missing ref, exit 1)."""

from __future__ import annotations

import pytest

from tests.conftest import Yyb

SPELLINGS = ["plan.json", "./plan.json", "../plan.json", "sub/plan.json", "nothing", "refs/x/y"]


@pytest.fixture
def yyb(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "store"
    assert Yyb(str(store))("store", "init").exit_code == 0
    return Yyb(str(store))


@pytest.mark.parametrize("spelling", [*SPELLINGS, "/absolute/missing.json"])
def test_every_spelling_of_a_missing_plan_is_one_line_exit_2(yyb, spelling):
    for args in (
        ["plan", "show", spelling],
        ["run", "--plan", spelling, "--dry-run"],
        ["regrade", "--plan", spelling, "--profile", "tests"],
        ["doctor", "--plan", spelling],
    ):
        done = yyb(*args)
        assert done.exit_code == 2, (args, done.stderr)
        assert done.stderr == f"yyb: error: no plan file or ref {spelling}\n", args


def test_without_a_store_the_line_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = Yyb(str(tmp_path / "none"))("plan", "show", "./plan.json")
    assert done.exit_code == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("yyb: error: no plan file or ref ./plan.json (not a yyb store")


def test_an_ambiguous_abbreviation_is_still_named_as_one(yyb):
    from yyb.store.objects.format import hash_object
    from yyb.store.repo import Store

    seen: dict[str, bytes] = {}
    n = 0
    while True:  # two blobs whose oids share their first 4 hex digits (found in memory)
        data = b"%d" % n
        prefix = hash_object("blob", data)[:4]
        if prefix in seen:
            break
        seen[prefix] = data
        n += 1
    store = Store.open(yyb.store_path)
    store.objects.put("blob", seen[prefix])
    store.objects.put("blob", data)
    done = yyb("plan", "show", prefix)
    assert done.exit_code == 2 and "no plan file" not in done.stderr, done.stderr
