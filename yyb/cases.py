"""Benchmark cases: ledger task files that opted in, their validation and their identity.

A task file is Markdown that opens with a YAML front-matter block between two ``---`` lines.
The block carries ``id``, ``title``, ``tags`` and ``fields``; the task is a benchmark case when
``tags`` holds ``benchmark-case`` and ``fields.benchmark`` names the repository, base commit,
case version, category, grader profile and optional wiki paths; a case graded by a ``tests``
evaluator also names its hidden tests (``fields.benchmark.tests``: a test patch file, pinned by
its sha256, and the FAIL_TO_PASS and PASS_TO_PASS test ids; optionally a gold patch, for
validation only). The bytes after the closing ``---`` line are the prompt. docs/cases.md
defines the three identity hashes.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

from yyb.config import Config
from yyb.errors import FieldError, UsageError
from yyb.evidence import records
from yyb.store import file
from yyb.store.objects import codec

CASE_SCHEMA = records.CASE
TAG = "benchmark-case"
CASE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
REQUIRED = ("repository", "base_commit", "case_version", "category", "grader_profile")
SHA256 = re.compile(r"[0-9a-f]{64}")
TEST_LISTS = ("fail_to_pass", "pass_to_pass")


class CaseError(FieldError):
    """A task that is not a valid benchmark case (``where``: its path); ``field`` names what is
    missing or wrong."""


@dataclass(frozen=True)
class Task:
    """A parsed task file: its exact bytes, front matter, and prompt bytes."""

    path: str
    data: bytes
    front: dict
    prompt: bytes


def _split(data: bytes, path: str) -> tuple[bytes, bytes]:
    """(front-matter text, prompt bytes)."""
    lines = data.splitlines(keepends=True)
    if not lines or lines[0].rstrip(b"\r\n") != b"---":
        raise CaseError(path, "", "missing front matter (the file must open with a '---' line)")
    for i, line in enumerate(lines[1:], start=1):
        if line.rstrip(b"\r\n") == b"---":
            return b"".join(lines[1:i]), b"".join(lines[i + 1 :])
    raise CaseError(path, "", "front matter is not closed by a '---' line")


def parse_task(data: bytes, path: str) -> Task:
    """Parse a task file without judging whether it is a benchmark case.

    Raises:
        CaseError: missing or malformed front matter.
    """
    import yaml

    front_text, prompt = _split(data, path)
    try:
        # BaseLoader keeps every scalar a string: a hex commit of digits stays text.
        front = yaml.load(front_text.decode("utf-8"), Loader=yaml.BaseLoader)
    except UnicodeDecodeError:
        raise CaseError(path, "", "front matter is not UTF-8") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        raise CaseError(path, "", f"front matter is not valid YAML{where}") from None
    if not isinstance(front, dict):
        raise CaseError(path, "", "front matter must be a YAML mapping")
    return Task(path, data, front, prompt)


def _text(value: object, path: str, field: str) -> str:
    if value is None:
        raise CaseError(path, field, "missing")
    if not isinstance(value, str) or not value.strip():
        raise CaseError(path, field, "must be a non-empty string")
    return value


def benchmark_fields(task: Task) -> dict:
    """Check the case's own fields (no repository or configuration needed) and return them."""
    path, front = task.path, task.front
    case_id = _text(front.get("id"), path, "id")
    if not CASE_ID.fullmatch(case_id):
        raise CaseError(
            path, "id", f"{case_id!r} is not a case id (letters, digits, . _ -; at most 128)"
        )
    title = _text(front.get("title"), path, "title")
    tags = front.get("tags")
    if tags is None:
        raise CaseError(path, "tags", "missing")
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise CaseError(path, "tags", "must be a list of strings")
    if TAG not in tags:
        raise CaseError(path, "tags", f"does not contain {TAG!r}: not a benchmark case")
    fields = front.get("fields")
    if not isinstance(fields, dict):
        raise CaseError(path, "fields", "missing" if fields is None else "must be a mapping")
    bench = fields.get("benchmark")
    if not isinstance(bench, dict):
        raise CaseError(
            path, "fields.benchmark", "missing" if bench is None else "must be a mapping"
        )
    out = {name: _text(bench.get(name), path, f"fields.benchmark.{name}") for name in REQUIRED}
    wiki = bench.get("wiki_paths", [])
    if not isinstance(wiki, list) or not all(isinstance(w, str) and w for w in wiki):
        raise CaseError(path, "fields.benchmark.wiki_paths", "must be a list of paths")
    for i, item in enumerate(wiki):
        parts = item.strip("/").split("/")
        if item.startswith("/") or ".." in parts or "" in parts:
            raise CaseError(
                path,
                f"fields.benchmark.wiki_paths[{i}]",
                f"{item!r} must be a relative path inside the repository",
            )
    if len(set(wiki)) != len(wiki):
        raise CaseError(path, "fields.benchmark.wiki_paths", "lists a path twice")
    out["tests"] = _tests(bench.get("tests"), path)
    return {"case_id": case_id, "title": title, "tags": sorted(tags), **out, "wiki_paths": wiki}


