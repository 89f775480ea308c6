"""Grading workspaces as an overlay: one pristine copy of each base, the changes on top.

Every evaluation needs the candidate's final files rebuilt from the store, never a folder that
a candidate or an earlier evaluation had. Writing every file of a large repository again for
each evaluation costs far more than the grader's own bookkeeping (5,000 files: half a second
to two seconds on ext4, almost all of it creating inodes). So when the host allows it, the
workspace is an overlay mount:

- the **lower** layer is the base, rebuilt from the store once per process for each base
  listing and never written again; for a command evaluator, a second lower layer above it
  holds only the base's Git repository (``baserepo``), built once too. Both lie in the
  process's run folder, never inside a sandbox's view. A run begins building them as each
  candidate starts (``warm``), so an evaluation after it finds them built;
- the **upper** layer is made for each evaluation and holds only what differs: the files the
  graded listing adds or changes, and a whiteout (a 0/0 character device, the overlay's mark
  for "gone") for the topmost base path under which the graded listing has nothing left.

The mount is made in a private mount namespace of the sandboxed command itself
(``Mount.prefix``: ``unshare --mount`` and ``mount -t overlay`` ahead of bubblewrap), so it
goes away with the command's last process and nothing is mounted on the host. Whatever the
command writes lands in its upper layer; the lower stays as built, so the next evaluation of
the same base starts from the same bytes.

Used only where an overlay with ``redirect_dir=on`` can be mounted (``usable``, tried once per
process): there a folder coming from the lower layer can be renamed as in any folder. That
takes root; without it, and in a user namespace, the kernel refuses the option (a rename of a
base folder would fail with EXDEV, which a grader could read as the candidate's fault), and the
workspace is rebuilt whole as before. Known differences from a plain folder, none of which a
grader can use to change another evaluation: files report the overlay's device number, and a
file opened read-only before it is first written keeps showing its old bytes.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from yyb.harness import baserepo, manifest, sandbox, scratch

MAX_KEPT = 4  # pristine bases kept at once in a process (those in use are never dropped)
# A path that can be written into mount options as it is (no comma, colon, backslash, space).
_PLAIN_PATH = re.compile(r"^/[A-Za-z0-9._/+@=-]*$")
OPTIONS = "redirect_dir=on,metacopy=off,index=off"
MOUNT_FAILED = 125
# Run by bash ahead of bubblewrap inside the new mount namespace ($0 mount, $1 options, $2
# target, $3 the descriptor that says it is mounted): mount, say so, close that descriptor,
# become the rest. (bash: dash cannot name a descriptor above 9 in a redirection.)
_SCRIPT = (
    '"$0" -n -t overlay -o "$1" yyb-workspace "$2" || '
    f'{{ echo "yyb: the grading workspace could not be mounted" >&2; exit {MOUNT_FAILED}; }}; '
    'printf m >&"$3"; eval "exec $3>&-"; shift 3; exec "$@"'
)


@dataclass(frozen=True)
class Mount:
    """One evaluation's overlay: ``lower`` (the base's files, shared, read-only by use) under
    ``upper`` (its own, with ``work``, the overlay's scratch folder on the same file system),
    shown at ``target``; for a command evaluator, ``repository`` (a folder holding only the
    base's ``.git``, shared as ``lower`` is) lies between the two."""

    lower: str
    upper: str
    work: str
    target: str
    repository: str | None = None

    def options(self) -> str:
        lowers = self.lower if self.repository is None else f"{self.repository}:{self.lower}"
        return f"{OPTIONS},lowerdir={lowers},upperdir={self.upper},workdir={self.work}"

    def prefix(self, mark_fd: int) -> list[str]:
        """The argv that mounts this overlay in a new private mount namespace, writes one
        byte to ``mark_fd`` once it is mounted and closes it, then runs the rest of the
        command line there."""
        return [
            _tool("unshare"),
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/bash",
            "-c",
            _SCRIPT,
            _tool("mount"),
            self.options(),
            self.target,
            str(mark_fd),
        ]


def _tool(name: str) -> str:
    for folder in ("/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK):
            return path
    return name


_probe_lock = threading.Lock()
_usable: dict[int, bool] = {}  # pid -> whether an overlay can be mounted (tried once each)


def usable() -> bool:
    """Whether this process can give grading workspaces as overlays: root, util-linux's
    ``unshare`` and ``mount``, and a kernel that mounts an overlay with ``redirect_dir=on``
    in the run folder's file system, whiteouts honoured. Tried for real, once per process."""
    with _probe_lock:
        found = _usable.get(os.getpid())
        if found is None:
            found = _usable[os.getpid()] = os.geteuid() == 0 and _try_mount()
        return found


def _try_mount() -> bool:
    root = scratch.folder("overlay-probe")
    try:
        for name in ("lower", "upper", "work", "target"):
            os.mkdir(os.path.join(root, name))
        with open(os.path.join(root, "lower", "kept"), "w"):
            pass
        os.mkdir(os.path.join(root, "lower", "gone"))
        _whiteout(os.path.join(root, "upper", "gone"))
        mount = Mount(*(os.path.join(root, n) for n in ("lower", "upper", "work", "target")))
        if not all(_PLAIN_PATH.match(p) for p in (mount.lower, mount.upper, mount.work)):
            return False
        check = f'test -f "{mount.target}/kept" && test ! -e "{mount.target}/gone"'
        read, write = os.pipe()
        try:
            done = subprocess.run(
                [*mount.prefix(write), "/bin/sh", "-c", check],
                capture_output=True,
                timeout=30,
                env={"PATH": "/usr/bin:/bin"},
                pass_fds=(write,),
            )
            os.close(write)
            write = -1
            return done.returncode == 0 and os.read(read, 1) == b"m"
        finally:
            os.close(read)
            if write != -1:
                os.close(write)
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _whiteout(path: str) -> None:
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(0, 0))


@dataclass
class _Pristine:
    folder: str
    users: int = 0


_lock = threading.Lock()
_kept: OrderedDict[tuple[int, str, bool], _Pristine] = OrderedDict()
# Pristine bases being built, each with the event set when its build ends (built or not):
# one build per base and form, and no other base waits for it.
_building: dict[tuple[int, str, bool], threading.Event] = {}


def _acquire(store, key: str, base: dict, git: bool) -> _Pristine:
    """The pristine copy of base ``key`` (``git``: a folder holding only the base's Git
    repository, which a command evaluator's workspace stacks over the files), built on first
    use and counted as in use until ``_release``. Built outside the lock: a caller that wants
    a base another thread is building waits for that build, and for nothing else."""
    name = (os.getpid(), key, git)
    while True:
        with _lock:
            found = _kept.get(name)
            if found is not None and os.path.isdir(found.folder):
                _kept.move_to_end(name)
                return _take(found)
            building = _building.get(name)
            if building is None:
                building = _building[name] = threading.Event()
                break
        building.wait()  # then look again: built, or failed and this caller builds it
    try:
        folder = os.path.join(scratch.folder("lower"), "repository" if git else "base")
        if git:
            os.mkdir(folder)
            baserepo.write_repository(store, key, base, folder)
        else:
            manifest.write_entries(store, base, folder, lambda: key)
        sandbox.hand_over(folder)  # the sandbox's uid owns what it sees, as in a rebuild
        with _lock:
            found = _kept[name] = _Pristine(folder)
            return _take(found)
    finally:
        with _lock:
            del _building[name]
        building.set()


def _take(found: _Pristine) -> _Pristine:
    """Count ``found`` in use and drop the unused bases beyond MAX_KEPT (``_lock`` held)."""
    found.users += 1
    unused = [n for n, p in _kept.items() if p.users == 0 and n[0] == os.getpid()]
    while len(_kept) > MAX_KEPT and unused:
        shutil.rmtree(os.path.dirname(_kept.pop(unused.pop(0)).folder), ignore_errors=True)
    return found


def _release(pristine: _Pristine) -> None:
    with _lock:
        pristine.users -= 1


def warm(store, key: str, forms: list[bool]) -> threading.Thread | None:
    """Build the pristine copies of base ``key`` that evaluations to come will mount their
    workspaces on (``forms``: with its Git repository or not), in a thread of their own, and
    return it (None where no overlay is used). A run calls this as its candidate starts, so
    that the first evaluation finds its base built; one that comes before the build ends
    waits for it. What fails here is left for the evaluation, which builds the base again
    and reports why it cannot."""
    if not forms:
        return None

    def build() -> None:
        try:
            if not usable():
                return
            base = manifest.entries_at(store, key)
            _release(_acquire(store, key, base, False))  # the files, which every form needs
            if True in forms:
                _release(_acquire(store, key, base, True))
        except Exception:  # noqa: BLE001 - the evaluation meets it again, and says so
            return

    thread = threading.Thread(target=build, name="yyb-pristine-base", daemon=True)
    thread.start()
    return thread


@contextmanager
def workspace(
    store, key: str | None, base: dict | None, graded: dict, folder: str, git: bool = False
) -> Iterator[Mount | None]:
    """Make ``folder`` a grading workspace holding ``graded`` (path -> (mode, blob oid)) and
    yield the overlay the sandbox must mount there, or None when it was rebuilt whole: an
    overlay on the pristine copy of base ``key`` (``base``, its entries) when the host allows
    (``usable``), its upper layer and scratch folder beside ``folder``. With ``git``,
    ``folder/.git`` is the base's repository (``baserepo``). Leaving lets the pristine go."""
    layer = os.path.join(os.path.dirname(folder), "layer")
    upper, work = os.path.join(layer, "upper"), os.path.join(layer, "work")
    if key is None or base is None or not _PLAIN_PATH.match(layer) or not usable():
        manifest.write_entries(store, graded, folder)
        if git and key is not None and base is not None:
            baserepo.write(store, key, base, graded, folder)
        yield None
        return
    pristine = _acquire(store, key, base, False)
    try:
        repository = _acquire(store, key, base, True) if git else None
    except BaseException:
        _release(pristine)
        raise
    try:
        os.makedirs(work)
        os.mkdir(folder)
        write_upper(store, base, graded, upper)
        if repository is not None:
            baserepo.write_index(
                store, key, base, graded, pristine.folder, os.path.join(upper, ".git")
            )
        yield Mount(pristine.folder, upper, work, folder, repository and repository.folder)
    finally:
        _release(pristine)
        if repository is not None:
            _release(repository)


def write_upper(store, base: dict, graded: dict, upper: str) -> None:
    """Write into ``upper`` what makes an overlay on ``base`` show exactly ``graded`` (both
    path -> (mode, blob oid), proved safe by ``manifest.entries_of``): every entry that is new
    or differs, and a whiteout at the topmost base path with nothing of ``graded`` at or
    below it. A folder of ``graded`` where ``base`` has a file needs nothing more: a folder in
    the upper layer hides a file below it."""
    changed = {p: e for p, e in graded.items() if base.get(p) != e}
    manifest.write_entries(store, changed, upper)
    kept = {p[:i] for p in graded for i, c in enumerate(p) if c == "/"} | set(graded)
    gone = set()
    for path in base:
        if path in graded:
            continue
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            top = "/".join(parts[:depth])
            if top in graded:
                break  # a file of graded's, written above, hides everything below it
            if top not in kept:
                gone.add(top)
                break
    for path in sorted(gone):
        parent = os.path.join(upper, os.path.dirname(path))
        os.makedirs(parent, 0o755, exist_ok=True)
        _whiteout(os.path.join(upper, path))
