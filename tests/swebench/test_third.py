"""A real instance whose tests need a system library: Changaco__python-libarchive-c-127.

libarchive-c loads Debian's libarchive13 with ctypes when it is imported, so its recipe
(tests/data/swebench/environments-third.json) names ``"system_packages": ["libarchive13"]``
and the import gives its python spec a bookworm root with that package as its base. The fast
tests check the data (tests/data/swebench/README.md, "A third instance"); the deep one builds
the roots and validates the gold patch on them, with the library and without it.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from ctypes.util import find_library
from pathlib import Path

import pytest

from tests.conftest import Yyb, git
from tests.grading.conftest import write
from tests.swebench.test_data import check_apply
from yyb.swebench import instances

DATA = Path(__file__).parent.parent / "data" / "swebench"
ROWS = DATA / "instances-third.jsonl"
RECIPES = DATA / "environments-third.json"
BUNDLE = DATA / "third" / "python-libarchive-c.bundle"
ID = "Changaco__python-libarchive-c-127"
LIBRARY = "libarchive13"
# The README gives the bundle's checksum in a sentence, not as a sha256sum line: test_data.py
# reads those lines as the list of the two first rows' bundles.
CHECKSUM = re.compile(r"^SHA-256 of `third/python-libarchive-c\.bundle`: `([0-9a-f]{64})`$", re.M)


@pytest.fixture(scope="module")
def row() -> dict:
    lines = ROWS.read_text().splitlines()
    assert len(lines) == 1
    return json.loads(lines[0])


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("third") / "python-libarchive-c"
    git(target.parent, "clone", "-q", str(BUNDLE), str(target))
    return target


def test_the_row_reads_as_an_instance_with_its_lists(row):
    (instance,) = instances.read(str(ROWS), ROWS.read_bytes())
    assert instance.instance_id == ID and instance.repo == "Changaco/python-libarchive-c"
    assert len(instance.fail_to_pass) == 4 and len(instance.pass_to_pass) == 7
    assert not set(instance.fail_to_pass) & set(instance.pass_to_pass)
    assert {test.split("::")[0] for test in instance.fail_to_pass + instance.pass_to_pass} == {
        "tests/test_rwx.py"
    }
    assert instance.kept["environment_setup_commit"] == row["base_commit"]


def test_the_bundle_is_the_one_the_readme_names_and_clones_to_the_base(row, clone):
    (digest,) = CHECKSUM.findall((DATA / "README.md").read_text())
    assert hashlib.sha256(BUNDLE.read_bytes()).hexdigest() == digest
    assert git(clone, "rev-parse", "HEAD") == row["base_commit"]
    assert git(clone, "status", "--porcelain") == ""
    assert (
        "creativecommons.org/publicdomain/zero"
        in (BUNDLE.parent / "LICENSE.python-libarchive-c").read_text()
    )


def test_both_patches_apply_at_the_base_and_touch_their_own_files(row, clone, tmp_path):
    for name in ("test_patch", "patch"):
        done = check_apply(clone, row[name], tmp_path)
        assert done.returncode == 0, f"{name}: {done.stderr}"
    touched = {
        name: re.findall(r"^diff --git a/(\S+) ", row[name], re.M)
        for name in ("patch", "test_patch")
    }
    assert touched == {
        "patch": ["libarchive/entry.py", "libarchive/read.py"],
        "test_patch": ["tests/test_rwx.py"],
    }


def test_the_gold_patch_with_a_removed_line_altered_is_refused(row, clone, tmp_path):
    # The check above can fail: the gold patch with its first removed line altered does not apply.
    lines = row["patch"].splitlines(keepends=True)
    first = next(n for n, line in enumerate(lines) if line.startswith("-    def"))
    lines[first] = lines[first].replace("def", "dfe")
    assert check_apply(clone, "".join(lines), tmp_path).returncode != 0


def test_the_recipe_names_the_library_as_a_system_package():
    recipes = json.loads(RECIPES.read_text())
    assert list(recipes) == [ID]
    recipe = recipes[ID]
    assert recipe["python"] == "3.11" and recipe["system_packages"] == [LIBRARY]
    assert recipe["install"] == [] and any(
        pin.startswith("pytest==") for pin in recipe["requirements"]
    )


def imported(root: Path, yyb: Yyb, system_packages: list[str], *flags: str) -> tuple[Path, str]:
    """Import the row with the recipe's ``system_packages`` replaced; (out folder, case file).
    Nothing but the summary is on stderr: with ``--check-ids``, no listed id was repaired."""
    recipes = json.loads(RECIPES.read_text())
    name = "libarchive-c-" + ("-".join(system_packages) or "host")
    write(
        root / f"{name}.json",
        json.dumps({ID: dict(recipes[ID], system_packages=system_packages, name=name)}),
    )
    out = root / name
    config = out / "yylo-benchmark.config.json"
    done = yyb(
        "import", "swe-bench", str(ROWS), "--repos", str(root / "repos"), "--out", str(out),
        "--environments", str(root / f"{name}.json"), *flags,
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    assert done.stderr.splitlines() == [f"yyb: 1 case(s); configuration {config}"], done.stderr
    return out, str(out / "cases" / f"{ID}.md")


def validated(yyb: Yyb, out: Path, case: str) -> str:
    """``validate --gold`` of the case: its one line; exit 0 exactly when it says ok."""
    done = yyb(
        "--config", str(out / "yylo-benchmark.config.json"), "validate", "--gold", "--task", case
    )
    assert done.exit_code in (0, 1), done.stdout + done.stderr
    assert (done.exit_code == 0) == (" ok " in done.stdout), done.stdout
    return done.stdout


@pytest.mark.deep
def test_gold_resolves_on_a_debian_root_with_the_library_and_not_without_it(tmp_path):
    """The recipe as given: a bookworm base with libarchive13, every id kept by the collection,
    gold=pass empty=fail. The same recipe with ``["git"]`` (a package the root holds anyway,
    so a Debian root without the library): gold fails too. Emptied: no base, the host's root,
    whose own library (or its absence) decides."""
    subprocess.run(
        ["git", "clone", "-q", str(BUNDLE), str(tmp_path / "repos" / "python-libarchive-c")],
        check=True,
    )
    yyb = Yyb(str(tmp_path / "store"))
    out, case = imported(tmp_path, yyb, [LIBRARY], "--check-ids")
    spec = json.loads((out / "envs" / f"libarchive-c-{LIBRARY}.json").read_text())
    assert spec["base"] == f"debian-bookworm-python3.11-{LIBRARY}.json"
    base = json.loads((out / "envs" / spec["base"]).read_text())
    assert base["kind"] == "rootfs" and base["rootfs"]["suite"] == "bookworm"
    assert base["rootfs"]["packages"] == ["git", LIBRARY, "python3.11"]
    assert "gold=pass empty=fail" in validated(yyb, out, case)

    out, case = imported(tmp_path, yyb, ["git"])
    spec = json.loads((out / "envs" / "libarchive-c-git.json").read_text())
    assert (
        LIBRARY not in json.loads((out / "envs" / spec["base"]).read_text())["rootfs"]["packages"]
    )
    assert "gold=fail empty=fail" in validated(yyb, out, case)

    out, case = imported(tmp_path, yyb, [])
    assert "base" not in json.loads((out / "envs" / "libarchive-c-host.json").read_text())
    gold = "gold=pass" if find_library("archive") else "gold=fail"
    assert gold in validated(yyb, out, case)
