"""The built-in example run once with every record signed, shared by the signing tests."""

from __future__ import annotations

import pytest

from tests.conftest import Yyb
from yyb import signing


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """The example run (2 models x 1 attempt) with every record signed; the public key."""
    root = tmp_path_factory.mktemp("signed")
    key = str(root / "signing.key")
    public = signing.generate_key(key)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(signing.KEY_ENV, key)
        done = Yyb(str(root / "store"))("example", "--dir", str(root / "ex"), "--attempts", "1")
    assert done.exit_code == 0, done.stderr
    return root, public, key
