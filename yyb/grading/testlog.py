"""Per-test results from a test runner's printed log, in the formats SWE-bench's parsers read.

A log runner (a ``tests`` profile's ``runner`` other than ``junit``, docs/grading.md) is graded
by the status lines its test command prints, as SWE-bench grades every repository. The log is
written by the process the code under test runs in, so it is read as hostile input: one pass
over its lines, a line longer than ``MAX_LINE`` ignored (no status line is that long), at most
``MAX_TESTS`` distinct tests recorded, bytes that are not UTF-8 replaced. Each runner's test
ids are the ones SWE-bench's own parser gives that repository's tests, so an instance's
``FAIL_TO_PASS`` and ``PASS_TO_PASS`` name them as published:

- ``pytest-log``: pytest's ``-rA`` short test summary, ``PASSED path::id``,
  ``FAILED path::id - message``, ``ERROR path::id - message``, ``SKIPPED ...``, ``XFAIL ...``
  (an expected failure counts as passed, as in SWE-bench), and the older ``path::id STATUS``
  lines of a verbose classic run; colour codes and control characters are dropped first, and a
  test is also known by the ids SWE-bench's parsers of matplotlib, requests, pylint and
  pydicom rewrite its id to (``_pytest_ids``);
- ``django``: Django's ``runtests.py --verbosity 2`` lines, ``name (module.Class) ... ok``
  (``FAIL``, ``ERROR``, ``skipped 'why'``), where ``name`` is the first line of the test's
  docstring when it has one; ``FAIL: name`` and ``ERROR: name`` headers of the failure report;
  and a test whose ``ok`` arrives alone on a later line, after output the test printed;
- ``sympy``: ``bin/test --verbose`` lines, ``test_name ok`` (``F``, ``E``), and the
  ``____ path.py:test_name ____`` headers of its failure report.

A test the log reports more than once takes its worst status (``error``, then ``failed``,
``skipped``, ``passed``), not its last as SWE-bench does: a line printed after the runner's
cannot turn its failure into a pass. A line that is forged whole, while the runner's own never
appears, cannot be told from a real one (docs/grading.md, "Log runners").
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from typing import Literal

from yyb.evidence.records import TEST_RUNNERS

MAX_LINE = 16 << 10  # characters
MAX_TESTS = 200_000
MAX_DETAIL = 300

TestStatus = Literal["passed", "failed", "error", "skipped"]
LOG_RUNNERS = tuple(r for r in TEST_RUNNERS if r != "junit")
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}

_PYTEST = {
    "PASSED": "passed",
    "XFAIL": "passed",
    "FAILED": "failed",
    "ERROR": "error",
    "SKIPPED": "skipped",
}
_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\[[0-9;]*m|[\x00-\x08\x0b-\x1f\x7f]")
_SKIP_SUMMARY = re.compile(r"\[\d+\]")  # ``SKIPPED [N] path:line: why``: N counts, names none
_DJANGO_ENDINGS = (
    (" ... ok", "passed"),
    (" ... OK", "passed"),
    (" ...  OK", "passed"),
    (" ... FAIL", "failed"),
    (" ... ERROR", "error"),
)
# Printed by one of Django's own tests across lines; SWE-bench lists it under this name.
_DJANGO_VERSION_TEST = "--version is equivalent to version"
_SYMPY_HEADER = re.compile(r"_+ (\S.*\.py:\S+) _+")
_SYMPY_ENDINGS = ((" ok", "passed"), (" F", "failed"), (" E", "error"))


class Results:
    """test id -> status, each test's worst status kept, at most ``MAX_TESTS`` tests."""

    def __init__(self) -> None:
        self.found: dict[str, TestStatus] = {}

    def add(self, test_id: str, status: TestStatus) -> None:
        test_id = test_id.strip()
        if not test_id:
            return
        old = self.found.get(test_id)
        if old is None:
            if len(self.found) < MAX_TESTS:
                self.found[test_id] = status
        elif _RANK[status] > _RANK[old]:
            self.found[test_id] = status


def parse(runner: str, log: bytes) -> dict[str, TestStatus]:
    """Each test the log of ``runner`` reports -> ``passed``, ``failed``, ``error`` or
    ``skipped``.

    Args:
        runner: ``pytest-log``, ``django`` or ``sympy``.
        log: the test command's output, stdout then stderr, as received.

    Returns:
        The tests in SWE-bench's ids for that runner; a test the log never reports is absent.

    Raises:
        ValueError: ``runner`` is not a log runner.
    """
    if runner not in _READERS:
        raise ValueError(f"{runner!r} is not a log runner (one of {', '.join(LOG_RUNNERS)})")
    results = Results()
    reader = _READERS[runner](results)
    for line in log.decode("utf-8", errors="replace").split("\n"):
        if len(line) <= MAX_LINE:
            reader(line)
    return results.found


