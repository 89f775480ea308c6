"""The build a receipt binds is the bytes that run: a change hidden from `git status`, a
module loaded from elsewhere, a start-up file or a package file the installer never wrote
is refused, each in one line naming the file."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import GIT_ENV
from tests.readiness.conftest import REAL, copy_of_yyb
from yyb.readiness import identity


def _git(top: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(top), *args], env={**os.environ, **GIT_ENV}, check=True)


@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_a_change_hidden_from_git_status_is_refused(tmp_path, flag):
    top = copy_of_yyb(tmp_path / "checkout")
    bound = identity.build(str(top / "yyb"))
    assert bound.record["kind"] == "checkout"
    assert bound.identity()["modules"]["count"] > 0  # the copy is the running yyb's bytes
    target = top / "yyb" / "readiness" / "verify.py"
    _git(top, "update-index", flag, "yyb/readiness/verify.py")
    target.write_text(target.read_text() + "\nPASSED = True\n")
    status = subprocess.run(
        ["git", "-C", str(top), "status", "--porcelain"], capture_output=True, text=True
    )
    assert status.stdout == ""  # what the forger relies on
    with pytest.raises(identity.DirtyCheckout) as refused:
        identity.build(str(top / "yyb"))
    message = refused.value.message
    assert "yyb/readiness/verify.py" in message and flag.strip("-") in message
    assert "\n" not in message


def test_an_imported_module_that_is_not_the_commit_is_refused(tmp_path):
    top = copy_of_yyb(tmp_path / "checkout")
    bound = identity.build(str(top / "yyb"))
    # A module git is told to ignore (.git/info/exclude is no tracked file), imported: git
    # status is clean, the commit does not hold it.
    (top / ".git" / "info" / "exclude").write_text("yyb/readiness/extra.py\n")
    extra = top / "yyb" / "readiness" / "extra.py"
    extra.write_text("PASSED = True\n")
    assert identity.build(str(top / "yyb")).record == bound.record
    loaded = {"yyb": str(top / "yyb" / "__init__.py"), "yyb.readiness.extra": str(extra)}
    with pytest.raises(identity.UnboundBuild, match="yyb.readiness.extra"):
        bound.modules(loaded, str(top))
    # A module of the build whose bytes are not the commit's.
    (top / "yyb" / "__init__.py").write_text("PATCHED = True\n")
    with pytest.raises(identity.UnboundBuild, match="differs"):
        bound.modules({"yyb": str(top / "yyb" / "__init__.py")}, str(top))
    # A module loaded from outside the build's folder.
    stray = tmp_path / "elsewhere" / "yyb_stray.py"
    stray.parent.mkdir()
    stray.write_text("")
    with pytest.raises(identity.UnboundBuild, match="outside"):
        bound.modules({"yyb.stray": str(stray)}, str(top))


def _wheel(site: Path, extra: dict[str, bytes] | None = None) -> Path:
    """A wheel-like install of a copy of the running yyb in ``site``: its package, its
    dist-info and a RECORD of every file, then ``extra`` files the installer never wrote."""
    shutil.copytree(REAL / "yyb", site / "yyb", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / "yyb-9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: yyb\nVersion: 9.9\n")
    lines = []
    for path in sorted(p for p in site.rglob("*") if p.is_file()):
        data = path.read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{path.relative_to(site)},sha256={digest},{len(data)}")
    lines.append(f"{info.name}/RECORD,,")
    (info / "RECORD").write_text("\n".join(lines) + "\n")
    for name, data in (extra or {}).items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(data)
    return site / "yyb"


def test_a_wheel_install_binds_its_record_and_the_modules_that_run(tmp_path):
    package = _wheel(tmp_path / "site")
    bound = identity.build(str(package), site_dirs=[str(tmp_path / "site")])
    assert bound.record["kind"] == "distribution" and bound.record["version"] == "9.9"
    assert bound.identity()["modules"]["count"] > 0


@pytest.mark.parametrize(
    "name, data",
    [
        ("yyb/readiness/patch.py", b"import yyb.readiness.verify as v\nv.verdict = 1\n"),
        ("yyb/_speedups.cpython-311-x86_64-linux-gnu.so", b"\x7fELF"),
        ("yyb/__pycache__/evil.cpython-311.pyc", b"\0" * 16),
    ],
)
def test_a_package_file_no_record_lists_is_refused(tmp_path, name, data):
    package = _wheel(tmp_path / "site", {name: data})
    with pytest.raises(identity.UnboundBuild, match=name.replace(".", r"\.")) as refused:
        identity.build(str(package), site_dirs=[str(tmp_path / "site")])
    assert "RECORD" in refused.value.message


@pytest.mark.parametrize(
    "pth, files",
    [
        ("import yyb_patch\n", {"yyb_patch.py": b"import yyb.readiness.verify\n"}),
        ("import os; os.environ.setdefault('X', 'yyb')\n", {}),
        ("../shadow\n", {"../shadow/yyb/__init__.py": b""}),
    ],
)
def test_a_stray_startup_file_affecting_yyb_is_refused(tmp_path, pth, files):
    site = tmp_path / "site"
    extra = {"zz-stray.pth": pth.encode(), **files}
    package = _wheel(site, extra)
    with pytest.raises(identity.UnboundBuild, match="zz-stray.pth"):
        identity.build(str(package), site_dirs=[str(site)])


def test_startup_files_that_do_not_reach_yyb_or_are_recorded_pass(tmp_path):
    site = tmp_path / "site"
    package = _wheel(site, {"_virtualenv.pth": b"import _virtualenv\n", "_virtualenv.py": b""})
    identity.build(str(package), site_dirs=[str(site)])
    # This interpreter's own site folders (an editable install's finder, setuptools' shim)
    assert identity.startup_files() is None
    # A recorded .pth whose bytes changed since it was installed is no longer recorded.
    other = site / "other-1.dist-info"
    other.mkdir()
    (other / "METADATA").write_text("Metadata-Version: 2.1\nName: other\nVersion: 1\n")
    data = b"import yyb_hook\n"
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    (other / "RECORD").write_text(f"other.pth,sha256={digest},{len(data)}\n")
    (site / "other.pth").write_bytes(data)
    identity.build(str(package), site_dirs=[str(site)])  # recorded as installed
    (site / "other.pth").write_bytes(data + b"import yyb\n")
    with pytest.raises(identity.UnboundBuild, match="other.pth"):
        identity.build(str(package), site_dirs=[str(site)])


def test_cached_bytecode_that_is_not_the_source_is_refused(tmp_path):
    """A forged ``.pyc`` beside an unchanged source (git ignores ``__pycache__``; a wheel's
    RECORD leaves room for it) runs instead of the source: it is refused."""
    import importlib.util
    import py_compile

    top = copy_of_yyb(tmp_path / "checkout")
    bound = identity.build(str(top / "yyb"))
    source = top / "yyb" / "readiness" / "verify.py"
    loaded = {"yyb": str(top / "yyb" / "__init__.py"), "yyb.readiness.verify": str(source)}
    honest = bound.modules(loaded, str(top))
    py_compile.compile(str(source), doraise=True)  # the cache Python itself writes
    assert bound.modules(loaded, str(top)) == honest
    forged = tmp_path / "forged.py"
    forged.write_text("def verdict(*args):\n    return True\n")
    cached = importlib.util.cache_from_source(str(source))
    header = Path(cached).read_bytes()[:16]  # the source's time and size: Python loads it
    py_compile.compile(str(forged), cfile=str(tmp_path / "forged.pyc"), doraise=True)
    Path(cached).write_bytes(header + (tmp_path / "forged.pyc").read_bytes()[16:])
    with pytest.raises(identity.UnboundBuild, match="cached bytecode"):
        bound.modules(loaded, str(top))
