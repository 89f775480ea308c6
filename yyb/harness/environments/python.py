"""The ``python`` kind: a virtual environment over an interpreter, built in the sandbox.

The build has four steps, each named when it fails (docs/environments.md, "python"):

1. ``download``: the controller's pip fetches the pinned requirements, pip, setuptools, wheel
   and the repository's build requirements as wheels (never sdists, whose metadata would
   take running their code outside the sandbox) for the environment's Python version into
   a folder of the build, checking hashes where the requirements give them. This is the
   only step that reaches the network.
2. ``venv``: in the sandbox, on the base environment's root (or the host's OS folders), the
   interpreter makes a virtual environment at ``/yyb/python``, where it is shown ever after
   (its scripts name that path); pip is installed into it from the downloaded wheel.
3. ``requirements``: pip installs the requirements from that folder only (no index).
4. ``install``: the repository is exported at ``install_commit`` to ``/testbed`` and each
   install command runs there, so an editable install points at ``/testbed``: the workspace
   an attempt's candidate edits is shown at that path.

Steps 2-4 run without network, with the sandbox's limits, as the sandbox's uid.
"""

from __future__ import annotations

import os
import subprocess
import sys  # the controller's interpreter runs pip download

from yyb.errors import EnvironmentBuildFailed
from yyb.harness.environments import PYTHON_MOUNT

WHEELS = "/yyb/wheels"
STEP_TIMEOUT_MS = 30 * 60 * 1000
TOOLS = ("pip", "setuptools", "wheel")
VERSION_SCRIPT = "import sys; print('%d.%d' % sys.version_info[:2])"


def build(request, staging: str, root: str, progress) -> tuple[dict, dict]:
    """Build the virtual environment of ``request`` (build.Request) into ``root``."""
    spec, name = request.spec, request.spec["name"]
    python = spec["python"]
    wheels = os.path.join(staging, "wheels")
    testbed = os.path.join(staging, "testbed")
    os.makedirs(wheels)
    os.makedirs(testbed)
    box = _Box(request, staging, root, wheels, testbed)
    version = box.output("version", [python["interpreter"], "-c", VERSION_SCRIPT]).strip()
    if progress:
        progress(f"downloading wheels for Python {version}")
    build_requires = _export(request, testbed)
    log = os.path.join(staging, "build.log")
    _download(name, version, python.get("requirements", []), build_requires, wheels, log)
    if progress:
        progress("making the virtual environment")
    box.step("venv", [python["interpreter"], "-m", "venv", "--without-pip", PYTHON_MOUNT])
    pip_wheel = sorted(n for n in os.listdir(wheels) if n.startswith("pip-"))
    if not pip_wheel:
        raise EnvironmentBuildFailed(name, "download", "no pip wheel was downloaded")
    pip = [f"{PYTHON_MOUNT}/bin/python", f"{WHEELS}/{pip_wheel[-1]}/pip", "install", "-q"]
    box.step("venv", [*pip, "--no-index", "--find-links", WHEELS, "pip"])
    if python.get("requirements"):
        if progress:
            progress(f"installing {len(python['requirements'])} requirements")
        box.step("requirements", [*_pip(), "-r", f"{WHEELS}/requirements.txt"])
    for command in python.get("install", []):
        if progress:
            progress(f"install: {command}")
        box.step("install", ["/bin/sh", "-c", command])
    installed = box.output("freeze", [*PIP, "freeze", "--all"])
    facts = {
        "python": version,
        "installed": sorted(line for line in installed.splitlines() if line and "==" in line),
        "pip_wheel": pip_wheel[-1],
    }
    variables = {
        "PATH": f"{PYTHON_MOUNT}/bin:/usr/local/bin:/usr/bin:/bin",
        "VIRTUAL_ENV": PYTHON_MOUNT,
        **spec.get("variables", {}),
    }
    return facts, variables


PIP = [f"{PYTHON_MOUNT}/bin/python", "-m", "pip"]


def _pip() -> list[str]:
    return [*PIP, "install", "-q", "--no-index", "--find-links", WHEELS]


def _export(request, testbed: str) -> list[str]:
    """Export the repository at the install commit into ``testbed`` (when the spec installs
    one); its build requirements (pyproject.toml's ``build-system.requires``)."""
    python = request.spec["python"]
    commit = python.get("install_commit")
    if not python.get("install") or request.repository is None or commit is None:
        return []
    from yyb.harness import snapshot

    try:
        snapshot.create(request.repository, commit, [], testbed)
    except Exception as exc:  # noqa: BLE001 - any reason the export failed names the step
        raise EnvironmentBuildFailed(request.spec["name"], "checkout", str(exc)) from None
    return build_requirements(os.path.join(testbed, "pyproject.toml"))


