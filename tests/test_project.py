"""The project's own promises: README set-up, CI running it verbatim, layering."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    setup = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", setup, re.S)


def test_readme_has_three_setup_commands_and_ci_runs_the_tests_one():
    commands = _readme_commands()
    assert len(commands) == 3
    assert all("\n" not in c for c in commands)
    assert "yyb example" in commands[0]
    assert "install_agents.sh" in commands[1] and "init --harness" in commands[1]
    assert "pytest" in commands[2]
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[2] in ci_lines


@pytest.mark.parametrize("sudo", [False, True], ids=["root-without-sudo", "user-with-sudo"])
def test_the_own_agent_command_runs_as_written_with_and_without_sudo(tmp_path, sudo):
    """The installer runs (as root where there is sudo), then the set-up's yyb prints a
    configuration for the shipped adapter."""
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "yyb").write_text(STUB)
    (venv_bin / "yyb").chmod(0o755)
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "install_agents.sh").write_text("")
    code, calls = _run_setup(_readme_commands()[1], tmp_path, sudo, extra={"sh": STUB})
    assert code == 0, calls
    assert calls[-2:] == ["sh tools/install_agents.sh", "yyb init --harness aider --stdout"]
    assert ("sudo sh tools/install_agents.sh" in calls) == sudo


STUB = """#!/bin/sh
echo "$(basename "$0") $*" >> "$STUB_LOG"
"""
STUB_SUDO = STUB + 'exec "$@"\n'
# python3 -m venv .venv makes the commands the set-up calls next, each logging its call.
STUB_PYTHON = (
    STUB
    + """if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin"
  for tool in pip python yyb; do
    printf '#!/bin/sh\\necho "%s $*" >> "$STUB_LOG"\\n' "$3/bin/$tool" > "$3/bin/$tool"
    chmod +x "$3/bin/$tool"
  done
fi
"""
)


def _run_setup(
    command: str, tmp_path: Path, sudo: bool, extra: dict | None = None
) -> tuple[int, list[str]]:
    """The set-up command through bash on a PATH of stand-ins: apt-get, python3, maybe sudo
    (and ``extra``: name -> text)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = {"apt-get": STUB, "python3": STUB_PYTHON} | ({"sudo": STUB_SUDO} if sudo else {})
    tools |= extra or {}
    for name, text in tools.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    for name in ("mkdir", "chmod", "basename"):
        (bin_dir / name).symlink_to(next(p for p in ("/usr/bin/" + name, "/bin/" + name)))
    log = tmp_path / "calls"
    env = {"PATH": str(bin_dir), "STUB_LOG": str(log), "HOME": str(tmp_path)}
    done = subprocess.run(["/bin/bash", "-c", command], cwd=tmp_path, env=env)
    return done.returncode, log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("which", [0, 2], ids=["example", "tests"])
@pytest.mark.parametrize("sudo", [False, True], ids=["root-without-sudo", "user-with-sudo"])
def test_each_setup_command_runs_as_written_with_and_without_sudo(tmp_path, which, sudo):
    command = _readme_commands()[which]
    code, calls = _run_setup(command, tmp_path, sudo)
    assert code == 0, calls
    apt = [c for c in calls if "apt-get" in c]
    prefix = "sudo apt-get" if sudo else "apt-get"
    assert [c.split(" ", 2)[:2] for c in apt if c.startswith(prefix)] and all(
        c.startswith(prefix) or c.startswith("apt-get") for c in apt
    )
    assert any(c.startswith(prefix + " install -y python3-venv git bubblewrap") for c in calls)
    assert calls[-1].endswith("yyb example" if which == 0 else "python -m pytest -q -n auto")


def test_the_plumbing_demo_runs_as_written_after_the_setup(tmp_path):
    readme = (ROOT / "README.md").read_text()
    demo = readme.split("Try the plumbing", 1)[1]
    demo = re.search(r"```sh\n(.+?)\n```", demo, re.S).group(1)
    venv_bin = tmp_path / ".venv" / "bin"  # where the set-up installs yyb, and nowhere else
    venv_bin.mkdir(parents=True)
    (venv_bin / "yyb").write_text(f'#!/bin/sh\nexec {sys.executable} -m yyb "$@"\n')
    (venv_bin / "yyb").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("YYB_STORE",)}
    env["PATH"] = "/usr/bin:/bin"  # no yyb on it: the demo must find the one in .venv/bin
    done = subprocess.run(
        ["/bin/bash", "-ec", demo], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "first note" in done.stdout


def test_store_imports_nothing_above_it():
    for path in (ROOT / "yyb" / "store").glob("*.py"):
        source = path.read_text()
        assert not re.search(r"^\s*(from|import)\s+yyb\.(cli|harness|porcelain)", source, re.M), (
            path
        )


def test_only_cli_prints_or_exits():
    for path in (ROOT / "yyb").rglob("*.py"):
        if "cli" in path.parts or path.name == "__main__.py":
            continue
        source = path.read_text()
        if 'if __name__ == "__main__":' in source and (
            "agents" in path.parts or path.name == "forwarder.py"
        ):
            continue  # a program the sandbox runs (an adapter, the forwarder): its own exit code
        assert not re.search(r"^\s*(print\(|sys\.exit\()", source, re.M), path


def test_plumbing_does_not_import_heavy_dependencies():
    code = (
        "import sys; from yyb.cli import plumbing, refs, check, context; "
        "import yyb.store.fsck; "
        "names = ('pygit2', 'jsonschema', 'fastjsonschema', 'cryptography', 'yaml'); "
        "heavy = [m for m in names if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_every_schema_is_a_valid_json_schema():
    import json

    import jsonschema

    files = sorted((ROOT / "schemas").glob("*.schema.json"))
    assert files
    for path in files:
        schema = json.loads(path.read_text())
        jsonschema.validators.validator_for(schema).check_schema(schema)
        version = path.name.removesuffix(".schema.json")
        assert schema["properties"]["schema_version"] == {"const": version}


def test_every_package_is_listed_in_pyproject():
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for path in (ROOT / "yyb").rglob("__init__.py")
    }
    assert found <= listed, found - listed


def test_every_registered_command_loads():
    from yyb.cli import COMMANDS

    done = subprocess.run([sys.executable, "-m", "yyb", "--help"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    listed = {
        line.split()[0] for line in done.stdout.split("Commands:")[1].splitlines() if line.strip()
    }
    assert listed == set(COMMANDS)
