"""The ``rootfs`` kind: a Debian root built by mmdebstrap from a suite and a package list.

Two builds of one spec against one mirror's content give trees of the same paths, modes,
link targets and file bytes (measured: docs/environments.md, "rootfs"); what still differs is
mtimes, which no manifest of ours records.
"""

from __future__ import annotations

import os
import platform
import pwd
import re
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from typing import BinaryIO

from yyb.errors import EnvironmentBuildFailed, EnvironmentSpecError, InvalidArgument
from yyb.harness.environments import debian
from yyb.harness.environments.tidy import empty, tidy, unmounted

DEFAULT_MIRROR = "http://deb.debian.org/debian"
# mmdebstrap's variants that make a root one can run in (not extract, custom or "-").
VARIANTS = (
    "essential",
    "apt",
    "required",
    "minbase",
    "buildd",
    "important",
    "debootstrap",
    "standard",
)
# setpriv: yyb drops root inside the sandbox with it, whatever the case asked for.
ALWAYS = ("util-linux",)
SUBID_FILES = ("/etc/subuid", "/etc/subgid")
FIELDS = {
    "kind",
    "name",
    "suite",
    "packages",
    "variant",
    "mirror",
    "architecture",
    "components",
    "source_date_epoch",
}
RELEASE_TIMEOUT_S = 60
_TAIL_BYTES = 64 * 1024  # of mmdebstrap's output, kept to find why it failed
_RELEASE_BYTES = 64 * 1024  # the Date field is in an InRelease file's first kilobyte

# Words, not patterns: a package may carry a version (name=1.2-3), never an apt pattern
# (?...), a path to a .deb or a release (name/suite), which would let a spec pull packages
# from outside the suite it names.
_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?")
_WORD = re.compile(r"[a-z0-9][a-z0-9.-]*")
_MIRROR = re.compile(r"(https?|file)://[^\s,]+")


@dataclass(frozen=True)
class Request:
    """A rootfs spec with its defaults filled in: what one build is asked to make."""

    name: str
    suite: str
    packages: tuple[str, ...]
    variant: str
    mirror: str
    architecture: str
    components: tuple[str, ...]
    source_date_epoch: int | None


@dataclass(frozen=True)
class Built:
    """What a build made: the inputs it resolved and the packages the tree holds."""

    mmdebstrap: str
    suite: str
    mirror: str
    architecture: str
    source_date_epoch: int
    packages: dict[str, str]
    seconds: float


def _refuse(where: str, field: str, reason: str):
    raise EnvironmentSpecError(where, field, reason)


