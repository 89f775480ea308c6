"""What a release-readiness receipt binds: the build, the configured harnesses, the host.

Every value is a fact of the build or the host, never a time or a temporary path, so the
same build on the same host gives the same identities.
"""

from __future__ import annotations

import base64
import hashlib
import os
import platform
import re
import subprocess
import sys
from dataclasses import dataclass, field

from yyb import __version__
from yyb.errors import UsageError

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the yyb package
VERSION_TIMEOUT_S = 10
MAX_VERSION = 200  # characters of a reported version kept


class DirtyCheckout(UsageError):
    """The checkout yyb runs from has changes no commit names: no release gate passes it."""


class UnboundBuild(UsageError):
    """Code that runs as part of yyb is not the build's: an imported module whose bytes the
    build does not hold, a package file no RECORD lists, or a start-up (``.pth``) file that
    reaches yyb."""


def _git(top: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", top, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
    )


def _b64(data: bytes) -> str:
    """A RECORD's digest of ``data``: URL-safe base64 of its SHA-256, unpadded."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _read(path: str) -> bytes | None:
    """A file's bytes (a symbolic link's target), or None when it cannot be read."""
    try:
        if os.path.islink(path):
            return os.fsencode(os.readlink(path))
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


@dataclass
class Build:
    """The running yyb as a build: ``record`` (what the receipt says of it) and, for every
    file the build holds (its path relative to the folder holding the package), its digest
    as the commit (a Git object id) or the RECORD (``sha256=`` base64) gives it."""

    record: dict
    files: dict[str, str]
    git_format: str | None = None  # the checkout's object format; None for a distribution
    # (name, path, size, mtime, cache's size and mtime) -> SHA-256 of a module found bound,
    # so that a second look (after the suite ran) reads only what changed or is new.
    checked: dict = field(default_factory=dict, repr=False, compare=False)

    def digest(self, data: bytes) -> str:
        if self.git_format is None:
            return _b64(data)
        return hashlib.new(self.git_format, b"blob %d\0" % len(data) + data).hexdigest()

    def identity(self) -> dict:
        """The receipt's ``yyb``: the record and ``modules``, the modules imported now."""
        return {**self.record, "modules": self.modules()}

    def modules(self, loaded: dict[str, str] | None = None, root: str | None = None) -> dict:
        """Every yyb module imported (``loaded``: name -> file, else the ``yyb`` entries of
        ``sys.modules``; their paths relative to ``root``, else to the folder holding the
        imported ``yyb``), each checked to be a file of the build with the build's bytes:
        ``{"count": N, "sha256": SHA-256 of the sorted lines "NAME SHA256"}``.

        Raises:
            UnboundBuild: a module is loaded from outside that folder, is not a file of the
                build, or its bytes differ from the build's.
        """
        loaded = imported() if loaded is None else loaded
        if root is None:
            root = os.path.dirname(os.path.dirname(os.path.realpath(loaded["yyb"])))
        lines = []
        for name, file in sorted(loaded.items()):
            path = os.path.realpath(file)
            seen = (name, path, *_stat(path), *_stat(_cache_of(path)))
            if seen in self.checked:
                lines.append(f"{name} {self.checked[seen]}\n")
                continue
            rel = os.path.relpath(path, root)
            if rel.startswith(".." + os.sep) or rel == "..":
                raise UnboundBuild(f"module {name} is loaded from {path}, outside yyb's folder")
            expected = self.files.get(rel.replace(os.sep, "/"))
            if expected is None:
                raise UnboundBuild(f"module {name} is loaded from {path}, no file of the build")
            data = _read(path)
            if data is None or self.digest(data) != expected:
                raise UnboundBuild(f"module {name} at {path} differs from the build's {rel}")
            _bytecode_is_source(name, path, data)
            self.checked[seen] = hashlib.sha256(data).hexdigest()
            lines.append(f"{name} {self.checked[seen]}\n")
        return {"count": len(lines), "sha256": hashlib.sha256("".join(lines).encode()).hexdigest()}


def imported() -> dict[str, str]:
    """name -> file of every yyb module imported in this process (namespace packages,
    which have no file, left out)."""
    found = {}
    for name, module in list(sys.modules.items()):
        if name == "yyb" or name.startswith("yyb."):
            file = getattr(module, "__file__", None)
            if file:
                found[name] = file
    return found


def _stat(path: str | None) -> tuple[int, int]:
    try:
        info = os.stat(path) if path else None
    except OSError:
        info = None
    return (info.st_size, info.st_mtime_ns) if info else (-1, -1)