def _pytest_reader(results: Results) -> Callable[[str], None]:
    def read(line: str) -> None:
        line = _ESCAPE.sub("", line)
        word, _, rest = line.partition(" ")
        status = _PYTEST.get(word)
        if status is not None:
            if word != "PASSED":
                rest = rest.split(" - ", 1)[0]  # a reason or message follows: no part of the id
            words = rest.split()
            if words and not (word == "SKIPPED" and _SKIP_SUMMARY.fullmatch(words[0])):
                for test_id in _pytest_ids(" ".join(words)):
                    results.add(test_id, status)
            return
        words = line.split()
        if len(words) >= 2 and words[-1] in _PYTEST:
            for test_id in _pytest_ids(" ".join(words[:-1])):
                results.add(test_id, _PYTEST[words[-1]])

    return read


def _pytest_ids(test_id: str) -> set[str]:
    """A pytest node id as printed, and as SWE-bench's parsers of some repositories rewrite
    it before listing it: matplotlib's mouse buttons as numbers, and (requests, pylint,
    pydicom) a parameter that is an absolute path cut to its last part."""
    ids = {test_id, test_id.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3")}
    main, bracket, option = test_id.partition("[")
    if bracket and option.endswith("]"):
        option = option[:-1]
        if option.startswith("/") and not option.startswith("//") and "*" not in option:
            ids.add(f"{main}[/{option.rsplit('/', 1)[-1]}]")
    return ids


def _django_reader(results: Results) -> Callable[[str], None]:
    pending: list[str] = []  # the test whose line said `` ... `` and no status yet

    def read(line: str) -> None:
        line = line.strip()
        if _DJANGO_VERSION_TEST in line:
            results.add(_DJANGO_VERSION_TEST, "passed")
        status = None
        for ending, name in _DJANGO_ENDINGS:
            if line.endswith(ending):
                status, test = name, line[: -len(ending)]
                break
        else:
            if " ... skipped" in line:
                status, test = "skipped", line.split(" ... skipped", 1)[0]
            elif line.startswith(("FAIL:", "ERROR:")):
                word, _, test = line.partition(":")
                status = "failed" if word == "FAIL" else "error"
        if status is not None:
            if test.startswith("Applying ") and "..." in test:
                test = test.split("...", 1)[1]  # a migration's progress line ran into it
            results.add(test, status)
            pending.clear()
        elif " ... " in line or line.endswith(" ..."):
            pending[:] = [line.split(" ...", 1)[0]]  # its status comes on a later line
        elif line == "ok" and pending:
            results.add(pending.pop(), "passed")

    return read


def _sympy_reader(results: Results) -> Callable[[str], None]:
    def read(line: str) -> None:
        line = line.strip()
        header = _SYMPY_HEADER.fullmatch(line)
        if header is not None:
            results.add(header.group(1), "failed")
        elif line.startswith("test_"):
            for ending, status in _SYMPY_ENDINGS:
                if line.endswith(ending):
                    results.add(line.split()[0], status)
                    break

    return read


_READERS = {"pytest-log": _pytest_reader, "django": _django_reader, "sympy": _sympy_reader}


class Index:
    """A parsed log, looked up by listed test id."""

    def __init__(self, found: dict[str, TestStatus]):
        self.found = found
        self._sorted = sorted(found)

    def check(self, test_id: str) -> tuple[bool, str]:
        """(passed, detail) of one listed test.

        A listed id that holds more ``[`` than ``]`` was cut inside its parameters where it
        was published (SWE-bench tolerates the same): it names every test whose id it begins.
        A listed test is passed when at least one test it names is in the log and every one
        it names passed.
        """
        matched = [test_id] if test_id in self.found else []
        if not matched and test_id.count("[") > test_id.count("]"):
            at = bisect.bisect_left(self._sorted, test_id)
            while at < len(self._sorted) and self._sorted[at].startswith(test_id):
                matched.append(self._sorted[at])
                at += 1
        if not matched:
            return False, "not in the log: it did not run"
        bad = [t for t in matched if self.found[t] != "passed"]
        if not bad:
            return True, "passed" if len(matched) == 1 else f"passed ({len(matched)} tests)"
        detail = self.found[bad[0]] + ("" if bad[0] == test_id else f": {bad[0]}")
        return False, detail[:MAX_DETAIL]
