"""Test logs read as SWE-bench reads them, with ids as it lists them, and as hostile input."""

from __future__ import annotations

import random
import time

import pytest

from yyb.grading import testlog
from yyb.grading.testlog import Index, parse

PYTEST_LOG = b"""============================= test session starts ==============================
collected 6 items

tests/test_ops.py ..F.sx                                                 [100%]

=========================== short test summary info ============================
PASSED tests/test_ops.py::test_add
PASSED tests/test_ops.py::test_same[ones and ones]
\x1b[32mPASSED\x1b[0m tests/test_ops.py::test_colour
FAILED tests/test_ops.py::test_mean - assert 1 == 1.5 - or so
SKIPPED [1] tests/test_ops.py:20: later
SKIPPED tests/test_ops.py::test_later
XFAIL tests/test_ops.py::test_known - a known bug
ERROR tests/test_ops.py::test_teardown - RuntimeError: boom
PASSED tests/test_ops.py::test_teardown
astropy/io/tests/test_x.py::test_classic PASSED
==================== 1 failed, 4 passed, 1 skipped in 0.10s ====================
"""


def test_pytest_short_summary_lines():
    assert parse("pytest-log", PYTEST_LOG) == {
        "tests/test_ops.py::test_add": "passed",
        "tests/test_ops.py::test_same[ones and ones]": "passed",
        "tests/test_ops.py::test_colour": "passed",
        "tests/test_ops.py::test_mean": "failed",
        "tests/test_ops.py::test_later": "skipped",
        "tests/test_ops.py::test_known": "passed",  # an expected failure passes, as in SWE-bench
        "tests/test_ops.py::test_teardown": "error",  # its worst report, not its last
        "astropy/io/tests/test_x.py::test_classic": "passed",
    }


DJANGO_LOG = b"""Testing against Django installed in '/testbed/django'
Importing application ops
Operations to perform:
  Apply all migrations: auth
System check identified no issues (0 silenced).
test_add (ops.tests.OpsTests) ... ok
test_mean (ops.tests.OpsTests) ... FAIL
test_halves (ops.tests.OpsTests)
Halves are kept as halves. ... ok
test_later (ops.tests.OpsTests) ... skipped 'needs a database'
test_boom (ops.tests.OpsTests) ... ERROR
test_chatty (ops.tests.OpsTests) ... Testing against Django installed in '/testbed/django'
System check identified no issues (0 silenced).
ok
test_loud (ops.tests.OpsTests) ...
Internal Server Error: /view/
ok
Applying sites.0002_alter_domain_unique...test_no_migrations (ops.tests.M) ... ok
test_old (ops.tests.OpsTests) ...  OK
--version is equivalent to version

======================================================================
FAIL: test_mean (ops.tests.OpsTests)
----------------------------------------------------------------------
Traceback (most recent call last):
AssertionError: 1 != 1.5

======================================================================
ERROR: test_summary_only (ops.tests.OpsTests)
----------------------------------------------------------------------
Ran 9 tests in 0.010s

FAILED (failures=1, errors=1, skipped=1)
"""


def test_django_verbosity_2_lines():
    assert parse("django", DJANGO_LOG) == {
        "test_add (ops.tests.OpsTests)": "passed",
        "test_mean (ops.tests.OpsTests)": "failed",
        "Halves are kept as halves.": "passed",  # a docstring's first line is the test's name
        "test_later (ops.tests.OpsTests)": "skipped",
        "test_boom (ops.tests.OpsTests)": "error",
        "test_chatty (ops.tests.OpsTests)": "passed",  # its ok two lines later
        "test_loud (ops.tests.OpsTests)": "passed",
        "test_no_migrations (ops.tests.M)": "passed",
        "test_old (ops.tests.OpsTests)": "passed",
        "--version is equivalent to version": "passed",
        "test_summary_only (ops.tests.OpsTests)": "error",
    }


def test_a_lone_ok_belongs_only_to_a_test_still_waiting_for_its_status():
    log = b"test_mean (m.C) ... FAIL\nok\ntest_x (m.C) ... ok\nok\n"
    assert parse("django", log) == {"test_mean (m.C)": "failed", "test_x (m.C)": "passed"}


SYMPY_LOG = b"""============================= test process starts ==============================
executable:         /usr/bin/python  (3.9.0-final-0) [CPython]

sympy/core/tests/test_basic.py[3]
test_structure ok
test_equality F
test_broken E
test_slow_thing s
test_expected f

________________________________________________________________________________
___________ sympy/core/tests/test_basic.py:test_equality ____________
Traceback (most recent call last):
AssertionError
"""


