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
from decimal import Decimal

from yyb.errors import InvalidArgument, UsageError
from yyb.evidence.kinds import governed as kinds
from yyb.evidence.record import ABSENT, kind_of
from yyb.evidence.records import CONFIG, GOVERNED_CONFIG
from yyb.store import file, schema
from yyb.store.objects.codec import json_path

# What each field must be, in words, by JSON path ("*" a judge's profile): a schema's own
# messages speak of regular expressions and types, a person fixing the file of what it means.
EXPECTED = {
    "$.yylo_version": "must be a non-empty string",
    "$.project": "must be a path",
    "$.lock_store": "must name the folder of the shared resource locks",
    "$.tool_paths": "must list paths",
    "$.judges": "must map a profile to a judge",
    "$.boundary": "must pin the boundary program (docs/boundary.md)",
    "$.boundary.executable": "must be a path",
    "$.boundary.journal": "must be a path",
    "$.boundary.sha256": "must be the SHA-256 of the boundary's bytes (64 hex)",
    "$.boundary.identity": "must be the reviewed identity (name@version)",
    "$.boundary.interpreter": "must be an absolute path",
    "$.boundary.credentials": "must list environment variable names",
    "$.judges.*": "must be an object",
    "$.judges.*.model": "must be a non-empty string",
    "$.judges.*.prompt": "must be a non-empty string",
    "$.judges.*.rubric": "must be a non-empty string",
    "$.judges.*.harness": "must be {kind: command, argv: [...]}",
    "$.judges.*.identity": "must be one of blinded, visible",
    "$.judges.*.parsing": "must be one of strict_json, verdict_line",
    "$.judges.*.aggregation": "must be one of majority, all, any",
    "$.judges.*.evidence": "may only name outputs",
    "$.judges.*.timeout_ms": "must be a positive integer",
    "$.judges.*.repetitions": "must be a positive integer",
    "$.judges.*.byte_limit": "must be a positive integer",
}
_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'")


class GovernedConfigError(UsageError):
    """A governed configuration refused: ``path`` names the file, ``field`` the JSON path at
    fault (None: the file as a whole), ``reason`` what is wrong there."""

    def __init__(self, path: str, reason: str, field: str | None = None):
        where = f"{field}: " if field else ""
        super().__init__(f"governed configuration {path}: {where}{reason}")
        self.path = path
        self.field = field
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
    version = kind_of(data)
    if version == CONFIG:
        raise GovernedConfigError(
            path,
            f"it is an isolated {CONFIG} configuration; a governed one is {GOVERNED_CONFIG} "
            "(see 'yyb workflow migrate-config')",
        )
    if version != GOVERNED_CONFIG:
        raise GovernedConfigError(path, f"schema_version is {version!r}, not {GOVERNED_CONFIG!r}")
    found = problems(data)
    if found:
        raise GovernedConfigError(path, found[0][1], found[0][0])
    # The schema has passed it (problems above), so the class is built without a second check.
    return _resolved(os.path.abspath(path), kinds.GovernedConfig.from_stored(data))


def _resolved(path: str, read: kinds.GovernedConfig) -> GovernedConfig:
    """The configuration of the file at ``path``, its paths taken from the file's folder."""
    here = os.path.dirname(path)
    b = read.boundary
    boundary = Boundary(
        executable=os.path.join(here, b.executable),
        sha256=b.sha256,
        identity=b.identity,
        interpreter=None if b.interpreter is ABSENT else b.interpreter,
        journal=os.path.join(here, b.journal),
        credentials=tuple(b.credentials or ()),
    )
    return GovernedConfig(
        path=path,
        yylo_version=read.yylo_version,
        project=os.path.join(here, "." if read.project is ABSENT else read.project),
        boundary=boundary,
        lock_store=os.path.join(here, read.lock_store),
        judges=dict(read.judges or {}),
        tool_paths=tuple(os.path.join(here, p) for p in read.tool_paths or ()),
    )


def problems(data: dict) -> list[tuple[str, str]]:
    """Every way ``data`` (a governed configuration's value) breaks its schema
    (schemas/juno_benchmark_config.v1.schema.json), as (JSON path, what it must be) in path
    order; empty when nothing does."""
    found = {}
    for parts, message in schema.problems(data, GOVERNED_CONFIG):
        where, reason = _worded(parts, message)
        found.setdefault(where, reason)  # a field's first problem says what it must be
    return list(found.items())


def lacks(data: dict) -> list[str]:
    """What keeps ``data`` from being a usable governed configuration, in words (its JSON
    path first); empty when nothing does."""
    return [f"{where}: {reason}" for where, reason in problems(data)]


def _worded(parts: tuple, message: str) -> tuple[str, str]:
    """The JSON path at fault and the words for one schema problem at ``parts``."""
    if "does not match any of the regexes" in message:  # a profile's name, under judges
        name = _QUOTED.search(message)
        return json_path((*parts, name.group(1) if name else "?")), "a profile is a plain name"
    if "was unexpected" in message or "were unexpected" in message:
        name = _QUOTED.search(message.rsplit("(", 1)[-1])
        unknown = name.group(1) if name else "?"
        return json_path((*parts, unknown)), "is not a known field"
    if message.endswith("is a required property"):
        name = _QUOTED.search(message)
        parts = (*parts, name.group(1)) if name else parts
    for depth in range(len(parts), 0, -1):  # the field's own words, else its nearest holder's
        words = EXPECTED.get(_pattern(parts[:depth]))
        if words is not None:
            return json_path(parts[:depth]), words
    return json_path(parts), message


def _pattern(parts: tuple) -> str:
    """The key of ``EXPECTED`` for a JSON path: a judge's profile is ``*``."""
    if parts[:1] == ("judges",) and len(parts) >= 2:
        parts = ("judges", "*", *parts[2:])
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in parts)


def _json(path: str) -> dict:
    try:
        # A float is no integer here (JSON Schema would take 1.0 for one): a Decimal is none.
        data = json.loads(file.read_input(path), parse_float=Decimal)
    except (ValueError, UnicodeDecodeError) as exc:
        raise GovernedConfigError(path, f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise GovernedConfigError(path, "not a JSON object")
    return data


def template(isolated: dict) -> dict:
    """A governed configuration for review, from an isolated v2 one: only its YYLO version
    carries over (nothing of the isolated lane's policy grants anything here); every pin is
    a placeholder a person must fill in."""
    return kinds.GovernedConfig(
        yylo_version=isolated.get("yylo_version") or "REPLACE",
        project=".",
        boundary=kinds.GovernedConfigBoundary(
            executable="REPLACE: the reviewed boundary program",
            sha256="REPLACE: the SHA-256 of its bytes",
            identity="REPLACE: its reviewed identity (name@version)",
            journal="REPLACE: the boundary's private journal folder",
            credentials=(),
        ),
        lock_store="REPLACE: the folder of the shared resource locks",
    ).to_value()


def migrate(input_path: str, output_path: str | None) -> dict:
    """Inspect a configuration without changing it; with an isolated v2 input and an unused
    ``output_path``, write a governed template there. Returns the report."""
    data = _json(input_path)
    version = kind_of(data)  # which kind of file the user gave decides the report
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
            raise InvalidArgument(
                "output_path",
                f"writes a governed template from an isolated {CONFIG} configuration; "
                f"{input_path} is {report['kind']}",
                output_path,
            )
        body = (json.dumps(template(data), indent=2) + "\n").encode()
        file.write_new(output_path, body)
        report["written"] = output_path
    return report
