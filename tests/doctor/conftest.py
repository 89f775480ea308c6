"""The built-in example, run once per module, and private copies of its store to damage."""

from __future__ import annotations

import pytest

from tests.conftest import Yyb
from yyb.store.repo import Store


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """One run of the example (2 models x 2 attempts), shared read-only by the tests below."""
    root = tmp_path_factory.mktemp("example") / "ex"
    result = Yyb(str(root / "store"))("example", "--dir", str(root), "--attempts", "2")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "report (complete; layer " in result.stdout  # the example ends with its report
    assert "example/fixer  valid resolved rate 2/2 100.0%" in result.stdout
    return root


@pytest.fixture
def copy(ran, tmp_path):
    """A private copy of the example's store, to damage."""
    import shutil

    shutil.copytree(ran / "store", tmp_path / "store", symlinks=True)
    store = Store.open(str(tmp_path / "store"))
    plan_oid = next(
        name.split("/")[2] for name in store.refs.names() if name.startswith("refs/plans/")
    )
    return store, plan_oid, str(ran / "plan.json")
