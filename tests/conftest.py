"""Shared fixtures: stores (memory twin and disk), the CLI through one runner."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import settings

from yyb import example
from yyb.store.repo import Store

settings.register_profile("ci", derandomize=True, max_examples=200, deadline=None)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile("deep", max_examples=5000, deadline=None)
settings.load_profile(os.environ.get("YYB_HYPOTHESIS", "ci" if os.environ.get("CI") else "dev"))

# What yyb reads from the environment that a test must never take from the machine: a key or
# a store configured there would change what a test signs, where it writes and what it finds.
MACHINE_VARIABLES = (
    "YYB_STORE",
    "YYB_SIGNING_KEY",
    "YYB_FAULT_KILL_AT",
    "GIT_DIR",
    "GIT_WORK_TREE",
)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``deep`` (the network, builds of minutes) run only with YYB_DEEP=1."""
    if os.environ.get("YYB_DEEP") == "1":
        return
    skip = pytest.mark.skip(reason="deep: set YYB_DEEP=1 to run it (network, minutes)")
    for item in items:
        if "deep" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def hermetic(tmp_path_factory, monkeypatch):
    """Every test gets its own HOME, XDG folders and temp folder, and no store, key or git
    config of the machine's: a signing key in the real ~/.config/yyb changes nothing, and a
    run folder some other process left in the machine's temp folder is not swept here."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(tmp_path_factory.mktemp("tmp")))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    for name, sub in (
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_CACHE_HOME", ".cache"),
    ):
        (home / sub).mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(name, str(home / sub))
    for name in MACHINE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    return home


@pytest.fixture
def open_folder():
    """A folder any user may pass through (pytest's own is private to its user)."""
    import shutil

    folder = Path(tempfile.mkdtemp(prefix="yyb-open-", dir="/var/tmp"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def disk_store(tmp_path: Path) -> Store:
    store, _ = Store.init(str(tmp_path / "store"))
    return store


@pytest.fixture(params=["memory", "disk"])
def store(request, tmp_path: Path) -> Store:
    if request.param == "memory":
        return Store.memory()
    return Store.init(str(tmp_path / "store"))[0]


def note(message: str, **links) -> dict:
    record = {"schema_version": "yyb_note.v1", "message": message}
    if links:
        record["links"] = links
    return record


def forged_update(store, ref: str, target: str, previous: str | None = None) -> str:
    """A ref-update record written around the store's refs (and so its transparency log),
    as someone rewriting a chain by hand would write it; its oid."""
    record = {
        "schema_version": "yyb_ref_update.v1",
        "ref": ref,
        "old": None,
        "new": target,
        "time_ms": 1,
        "reason": "rewritten",
        "links": {"target": target, **({"previous": previous} if previous else {})},
    }
    return store.objects.put_record(record)


def killed_runs(tmp_path: Path, template: str, script: str):
    """Copies of the store at ``template``, each after ``python -c script COPY`` ran on it and
    was SIGKILLed at its 1st, 2nd, ... durable write (``file.FAULT_ENV``), until a run reaches
    its end: yields (point, the copy's path, ran to its end?) and stops after that run."""
    from shutil import copytree

    from yyb.store import file

    point = 0
    while True:
        point += 1
        path = str(tmp_path / f"s{point}")
        copytree(template, path)
        env = {**os.environ, file.FAULT_ENV: str(point)}
        done = subprocess.run([sys.executable, "-c", script, path], env=env, timeout=60)
        assert done.returncode in (0, -9), (point, done.returncode)
        yield point, path, done.returncode == 0
        if done.returncode == 0:
            return


def flip_byte(path: str, offset: int = -1) -> None:
    """Corrupt one byte of a file with XOR 0xFF (a fixed replacement byte could be a no-op)."""
    os.chmod(path, 0o644)
    with open(path, "r+b") as handle:
        handle.seek(offset, os.SEEK_END if offset < 0 else os.SEEK_SET)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))


def damage_packed(store, marker: bytes, offset: int = 0) -> str:
    """Pack ``store`` (``yyb gc``), then flip the byte ``offset`` bytes into the first
    ``marker`` in its pack; the pack's path. Packs the store had open are closed."""
    from yyb.store import gc

    gc.gc(store)
    path = store.objects.packs(rescan=True)[0].path
    for held in store.objects.packs():
        held.close()
    with open(path, "rb") as handle:
        at = handle.read().index(marker)
    flip_byte(path, at + offset)
    return path


@dataclass
class Result:
    exit_code: int
    stdout_bytes: bytes
    stderr: str

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


class Yyb:
    """Runs ``yyb.cli.main(["--store", STORE, ...])`` in-process, capturing its streams."""

    def __init__(self, store_path: str):
        self.store_path = store_path

    def __call__(self, *args: str, input: bytes | str | None = None) -> Result:
        from yyb.cli import main

        runner = CliRunner()
        with runner.isolation(input=input) as streams:
            try:
                main(["--store", self.store_path, *args])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            out, err = streams[0].getvalue(), streams[1].getvalue()
        return Result(code, out, err.decode("utf-8", "replace"))


@pytest.fixture
def yyb(disk_store: Store) -> Yyb:
    return Yyb(disk_store.path)


def run_yyb(
    *args: str, input: bytes | None = None, env: dict | None = None, cwd: str | None = None
):
    """A real subprocess run of the CLI, for pipelines, signals and tracebacks."""
    return subprocess.run(
        [sys.executable, "-m", "yyb", *args],
        input=input,
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def _signals_at_their_defaults() -> None:
    """Run in the child before exec: SIGINT and SIGTERM back to their defaults.

    A disposition of "ignore" survives exec, and a shell gives one to every job it starts with
    `&` (and nohup does the same for SIGHUP): a Python child that starts with SIGINT ignored
    never raises KeyboardInterrupt, so a test that signals it would wait on a process that
    cannot hear it.
    """
    import signal

    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)


@contextmanager
def signalled(argv: list[str], **kwargs):
    """A child that a test will signal: defaults restored, its own session, reaped at the end.

    Whatever the test asserts or raises, the child's whole process group is killed and the
    child waited for before the context ends, so no test leaves a process behind.
    """
    import signal

    process = subprocess.Popen(
        argv, preexec_fn=_signals_at_their_defaults, start_new_session=True, **kwargs
    )
    try:
        yield process
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # the group is gone: nothing of it is left to reap
        process.communicate()


# Tests commit with a fixed identity and date, and no user or system git configuration.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@e",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@e",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}


def git(repo: Path, *args: str) -> str:
    return example.git(repo, *args, env=GIT_ENV)


class RunBench:
    """What the benches of tests/attempts and tests/grading share: a repository with a config
    and one task at ``task_path``, and a store at ``store_path``; plan, run, read evidence."""

    repo: Path
    store_path: str
    task_path: Path

    @property
    def config_path(self) -> Path:
        return self.repo / "yylo-benchmark.config.json"

    @property
    def store(self) -> Store:
        return Store.open(self.store_path)

    def config(self):
        from yyb import config

        return config.load(str(self.config_path))

    def plan(self, models: list[str], attempts: int = 1):
        """Build and store the plan of the case x ``models`` x ``attempts``."""
        from yyb.evidence import environment
        from yyb.plans import build

        plan = build.task_plan(
            self.config(),
            [str(self.task_path)],
            ",".join(models),
            attempts,
            "2",
            environment.resolver(lambda: self.store),
        )
        build.write(self.store, plan)
        authorize(self.store, plan.oid, plan.experiment)
        return plan

    def context(self, plan, environ: dict | None = None):
        from yyb.attempts import run as attempts_run
        from yyb.harness.environments import build

        build.forget()  # as a new run's process: every environment checked again

        chosen = {oid: plan.records[oid] for oid in plan.attempt_oids}
        return attempts_run.prepare(
            self.store,
            self.config(),
            plan.oid,
            plan.experiment,
            chosen,
            dict(os.environ if environ is None else environ),
        )

    def execute(self, plan, jobs: int = 1, environ: dict | None = None) -> list:
        """Run every attempt of ``plan`` through the library; results in plan order."""
        from yyb.attempts import run as attempts_run

        results = attempts_run.run_plan(self.context(plan, environ), jobs)
        return sorted(results, key=lambda r: r.ordinal)

    def run(self, models: list[str], attempts: int = 1, jobs: int = 1, environ: dict | None = None):
        """Plan and run through the library; return (plan, results in plan order)."""
        plan = self.plan(models, attempts)
        return plan, self.execute(plan, jobs, environ)

    def yyb(self, *args: str):
        return Yyb(self.store_path)("--config", str(self.config_path), *args)

    def record(self, oid: str) -> dict:
        return self.store.objects.get_record(oid)

    def body(self, oid: str) -> bytes:
        return self.store.objects.get(oid).body

    def terminal(self, result) -> dict:
        return self.record(result.terminal)

    def doctor_errors(self) -> list:
        from yyb.store.fsck import fsck

        return [f for f in fsck(self.store) if f.level == "error"]


def authorize(store: Store, plan_oid: str, experiment: dict, hours: int = 24) -> str:
    """Grant the plan's budget (as ``yyb authorize`` does) so a live run may dispatch it."""
    from yyb.evidence import names
    from yyb.plans import grant

    now = grant.now_ms()
    record = grant.grant_for(plan_oid, experiment, now + hours * 3_600_000, now)
    oid = store.objects.put_record(record)
    store.refs.update(names.grant(plan_oid), oid, reason="authorize")
    return oid


@dataclass
class Project:
    """A source repository with a base commit, a later commit, a config and task files."""

    root: Path
    base: str
    later: str
    store_path: str

    @property
    def config_path(self) -> Path:
        return self.root / "yylo-benchmark.config.json"

    def config(self) -> dict:
        import json

        return json.loads(self.config_path.read_text())

    def set_config(self, data: dict) -> None:
        import json

        self.config_path.write_text(json.dumps(data, indent=2))

    def task(self, name: str = "task.md", case_id: str = "fix-add", **fields) -> Path:
        bench = {
            "repository": "repo",
            "base_commit": self.base,
            "case_version": "1",
            "category": "bugfix",
            "grader_profile": "checks",
            **fields,
        }
        lines = [
            "---",
            f"id: {case_id}",
            "title: Fix add",
            "tags: [benchmark-case]",
            "fields:",
            "  benchmark:",
        ]
        for key, value in bench.items():
            if value is None:
                continue
            if isinstance(value, list):
                value = "[" + ", ".join(value) + "]"
            lines.append(f"    {key}: {value}")
        lines += ["---", "The add function subtracts. Make it add.", ""]
        path = self.root.parent / name
        path.write_text("\n".join(lines))
        return path

    def yyb(self, *args: str, input=None) -> Result:
        return Yyb(self.store_path)("--config", str(self.config_path), *args, input=input)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    import json

    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "docs").mkdir()
    (root / "docs" / "wiki.md").write_text("how to add\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD")
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    git(root, "commit", "-qam", "the fix")
    later = git(root, "rev-parse", "HEAD")
    from yyb import config

    data = config.template("repo")
    data["evaluators"] = {
        "checks": {
            "kind": "command",
            "grader_id": "pytest",
            "version": "1",
            "executable": "/usr/bin/true",
            "sha256": "0" * 64,
            "argv": [],
            "protected_paths": [],
        },
        "judge": {
            "kind": "llm_judge",
            "version": "1",
            "harness": "candidate",
            "model": "vendor/judge",
            "prompt": "Judge.",
            "rubric": "Works?",
        },
    }
    data["models"] = {":mini": "vendor/mini-1"}
    (root / "yylo-benchmark.config.json").write_text(json.dumps(data, indent=2))
    return Project(root, base, later, str(tmp_path / "store"))


def doc_blocks(name: str) -> list[str]:
    """The ``sh`` blocks of docs/NAME, in order."""
    import re

    root = Path(__file__).resolve().parent.parent
    return re.findall(r"```sh\n(.+?)```", (root / "docs" / name).read_text(), re.S)


def doc_shell(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """(the environment, an empty working folder) for running a page's commands as a user
    would: ``yyb`` on PATH, and a HOME of its own, so its key and state are nothing of the
    machine's or another test's."""
    root = Path(__file__).resolve().parent.parent
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "yyb"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m yyb "$@"\n')
    wrapper.chmod(0o755)
    home = tmp_path / "home"
    env = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        PYTHONPATH=str(root),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
    )
    env.pop("YYB_STORE", None)
    work = tmp_path / "work"
    work.mkdir()
    return env, work