def _word(where: str, field: str, value: object, pattern: re.Pattern, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        _refuse(where, field, f"{what}, not {value!r}")
    return value


def _words(where: str, field: str, value: object, pattern: re.Pattern, what: str) -> list:
    if not isinstance(value, list):
        _refuse(where, field, f"a list of {what}, not {value!r}")
    return [_word(where, f"{field}[{i}]", v, pattern, what) for i, v in enumerate(value)]


def host_architecture() -> str:
    """The host's dpkg architecture (``amd64``), from dpkg where it is installed."""
    try:
        done = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    except OSError:
        pass  # no dpkg: name the machine as Debian would
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64", "i686": "i386"}.get(machine, machine)


def resolve(spec: dict) -> Request:
    """The spec checked field by field, with every default filled in.

    Args:
        spec: a rootfs spec (docs/environments.md, "rootfs").

    Returns:
        the request a build runs.

    Raises:
        EnvironmentSpecError: a field missing, unknown or not of its form; ``field`` is its
            JSON path (``$.packages[2]``).
    """
    if not isinstance(spec, dict):
        raise EnvironmentSpecError("rootfs spec", None, "a map of fields")
    where = spec.get("name", "rootfs")
    if not isinstance(where, str) or not where.strip():
        _refuse("rootfs spec", "$.name", f"a name, not {where!r}")
    for key in sorted(set(spec) - FIELDS, key=str):
        _refuse(where, f"$.{key}", f"not a rootfs field (known: {', '.join(sorted(FIELDS))})")
    if spec.get("kind", "rootfs") != "rootfs":
        _refuse(where, "$.kind", f"rootfs, not {spec['kind']!r}")
    if "suite" not in spec:
        _refuse(where, "$.suite", "missing (a Debian suite or codename: bookworm)")
    suite = _word(where, "$.suite", spec["suite"], _WORD, "a suite or codename")
    packages = _words(where, "$.packages", spec.get("packages", []), _PACKAGE, "package names")
    variant = spec.get("variant", "minbase")
    if variant not in VARIANTS:
        _refuse(where, "$.variant", f"one of {', '.join(VARIANTS)}, not {variant!r}")
    mirror = spec.get("mirror") or debian.host_mirror(suite) or DEFAULT_MIRROR
    mirror = _word(where, "$.mirror", mirror, _MIRROR, "an http, https or file URL")
    architecture = spec.get("architecture") or host_architecture()
    architecture = _word(where, "$.architecture", architecture, _WORD, "a dpkg architecture")
    components = _words(where, "$.components", spec.get("components", ["main"]), _WORD, "names")
    if not components:
        _refuse(where, "$.components", "at least one component (main)")
    epoch = spec.get("source_date_epoch")
    if epoch is not None and (type(epoch) is not int or epoch < 0):
        _refuse(where, "$.source_date_epoch", f"seconds since the epoch, not {epoch!r}")
    return Request(
        name=where,
        suite=suite,
        packages=tuple(sorted(set(packages) | set(ALWAYS))),
        variant=variant,
        mirror=mirror.rstrip("/"),
        architecture=architecture,
        components=tuple(components),
        source_date_epoch=epoch,
    )


def _mode(name: str) -> str:
    """``root`` as root; else ``unshare``, which maps the build's users through sub-ids."""
    if os.geteuid() == 0:
        return "root"
    try:
        user = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        user = str(os.geteuid())
    for path in SUBID_FILES:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                owners = {line.split(":", 1)[0] for line in handle}
        except OSError:
            owners = set()
        if not owners & {user, str(os.geteuid())}:
            raise EnvironmentBuildFailed(
                name,
                "unshare",
                f"building as {user} (not root) needs a range for {user} in {path} "
                f"(usermod --add-subuids and --add-subgids), or build as root",
            )
    return "unshare"


def command(request: Request, dest: str) -> list[str]:
    """The mmdebstrap command line that builds ``request`` into the folder ``dest``."""
    return [
        "mmdebstrap",
        f"--mode={_mode(request.name)}",
        f"--variant={request.variant}",
        f"--architectures={request.architecture}",
        f"--components={','.join(request.components)}",
        f"--include={','.join(request.packages)}",
        "--format=directory",
        "--",
        request.suite,
        dest,
        request.mirror,
    ]


def argv(spec: dict, dest: str) -> list[str]:
    """The mmdebstrap command line for a rootfs spec.

    The mirror is always passed, so mmdebstrap adds no updates or security suites of its own:
    the tree holds the suite the spec names and nothing else.

    Args:
        spec: a rootfs spec (docs/environments.md, "rootfs").
        dest: the empty folder the tree is written to.

    Returns:
        the argument vector, ``mmdebstrap`` first.

    Raises:
        EnvironmentSpecError: the spec refused (``resolve``).
        EnvironmentBuildFailed: not root and no sub-id range for the user (step ``unshare``).
    """
    return command(resolve(spec), dest)


def mmdebstrap_version(name: str = "rootfs") -> str:
    """The installed mmdebstrap's version (``1.3.5``)."""
    try:
        done = subprocess.run(["mmdebstrap", "--version"], capture_output=True, text=True)
    except OSError as exc:
        raise EnvironmentBuildFailed(name, "mmdebstrap", f"cannot run mmdebstrap: {exc}") from exc
    words = done.stdout.split()
    if done.returncode != 0 or len(words) < 2:
        raise EnvironmentBuildFailed(name, "mmdebstrap", "mmdebstrap --version said nothing")
    return words[1]


def suite_date(request: Request) -> int:
    """The ``Date`` of the suite's InRelease on the mirror: the epoch a spec without one gets.

    Raises:
        EnvironmentBuildFailed: the file unreachable or dateless (step ``release``).
    """
    url = f"{request.mirror}/dists/{request.suite}/InRelease"
    try:
        with urllib.request.urlopen(url, timeout=RELEASE_TIMEOUT_S) as response:
            head = response.read(_RELEASE_BYTES).decode("utf-8", "replace")
    except (OSError, ValueError) as exc:
        raise EnvironmentBuildFailed(request.name, "release", f"{url}: {exc}") from exc
    date = debian.release_date(head)
    if date is None:
        raise EnvironmentBuildFailed(request.name, "release", f"{url}: no Date field")
    return date


# Lines mmdebstrap prints around the cause of a failure, which would hide it.
_WRAPPERS = re.compile(r"mmdebstrap failed|setup failed:|main\(\) received|.* failed$")


def failure_line(output: bytes) -> str:
    """The line of mmdebstrap's output that says why it failed.

    The last ``E:`` line that is not one of mmdebstrap's wrappers (``setup failed: ...``,
    the failing command echoed, ``mmdebstrap failed to run``); else the first ``E:`` line;
    else the last line that is not blank; else a note that it said nothing.
    """
    lines = [line.strip() for line in output.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    errors = [line[3:] for line in lines if line.startswith("E: ")]
    causes = [line for line in errors if not _WRAPPERS.match(line)]
    if causes or errors:
        return (causes or errors)[-1 if causes else 0]
    return lines[-1] if lines else "mmdebstrap failed and printed nothing"


def _run(argv: list[str], env: dict, log: BinaryIO) -> tuple[int, bytes]:
    """Run ``argv``, copying its output to ``log``; (exit code, the output's last bytes)."""
    tail = b""
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )
    with process:
        for chunk in iter(lambda: process.stdout.read1(8192), b""):
            log.write(chunk)
            tail = (tail + chunk)[-_TAIL_BYTES:]
    return process.returncode, tail


def _discard(name: str, dest: str) -> None:
    """Empty ``dest`` after a failed build (unless something is mounted below it)."""
    unmounted(name, dest)
    empty(dest)


def _packages(request: Request, dest: str) -> dict[str, str]:
    """The installed packages of the tree at ``dest``, from its dpkg status."""
    try:
        with open(os.path.join(dest, "var/lib/dpkg/status"), encoding="utf-8") as handle:
            return debian.installed(handle.read(), request.architecture)
    except (OSError, UnicodeDecodeError) as exc:
        raise EnvironmentBuildFailed(request.name, "mmdebstrap", f"no dpkg status: {exc}") from exc


def build(spec: dict, dest: str, log: BinaryIO) -> Built:
    """Build a rootfs spec into the empty folder ``dest``.

    mmdebstrap's output goes to ``log`` as it comes. After a successful run the tree is tidied
    (``tidy``: what varies between builds and is not needed to run goes, the folders the
    sandbox mounts over are made empty). After a failed one ``dest`` is emptied, unless
    something is still mounted below it, which is then reported and left alone.

    Args:
        spec: a rootfs spec (docs/environments.md, "rootfs").
        dest: an existing empty folder.
        log: a binary file open for writing.

    Returns:
        the build's facts, with the tree's installed packages read from its dpkg status.

    Raises:
        EnvironmentSpecError: the spec refused.
        InvalidArgument: ``dest`` not an empty folder.
        EnvironmentBuildFailed: a step failed (``unshare``, ``release``, ``mmdebstrap``,
            ``tidy``); ``reason`` is the line of output that says why.
    """
    request = resolve(spec)
    if not os.path.isdir(dest) or os.listdir(dest):
        raise InvalidArgument("dest", "an existing empty folder", dest)
    line = command(request, os.path.abspath(dest))
    version = mmdebstrap_version(request.name)
    epoch = request.source_date_epoch
    if epoch is None:
        epoch = suite_date(request)
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}
    started = time.monotonic()
    try:
        code, tail = _run(line, env, log)
    except OSError as exc:
        raise EnvironmentBuildFailed(request.name, "mmdebstrap", str(exc)) from exc
    if code != 0:
        _discard(request.name, dest)
        raise EnvironmentBuildFailed(request.name, "mmdebstrap", failure_line(tail))
    try:
        tidy(request.name, dest)
        packages = _packages(request, dest)
    except EnvironmentBuildFailed:
        _discard(request.name, dest)
        raise
    return Built(
        mmdebstrap=version,
        suite=request.suite,
        mirror=request.mirror,
        architecture=request.architecture,
        source_date_epoch=epoch,
        packages=packages,
        seconds=round(time.monotonic() - started, 3),
    )
