"""The comparison page of ``yyb view``: two runs of the example that differ in their
candidate, the key part that differs said first, the flipped case, and the form on the
experiments page that leads to it."""

from __future__ import annotations

import pytest

from tests.reports.conftest import example_runs
from tests.view.conftest import serving
from tests.view.test_reading import read
from yyb.view import urls


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    example = example_runs(tmp_path_factory.mktemp("compare") / "ex", 1)
    first, second = example.plan_of(":fixer", 1), example.plan_of(":idler", 1)
    from yyb.plans import planfile

    oids = [planfile.plan_oid(p, lambda: None) for p in (first, second)]
    return example, oids


def test_the_page_says_the_key_that_differs_then_the_flipped_case(runs):
    example, (first, second) = runs
    with serving(example.store) as served:
        status, _, body = served.get(urls.compare(first, second))
        assert status == 200
        page = body.decode()
        assert page.index("agent.model") < page.index("valid resolved rate")
        assert "example/fixer → example/idler" in page
        assert ">lost<" in page and "calc-add" in page
        status, _, again = served.get(f"/compare?first={first}&second={second}")
        assert status == 200 and again == body
        home = served.get(urls.home())[2].decode()
        assert 'action="/compare"' in home and f'value="{second}"' in home
        for bad in (f"/compare?first={first}", f"/compare?first={first}&second={first}"):
            assert served.get(bad)[0] == 400, bad
        assert served.get(f"/compare/{first}/{'0' * 64}")[0] == 404


@pytest.mark.parametrize("width", (1400, 500))
def test_the_page_reads_as_words_and_fits(browser, runs, width):
    example, (first, second) = runs
    with serving(example.store) as served:
        found, wide = read(browser, served, {"compare": urls.compare(first, second)}, width)
    assert found == {} and wide == {}
