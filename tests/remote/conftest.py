"""One loopback sshd for the session's remote tests (tests/remote/sshd.py)."""

from tests.remote.sshd import sshd_server  # noqa: F401