def _cache_of(path: str) -> str | None:
    """Where Python caches the bytecode of the source at ``path`` (None: it does not)."""
    import importlib.util

    if not path.endswith(".py"):
        return None
    try:
        return importlib.util.cache_from_source(path)
    except NotImplementedError:  # no cache tag: nothing is cached
        return None


def _loadable(data: bytes, path: str, source: bytes) -> bool:
    """Whether Python would load the cached bytecode ``data`` for the source at ``path``
    (PEP 552): this interpreter's magic number, and a header naming the source's time and
    size, or its hash, or a hash it is told not to check."""
    import importlib.util

    if data[:4] != importlib.util.MAGIC_NUMBER or len(data) < 16:
        return False
    flags = int.from_bytes(data[4:8], "little")
    if flags & 0b1 == 0:  # the source's modification time and size
        info = os.stat(path)
        claimed = int.from_bytes(data[8:12], "little"), int.from_bytes(data[12:16], "little")
        return claimed == (int(info.st_mtime) & 0xFFFFFFFF, info.st_size & 0xFFFFFFFF)
    if flags & 0b10:  # the source's hash, checked
        return data[8:16] == importlib.util.source_hash(source)
    return True  # a hash never checked: loaded whatever the source is


def _bytecode_is_source(name: str, path: str, source: bytes) -> None:
    """The cached bytecode Python would load for the source at ``path`` (if any) is that
    source compiled: a ``.pyc`` whose header claims the source's time and size (or that is
    never checked against it) runs instead of the source, whatever the source says.

    Raises:
        UnboundBuild: the cached code is not the source's.
    """
    import marshal

    cached = _cache_of(path)
    data = _read(cached) if cached else None
    if data is None or not _loadable(data, path, source):
        return
    try:
        code = marshal.loads(data[16:])
        compiled = compile(source, path, "exec", dont_inherit=True)
    except (EOFError, ValueError, TypeError, SyntaxError):
        code, compiled = None, True
    if code != compiled:
        raise UnboundBuild(f"module {name}: its cached bytecode {cached} is not its source's")


def build(package_dir: str | None = None, site_dirs: list[str] | None = None) -> Build:
    """The running yyb as a build: the clean commit of the checkout it runs from, or the
    installed distribution (its name, version and a hash of its RECORD, every file of which is
    checked against the hash the installer recorded, and no other file in its package); in
    either case no start-up file of ``site_dirs`` (else this interpreter's site folders)
    reaching yyb unrecorded.

    Raises:
        DirtyCheckout: the checkout has uncommitted or untracked changes, or a tracked file
            that git is told not to look at (assume-unchanged, skip-worktree).
        UnboundBuild: a package file no RECORD lists, or a stray start-up file.
        UsageError: an installed file differs from its RECORD, or yyb is neither.
    """
    from yyb.store.location import find_repository

    package_dir = package_dir or PACKAGE_DIR
    top = find_repository(package_dir)
    init = os.path.relpath(os.path.join(package_dir, "__init__.py"), top) if top else ""
    if top and _git(top, "ls-files", "--error-unmatch", "--", init).returncode == 0:
        found = _checkout(top, package_dir)
    else:
        found = _installed(package_dir)
    startup_files(site_dirs)
    return found


def _checkout(top: str, package_dir: str) -> Build:
    """The clean checkout's build: its HEAD commit, the files HEAD holds."""
    flagged = _git(top, "ls-files", "-v", "-z")
    for entry in flagged.stdout.split("\0"):
        tag, _, path = entry.partition(" ")
        if tag and (tag.islower() or tag == "S"):
            flag = "skip-worktree" if tag in "Ss" else "assume-unchanged"
            raise DirtyCheckout(
                f"the yyb checkout at {top} hides {path} from git status: it is marked "
                f"{flag} (git update-index --no-{flag} -- {path})"
            )
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
    root = os.path.dirname(os.path.realpath(package_dir))
    listed = _git(root, "ls-tree", "-r", "-z", "HEAD", ".")
    files = {}
    for entry in listed.stdout.split("\0"):
        meta, _, path = entry.partition("\t")
        if meta.split(" ")[1:2] == ["blob"]:
            files[path] = meta.split(" ")[2]
    git_format = _git(top, "rev-parse", "--show-object-format").stdout.strip() or "sha1"
    record = {"kind": "checkout", "version": __version__, "commit": commit}
    return Build(record, files, git_format)