def build_requirements(path: str) -> list[str]:
    """``build-system.requires`` of the pyproject.toml at ``path`` (setuptools and wheel when
    it has none, as pip assumes)."""
    import tomllib

    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError):
        return ["setuptools", "wheel"]
    requires = data.get("build-system", {}).get("requires")
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        return ["setuptools", "wheel"]
    return requires


def _download(name, version, requirements, build_requires, wheels, log: str) -> None:
    """Step 1: the wheels into ``wheels``; the requirements file the later steps install
    from; pip's output appended to the build log at ``log``."""
    with open(os.path.join(wheels, "requirements.txt"), "w") as handle:
        handle.write("".join(f"{line}\n" for line in requirements))
    # Wheels only, whatever the Python: getting an sdist's metadata would run its code here,
    # outside the sandbox. The target version tells pip which wheels fit.
    base = [sys.executable, "-m", "pip", "download", "-q", "--dest", wheels]
    base += ["--only-binary=:all:", "--python-version", version]
    runs = [[*base, *TOOLS, *build_requires]]
    if requirements:
        runs.append([*base, "-r", os.path.join(wheels, "requirements.txt")])
    for argv in runs:
        done = subprocess.run(argv, capture_output=True, env=_download_env())
        with open(log, "ab") as handle:  # the build log, beside the sandboxed steps'
            handle.write(f"$ {' '.join(argv)}\n".encode() + done.stdout + done.stderr)
        if done.returncode != 0:
            raise EnvironmentBuildFailed(name, "download", _last_line(done.stderr))


def _download_env() -> dict:
    """The controller's environment for pip, less what would make it install (a virtual
    environment's own variables), so that its index and certificates are used."""
    env = dict(os.environ)
    env.pop("PIP_REQUIRE_VIRTUALENV", None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _last_line(data: bytes) -> str:
    lines = [line.strip() for line in data.decode(errors="replace").splitlines()]
    lines = [line for line in lines if line and not line.startswith("WARNING")]
    return lines[-1][:500] if lines else "no output"


class _Box:
    """The sandbox the build's steps 2-4 run in."""

    def __init__(self, request, staging: str, root: str, wheels: str, testbed: str):
        from yyb.harness import limits, sandbox

        self.name = request.spec["name"]
        self.staging = staging
        self.log = os.path.join(staging, "build.log")
        home, tmp = os.path.join(staging, "home"), os.path.join(staging, "tmp")
        os.makedirs(home)
        os.makedirs(tmp)
        base = request.base.view() if request.base is not None else None
        self.env = {
            "PATH": f"{PYTHON_MOUNT}/bin:/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "TMPDIR": tmp,
            "LANG": "C.UTF-8",
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": WHEELS,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_CACHE_DIR": "1",
            # Bytecode pip compiles is then checked by hash, not stamped with the build's
            # time: two builds share their .pyc files (1980: the first time a wheel's zip
            # entries can hold, should a step build one).
            "SOURCE_DATE_EPOCH": "315532800",
            **(base.variables if base else {}),
            **request.spec.get("variables", {}),
        }
        self.env["PATH"] = f"{PYTHON_MOUNT}/bin:" + self.env["PATH"]
        self.box = sandbox.Sandbox(
            writable=[home, tmp],
            hidden=[],
            cwd=request.spec["workspace"],
            limits=limits.resolve(None),
            os_root=base.os_root if base else None,
            mounts=(
                *(base.mounts if base else ()),
                (wheels, WHEELS, False),
                (root, PYTHON_MOUNT, True),
                (testbed, request.spec["workspace"], True),
            ),
        )

    def output(self, step: str, argv: list[str]) -> str:
        return self.step(step, argv).decode(errors="replace")

    def step(self, step: str, argv: list[str]) -> bytes:
        """Run one step to its end; its output, appended to the build log.

        Raises:
            EnvironmentBuildFailed: it did not exit 0.
        """
        outcome, _ = self.box.run(argv, self.env, STEP_TIMEOUT_MS, owner=self.staging)
        out = outcome.stdout.data + outcome.stderr.data
        with open(self.log, "ab") as handle:
            handle.write(f"$ {' '.join(argv)}\n".encode() + out)
        if outcome.exit_code != 0:
            why = "timed out" if outcome.timed_out else _last_line(out)
            raise EnvironmentBuildFailed(self.name, step, f"{why} (exit {outcome.exit_code})")
        return outcome.stdout.data
