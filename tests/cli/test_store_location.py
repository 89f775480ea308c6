"""A store must lie apart from the repositories it records: never inside one, never one, never
around one (docs/cli.md, "Where a store may be").

Each way of naming a store is tried (``--store``, ``YYB_STORE``, a symlink, the default), with
every command that opens one: the refusal is one line naming both, exit 2, and nothing is
created or written.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import Yyb, git
from yyb.store.repo import Store

# An empty --store counts as not given (click keeps "", the store lookup skips it), so YYB_STORE
# and then the default location apply: the CLI fixture with no store of its own.
UNNAMED = ""


def one_error(result, *needles: str) -> str:
    """The single stderr line of a refusal (exit 2) that names every needle."""
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("yyb: error: store "), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture
def planned(project):
    """The project with a task and a plan made against its own (outside) store."""
    task = project.task()
    plan_file = project.root.parent / "plan.json"
    done = project.yyb("plan", "--task", str(task), "--models", ":mini", "--output", str(plan_file))
    assert done.exit_code == 0, done.stderr
    return project, task, plan_file


def files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


# name -> (arguments, whether the command is tried on a real store placed inside the repository
# rather than on a path where none exists yet).
COMMANDS = {
    "plan": (["plan", "--task", "{task}", "--models", ":mini", "--output", "new.json"], False),
    "validate": (["validate", "--task", "{task}", "--write"], False),
    "authorize": (["authorize", "--plan", "{plan}", "--expires", "+1h"], False),
    "run": (["run", "--plan", "{plan}"], True),
    "recover": (["recover", "--plan", "{plan}"], True),
    "regrade": (["regrade", "--plan", "{plan}", "--profile", "checks"], True),
    "report": (["report", "--plan", "{plan}"], True),
    "doctor": (["doctor", "--plan", "{plan}"], True),
    "show-ref": (["show-ref"], True),
    "update-ref": (["update-ref", "refs/notes/x", "{plan_oid}"], True),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_refuses_a_store_inside_the_repository(planned, command, monkeypatch):
    """Whether the store would be created there or someone already put one there (here: a
    copy of the project's store, holding the plan), nothing is created, read or changed."""
    project, task, plan_file = planned
    monkeypatch.chdir(project.root.parent)  # no repository around: the configuration names it
    inside = project.root / "evidence"
    template, existing = COMMANDS[command]
    if existing:
        shutil.copytree(project.store_path, inside)
        before = files(inside)
    plan_oid = json.loads(plan_file.read_text())["plan"]
    values = {"task": str(task), "plan": str(plan_file), "plan_oid": plan_oid}
    args = [arg.format(**values) for arg in template]
    done = Yyb(str(inside))("--config", str(project.config_path), *args)
    one_error(done, str(inside), f"is inside repository {project.root}")
    assert done.stdout == ""
    if existing:
        assert files(inside) == before
    else:
        assert not inside.exists()
        assert not (project.root.parent / "new.json").exists()


def test_yyb_store_inside_the_repository_is_refused(planned, monkeypatch):
    project, task, plan_file = planned
    inside = project.root / "docs" / "store"
    monkeypatch.setenv("YYB_STORE", str(inside))
    done = Yyb(UNNAMED)("--config", str(project.config_path), "run", "--plan", str(plan_file))
    one_error(done, str(inside), str(project.root))
    assert not inside.exists()


def test_a_symlink_outside_that_points_inside_is_refused(planned, tmp_path):
    project, task, plan_file = planned
    (project.root / "hidden").mkdir()
    link = tmp_path / "looks-outside"
    link.symlink_to(project.root / "hidden")
    done = Yyb(str(link))("--config", str(project.config_path), "run", "--plan", str(plan_file))
    line = one_error(done, str(link), str(project.root / "hidden"), str(project.root))
    assert "(really " in line
    assert list((project.root / "hidden").iterdir()) == []
    # A link to a folder that does not exist yet resolves the same way.
    dangling = tmp_path / "dangling"
    dangling.symlink_to(project.root / "later")
    done = Yyb(str(dangling))("--config", str(project.config_path), "plan", *_plan_args(task))
    one_error(done, str(dangling), str(project.root))
    assert not (project.root / "later").exists()


def test_a_repository_reached_through_a_symlink_is_compared_by_its_real_path(planned, tmp_path):
    """Configuration and store both named through a link to the repository."""
    project, task, plan_file = planned
    alias = tmp_path / "alias"
    alias.symlink_to(project.root)
    config = str(alias / project.config_path.name)
    done = Yyb(str(alias / "store"))("--config", config, "plan", *_plan_args(task))
    one_error(done, str(alias / "store"), f"(really {project.root / 'store'})", str(project.root))
    assert not (project.root / "store").exists()


@pytest.mark.parametrize(
    ("where", "relation"),
    [(lambda p: p.root, "is repository"), (lambda p: p.root.parent, "contains repository")],
)
def test_a_store_that_is_or_contains_the_repository_is_refused(planned, where, relation):
    project, task, plan_file = planned
    store = where(project)
    before = sorted(os.listdir(store))
    done = Yyb(str(store))("--config", str(project.config_path), "plan", *_plan_args(task))
    one_error(done, f"{relation} {project.root}")
    assert sorted(os.listdir(store)) == before  # no format file, no objects/, no refs/


def test_every_repository_the_configuration_names_is_kept_apart(planned, tmp_path):
    project, task, plan_file = planned
    other = tmp_path / "other"
    (other / "pkg").mkdir(parents=True)
    git(other, "init", "-q")
    data = project.config()
    data["repositories"]["lib"] = str(other / "pkg")  # a folder inside another repository
    project.set_config(data)
    for store in (other / "pkg" / "s", other / "s"):  # inside the folder, or its repository
        done = Yyb(str(store))("--config", str(project.config_path), "plan", *_plan_args(task))
        one_error(done, str(store))
        assert not store.exists()


def test_the_repository_around_the_current_folder_is_kept_apart(tmp_path, monkeypatch):
    """No configuration at all: the repository the command runs in is still one to protect,
    even from plumbing writing to a store someone already made there."""
    repo = tmp_path / "bare-project"
    (repo / "sub").mkdir(parents=True)
    git(repo, "init", "-q")
    store = repo / "sub" / "store"
    Store.init(str(store))
    before = files(store)
    monkeypatch.chdir(repo / "sub")
    done = Yyb(str(store))("hash-object", "-w", "--stdin", input=b"evidence\n")
    one_error(done, str(store), f"is inside repository {repo}")
    assert files(store) == before


def test_a_store_beside_the_repository_is_accepted(planned):
    """A common name prefix is not containment: ``repo-store`` is not inside ``repo``."""
    project, task, plan_file = planned
    beside = Path(str(project.root) + "-store")
    done = Yyb(str(beside))("--config", str(project.config_path), "plan", *_plan_args(task))
    assert done.exit_code == 0, done.stderr
    assert (beside / "format").exists()


def test_the_default_location_is_accepted(planned, monkeypatch):
    """Inside the repository, no store named: the store goes under XDG_STATE_HOME."""
    project, task, plan_file = planned
    monkeypatch.chdir(project.root)
    where = Yyb(UNNAMED)("store", "path")
    assert where.exit_code == 0
    default = where.stdout.strip()
    assert default.startswith(os.environ["XDG_STATE_HOME"] + "/yyb/stores/repo-")
    done = Yyb(UNNAMED)("plan", *_plan_args(task))
    assert done.exit_code == 0, done.stderr
    assert os.path.exists(os.path.join(default, "format"))
    refs = Yyb(UNNAMED)("show-ref", "refs/plans")
    assert refs.exit_code == 0 and any("refs/plans/" in line for line in refs.lines)


def test_an_unreadable_configuration_does_not_hide_the_current_repository(planned, monkeypatch):
    project, task, plan_file = planned
    project.config_path.write_text("{ not json")
    store = project.root / "s"
    Store.init(str(store))
    monkeypatch.chdir(project.root)
    done = Yyb(str(store))("hash-object", "-w", "--stdin", input=b"evidence\n")
    one_error(done, str(project.root))  # the configuration is not needed to refuse


def _plan_args(task: Path) -> list[str]:
    return ["--task", str(task), "--models", ":mini", "--output", str(task.parent / "p2.json")]