def _installed(package_dir: str) -> Build:
    """The installed distribution that holds ``package_dir`` (else the one named yyb)."""
    from importlib import metadata

    root = os.path.dirname(os.path.realpath(package_dir))
    beside = next(iter(metadata.distributions(name="yyb", path=[root])), None)
    dist = beside or _distribution("yyb")
    record = distribution("yyb", dist)
    files = {
        str(entry): entry.hash.value
        for entry in dist.files or []
        if entry.hash is not None and not str(entry).startswith("..")
    }
    if beside is not None:
        _no_stray_files(package_dir, root, files)
    return Build(record, files)


def _distribution(name: str):
    from importlib import metadata

    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise UsageError(
            f"{name} runs neither from a checkout nor as an installed package"
        ) from None


def _no_stray_files(package_dir: str, root: str, files: dict[str, str]) -> None:
    """Every file in the package is in its RECORD, but the bytecode Python writes beside a
    recorded module (``__pycache__/NAME.TAG.pyc`` of a recorded ``NAME.py``)."""
    for folder, folders, names in os.walk(package_dir):
        folders.sort()
        for name in sorted(names):
            rel = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
            if rel in files:
                continue
            parent, _, leaf = rel.rpartition("/")
            if parent.endswith("__pycache__") and leaf.endswith(".pyc"):
                source = f"{parent.removesuffix('__pycache__')}{leaf.split('.')[0]}.py"
                if source in files:
                    continue
            raise UnboundBuild(f"the installed file {rel} is in no RECORD of the distribution")


def distribution(name: str = "yyb", dist=None) -> dict:
    """The installed distribution's identity, each of its recorded files checked.

    Raises:
        UsageError: it is not installed, has no RECORD, or a file differs from its record.
    """
    dist = dist or _distribution(name)
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
        if _b64(data) != entry.hash.value:
            raise UsageError(f"the installed file {entry} differs from its RECORD")
        checked += 1
    return {
        "kind": "distribution",
        "name": dist.metadata["Name"],
        "version": dist.version,
        "record_sha256": hashlib.sha256(record.encode()).hexdigest(),
        "files_checked": checked,
    }


def startup_files(site_dirs: list[str] | None = None) -> None:
    """No ``.pth`` file of the site folders reaches yyb unless an installed distribution's
    RECORD lists it with its bytes. One reaches yyb when its text names yyb, a path line of
    it names a folder holding a ``yyb`` package or module, or an import line of it imports a
    module of the site folders whose source names yyb.

    Raises:
        UnboundBuild: naming the first such file.
    """
    import site

    if site_dirs is None:
        site_dirs = [*site.getsitepackages()]
        if site.ENABLE_USER_SITE:
            site_dirs.append(site.getusersitepackages())
    recorded = _recorded_pth(site_dirs)
    for folder in site_dirs:
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            data = _read(path) or b""
            if recorded.get(os.path.realpath(path)) == _b64(data):
                continue
            why = _reaches_yyb(data.decode(errors="replace"), folder, site_dirs)
            if why:
                raise UnboundBuild(
                    f"the start-up file {path} {why}, and no installed RECORD lists it"
                )


def _recorded_pth(site_dirs: list[str]) -> dict[str, str]:
    """path -> RECORD digest of every ``.pth`` an installed distribution recorded."""
    from importlib import metadata

    found = {}
    for dist in metadata.distributions(path=site_dirs):
        for entry in dist.files or []:
            if str(entry).endswith(".pth") and entry.hash is not None:
                found[os.path.realpath(str(dist.locate_file(entry)))] = entry.hash.value
    return found


def _reaches_yyb(text: str, folder: str, site_dirs: list[str]) -> str:
    """How a ``.pth``'s text reaches yyb ("" when it does not)."""
    if "yyb" in text:
        return "names yyb"
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("import ", "import\t")):
            for module in re.findall(r"import\s+([\w.]+)", line):
                top = module.split(".")[0]
                for base in site_dirs:
                    for candidate in (f"{top}.py", f"{top}/__init__.py"):
                        if "yyb" in (_read(os.path.join(base, candidate)) or b"").decode(
                            errors="replace"
                        ):
                            return f"imports {top}, which names yyb"
            continue
        added = os.path.join(folder, line)
        if any(os.path.lexists(os.path.join(added, n)) for n in ("yyb", "yyb.py")):
            return f"puts {os.path.normpath(added)}, which holds yyb, on the path"
    return ""


def host() -> dict:
    """The sandbox (bubblewrap's version and what its probe verified), kernel and Python.

    Raises:
        SandboxUnavailable: the sandbox cannot start here (nothing can be checked).
    """
    from yyb.harness import probe

    version, verified = probe.verify()
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
