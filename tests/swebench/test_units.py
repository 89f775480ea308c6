"""The parts of the tests kind that need no sandbox: the patch applier, the JUnit reader,
the matching of listed test ids, the verdict rule, and the case's tests block."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pytest

from yyb.evidence import testpatch
from yyb.grading import junit, testsuite
from yyb.grading.outcome import SIGNAL_EXIT, Outcome
from yyb.harness import apply


class Blobs(dict):
    def put(self, data: bytes) -> str:
        oid = hashlib.sha256(data).hexdigest()
        self[oid] = data
        return oid


def entries(blobs: Blobs, files: dict[str, bytes], mode: int = 0o100644) -> dict:
    return {path: (mode, blobs.put(data)) for path, data in files.items()}


def applied(files: dict[str, bytes], patch: bytes) -> dict[str, bytes]:
    blobs = Blobs()
    out = apply.apply(entries(blobs, files), patch, blobs.__getitem__, blobs.put)
    return {path: blobs[oid] for path, (_, oid) in out.items()}


PATCH = b"""diff --git a/a.txt b/a.txt
index 1111111..2222222 100644
--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,4 @@
 one
-two
+TWO
+two and a half
 three
diff --git a/new.py b/new.py
new file mode 100755
--- /dev/null
+++ b/new.py
@@ -0,0 +1,2 @@
+print(1)
+print(2)
\\ No newline at end of file
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
"""


def test_a_git_patch_changes_creates_and_deletes_files():
    blobs = Blobs()
    base = entries(blobs, {"a.txt": b"one\ntwo\nthree\n", "gone.txt": b"bye\n"})
    out = apply.apply(base, PATCH, blobs.__getitem__, blobs.put)
    assert sorted(out) == ["a.txt", "new.py"]
    assert blobs[out["a.txt"][1]] == b"one\nTWO\ntwo and a half\nthree\n"
    assert out["new.py"] == (0o100755, blobs.put(b"print(1)\nprint(2)"))
    assert apply.paths(PATCH) == ["a.txt", "gone.txt", "new.py"]


def test_a_hunk_applies_at_an_offset_but_never_against_other_context():
    shifted = b"zero\n-1\none\ntwo\nthree\n"
    assert applied({"a.txt": shifted}, PATCH.split(b"diff --git a/new.py")[0])["a.txt"] == (
        b"zero\n-1\none\nTWO\ntwo and a half\nthree\n"
    )
    with pytest.raises(apply.PatchError, match="does not apply"):
        applied({"a.txt": b"one\n2\nthree\n"}, PATCH.split(b"diff --git a/new.py")[0])


@pytest.mark.parametrize(
    "patch, reason",
    [
        (b"just prose\n", "no file section"),
        (b"diff --git a/x b/x\nGIT binary patch\nliteral 1\n", "binary"),
        (b"--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n", "ends before its lines"),
        (b"--- a/x\n+++ b/x\n@@ nonsense @@\n", "malformed hunk header"),
    ],
)
def test_patches_that_cannot_be_read_are_refused(patch, reason):
    with pytest.raises(apply.PatchError, match=reason):
        apply.parse(patch)


def test_a_file_created_where_one_exists_or_changed_where_none_is_refused():
    with pytest.raises(apply.PatchError, match="already exists"):
        applied({"new.py": b"x\n"}, PATCH[PATCH.index(b"diff --git a/new.py") :])
    with pytest.raises(apply.PatchError, match="does not exist"):
        applied({}, PATCH.split(b"diff --git a/new.py")[0])


def test_quoted_names_renames_and_mode_changes():
    patch = (
        b'diff --git "a/t\\303\\251st b.txt" "b/t\\303\\251st b.txt"\n'
        b"old mode 100644\nnew mode 100755\n"
        b"diff --git a/old.txt b/moved.txt\nsimilarity index 100%\n"
        b"rename from old.txt\nrename to moved.txt\n"
    )
    blobs = Blobs()
    base = entries(blobs, {"t\u00e9st b.txt": b"x\n", "old.txt": b"y\n"})
    out = apply.apply(base, patch, blobs.__getitem__, blobs.put)
    assert out == {
        "t\u00e9st b.txt": (0o100755, base["t\u00e9st b.txt"][1]),
        "moved.txt": base["old.txt"],
    }


def test_the_test_patch_files_are_protected_and_the_patch_applied_on_the_base():
    blobs = Blobs()
    base = entries(blobs, {"a.txt": b"one\ntwo\nthree\n", "gone.txt": b"bye\n", "src.py": b"1\n"})
    final = entries(
        blobs,
        {
            "a.txt": b"tampered\n",
            "src.py": b"2\n",
            "new.py/x": b"a folder in its way\n",
            "conftest.py": b"cheat\n",
        },
    )
    graded, touched = testpatch.graded(
        base, final, ["**/conftest.py"], PATCH, [], blobs.__getitem__, blobs.put
    )
    assert sorted(graded) == ["a.txt", "new.py", "src.py"]
    assert blobs[graded["src.py"][1]] == b"2\n"  # the candidate's own work stays
    assert blobs[graded["a.txt"][1]] == b"one\nTWO\ntwo and a half\nthree\n"
    assert touched == ["a.txt", "conftest.py", "gone.txt", "new.py/x"]
    assert testpatch.literal("tests/test_x[1].py") == "tests/test_x[[]1].py"


def test_pytest_configuration_and_listed_test_files_are_the_benchmarks_in_any_profile():
    """A candidate adding a ``pytest.toml`` or ``.pytest.ini`` (which pytest prefers to the
    project's ``pyproject.toml``) whose ``addopts`` loads a plugin of its own, or rewriting the
    file of a listed test the test patch does not touch, grades nothing of its own there."""
    blobs = Blobs()
    files = {"a.txt": b"one\ntwo\nthree\n", "gone.txt": b"bye\n", "pyproject.toml": b"[x]\n"}
    files["tests/test_extras.py"] = b"def test_halves():\n    assert 0\n"
    base = entries(blobs, files)
    forced = b"[pytest]\naddopts = ['-p', 'cheat']\n"
    final = entries(
        blobs,
        {
            **files,
            "tests/test_extras.py": b"def test_halves():\n    pass\n",
            "pytest.toml": forced,
            ".pytest.toml": forced,
            "sub/.pytest.ini": b"[pytest]\naddopts = -p cheat\n",
            "sub/pytest.ini": b"[pytest]\naddopts = -p cheat\n",
            "tests/tox.ini": b"[pytest]\naddopts = -p cheat\n",
            "deep/er/conftest.py": b"cheat\n",
            "cheat.py": b"the plugin\n",
            "setup.cfg": b"[tool:pytest]\naddopts = -p cheat\n",
        },
    )
    listed = ["tests/test_extras.py::test_halves", "test_get (views.ViewTests)"]
    graded, touched = testpatch.graded(base, final, [], PATCH, listed, blobs.__getitem__, blobs.put)
    assert sorted(graded) == [
        "a.txt",
        "cheat.py",
        "new.py",
        "pyproject.toml",
        "tests/test_extras.py",
    ]
    assert graded["tests/test_extras.py"] == base["tests/test_extras.py"]
    assert touched == [
        ".pytest.toml",
        "deep/er/conftest.py",
        "pytest.toml",
        "setup.cfg",
        "sub/.pytest.ini",
        "sub/pytest.ini",
        "tests/test_extras.py",
        "tests/tox.ini",
    ]
    assert testpatch.test_files([*listed, "tests/test_extras.py::TestX::test_y[a::b]"]) == [
        "tests/test_extras.py"
    ]


REPORT = b"""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.test_ops" name="test_add" />
<testcase classname="tests.test_ops" name="test_mean">
  <failure message="assert 1 == 1.5">x</failure></testcase>
<testcase classname="tests.test_mean.TestMean" name="test_values[values0-1.5]">
  <skipped message="later" /></testcase>
<testcase classname="tests.test_mean.TestMean" name="test_empty_raises" />
<testcase classname="tests.test_mean.TestMean" name="test_empty_raises">
  <error message="teardown" /></testcase>
<testcase classname="test_views.ViewTests" name="test_get" />
</testsuite></testsuites>
"""


@pytest.mark.parametrize(
    "test_id, passed, detail",
    [
        ("tests/test_ops.py::test_add", True, "passed"),
        ("tests/test_ops.py::test_mean", False, "failed: assert 1 == 1.5"),
        ("tests/test_mean.py::TestMean::test_values[values0-1.5]", False, "skipped: later"),
        ("tests/test_mean.py::TestMean::test_empty_raises", False, "error: teardown (reported 2"),
        ("tests/test_mean.py::TestMean::test_missing", False, "not in the report"),
        ("test_get (test_views.ViewTests)", True, "passed"),
        ("test_views.ViewTests.test_get", True, "passed"),
        ("test_get", False, "not in the report"),
    ],
)
def test_each_listed_test_is_judged_from_the_report(test_id, passed, detail):
    found = junit.index(junit.read(REPORT))
    got_passed, got_detail = junit.check(test_id, found)
    assert got_passed is passed and got_detail.startswith(detail)


BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
<testsuites>&lol2;</testsuites>
"""
EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]><testsuites>&x;</testsuites>
"""


@pytest.mark.parametrize(
    "data, reason",
    [
        (BOMB, "forbidden XML feature"),
        (EXTERNAL, "forbidden XML feature"),
        (b"<testsuites/>", "one document"),  # no declaration: something wrote before it
        (REPORT + REPORT, "one document"),  # a forged report, then the runner's own
        (b'<?xml version="1.0"?><testsuites><unclosed></testsuites>', "not well-formed"),
        (b'<?xml version="1.0"?><html/>', "not a JUnit test suite"),
        (b'<?xml version="1.0"?>' + b" " * junit.MAX_REPORT, "larger than"),
    ],
)
def test_hostile_or_spoilt_reports_are_refused(data, reason):
    with pytest.raises(junit.ReportError, match=reason):
        junit.read(data)


@dataclass
class Ran:
    """A stand-in for a supervised run's outcome."""

    exit_code: int | None = 0
    signal: int | None = None
    timed_out: bool = False
    cancelled: bool = False
    cleanup_confirmed: bool = True


