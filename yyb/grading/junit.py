"""Per-test results from a JUnit XML report, read as hostile input.

The report is written by a test runner in whose process the candidate's code runs, so it is
parsed as an attacker's file: at most ``MAX_REPORT`` bytes and ``MAX_CASES`` test cases, with
defusedxml (no DTD, no entity, no external reference: no billion laughs, no file read through
an entity), and nothing in it is trusted beyond what it says about each test. It arrives
through a pipe, where writes only append: it must be one document as a runner writes it, so it
opens with an XML declaration and holds no second one. Bytes the code under test wrote into
the pipe, before or after the runner's own report, make it unreadable, never a pass.

A ``<testcase>`` (at any depth, under ``<testsuite>`` or ``<testsuites>``) is identified by its
``classname`` and ``name`` attributes. Its outcome is ``error`` when it holds an ``<error>``
element, else ``failed`` with a ``<failure>``, else ``skipped`` with a ``<skipped>``, else
``passed``. A listed test id names a test case (docs/grading.md, "The tests kind"):

- an id with ``::`` is a pytest node id, ``path/to/test_x.py::Class::name[params]``, and names
  the case with classname ``path.to.test_x.Class`` and name ``name[params]`` (what pytest's
  JUnit writer derives from a node id);
- any other id names the case whose ``classname.name``, or ``name (classname)`` (unittest's
  description of a test, as SWE-bench lists Django's), is exactly the id.

A listed test is passed when at least one test case it names is in the report and every one
it names passed (a test reported twice, once passed and once errored in its teardown, is not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MAX_REPORT = 32 << 20  # bytes
MAX_CASES = 200_000
MAX_DETAIL = 300  # characters of a failure message kept in a check's detail

TestOutcome = Literal["passed", "failed", "error", "skipped"]


class ReportError(Exception):
    """A report that cannot be read as JUnit XML; ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Case:
    classname: str
    name: str
    outcome: TestOutcome
    message: str = ""


def read(data: bytes) -> list[Case]:
    """The test cases of a JUnit XML report.

    Raises:
        ReportError: too large, not one document opening with its XML declaration, not
            well-formed XML, a DTD or entity, not JUnit (its root is neither ``testsuites``
            nor ``testsuite``), or more than ``MAX_CASES`` cases.
    """
    from xml.etree.ElementTree import ParseError

    import defusedxml.ElementTree as SafeTree
    from defusedxml import DefusedXmlException

    if len(data) > MAX_REPORT:
        raise ReportError(f"the report is larger than {MAX_REPORT >> 20} MiB")
    body = data.removeprefix(b"\xef\xbb\xbf")
    if not body.startswith(b"<?xml") or body.count(b"<?xml") != 1:
        raise ReportError(
            "the report is not one document as a runner writes it (it must open with its XML "
            "declaration and hold no other): something else wrote into the report channel"
        )
    try:
        root = SafeTree.fromstring(data, forbid_dtd=True)
    except DefusedXmlException as exc:
        raise ReportError(
            f"the report uses a forbidden XML feature ({type(exc).__name__})"
        ) from None
    except (ParseError, ValueError) as exc:
        raise ReportError(f"the report is not well-formed XML ({exc})") from None
    if _local(root.tag) not in ("testsuites", "testsuite"):
        raise ReportError(f"the report's root is <{_local(root.tag)}>, not a JUnit test suite")
    cases = []
    for element in root.iter():
        if _local(element.tag) != "testcase":
            continue
        if len(cases) >= MAX_CASES:
            raise ReportError(f"the report lists more than {MAX_CASES} test cases")
        cases.append(_case(element))
    return cases


def _local(tag) -> str:
    """A tag without its namespace (``{ns}testcase`` -> ``testcase``)."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _case(element) -> Case:
    found = {_local(child.tag): child for child in element}
    outcome: TestOutcome = "passed"
    for tag, name in (("error", "error"), ("failure", "failed"), ("skipped", "skipped")):
        if tag in found:
            outcome = name
            child = found[tag]
            message = child.get("message") or (child.text or "").strip()
            break
    else:
        message = ""
    first = message.strip().splitlines()[0] if message.strip() else ""
    return Case(element.get("classname", ""), element.get("name", ""), outcome, first)


def node_case(test_id: str) -> tuple[str, str]:
    """(classname, name) pytest's JUnit writer gives the test of node id ``test_id``."""
    path, bracket, params = test_id.partition("[")
    names = path.split("::")
    names[0] = names[0].replace("/", ".").removesuffix(".py")
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def index(cases: list[Case]) -> dict[str, list[Case]]:
    """Every id a test case answers to -> the cases that answer to it."""
    found: dict[str, list[Case]] = {}
    for case in cases:
        keys = {f"{case.classname}\0{case.name}", f"{case.name} ({case.classname})"}
        if case.classname:
            keys.add(f"{case.classname}.{case.name}")
        for key in keys:
            found.setdefault(key, []).append(case)
    return found


def check(test_id: str, found: dict[str, list[Case]]) -> tuple[bool, str]:
    """(passed, detail) of one listed test against a report's ``index``."""
    if "::" in test_id:
        classname, name = node_case(test_id)
        matched = found.get(f"{classname}\0{name}", [])
    else:
        matched = found.get(test_id, [])
    if not matched:
        return False, "not in the report: it did not run"
    bad = [c for c in matched if c.outcome != "passed"]
    if not bad:
        return True, "passed" if len(matched) == 1 else f"passed ({len(matched)} reports)"
    case = bad[0]
    detail = case.outcome + (f": {case.message}" if case.message else "")
    if len(matched) > 1:
        outcomes = ", ".join(c.outcome for c in matched)
        detail += f" (reported {len(matched)} times: {outcomes})"
    return False, detail[:MAX_DETAIL]
