"""The configuration file (``yylo-benchmark.config.json``, schema ``yylo_benchmark_config.v2``)."""

from __future__ import annotations

import os

from yyb.errors import InvalidArgument, InvalidRecord, UsageError
from yyb.store import file
from yyb.store.location import find_repository
from yyb.store.objects import codec

CONFIG_NAME = "yylo-benchmark.config.json"
DEFAULT_EXCLUDED = (".yylo-benchmark/", ".juno_task/", CONFIG_NAME)
DEFAULT_TIMEOUT_MS = 30 * 60 * 1000
MODEL_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._:@+/-]*"


class ConfigError(UsageError):
    """An invalid configuration: one (JSON pointer, expectation) per problem."""

    def __init__(self, path: str, problems: list[tuple[str, str]]):
        lines = [f"config {path}: {pointer or '/'}: {reason}" for pointer, reason in problems]
        super().__init__("\n".join(lines))
        self.path = path
        self.problems = problems


def _schema() -> str:
    """The configuration's schema_version (imported here: plumbing reads a configuration's
    repositories and must not pay for importing every record kind)."""
    from yyb.evidence.records import CONFIG

    return CONFIG


def pointer(parts: tuple) -> str:
    """A JSON pointer (RFC 6901) for a tuple of keys and indexes."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def template(source_name: str, yylo_version: str = "INSTALLED_YYLO_VERSION") -> dict:
    """The configuration ``yyb init`` writes: valid, with placeholders to replace."""
    return {
        "schema_version": _schema(),
        "yylo_version": yylo_version,
        "workspace": {
            "attempts_root": ".yylo-benchmark/attempts",
            "registry_root": ".yylo-benchmark/registry",
            "excluded_paths": list(DEFAULT_EXCLUDED),
        },
        "default_candidate_harness": "candidate",
        "harnesses": {
            "candidate": {"kind": "yylo_pi", "prompt": "Complete the configured benchmark case."}
        },
        "default_evaluators": [],
        "evaluators": {},
        "models": {},
        "repositories": {source_name: "."},
        "attempt_timeout_ms": DEFAULT_TIMEOUT_MS,
        "tool_policy": {"network": "denied", "read_only_paths": []},
    }


def render(config: dict) -> str:
    import json  # here: plumbing reads a configuration through codec alone

    return json.dumps(config, indent=2) + "\n"


def write_new(path: str, config: dict) -> None:
    """Write a configuration file, never replacing an existing one (UsageError if it exists)."""
    file.write_new(path, render(config).encode())


def default_path(cwd: str) -> str:
    """``<repository root>/yylo-benchmark.config.json`` for the repository around ``cwd``."""
    root = find_repository(cwd)
    if root is None:
        raise InvalidArgument("config_path", f"none named, and {cwd} is inside no Git repository")
    return os.path.join(root, CONFIG_NAME)


class Config:
    """A loaded, validated configuration and where it came from (a plain class: plumbing
    reads a configuration's repositories and must not pay for importing ``dataclasses``)."""

    __slots__ = ("path", "data")

    def __init__(self, path: str, data: dict) -> None:
        self.path = path
        self.data = data

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Config):
            return NotImplemented
        return (self.path, self.data) == (other.path, other.data)

    __hash__ = None  # type: ignore[assignment]  (it holds a dict)

    def __repr__(self) -> str:
        return f"Config({self.path!r})"

    @property
    def folder(self) -> str:
        return os.path.dirname(os.path.abspath(self.path))

    def excluded_paths(self) -> list[str]:
        return list(self.data["workspace"].get("excluded_paths", DEFAULT_EXCLUDED))

    def timeout_ms(self) -> int:
        return int(self.data.get("attempt_timeout_ms", DEFAULT_TIMEOUT_MS))

    def tool_policy(self) -> dict:
        policy = self.data.get("tool_policy", {"network": "denied"})
        from yyb.harness import limits

        return {
            "network": policy["network"],
            "read_only_paths": sorted(policy.get("read_only_paths", [])),
            "limits": limits.resolve(policy.get("limits")),
        }

    def repository_path(self, repo_id: str) -> str | None:
        """The absolute path of repository ``repo_id``, or None if it is not configured."""
        target = self.data.get("repositories", {}).get(repo_id)
        if target is None:
            return None
        return os.path.normpath(os.path.join(self.folder, target))

    def repository_paths(self) -> list[str]:
        """The absolute path of every configured repository, by id."""
        named = self.data.get("repositories", {})
        return [self.repository_path(repo_id) for repo_id in sorted(named)]

    def resolve_model(self, requested: str) -> str:
        """The exact provider/model a selector (``:mini``) or an exact identity stands for.

        Raises:
            UsageError: an unknown selector or a malformed identity.
        """
        if requested.startswith(":"):
            entry = self.data.get("models", {}).get(requested)
            if entry is None:
                known = ", ".join(sorted(self.data.get("models", {}))) or "none configured"
                raise UsageError(f"unknown model selector {requested!r} (known: {known})")
            return model_id(entry)
        if not _fullmatch(MODEL_PATTERN, requested):
            raise UsageError(
                f"not a model identity: {requested!r} (expected provider/model "
                "or a configured :selector)"
            )
        return requested

    def accepted(self, resolved: str) -> list[str]:
        """The observed ids ``resolved`` accepts beside itself (yyb/evidence/identity.py), as
        the model entries that name it declare them (they agree: ``parse`` checks it)."""
        for entry in self.data.get("models", {}).values():
            if isinstance(entry, dict) and entry["id"] == resolved and entry.get("accept"):
                return list(entry["accept"])
        return []

    def gateway(self) -> dict | None:
        """The model gateway's section (docs/gateway.md), None when there is none."""
        return self.data.get("gateway")

    def harness(self, harness_id: str) -> dict:
        return self.data["harnesses"][harness_id]

    def evaluators(self) -> dict:
        return self.data["evaluators"]


