"""The governed configuration (``juno_benchmark_config.v1``) and ``workflow migrate-config``.

A governed configuration is a JSON file of its own, never an isolated v2 configuration with
another schema string: the isolated lane's file grants nothing here, and this one nothing
there. Paths in it are relative to its folder. docs/workflow.md has the fields.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from yyb.errors import UsageError
from yyb.evidence.records import CONFIG, GOVERNED_CONFIG
from yyb.store import file

IDENTITY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
CREDENTIAL = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
FIELDS = {
    "schema_version",
    "yylo_version",
    "project",
    "boundary",
    "lock_store",
    "judges",
    "tool_paths",
}
JUDGE_FIELDS = {
    "harness",
    "model",
    "prompt",
    "rubric",
    "evidence",
    "identity",
    "parsing",
    "timeout_ms",
    "repetitions",
    "aggregation",
    "byte_limit",
}
PROFILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
BOUNDARY_FIELDS = {"executable", "sha256", "identity", "interpreter", "journal", "credentials"}


class GovernedConfigError(UsageError):
    def __init__(self, path: str, reason: str):
        super().__init__(f"governed configuration {path}: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class Boundary:
    """The pinned boundary (docs/boundary.md): its file, bytes, reviewed identity, journal."""

    executable: str
    sha256: str
    identity: str
    interpreter: str | None
    journal: str
    credentials: tuple[str, ...]

    def pin(self) -> dict:
        """What a plan binds of it."""
        return {"identity": self.identity, "sha256": self.sha256}


@dataclass(frozen=True)
class GovernedConfig:
    path: str
    yylo_version: str
    project: str  # the tracked project's folder (a Git repository)
    boundary: Boundary
    lock_store: str
    judges: dict  # profile -> judge spec with its harness (docs/workflow.md, "Judges")
    tool_paths: tuple[str, ...]  # read-only paths a judge's sandbox shows (its programs)


def load(path: str) -> GovernedConfig:
    """Read and check the governed configuration at ``path``.

    Raises:
        UsageError: unreadable; GovernedConfigError: not a governed configuration, or invalid.
    """
    data = _json(path)
    version = data.get("schema_version")
    if version == CONFIG:
        raise GovernedConfigError(
            path,
            f"it is an isolated {CONFIG} configuration; a governed one is {GOVERNED_CONFIG} "
            "(see 'yyb workflow migrate-config')",
        )
    if version != GOVERNED_CONFIG:
        raise GovernedConfigError(path, f"schema_version is {version!r}, not {GOVERNED_CONFIG!r}")
    problems = lacks(data)
    if problems:
        raise GovernedConfigError(path, problems[0])
    here = os.path.dirname(os.path.abspath(path))
    b = data["boundary"]
    boundary = Boundary(
        executable=os.path.join(here, b["executable"]),
        sha256=b["sha256"],
        identity=b["identity"],
        interpreter=b.get("interpreter"),
        journal=os.path.join(here, b["journal"]),
        credentials=tuple(b.get("credentials", [])),
    )
    return GovernedConfig(
        path=os.path.abspath(path),
        yylo_version=data["yylo_version"],
        project=os.path.join(here, data.get("project", ".")),
        boundary=boundary,
        lock_store=os.path.join(here, data["lock_store"]),
        judges=data.get("judges", {}),
        tool_paths=tuple(os.path.join(here, p) for p in data.get("tool_paths", [])),
    )


def lacks(data: dict) -> list[str]:
    """What keeps ``data`` (a governed configuration's value) from being usable, in words;
    empty when nothing does."""
    found = []
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        found.append(f"unknown field {unknown[0]!r}")
    if not isinstance(data.get("yylo_version"), str) or not data.get("yylo_version"):
        found.append("yylo_version must be a non-empty string")
    if "project" in data and not isinstance(data["project"], str):
        found.append("project must be a path")
    if not isinstance(data.get("lock_store"), str) or not data.get("lock_store"):
        found.append("lock_store must name the folder of the shared resource locks")
    found += _judges_lack(data.get("judges", {}))
    tool_paths = data.get("tool_paths", [])
    if not isinstance(tool_paths, list) or not all(isinstance(p, str) for p in tool_paths):
        found.append("tool_paths must list paths")
    b = data.get("boundary")
    if not isinstance(b, dict):
        found.append("boundary must pin the boundary program (docs/boundary.md)")
        return found
    unknown = sorted(set(b) - BOUNDARY_FIELDS)
    if unknown:
        found.append(f"boundary has an unknown field {unknown[0]!r}")
    for name in ("executable", "journal"):
        if not isinstance(b.get(name), str) or not b.get(name):
            found.append(f"boundary.{name} must be a path")
    if not isinstance(b.get("sha256"), str) or not SHA256.match(b["sha256"]):
        found.append("boundary.sha256 must be the SHA-256 of the boundary's bytes (64 hex)")
    if not isinstance(b.get("identity"), str) or not IDENTITY.match(b["identity"]):
        found.append("boundary.identity must be the reviewed identity (name@version)")
    interpreter = b.get("interpreter")
    if interpreter is not None and not (isinstance(interpreter, str) and interpreter[:1] == "/"):
        found.append("boundary.interpreter must be an absolute path")
    credentials = b.get("credentials", [])
    if not isinstance(credentials, list) or not all(
        isinstance(c, str) and CREDENTIAL.match(c) for c in credentials
    ):
        found.append("boundary.credentials must list environment variable names")
    return found


def _judges_lack(judges) -> list[str]:
    """What keeps the ``judges`` catalog (profile -> LLM judge spec, docs/grading.md, with
    its ``harness``) from being usable."""
    if not isinstance(judges, dict):
        return ["judges must map a profile to a judge"]
    found = []
    for profile, spec in sorted(judges.items()):
        where = f"judges.{profile}"
        if not PROFILE.match(profile):
            found.append(f"{where}: a profile is a plain name")
        if not isinstance(spec, dict):
            found.append(f"{where} must be an object")
            continue
        unknown = sorted(set(spec) - JUDGE_FIELDS)
        if unknown:
            found.append(f"{where} has an unknown field {unknown[0]!r}")
        for name in ("model", "prompt", "rubric"):
            if not isinstance(spec.get(name), str) or not spec.get(name):
                found.append(f"{where}.{name} must be a non-empty string")
        harness = spec.get("harness")
        if not (
            isinstance(harness, dict)
            and harness.get("kind") == "command"
            and isinstance(harness.get("argv"), list)
            and harness["argv"]
            and all(isinstance(a, str) for a in harness["argv"])
        ):
            found.append(f"{where}.harness must be {{kind: command, argv: [...]}}")
        choices = {
            "identity": ("blinded", "visible"),
            "parsing": ("strict_json", "verdict_line"),
            "aggregation": ("majority", "all", "any"),
        }
        for name, allowed in choices.items():
            if name in spec and spec[name] not in allowed:
                found.append(f"{where}.{name} must be one of {', '.join(allowed)}")
        if not set(spec.get("evidence", ["outputs"])) <= {"outputs"}:
            found.append(f"{where}.evidence may only name outputs")
        for name in ("timeout_ms", "repetitions", "byte_limit"):
            if name in spec and not (type(spec[name]) is int and spec[name] >= 1):
                found.append(f"{where}.{name} must be a positive integer")
    return found


def _json(path: str) -> dict:
    try:
        data = json.loads(file.read_input(path))
    except (ValueError, UnicodeDecodeError) as exc:
        raise GovernedConfigError(path, f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise GovernedConfigError(path, "not a JSON object")
    return data


def template(isolated: dict) -> dict:
    """A governed configuration for review, from an isolated v2 one: only its YYLO version
    carries over (nothing of the isolated lane's policy grants anything here); every pin is
    a placeholder a person must fill in."""
    return {
        "schema_version": GOVERNED_CONFIG,
        "yylo_version": isolated.get("yylo_version") or "REPLACE",
        "project": ".",
        "boundary": {
            "executable": "REPLACE: the reviewed boundary program",
            "sha256": "REPLACE: the SHA-256 of its bytes",
            "identity": "REPLACE: its reviewed identity (name@version)",
            "journal": "REPLACE: the boundary's private journal folder",
            "credentials": [],
        },
        "lock_store": "REPLACE: the folder of the shared resource locks",
    }


def migrate(input_path: str, output_path: str | None) -> dict:
    """Inspect a configuration without changing it; with an isolated v2 input and an unused
    ``output_path``, write a governed template there. Returns the report."""
    data = _json(input_path)
    version = data.get("schema_version")
    report: dict = {"input": input_path, "schema_version": version, "dispatch_count": 0}
    if version == GOVERNED_CONFIG:
        report["kind"] = "governed"
        report["lacks"] = lacks(data)
    elif version == CONFIG and set(data) & {"boundary", "lock_store"}:
        # A governed file with another schema string is still a governed file.
        report["kind"] = "relabelled"
        report["lacks"] = [
            f"it carries governed fields under {CONFIG}: changing the schema string is not a "
            f"migration; keep it as {GOVERNED_CONFIG}"
        ]
    elif version == CONFIG:
        report["kind"] = "isolated"
        report["lacks"] = ["it is an isolated configuration: the governed lane needs its own"]
    else:
        report["kind"] = "unknown"
        report["lacks"] = [f"schema_version {version!r} is neither {CONFIG} nor {GOVERNED_CONFIG}"]
    if output_path is not None:
        if report["kind"] != "isolated":
            raise UsageError(
                f"--output writes a governed template from an isolated {CONFIG} "
                f"configuration; {input_path} is {report['kind']}"
            )
        body = (json.dumps(template(data), indent=2) + "\n").encode()
        file.write_new(output_path, body)
        report["written"] = output_path
    return report
