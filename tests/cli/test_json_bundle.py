"""--json of bundle create/verify/list-heads/unbundle, push and fetch against real stores."""

from __future__ import annotations

from tests.cli.test_json_refs import answer
from tests.conftest import Yyb, flip_byte, note
from yyb.store.repo import Store


def filled(store) -> dict[str, str]:
    """Two refs, one of them moved twice and linking an older note; name -> oid."""
    first = store.objects.put_record(note("first"))
    store.refs.update("refs/notes/a", first)
    store.refs.update("refs/notes/a", store.objects.put_record(note("second", previous=first)))
    store.refs.update("refs/notes/b", store.objects.put_record(note("other")))
    return dict(store.refs.iter_refs())


def test_create_verify_and_list_heads(yyb, disk_store, tmp_path):
    refs = filled(disk_store)
    heads = [{"name": name, "oid": oid} for name, oid in sorted(refs.items())]
    path = str(tmp_path / "x.bundle")
    made = yyb("bundle", "create", "--json", path, "--all")
    assert made.exit_code == 0 and "written to" in made.stderr
    created = answer(made)
    assert created == {"path": path, "objects": created["objects"], "refs": heads}
    text = yyb("bundle", "verify", path).lines
    checked = answer(yyb("bundle", "verify", "--json", path))
    assert text == [f"ok {checked['objects']} objects 2 refs"]
    assert checked == {
        "path": path,
        "objects": created["objects"],
        "refs": heads,
        "ok": True,
        "errors": 0,
        "infos": 0,
        "findings": [],
    }
    listed = answer(yyb("bundle", "list-heads", "--json", path))
    assert [f"{h['oid']} {h['name']}" for h in listed["refs"]] == yyb(
        "bundle", "list-heads", path
    ).lines
    assert listed == {"refs": heads}


def test_a_damaged_bundle_is_not_ok_with_the_text_forms_exit_code(yyb, disk_store, tmp_path):
    filled(disk_store)
    path = str(tmp_path / "x.bundle")
    assert yyb("bundle", "create", path, "--all").exit_code == 0
    flip_byte(path)  # the trailer
    text = yyb("bundle", "verify", path)
    done = yyb("bundle", "verify", "--json", path)
    assert done.exit_code == text.exit_code == 1 and done.stderr == text.stderr
    assert done.stderr.count("\n") == 1 and text.stdout == ""
    failed = answer(done)
    assert failed["ok"] is False and failed["errors"] == 1 and failed["objects"] is None
    [finding] = failed["findings"]
    assert finding["level"] == "error" and finding["subject"] == path
    assert finding["detail"] in done.stderr
    # Not a bundle at all is bad input: exit 2, the error line, no JSON.
    junk = tmp_path / "junk"
    junk.write_bytes(b"not a bundle\n")
    bad = yyb("bundle", "verify", "--json", str(junk))
    assert bad.exit_code == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1


def test_unbundle_push_and_fetch_report_each_move(yyb, disk_store, tmp_path):
    refs = filled(disk_store)
    path = str(tmp_path / "x.bundle")
    assert yyb("bundle", "create", path, "--all").exit_code == 0
    other = Yyb(str(tmp_path / "other"))
    Store.init(other.store_path)
    moved = answer(other("bundle", "unbundle", "--json", path))
    new = [
        {"ref": name, "old": None, "new": oid, "how": "new"} for name, oid in sorted(refs.items())
    ]
    assert moved == {"replaced": [], "refs": new}
    again = other("bundle", "unbundle", path).lines
    assert [line.split()[-1] for line in again] == ["up-to-date", "up-to-date"]
    # push a moved ref: a fast-forward; fetch it back where it is now: up to date.
    store = Store.open(other.store_path)
    before = refs["refs/notes/b"]
    after = store.objects.put_record(note("moved", previous=before))
    store.refs.update("refs/notes/b", after)
    third = Yyb(str(tmp_path / "third"))
    Store.init(third.store_path)
    pushed = answer(other("push", "--json", third.store_path, "refs/notes/b"))
    crossed = pushed.pop("transfer")  # what crossed: both notes and both updates
    assert crossed["objects"] == 4 and crossed["bytes_sent"] > crossed["bytes_received"] > 0
    assert pushed == {
        "replaced": [],
        "refs": [{"ref": "refs/notes/b", "old": None, "new": after, "how": "new"}],
    }
    fetched = answer(yyb("fetch", "--json", other.store_path, "refs/notes/b"))
    assert fetched.pop("transfer")["objects"] == 2  # the moved note and its update
    forward = {"ref": "refs/notes/b", "old": before, "new": after, "how": "fast-forward"}
    assert fetched == {"replaced": [], "refs": [forward]}
    refused = yyb("fetch", "--json", str(tmp_path / "nowhere"), "refs/notes/b")
    assert refused.exit_code == 2 and refused.stdout == ""