def test_sympy_bin_test_lines():
    assert parse("sympy", SYMPY_LOG) == {
        "test_structure": "passed",
        "test_equality": "failed",
        "test_broken": "error",
        "sympy/core/tests/test_basic.py:test_equality": "failed",
    }


def test_an_unknown_runner_is_refused():
    with pytest.raises(ValueError, match="not a log runner"):
        parse("junit", b"")
    for runner in testlog.LOG_RUNNERS:  # one reader per log runner of the vocabulary
        assert parse(runner, b"") == {}


def test_a_cut_parametrized_id_names_every_test_it_begins():
    found = parse(
        "pytest-log",
        b"PASSED t.py::test_g[log(photon)]\nPASSED t.py::test_g[log(photon/s)]\n"
        b"FAILED t.py::test_h[a b]\nPASSED t.py::test_h[a c]\nPASSED t.py::test_i[x]\n",
    )
    index = Index(found)
    assert index.check("t.py::test_g[log(photon") == (True, "passed (2 tests)")
    passed, detail = index.check("t.py::test_h[a")
    assert not passed and detail == "failed: t.py::test_h[a b]"
    assert index.check("t.py::test_i[x]") == (True, "passed")
    # exact ids never match by prefix
    assert index.check("t.py::test_i") == (False, "not in the log: it did not run")
    assert index.check("t.py::test_g[log(photon)]") == (True, "passed")


def test_check_details():
    index = Index({"a": "passed", "b": "skipped", "c": "error"})
    assert index.check("a") == (True, "passed")
    assert index.check("b") == (False, "skipped")
    assert index.check("c") == (False, "error")
    assert index.check("d") == (False, "not in the log: it did not run")


@pytest.mark.parametrize("runner", testlog.LOG_RUNNERS)
def test_a_huge_line_and_binary_junk_are_read_in_bounds(runner):
    junk = random.Random(7).randbytes(1 << 20)
    huge = b"PASSED t.py::test_" + b"x" * (8 << 20) + b" ... ok\n"
    line = {
        "pytest-log": b"PASSED t.py::test_real\n",
        "django": b"test_real (m.C) ... ok\n",
        "sympy": b"test_real ok\n",
    }[runner]
    found = parse(runner, junk + b"\n" + huge + line + b"\xff\xfe\x00" * 1000)
    assert all(len(test_id) <= testlog.MAX_LINE for test_id in found)
    assert sum(status == "passed" for status in found.values()) >= 1
    assert not any("x" * 1000 in test_id for test_id in found)


@pytest.mark.parametrize("runner", testlog.LOG_RUNNERS)
def test_a_million_lines_take_linear_time(runner):
    line = {
        "pytest-log": b"PASSED t.py::test_%d\n",
        "django": b"test_%d (m.C) ... ok\n",
        "sympy": b"test_%d ok\n",
    }[runner]
    small = b"".join(line % i for i in range(100_000))
    big = b"".join(line % i for i in range(1_000_000))
    started = time.perf_counter()
    parse(runner, small)
    small_s = time.perf_counter() - started
    started = time.perf_counter()
    found = parse(runner, big)
    big_s = time.perf_counter() - started
    assert len(found) == testlog.MAX_TESTS  # more distinct tests than that are not kept
    # ten times the lines: far from a hundred times the time (a shared machine is noisy)
    assert big_s < 40 * small_s + 1.0, (small_s, big_s)


def test_many_lines_of_one_test_keep_one_entry():
    log = b"FAILED t.py::test_a - no\n" + b"PASSED t.py::test_a\n" * 500_000
    assert parse("pytest-log", log) == {"t.py::test_a": "failed"}


def test_pytest_ids_as_swe_bench_rewrites_them_for_some_repositories():
    found = parse(
        "pytest-log",
        b"PASSED lib/t.py::test_press[MouseButton.LEFT-MouseButton.RIGHT]\n"
        b"PASSED t.py::test_file[/testbed/data/rtplan.dcm]\n"
        b"FAILED t.py::test_share[//host/share] - no\n",
    )
    assert found == {
        "lib/t.py::test_press[MouseButton.LEFT-MouseButton.RIGHT]": "passed",
        "lib/t.py::test_press[1-3]": "passed",  # matplotlib's lists
        "t.py::test_file[/testbed/data/rtplan.dcm]": "passed",
        "t.py::test_file[/rtplan.dcm]": "passed",  # requests', pylint's and pydicom's lists
        "t.py::test_share[//host/share]": "failed",  # not a path SWE-bench cuts
    }
