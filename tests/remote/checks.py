"""What every remote's end-to-end test checks once an experiment was pushed: the refs fetched
back into a new store verify there, and a second push sends nothing."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Yyb


def fetched_back_verifies(yyb: Yyb, url: str, names: list[str], folder: Path, plan: str):
    """Fetch ``names`` from ``url`` into a new store in ``folder``: doctor --plan and doctor
    pass there. Returns that store's runner and the transfer of pushing ``plan`` again."""
    back = Yyb(str(folder))
    assert back("store", "init").exit_code == 0
    fetched = back("fetch", url, *names)
    assert fetched.exit_code == 0, fetched.stderr
    assert back("doctor", "--plan", plan).exit_code == 0
    assert back("doctor").exit_code == 0
    return back, json.loads(yyb("push", url, "--plan", plan, "--json").stdout)["transfer"]
