"""SWE-bench instance records: read from a JSON list or JSON Lines, each field checked.

docs/swe-bench.md specifies the input: which fields are required, which are kept, and the two
spellings of a test list (a JSON array, or a string holding one, as the published data sets
write them). Every problem is one ``InstanceError`` naming the record (by line for JSON
Lines, by position for a JSON list) and the field, before anything is written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from yyb.cases import CASE_ID, NOT_A_TEST_ID, is_test_id
from yyb.errors import FieldError

REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
COMMIT = re.compile(r"[0-9a-f]{40}")
TEXT = ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement")
LISTS = ("FAIL_TO_PASS", "PASS_TO_PASS")
# Optional fields kept in the case file (``fields.swe_bench``), when present and strings.
KEPT = ("version", "environment_setup_commit", "created_at")


class InstanceError(FieldError):
    """An instance record that cannot be imported; ``where`` names it, ``field`` the field."""


@dataclass(frozen=True)
class Instance:
    instance_id: str
    repo: str  # owner/name
    base_commit: str
    patch: bytes  # the gold patch: for validation only, never shown to a candidate
    test_patch: bytes
    problem_statement: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    kept: dict[str, str]
    where: str  # FILE:LINE, or FILE: record N

    @property
    def repo_id(self) -> str:
        """The repository id (and folder name) SWE-bench uses: ``owner__name``."""
        return self.repo.replace("/", "__")


def read(path: str, data: bytes) -> list[Instance]:
    """Every instance of a JSON list or JSON Lines file (``path`` names it in errors).

    Raises:
        InstanceError: the first record (or line) that is not a valid instance.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InstanceError(path, None, "not UTF-8 text") from None
    values: list[tuple[str, object]] = []
    if text.lstrip().startswith("["):
        items = _json(text, path)
        if not isinstance(items, list):
            raise InstanceError(path, None, "a JSON file must hold a list of instance records")
        values = [(f"{path}: record {n}", item) for n, item in enumerate(items, start=1)]
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                values.append((f"{path}:{number}", _json(line, f"{path}:{number}")))
    if not values:
        raise InstanceError(path, None, "no instance records")
    seen: dict[str, str] = {}
    out = []
    for where, value in values:
        instance = _instance(value, where)
        if instance.instance_id in seen:
            raise InstanceError(
                where,
                "instance_id",
                f"{instance.instance_id!r} is also at {seen[instance.instance_id]}",
            )
        seen[instance.instance_id] = where
        out.append(instance)
    return out


def _json(text: str, where: str):
    def refuse(name: str):
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(text, parse_constant=refuse)
    except ValueError as exc:
        raise InstanceError(where, None, f"not valid JSON ({exc})") from None


def _instance(value: object, where: str) -> Instance:
    from yyb.harness import apply

    if not isinstance(value, dict):
        raise InstanceError(where, None, "an instance record must be a JSON object")
    fields = {}
    for name in TEXT:
        item = value.get(name)
        if not isinstance(item, str) or not item.strip():
            raise InstanceError(
                where, name, "missing" if item is None else "must be a non-empty string"
            )
        fields[name] = item
    if not CASE_ID.fullmatch(fields["instance_id"]):
        raise InstanceError(
            where, "instance_id", "not a case id (letters, digits, . _ -; at most 128)"
        )
    if not REPO.fullmatch(fields["repo"]):
        raise InstanceError(where, "repo", f"{fields['repo']!r} is not owner/name")
    if not COMMIT.fullmatch(fields["base_commit"]):
        raise InstanceError(where, "base_commit", "must be a full commit id (40 hex digits)")
    for name in ("patch", "test_patch"):
        try:
            apply.parse(fields[name].encode("utf-8", "surrogateescape"))
        except apply.PatchError as exc:
            raise InstanceError(where, name, f"not a patch: {exc}") from None
    lists = {name: _tests(value.get(name), where, name) for name in LISTS}
    if not lists["FAIL_TO_PASS"]:
        raise InstanceError(where, "FAIL_TO_PASS", "lists no test")
    both = [*lists["FAIL_TO_PASS"], *lists["PASS_TO_PASS"]]
    twice = sorted({t for t in both if both.count(t) > 1})
    if twice:
        raise InstanceError(where, "PASS_TO_PASS", f"{twice[0]!r} is listed twice")
    kept = {name: value[name] for name in KEPT if isinstance(value.get(name), str) and value[name]}
    return Instance(
        fields["instance_id"],
        fields["repo"],
        fields["base_commit"],
        fields["patch"].encode(),
        fields["test_patch"].encode(),
        fields["problem_statement"],
        lists["FAIL_TO_PASS"],
        lists["PASS_TO_PASS"],
        kept,
        where,
    )


def _tests(value: object, where: str, name: str) -> list[str]:
    """A test list given as a JSON array, or as a string holding one."""
    if value is None:
        raise InstanceError(where, name, "missing")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise InstanceError(where, name, "a string that is not a JSON list") from None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise InstanceError(where, name, "must be a list of test ids")
    for test in value:
        if not is_test_id(test):
            raise InstanceError(where, name, f"{test!r} {NOT_A_TEST_ID}")
    return list(value)
