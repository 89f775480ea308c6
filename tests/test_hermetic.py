"""The suite never reads the machine's home, config, store or signing key."""

from __future__ import annotations

import os
import pwd

from yyb import signing


def test_home_and_config_are_the_tests_own(hermetic):
    real_home = pwd.getpwuid(os.getuid()).pw_dir
    assert os.path.expanduser("~") == str(hermetic) != real_home
    assert os.environ["XDG_CONFIG_HOME"].startswith(str(hermetic))
    assert signing.default_key_path().startswith(str(hermetic))
    assert "YYB_STORE" not in os.environ and "YYB_SIGNING_KEY" not in os.environ


def test_a_key_in_the_tests_home_is_used_and_one_elsewhere_is_not(hermetic, tmp_path):
    assert signing.configured_key_path() is None
    signing.generate_key(signing.default_key_path())
    assert signing.configured_key_path() == signing.default_key_path()