TESTS = {"fail_to_pass": ["tests/test_ops.py::test_add"], "pass_to_pass": []}
PASSING = (
    b'<?xml version="1.0"?><testsuites>'
    b'<testcase classname="tests.test_ops" name="test_add"/></testsuites>'
)


@pytest.mark.parametrize(
    "ran, report, verdict, problem",
    [
        (Ran(cancelled=True), PASSING, "invalid", "interrupted"),
        (Ran(cleanup_confirmed=False), PASSING, "invalid", "cleanup_unconfirmed"),
        (Ran(timed_out=True, exit_code=None, signal=9), PASSING, "fail", None),
        (Ran(exit_code=None, signal=9), PASSING, "fail", None),
        (Ran(exit_code=137), PASSING, "fail", None),
        (Ran(exit_code=0), None, "fail", None),
        (Ran(exit_code=0), b"garbage", "fail", None),
        (Ran(exit_code=1), PASSING, "pass", None),  # the exit status alone decides nothing
        (Ran(exit_code=0), PASSING, "pass", None),
    ],
)
def test_the_verdict_rule(ran, report, verdict, problem):
    signal = ran.signal
    if signal is None and ran.exit_code is not None and ran.exit_code > SIGNAL_EXIT:
        signal = ran.exit_code - SIGNAL_EXIT
    result = Outcome(exit_code=ran.exit_code, signal=signal, output_bytes=report)
    out = testsuite.verdict(result, ran, TESTS, report)
    assert (out.verdict, out.problem) == (verdict, problem), out.reason


