"""verify-chain: walk links from one object or ref and report every problem on the way."""

from __future__ import annotations

import os

import pytest

from tests.conftest import flip_byte, note
from yyb.errors import AmbiguousOid, InvalidRefName, RefNotFound
from yyb.store.fsck.verify_chain import verify_chain


def problems(store, name):
    return {(f.code, f.subject) for f in verify_chain(store, name)}


@pytest.fixture
def chain(disk_store):
    s = disk_store
    leaf = s.objects.put("blob", b"leaf")
    mid = s.objects.put_record(note("mid", leaf=leaf))
    top = s.objects.put_record(note("top", parts=[mid, leaf]))
    s.refs.update("notes/top", top, reason="one")
    other = s.objects.put("blob", b"unrelated")
    s.ids = {"leaf": leaf, "mid": mid, "top": top, "other": other}
    return s


def test_clean_chain(chain):
    assert problems(chain, chain.ids["top"]) == set()
    assert problems(chain, "notes/top") == set()
    assert problems(chain, chain.ids["top"][:8]) == set()


def test_damage_below_is_found_from_the_top(chain):
    flip_byte(chain.objects.path(chain.ids["leaf"]))
    assert problems(chain, chain.ids["top"]) == {("hash-mismatch", chain.ids["leaf"])}
    assert problems(chain, "refs/notes/top") == {("hash-mismatch", chain.ids["leaf"])}


def test_damage_elsewhere_is_not_this_chains_problem(chain):
    flip_byte(chain.objects.path(chain.ids["other"]))
    assert problems(chain, chain.ids["top"]) == set()


def test_missing_link(chain):
    os.unlink(chain.objects.path(chain.ids["mid"]))
    assert problems(chain, chain.ids["top"]) == {("broken-link", chain.ids["top"])}


def test_ref_chain_problems_are_included(chain):
    with open(chain.refs.path("refs/notes/top"), "w") as handle:
        handle.write(chain.ids["mid"] + "\n")
    assert ("ref-log-mismatch", "refs/notes/top") in problems(chain, "notes/top")


def test_older_targets_are_verified_through_the_update_chain(chain):
    chain.refs.update("notes/top", chain.ids["other"], reason="two")
    flip_byte(chain.objects.path(chain.ids["leaf"]))  # only reachable through the first update
    assert problems(chain, "notes/top") == {("hash-mismatch", chain.ids["leaf"])}


def test_unknown_names(chain):
    with pytest.raises(RefNotFound):
        list(verify_chain(chain, "notes/none"))
    with pytest.raises(InvalidRefName):
        list(verify_chain(chain, "../x"))


def test_ambiguous_abbreviation(chain):
    from tests.store.test_object_store import _colliding_bodies

    a, b = _colliding_bodies()
    oid = chain.objects.put("blob", a)
    chain.objects.put("blob", b)
    with pytest.raises(AmbiguousOid):
        list(verify_chain(chain, oid[:4]))
