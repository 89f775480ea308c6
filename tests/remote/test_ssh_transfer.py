"""Push and fetch over SSH: a real sshd on loopback (tests/remote/sshd.py), the far side
running yyb's own receive-pack and upload-pack, as git's ssh transport runs its own."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.conftest import Yyb
from tests.remote.checks import fetched_back_verifies
from tests.remote.test_transfer import _errors, _notes
from yyb.store import remotes, transfer
from yyb.store.repo import Store


@pytest.fixture
def over_ssh(sshd_server, tmp_path: Path, monkeypatch):
    """(here, there, the URL of there through sshd)."""
    monkeypatch.setenv(remotes.SSH_ENV, shlex.join(sshd_server.ssh_command))
    here, _ = Store.init(str(tmp_path / "here"))
    there, _ = Store.init(str(tmp_path / "there"))
    return here, there, sshd_server.url(there.path)


def test_a_run_pushed_over_ssh_fetches_back_whole_and_a_second_push_sends_nothing(
    over_ssh, tmp_path
):
    here, there, url = over_ssh
    _notes(here, "refs/notes/a", *(f"note {i}" for i in range(20)))
    yyb = Yyb(here.path)
    assert yyb("remote", "add", "origin", url).exit_code == 0
    pushed = yyb("push", "origin", "refs/notes/a")
    assert pushed.exit_code == 0, pushed.stderr
    assert "transfer: 60 object(s);" in pushed.stderr
    assert there.refs.read("refs/notes/a") == here.refs.read("refs/notes/a")
    assert _errors(there) == []
    again = remotes.push(here, remotes.parse(url), ["refs/notes/a"])
    assert again.objects == 0 and again.sent < 2000  # negotiation only
    back, _ = Store.init(str(tmp_path / "back"))
    got = remotes.fetch(back, remotes.parse(url), ["refs/notes/a"])
    assert got.objects == 60 and back.refs.read("refs/notes/a") == here.refs.read("refs/notes/a")
    assert _errors(back) == []


def test_a_refusal_on_the_far_side_comes_back_in_one_line(over_ssh, tmp_path):
    here, there, url = over_ssh
    _notes(here, "refs/notes/a", "one", "two")
    remotes.push(here, remotes.parse(url), ["refs/notes/a"])
    other, _ = Store.init(str(tmp_path / "other"))
    _notes(other, "refs/notes/a", "elsewhere")
    with pytest.raises(transfer.RemoteRefused, match="fast-forward"):
        remotes.push(other, remotes.parse(url), ["refs/notes/a"])
    refused = Yyb(other.path)("push", url, "refs/notes/a")
    assert refused.exit_code == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert there.refs.read("refs/notes/a") == here.refs.read("refs/notes/a")


def test_a_far_side_without_a_store_is_one_line(over_ssh, tmp_path):
    here, _, url = over_ssh
    _notes(here, "refs/notes/a", "one")
    missing = url.rsplit("/", 1)[0] + "/nowhere"
    done = Yyb(here.path)("push", missing, "refs/notes/a")
    assert done.exit_code == 1 and "Traceback" not in done.stderr
    assert "yyb: error:" in done.stderr


def test_an_experiment_pushed_over_ssh_verifies_there_and_fetched_back_verifies_here(
    over_ssh, tmp_path
):
    """The example's run, pushed with --plan: doctor --plan and the report pass on the far
    side; fetched back into a new store, they pass there too. A second plan's push sends
    only its own objects."""
    _, there, url = over_ssh
    root = tmp_path / "ex"
    yyb = Yyb(str(root / "store"))
    made = yyb("example", "--dir", str(root), "--attempts", "1", "--progress", "none")
    assert made.exit_code == 0, made.stderr
    plan = str(root / "plan.json")
    pushed = yyb("push", url, "--plan", plan, "--json")
    assert pushed.exit_code == 0, pushed.stderr
    first = json.loads(pushed.stdout)["transfer"]["objects"]
    far = Yyb(there.path)
    assert far("doctor", "--plan", plan).exit_code == 0
    report = far("report", "--plan", plan, "--no-layer")
    assert report.exit_code == 0 and "status: complete" in report.stdout
    names = [line.split()[1] for line in far("show-ref").lines]
    _, again = fetched_back_verifies(yyb, url, names, tmp_path / "back", plan)
    assert again["objects"] == 0 and first > 50