def _tests(value: object, path: str) -> dict | None:
    """``fields.benchmark.tests`` checked (None when absent)."""
    where = "fields.benchmark.tests"
    if value is None:
        return None
    if not isinstance(value, dict):
        raise CaseError(path, where, "must be a mapping")
    known = {"test_patch", "test_patch_sha256", *TEST_LISTS, "gold_patch", "gold_patch_sha256"}
    for key in sorted(set(value) - known):
        raise CaseError(path, f"{where}.{key}", "is not a field of the tests block")
    out = {}
    for name in ("test_patch", "gold_patch"):
        if name == "gold_patch" and name not in value and f"{name}_sha256" not in value:
            continue
        out[name] = _text(value.get(name), path, f"{where}.{name}")
        digest = _text(value.get(f"{name}_sha256"), path, f"{where}.{name}_sha256")
        if not SHA256.fullmatch(digest):
            raise CaseError(path, f"{where}.{name}_sha256", "must be 64 lowercase hex digits")
        out[f"{name}_sha256"] = digest
    seen: set[str] = set()
    for name in TEST_LISTS:
        items = value.get(name)
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise CaseError(path, f"{where}.{name}", "must be a list of test ids")
        for i, item in enumerate(items):
            if not is_test_id(item):
                raise CaseError(path, f"{where}.{name}[{i}]", f"{item!r} {NOT_A_TEST_ID}")
            if item in seen:
                raise CaseError(path, f"{where}.{name}[{i}]", f"{item!r} is listed twice")
            seen.add(item)
        out[name] = list(items)
    if not out["fail_to_pass"]:
        raise CaseError(path, f"{where}.fail_to_pass", "must list at least one test")
    return out


NOT_A_TEST_ID = "is not a test id (non-empty, one line, not starting with '-')"


def is_test_id(item: str) -> bool:
    """A test id is passed to the test command as one argument: never an option."""
    return bool(item) and not item.startswith("-") and not any(c in item for c in "\0\n\r")


def hidden_patch(task: Task, which: str = "test_patch") -> bytes | None:
    """The bytes of the case's ``test_patch`` (or ``gold_patch``), read from its path relative
    to the task file and checked against its bound sha256 (None when the case has none).

    Raises:
        CaseError: the file is unreadable, does not match its sha256, or is not a patch.
    """
    from yyb.harness import apply

    tests = benchmark_fields(task)["tests"]
    if tests is None or which not in tests:
        return None
    where = f"fields.benchmark.tests.{which}"
    target = os.path.join(os.path.dirname(os.path.abspath(task.path)), tests[which])
    try:
        data = file.read_input(target)
    except UsageError as exc:
        raise CaseError(task.path, where, exc.message) from None
    if sha256(data) != tests[f"{which}_sha256"]:
        raise CaseError(task.path, where, f"{tests[which]} does not match its bound sha256")
    try:
        apply.parse(data)
    except apply.PatchError as exc:
        raise CaseError(task.path, where, f"{tests[which]} is not a patch: {exc}") from None
    return data


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def input_hash(identity: dict) -> str:
    """SHA-256 of the canonical MessagePack of the identity map (docs/cases.md)."""
    keys = (
        "base_commit",
        "case_id",
        "case_version",
        "category",
        "grader_profile",
        "prompt_hash",
        "repository",
        "task_hash",
        "wiki",
    )
    # A case with hidden tests has them in its identity, and one declaring an environment its
    # spec's oid; one without either hashes as before.
    keys += ("tests",) if identity.get("tests") else ()
    keys += ("environment",) if identity.get("environment") else ()
    return sha256(codec.encode({k: identity[k] for k in keys}))


