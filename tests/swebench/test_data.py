"""The two real SWE-bench instances under tests/data/swebench are well-formed.

Each row parses as the importer reads it; each bundle clones to a repository holding its
row's base commit; both patches apply there; the bundles are the files whose SHA-256 the
README lists; and every instance has a measured environment.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import git
from yyb.swebench import instances

DATA = Path(__file__).parent.parent / "data" / "swebench"
ROWS = [json.loads(line) for line in (DATA / "instances.jsonl").read_text().splitlines()]
IDS = [row["instance_id"] for row in ROWS]
PUBLISHED = (
    "instance_id",
    "repo",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "version",
    "environment_setup_commit",
    "created_at",
    "hints_text",
)
# A checksum line of the README, as sha256sum prints it.
CHECKSUM = re.compile(r"^([0-9a-f]{64})  (\S+\.bundle)$", re.MULTILINE)
PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[0-9][A-Za-z0-9.+!-]*")


def bundle_of(row: dict) -> Path:
    """The bundle of a row's repository: the name part of ``owner/name``."""
    return DATA / f"{row['repo'].split('/')[1]}.bundle"


def listed_checksums(readme: str) -> dict[str, str]:
    """The README's checksum lines, bundle file name to SHA-256."""
    return {name: digest for digest, name in CHECKSUM.findall(readme)}


@pytest.fixture(scope="module")
def clones(tmp_path_factory) -> dict[str, Path]:
    """Each row's bundle cloned once, by instance id."""
    root = tmp_path_factory.mktemp("clones")
    out = {}
    for row in ROWS:
        target = root / row["instance_id"]
        git(root, "clone", "-q", str(bundle_of(row)), str(target))
        out[row["instance_id"]] = target
    return out


def check_apply(repo: Path, patch: str, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "check.patch"
    path.write_text(patch)
    return subprocess.run(
        ["git", "-C", str(repo), "apply", "--check", str(path)], capture_output=True, text=True
    )


def test_the_rows_parse_as_the_importer_reads_them():
    path = DATA / "instances.jsonl"
    read = instances.read(str(path), path.read_bytes())
    assert [instance.instance_id for instance in read] == IDS
    assert IDS == ["hukkin__tomli-125", "marshmallow-code__marshmallow-1359"]
    for row, instance in zip(ROWS, read, strict=True):
        assert set(PUBLISHED) <= set(row)
        # The lists are strings holding JSON lists, as the published data sets write them.
        assert isinstance(row["FAIL_TO_PASS"], str) and isinstance(row["PASS_TO_PASS"], str)
        assert instance.fail_to_pass == json.loads(row["FAIL_TO_PASS"])
        assert instance.pass_to_pass == json.loads(row["PASS_TO_PASS"])
        assert instance.kept["version"] == row["version"]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_the_bundle_clones_to_the_base_commit(row, clones):
    repo = clones[row["instance_id"]]
    assert git(repo, "cat-file", "-t", row["base_commit"]) == "commit"
    assert git(repo, "rev-parse", "HEAD") == row["base_commit"]
    assert git(repo, "cat-file", "-t", row["environment_setup_commit"]) == "commit"
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_both_patches_apply_at_the_base(row, clones, tmp_path):
    repo = clones[row["instance_id"]]
    for name in ("test_patch", "patch"):
        done = check_apply(repo, row[name], tmp_path)
        assert done.returncode == 0, f"{name}: {done.stderr}"


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_a_patch_whose_context_is_changed_does_not_apply(row, clones, tmp_path):
    # The check above can fail: the gold patch with one removed line altered is refused.
    lines = row["patch"].splitlines(keepends=True)
    first = next(
        n
        for n, line in enumerate(lines)
        if line.startswith("-") and not line.startswith("---") and any(map(str.isalpha, line))
    )
    lines[first] = "-" + "".join(chr(ord(c) ^ 1) if c.isalpha() else c for c in lines[first][1:])
    done = check_apply(clones[row["instance_id"]], "".join(lines), tmp_path)
    assert done.returncode != 0


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_every_listed_test_file_is_there_once_the_test_patch_is_applied(row, clones, tmp_path):
    repo = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(clones[row["instance_id"]]), str(repo))
    (tmp_path / "test.patch").write_text(row["test_patch"])
    git(repo, "apply", str(tmp_path / "test.patch"))
    listed = json.loads(row["FAIL_TO_PASS"]) + json.loads(row["PASS_TO_PASS"])
    files = {test.split("::")[0] for test in listed}
    assert files and all((repo / name).is_file() for name in files)


def test_the_bundles_are_the_ones_the_readme_lists():
    listed = listed_checksums((DATA / "README.md").read_text())
    assert sorted(listed) == sorted(path.name for path in DATA.glob("*.bundle"))
    assert sorted(listed) == sorted(bundle_of(row).name for row in ROWS)
    for name, digest in listed.items():
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name


def test_only_whole_checksum_lines_are_read_from_the_readme():
    digest = "ab" * 32
    text = f"{digest}  x.bundle\n{digest[1:]}  y.bundle\n`{digest}  z.bundle`\n{digest} w.bundle\n"
    assert listed_checksums(text) == {"x.bundle": digest}


def test_every_licence_is_beside_its_bundle():
    for row in ROWS:
        licence = DATA / f"LICENSE.{row['repo'].split('/')[1]}"
        assert "Permission is hereby granted, free of charge" in licence.read_text()


def test_every_instance_has_a_measured_environment():
    environments = json.loads((DATA / "environments.json").read_text())
    assert sorted(environments) == sorted(IDS)
    for environment in environments.values():
        assert environment["python"] == "3.11"
        pins = environment["requirements"]
        assert pins and all(PIN.fullmatch(pin) for pin in pins), pins
        assert any(pin.startswith("pytest==") for pin in pins)
        assert all(isinstance(step, str) and step for step in environment["install"])
        assert environment["test_command"][:3] == ["python", "-m", "pytest"]
        assert environment["notes"].strip()
