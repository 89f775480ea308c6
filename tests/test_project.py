"""The project's own promises: README set-up, CI running it verbatim, layering."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    setup = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", setup, re.S)


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_second():
    commands = _readme_commands()
    assert len(commands) == 2
    assert all("\n" not in c for c in commands)
    assert "yyb example" in commands[0]
    assert "pytest" in commands[1]
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[1] in ci_lines


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