def _fullmatch(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches all of ``text`` (``re`` imported here: plumbing reads the
    configuration and never needs it)."""
    import re

    return re.fullmatch(pattern, text) is not None


def model_id(entry: str | dict) -> str:
    """The exact provider/model of a ``models`` entry (an id, or ``{id, accept}``)."""
    return entry if isinstance(entry, str) else entry["id"]


# Variables the harness's ``env`` may not set: the launcher's own (docs/attempts.md, step 4).
RESERVED_ENV = r"PATH|HOME|TMPDIR|GIT_CONFIG_NOSYSTEM|XDG_[A-Z_]*|YYB_[A-Z0-9_]*"


def _model_problems(data: dict) -> list[tuple[str, str]]:
    from yyb.evidence import identity

    found, rules = [], {}
    for selector, entry in sorted(data.get("models", {}).items()):
        if isinstance(entry, str):
            continue
        for i, rule in enumerate(entry.get("accept", [])):
            reason = identity.problem(rule)
            if reason:
                found.append((pointer(("models", selector, "accept", i)), reason))
        accept = sorted(entry.get("accept", []))
        if rules.setdefault(entry["id"], (selector, accept))[1] != accept:
            found.append(
                (
                    pointer(("models", selector, "accept")),
                    f"{rules[entry['id']][0]} names {entry['id']} with other accepted ids; "
                    "a model's rules are declared once",
                )
            )
    return found


def _harness_problems(data: dict) -> list[tuple[str, str]]:
    found = []
    for name, spec in sorted(data.get("harnesses", {}).items()):
        secrets = set(spec.get("secrets", []))
        for variable in sorted(spec.get("env", {})):
            if _fullmatch(RESERVED_ENV, variable):
                found.append(
                    (
                        pointer(("harnesses", name, "env", variable)),
                        "the launcher sets this variable itself (docs/attempts.md, step 4)",
                    )
                )
            elif variable in secrets:
                found.append(
                    (
                        pointer(("harnesses", name, "env", variable)),
                        "also named in secrets: a variable is either a secret or not",
                    )
                )
    return found


def _gateway_problems(data: dict) -> list[tuple[str, str]]:
    """A gateway plan needs its providers; no harness may be handed a credential the gateway
    holds (it gets a token in its place), as a secret or as a fixed variable."""
    found = []
    gateway = data.get("gateway")
    if data.get("tool_policy", {}).get("network") == "gateway" and gateway is None:
        found.append(("/tool_policy/network", "gateway needs a gateway section with its providers"))
    held = {p["credential"] for p in (gateway or {}).get("providers", {}).values()}
    for name, spec in sorted(data.get("harnesses", {}).items()):
        for where in ("secrets", "env"):
            for variable in sorted(set(spec.get(where, [])) & held):
                found.append(
                    (
                        pointer(("harnesses", name, where)),
                        f"{variable} is a credential the gateway holds: a candidate gets a "
                        "per-attempt token in its place, never the key",
                    )
                )
    return found


def _semantic_problems(data: dict) -> list[tuple[str, str]]:
    found = _model_problems(data) + _harness_problems(data) + _gateway_problems(data)
    harnesses = data.get("harnesses", {})
    if data.get("default_candidate_harness") not in harnesses:
        found.append(("/default_candidate_harness", "expected the id of a configured harness"))
    evaluators = data.get("evaluators", {})
    for i, name in enumerate(data.get("default_evaluators", [])):
        if name not in evaluators:
            found.append(
                (f"/default_evaluators/{i}", f"expected a configured evaluator, not {name!r}")
            )
    for name, spec in evaluators.items():
        if spec.get("kind") != "llm_judge":
            continue
        if spec.get("harness") not in harnesses:
            found.append(
                (
                    pointer(("evaluators", name, "harness")),
                    "expected the id of a configured harness",
                )
            )
        reference = spec.get("mode") == "reference"
        if reference and not spec.get("assets"):
            found.append(
                (
                    pointer(("evaluators", name, "assets")),
                    "a reference judge needs its reference material as assets "
                    "(path and sha256 of each); without it there is nothing to judge against",
                )
            )
        if spec.get("mode") == "pairwise":
            for field, ok, expected in (
                ("baseline", bool(spec.get("baseline")), "the baseline model it compares with"),
                (
                    "required",
                    spec.get("required") is False,
                    "false: a comparison with a baseline "
                    "cannot decide whether one attempt resolved its case",
                ),
                (
                    "parsing",
                    spec.get("parsing", "strict_json") == "strict_json",
                    'strict_json: a pairwise judge answers {"winner": "A" | "B" | "tie"}',
                ),
            ):
                if not ok:
                    found.append(
                        (pointer(("evaluators", name, field)), f"pairwise needs {expected}")
                    )
        elif spec.get("baseline"):
            found.append(
                (pointer(("evaluators", name, "baseline")), "a baseline is for mode pairwise")
            )
        if spec.get("assets") and not reference:
            found.append(
                (
                    pointer(("evaluators", name, "mode")),
                    "assets are the reference material of mode reference; "
                    "set mode to reference or drop them",
                )
            )
    return found


def parse(text: bytes | str, path: str) -> Config:
    """Validate configuration text; every problem is reported at once.

    Raises:
        ConfigError: one (pointer, expectation) per problem.
    """
    try:
        data = codec.from_json(text)
    except InvalidRecord as exc:
        raise ConfigError(path, [(pointer(exc.parts), exc.reason)]) from None
    expected = _schema()
    if data.get("schema_version") != expected:
        found = data.get("schema_version")
        raise ConfigError(path, [("/schema_version", f"expected {expected!r}, found {found!r}")])
    from yyb.store import schema

    problems = [(pointer(parts), reason) for parts, reason in schema.problems(data, expected)]
    if not problems:
        problems = _semantic_problems(data)
    if problems:
        raise ConfigError(path, problems)
    return Config(path, data)


def repositories_named(path: str) -> list[str]:
    """The repositories the configuration at ``path`` names, read without validating the rest.

    Cheap enough for every command that opens a store (plumbing included) to keep the store
    apart from them; a missing or unreadable configuration names none (the commands that need
    a configuration report why when they load it).
    """
    try:
        data = codec.from_json(file.read_input(path))
    except (UsageError, InvalidRecord):
        return []
    named = data.get("repositories")
    if not isinstance(named, dict) or not all(isinstance(v, str) for v in named.values()):
        return []
    return Config(path, data).repository_paths()


def load(path: str) -> Config:
    """Read and validate the configuration at ``path``.

    Raises:
        UsageError: the file cannot be read; ConfigError: it is invalid.
    """
    if not os.path.exists(path):
        raise UsageError(f"no configuration at {path} (create one with 'yyb init')")
    return parse(file.read_input(path), path)