def validate(task: Task, config: Config) -> dict:
    """Validate a task as a benchmark case against the configuration and its repository.

    Returns the case record value (without links), including its identity hashes.

    Raises:
        CaseError / UsageError: the exact field or check that failed.
    """
    from yyb.harness import source

    fields = benchmark_fields(task)
    path = task.path
    profile = fields["grader_profile"]
    if profile not in config.evaluators():
        raise CaseError(
            path, "fields.benchmark.grader_profile", f"{profile!r} is not a configured evaluator"
        )
    tests = fields["tests"]
    if tests is None and config.evaluators()[profile]["kind"] == "tests":
        raise CaseError(
            path, "fields.benchmark.tests", f"missing: its grader profile {profile!r} runs tests"
        )
    repo_id = fields["repository"]
    repo_path = config.repository_path(repo_id)
    if repo_path is None:
        raise CaseError(
            path,
            "fields.benchmark.repository",
            f"unknown repository {repo_id!r} (not in the configuration)",
        )
    repo = source.open_repository(repo_path)
    commit = source.commit_at(repo, fields["base_commit"], f"{path}: fields.benchmark.base_commit")
    wiki = []
    for i, item in enumerate(fields["wiki_paths"]):
        digest = source.entry_digest(repo, commit, item)
        if digest is None:
            raise CaseError(
                path,
                f"fields.benchmark.wiki_paths[{i}]",
                f"{item!r} does not exist at {fields['base_commit']}",
            )
        wiki.append(digest)
    identity = {
        "case_id": fields["case_id"],
        "repository": repo_id,
        "base_commit": fields["base_commit"],
        "case_version": fields["case_version"],
        "category": fields["category"],
        "grader_profile": profile,
        "task_hash": sha256(task.data),
        "prompt_hash": sha256(task.prompt),
        "wiki": sorted(wiki, key=lambda w: w["path"].encode()),
    }
    if tests is not None:
        hidden_patch(task)  # readable, the bytes bound, a patch
        identity["tests"] = {
            "fail_to_pass": tests["fail_to_pass"],
            "pass_to_pass": tests["pass_to_pass"],
            "test_patch_sha256": tests["test_patch_sha256"],
        }
    declared = environment_of(task)
    if declared is not None:
        identity["environment"] = declared.oid
    identity["input_hash"] = input_hash(identity)
    return {
        "schema_version": CASE_SCHEMA,
        "title": fields["title"],
        "tags": fields["tags"],
        **identity,
    }


def environment_of(task: Task):
    """The environment spec ``fields.benchmark.environment`` names (a path relative to the
    task file), read and checked (yyb/evidence/environment.py); None when it names none.

    Raises:
        CaseError: the field is not a path.
        EnvironmentSpecError: the spec cannot be used.
    """
    given = task.front.get("fields", {}).get("benchmark", {}).get("environment")
    if given is None:
        return None
    if not isinstance(given, str) or not given:
        raise CaseError(task.path, "fields.benchmark.environment", "must be a spec file's path")
    from yyb.evidence import environment

    return environment.load(os.path.join(os.path.dirname(os.path.abspath(task.path)), given))


def load_case(path: str, config: Config) -> tuple[Task, dict]:
    """Read, parse and validate the task file at ``path``."""
    task = parse_task(file.read_input(path), path)
    return task, validate(task, config)


def write_case(store, task: Task, case: dict) -> str:
    """Store the task and prompt blobs (and the test patch of a case with hidden tests) and
    the case record; return the record's oid."""
    links = {"task": store.objects.put("blob", task.data)}
    links["prompt"] = store.objects.put("blob", task.prompt)
    if case.get("tests"):
        links["test_patch"] = store.objects.put("blob", hidden_patch(task))
    if case.get("environment"):
        for _, value in environment_of(task).records():
            store.objects.put_record(value)
        links["environment"] = case["environment"]
    return store.objects.put_record(dict(case, links=links))
