"""The sandbox's probe: a sandboxed process that reports what it can do, checked before a
run's first dispatch (docs/attempts.md, step 3), so that a host that cannot confine a
candidate fails closed, naming what is missing."""

from __future__ import annotations

import os
import subprocess

from yyb.harness import disk
from yyb.harness.sandbox import Sandbox, SandboxUnavailable, hand_over, version

PROBE_SCRIPT = """
grep -E '^(Uid|CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
[ -e "$1" ] && echo canary-visible
if [ -x /usr/bin/unshare ]; then /usr/bin/unshare --user true 2>/dev/null && echo userns-made; fi
head -c 2097152 /dev/zero > filler 2>/dev/null && echo disk-unbounded
rm -f filler
echo ok > probe
"""
PROBE_DISK_MIB = 1  # the probe's disk, which a 2 MiB file must not fit


def probe() -> str:
    """``verify()``'s bubblewrap version (for callers that need only the verdict)."""
    return verify()[0]


def verify() -> tuple[str, list[str]]:
    """Start a sandboxed process and check what it can do; return the bubblewrap version and
    the properties verified, in words (the same list on the same host).

    Checked for real inside: no effective, permitted or bounding capability; no_new_privs; not
    uid 0 when yyb runs as root; a seccomp filter in force, and no user namespace can be made
    (when ``/usr/bin/unshare`` is there to try); a file outside its view (a canary next to its
    folder) is invisible; its writable folder is writable, and lies on a disk
    (yyb/harness/disk.py) that the kernel holds to its size.

    Raises:
        SandboxUnavailable: naming the first property the host cannot provide.
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="yyb-probe-") as top:
        folder = os.path.join(top, "work")
        canary = os.path.join(top, "canary")
        os.mkdir(folder)
        with open(canary, "w") as handle:
            handle.write("must not be visible\n")
        try:
            held = disk.Disk.mount(folder, PROBE_DISK_MIB)
        except disk.DiskUnavailable as exc:
            raise SandboxUnavailable(exc.reason, None) from None
        with held:
            hand_over(held.reach(folder))
            box = Sandbox(writable=[folder], hidden=[top], cwd=folder, disk=held)
            try:
                with box.launch(["/bin/sh", "-c", PROBE_SCRIPT, "probe", canary]) as launch:
                    done = subprocess.run(
                        launch.argv,
                        capture_output=True,
                        timeout=30,
                        env={"PATH": "/usr/bin:/bin"},
                        pass_fds=launch.pass_fds,
                    )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise SandboxUnavailable(f"bwrap did not start ({exc})") from None
            wrote = os.path.exists(os.path.join(held.reach(folder), "probe"))
        if done.returncode != 0 or not wrote:
            detail = done.stderr.decode(errors="replace").strip().splitlines()
            raise SandboxUnavailable(f"bwrap failed: {detail[-1] if detail else done.returncode}")
        verified = _check(done.stdout.decode(errors="replace"))
    return version(), [*verified, "a folder of its own is writable"]


def _check(report: str) -> list[str]:
    """Refuse a sandbox whose probe reported a capability, privilege, missing filter, user
    namespace made or visible canary; return what was verified."""
    fields = {}
    for line in report.splitlines():
        name, _, value = line.partition(":")
        fields[name.strip()] = value.split()
    for name in ("CapEff", "CapPrm", "CapBnd"):
        if fields.get(name, ["?"])[0].strip("0") != "":
            raise SandboxUnavailable(
                f"a sandboxed process keeps capabilities ({name} {fields.get(name)})", None
            )
    if fields.get("NoNewPrivs", ["0"])[0] != "1":
        raise SandboxUnavailable("no_new_privs is not set inside the sandbox", None)
    if os.geteuid() == 0 and fields.get("Uid", ["0"])[0] == "0":
        raise SandboxUnavailable("a sandboxed process still runs as root", None)
    if fields.get("Seccomp", ["0"])[0] != "2":
        raise SandboxUnavailable("no seccomp filter is in force inside the sandbox", None)
    if "userns-made" in report:
        raise SandboxUnavailable("a sandboxed process can make a user namespace", None)
    if "canary-visible" in report:
        raise SandboxUnavailable("a file outside the sandbox's view is visible inside", None)
    if "disk-unbounded" in report:
        raise SandboxUnavailable("a file larger than its disk was written inside", None)
    verified = [
        "no effective, permitted or bounding capability",
        "no_new_privs is set",
        "a seccomp filter is in force",
    ]
    if os.geteuid() == 0:
        verified.append(f"root is dropped to uid {fields['Uid'][0]}")
    if os.path.exists("/usr/bin/unshare"):
        verified.append("no user namespace can be made")
    verified.append("a file outside its view is invisible")
    verified.append(f"its folders are a {PROBE_DISK_MIB} MiB disk that a larger file does not fit")
    return verified
