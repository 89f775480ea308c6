"""The candidate's environment: empty to start, private roots, secrets by name only."""

from __future__ import annotations

import os
from dataclasses import dataclass

from yyb.errors import UsageError

SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


@dataclass(frozen=True)
class Folders:
    """An attempt's private folders (all outside the workspace except the workspace itself)."""

    root: str

    @property
    def workspace(self) -> str:
        return os.path.join(self.root, "workspace")

    @property
    def home(self) -> str:
        return os.path.join(self.root, "home")

    @property
    def tmp(self) -> str:
        return os.path.join(self.root, "tmp")

    @property
    def cache(self) -> str:
        return os.path.join(self.root, "cache")

    @property
    def config(self) -> str:
        return os.path.join(self.root, "config")

    @property
    def control(self) -> str:
        """Prompt and envelope: outside the workspace, writable by the harness."""
        return os.path.join(self.root, "control")

    def private(self) -> list[str]:
        return [self.home, self.tmp, self.cache, self.config, self.control]

    def create(self) -> None:
        for folder in self.private():
            os.makedirs(folder, exist_ok=True)


def build(
    folders: Folders,
    read_only_paths: list[str],
    secret_names: list[str],
    source_env: dict[str, str],
    fixed: dict[str, str] | None = None,
) -> tuple[dict, dict]:
    """(environment for the candidate, the policy record that describes it without values);
    ``fixed`` holds the harness's non-secret variables (its ``env``, bound in the plan).

    Raises:
        UsageError: a secret the harness names is not set in the controller's environment.
    """
    # The controller's PATH is never inherited: only system folders, then the tool policy's
    # folders, which the sandbox exposes read-only even when they lie inside a protected root.
    path = [p for p in SYSTEM_PATH if os.path.isdir(p)]
    for extra in read_only_paths:
        if os.path.isdir(extra) and extra not in path:
            path.append(extra)
    env = {
        "PATH": ":".join(path),
        "HOME": folders.home,
        "TMPDIR": folders.tmp,
        "XDG_CACHE_HOME": folders.cache,
        "XDG_CONFIG_HOME": folders.config,
        "XDG_DATA_HOME": os.path.join(folders.home, ".local", "share"),
        "XDG_STATE_HOME": os.path.join(folders.home, ".local", "state"),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    env.update(fixed or {})
    for name in secret_names:
        if name not in source_env:
            raise UsageError(f"the harness needs the secret {name}, which is not set")
        env[name] = source_env[name]
    policy = {
        "variables": sorted(env),
        "path": path,
        "secrets": sorted(secret_names),
    }
    return env, policy


def redact(data: bytes, secrets: dict[str, str]) -> bytes:
    """Replace every secret value in ``data``, raw or encoded, by ``[REDACTED:NAME]``.

    One call builds the secrets' forms (``yyb.harness.redaction``); a caller that redacts
    many things holds a ``Redactor`` instead.
    """
    from yyb.harness.redaction import Redactor

    return Redactor(secrets).redact(data)
