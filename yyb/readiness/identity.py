"""What a release-readiness receipt binds: the build, the configured harnesses, the host.

Every value is a fact of the build or the host, never a time or a temporary path, so the
same build on the same host gives the same identities.
"""

from __future__ import annotations

import base64
import hashlib
import os
import platform
import subprocess

from yyb import __version__
from yyb.errors import UsageError

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the yyb package
VERSION_TIMEOUT_S = 10
MAX_VERSION = 200  # characters of a reported version kept


class DirtyCheckout(UsageError):
    """The checkout yyb runs from has changes no commit names: no release gate passes it."""


def _git(top: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", top, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
    )


def build(package_dir: str | None = None) -> dict:
    """The identity of the running yyb: the clean commit of the checkout it runs from, or the
    installed distribution (its name, version and a hash of its RECORD, every file of which is
    checked against the hash the installer recorded).

    Raises:
        DirtyCheckout: the checkout has uncommitted or untracked changes.
        UsageError: an installed file differs from its RECORD, or yyb is neither.
    """
    from yyb.store.location import find_repository

    package_dir = package_dir or PACKAGE_DIR
    top = find_repository(package_dir)
    init = os.path.relpath(os.path.join(package_dir, "__init__.py"), top) if top else ""
    if top and _git(top, "ls-files", "--error-unmatch", "--", init).returncode == 0:
        status = _git(top, "status", "--porcelain", "--untracked-files=all")
        if status.returncode != 0:
            raise UsageError(f"git cannot read the checkout at {top}: {status.stderr.strip()}")
        changed = status.stdout.splitlines()
        if changed:
            raise DirtyCheckout(
                f"the yyb checkout at {top} is not clean ({len(changed)} changed or untracked "
                f"path(s), first {changed[0][3:]!r}); commit or remove them first"
            )
        commit = _git(top, "rev-parse", "HEAD").stdout.strip()
        return {"kind": "checkout", "version": __version__, "commit": commit}
    return distribution()


def distribution(name: str = "yyb", dist=None) -> dict:
    """The installed distribution's identity, each of its recorded files checked.

    Raises:
        UsageError: it is not installed, has no RECORD, or a file differs from its record.
    """
    from importlib import metadata

    try:
        dist = dist or metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise UsageError(
            f"{name} runs neither from a checkout nor as an installed package"
        ) from None
    record = dist.read_text("RECORD")
    if record is None:
        raise UsageError(f"the installed {name} has no RECORD to bind")
    checked = 0
    for entry in dist.files or []:
        if entry.hash is None:
            continue  # RECORD itself, and files the installer wrote without a hash
        if entry.hash.mode != "sha256":
            raise UsageError(f"{entry}: its RECORD hash is {entry.hash.mode}, not sha256")
        try:
            data = entry.read_binary()
        except OSError as exc:
            raise UsageError(f"the installed file {entry} cannot be read: {exc.strerror}") from None
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        if digest != entry.hash.value:
            raise UsageError(f"the installed file {entry} differs from its RECORD")
        checked += 1
    return {
        "kind": "distribution",
        "name": dist.metadata["Name"],
        "version": dist.version,
        "record_sha256": hashlib.sha256(record.encode()).hexdigest(),
        "files_checked": checked,
    }


def host() -> dict:
    """The sandbox (bubblewrap's version and what its probe verified), kernel and Python.

    Raises:
        SandboxUnavailable: the sandbox cannot start here (nothing can be checked).
    """
    from yyb.harness import sandbox

    version, verified = sandbox.verify()
    uname = os.uname()
    return {
        "sandbox": {"kind": "bubblewrap", "version": version, "verified": verified},
        "kernel": {"system": uname.sysname, "release": uname.release, "machine": uname.machine},
        "python": {
            "implementation": platform.python_implementation(),
            "version": platform.python_version(),
        },
    }


def harnesses(config, protected: list[str]) -> list[dict]:
    """Each configured harness's program: path, SHA-256 and the version it reports to
    ``--version``, asked inside the sandbox (it is the candidate's code, never run bare); a
    judge's pinned program (``{judge}``) is bound by its evaluator instead. A harness whose
    program is missing is listed with its problem."""
    from yyb.harness import adapters

    if config is None:
        return []
    found = []
    default = config.data.get("default_candidate_harness")
    for harness_id, spec in sorted(config.data.get("harnesses", {}).items()):
        entry = {"id": harness_id, "kind": spec["kind"], "default": harness_id == default}
        if spec["kind"] != "yylo_pi" and spec["argv"][0] == "{judge}":
            continue
        try:
            path = adapters.executable(spec)
        except UsageError as exc:
            found.append({**entry, "problem": exc.message})
            continue
        with open(path, "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
        paths = config.tool_policy()["read_only_paths"]
        found.append({**entry, "path": path, "sha256": digest, **_version(path, paths, protected)})
    return found


def _version(path: str, read_only: list[str], protected: list[str]) -> dict:
    """{"version": first line of ``path --version``} or {"version": None, "problem": why}."""
    import tempfile

    from yyb.harness import sandbox

    with tempfile.TemporaryDirectory(prefix="yyb-version-") as top:
        folder = os.path.join(top, "work")
        os.mkdir(folder)
        sandbox.hand_over(folder)
        box = sandbox.Sandbox(
            writable=[folder],
            hidden=[*protected, top],
            read_only=sandbox.tool_paths(read_only, protected),
            cwd=folder,
        )
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": folder, "LANG": "C.UTF-8"}
        try:
            with box.launch([path, "--version"]) as launch:
                done = subprocess.run(
                    launch.argv,
                    capture_output=True,
                    timeout=VERSION_TIMEOUT_S,
                    env=env,
                    pass_fds=launch.pass_fds,
                )
        except subprocess.TimeoutExpired:
            return {"version": None, "problem": f"--version ran past {VERSION_TIMEOUT_S} s"}
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"version": None, "problem": f"--version exited with status {done.returncode}"}
    return {"version": lines[0].strip()[:MAX_VERSION]}
