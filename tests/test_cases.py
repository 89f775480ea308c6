"""Cases: eligibility, the exact field named on failure, identity hashes from their definition."""

from __future__ import annotations

import hashlib
import json

import msgpack
import pytest

from tests.conftest import git
from yyb import cases, config
from yyb.cases import CaseError


def load(project, path):
    return cases.load_case(str(path), config.load(str(project.config_path)))


def test_identity_hashes_follow_their_definitions(project):
    path = project.task(wiki_paths=["docs", "calc.py"])
    task, case = load(project, path)
    data = path.read_bytes()
    assert case["task_hash"] == hashlib.sha256(data).hexdigest()
    prompt = data.split(b"---\n", 2)[2]
    assert prompt == b"The add function subtracts. Make it add.\n"
    assert case["prompt_hash"] == hashlib.sha256(prompt).hexdigest()
    # wiki: a file's sha256 is of its bytes at the base commit (not the working tree)
    calc_at_base = b"def add(a, b):\n    return a - b\n"
    wiki = {w["path"]: w for w in case["wiki"]}
    assert wiki["calc.py"] == {
        "path": "calc.py",
        "kind": "file",
        "sha256": hashlib.sha256(calc_at_base).hexdigest(),
    }
    line = b"%s 100644 wiki.md\n" % hashlib.sha256(b"how to add\n").hexdigest().encode()
    assert wiki["docs"]["sha256"] == hashlib.sha256(line).hexdigest()
    # input hash: SHA-256 of canonical MessagePack of the identity map, keys sorted
    identity = {
        k: case[k]
        for k in (
            "base_commit",
            "case_id",
            "case_version",
            "category",
            "grader_profile",
            "prompt_hash",
            "repository",
            "task_hash",
            "wiki",
        )
    }
    ordered = dict(sorted(identity.items()))
    ordered["wiki"] = [dict(sorted(w.items())) for w in ordered["wiki"]]
    expected = hashlib.sha256(msgpack.packb(ordered, use_bin_type=True)).hexdigest()
    assert case["input_hash"] == expected


def test_validate_does_not_touch_the_file_or_the_store(project):
    path = project.task()
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    result = project.yyb("validate", "--task", str(path))
    assert result.exit_code == 0
    assert [line.split()[0] for line in result.lines] == [
        "case_id",
        "task_hash",
        "prompt_hash",
        "input_hash",
    ]
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    import os

    assert not os.path.exists(project.store_path)


def test_validate_write_stores_the_case_under_its_ref(project):
    from yyb.store.repo import Store

    result = project.yyb("validate", "--task", str(project.task()), "--write", "--json")
    assert result.exit_code == 0
    identity = json.loads(result.stdout)
    store = Store.open(project.store_path)
    assert store.refs.read("cases/fix-add") == identity["record"]
    record = store.objects.get_record(identity["record"])
    assert record["input_hash"] == identity["input_hash"]
    assert store.objects.get(record["links"]["prompt"]).body.startswith(b"The add function")
    again = project.yyb("validate", "--task", str(project.task()), "--write")
    assert again.exit_code == 0
    assert len(list(store.refs.log("cases/fix-add"))) == 1


def _front(project, text: str):
    path = project.root.parent / "t.md"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "body, field",
    [
        ("no front matter\n", ""),
        ("---\nid: x\n", ""),
        ("---\n: : :\n---\n", ""),
        ("---\n- a list\n---\n", ""),
        ("---\ntitle: t\ntags: [benchmark-case]\n---\n", "id"),
        ("---\nid: 'a b'\ntitle: t\ntags: [benchmark-case]\n---\n", "id"),
        ("---\nid: a\ntags: [benchmark-case]\n---\n", "title"),
        ("---\nid: a\ntitle: t\n---\n", "tags"),
        ("---\nid: a\ntitle: t\ntags: [x]\nfields: {}\n---\n", "tags"),
        ("---\nid: a\ntitle: t\ntags: [benchmark-case]\n---\n", "fields"),
        (
            "---\nid: a\ntitle: t\ntags: [benchmark-case]\nfields: {other: 1}\n---\n",
            "fields.benchmark",
        ),
    ],
)
def test_malformed_tasks_name_the_field(project, body, field):
    with pytest.raises(CaseError) as caught:
        load(project, _front(project, body))
    assert caught.value.field == field


@pytest.mark.parametrize(
    "override, field, needle",
    [
        ({"repository": None}, "fields.benchmark.repository", "missing"),
        ({"base_commit": None}, "fields.benchmark.base_commit", "missing"),
        ({"case_version": None}, "fields.benchmark.case_version", "missing"),
        ({"category": None}, "fields.benchmark.category", "missing"),
        ({"grader_profile": None}, "fields.benchmark.grader_profile", "missing"),
        ({"grader_profile": "nope"}, "fields.benchmark.grader_profile", "not a configured"),
        ({"repository": "elsewhere"}, "fields.benchmark.repository", "unknown repository"),
        ({"wiki_paths": ["missing.md"]}, "fields.benchmark.wiki_paths[0]", "does not exist"),
        ({"wiki_paths": ["../up"]}, "fields.benchmark.wiki_paths[0]", "relative path"),
    ],
)
def test_ineligible_fields(project, override, field, needle):
    with pytest.raises(CaseError) as caught:
        load(project, project.task(**override))
    assert caught.value.field == field
    assert needle in caught.value.reason


def test_base_commit_must_be_full_and_present(project):
    with pytest.raises(Exception, match="not a full commit id"):
        load(project, project.task(base_commit=project.base[:12]))
    with pytest.raises(Exception, match="not found"):
        load(project, project.task(base_commit="1" * 40))
    tree = git(project.root, "rev-parse", "HEAD^{tree}")
    with pytest.raises(Exception, match="not found"):
        load(project, project.task(base_commit=tree))


def test_wiki_is_read_at_the_base_commit_not_later(project):
    (project.root / "new.md").write_text("later\n")
    git(project.root, "add", "new.md")
    git(project.root, "commit", "-qm", "later wiki")
    with pytest.raises(CaseError, match="does not exist"):
        load(project, project.task(wiki_paths=["new.md"]))


def test_cli_errors_are_one_line_exit_2_and_write_nothing(project):
    import os

    result = project.yyb("validate", "--task", str(project.task(grader_profile="nope")), "--write")
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1 and "grader_profile" in result.stderr
    assert not os.path.exists(project.store_path)