def test_the_command_is_filled_with_the_listed_tests():
    argv = testsuite.fill(
        ["py", "--junitxml={junit}", "{tests}", "--root={workspace}"],
        "/w",
        "/dev/fd/7",
        ["a::b", "c::d"],
    )
    assert argv == ["py", "--junitxml=/dev/fd/7", "a::b", "c::d", "--root=/w"]


def _one_by_one(path: str, patterns: list[str]) -> bool:
    """The protected-path rules applied pattern by pattern (docs/grading.md), as an oracle."""
    import fnmatch

    for pattern in patterns:
        if any(char in pattern for char in "*?["):
            if fnmatch.fnmatchcase(path, pattern) or (
                pattern.startswith("**/") and fnmatch.fnmatchcase(path, pattern[3:])
            ):
                return True
        elif path == pattern.strip("/") or path.startswith(pattern.strip("/") + "/"):
            return True
    return False


def test_the_compiled_matcher_follows_the_rules_pattern_by_pattern():
    from yyb.evidence import protect

    patterns = ["**/conftest.py", "tests/", "setup.cfg", "a[[]1].py", "doc?/*.md", "x.y+z"]
    paths = [
        "conftest.py",
        "a/b/conftest.py",
        "conftest.pyc",
        "tests",
        "tests/x",
        "testsx",
        "setup.cfg",
        "setup.cfg/x",
        "sub/setup.cfg",
        "a[1].py",
        "a1.py",
        "docs/a/b.md",
        "doc/x.md",
        "x.y+z",
        "xayyz",
        "line\nbreak/conftest.py",
    ]
    for path in paths:
        assert protect.matches(path, patterns) is _one_by_one(path, patterns), path
    assert protect.matches("anything", []) is False
