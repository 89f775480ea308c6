"""A plan whose candidates reach their models through the gateway (docs/gateway.md, "In a
plan"): the providers and the price table are bound in it, credentials by name only."""

from __future__ import annotations

import json

import pytest

from yyb import config as configuration
from yyb.errors import UsageError

PRICES = {
    "schema_version": "yyb_price_table.v1",
    "currency": "USD",
    "models": {"reporter-2025": {"input": 3_000_000, "output": 15_000_000, "cached_input": 0}},
}
PROVIDERS = {
    "stand": {"base_url": "http://127.0.0.1:9", "credential": "STAND_API_KEY", "apis": ["openai"]}
}


def through_gateway(bench, prices=PRICES, providers=PROVIDERS, **harness) -> dict:
    return bench.through_gateway(providers, prices, **harness)


def test_the_providers_and_the_price_table_are_bound_in_the_plan(bench):
    through_gateway(bench)
    model = bench.behaviour("reporter", "envelope succeeded stand reporter\n")
    plan = bench.plan([model])
    experiment = plan.experiment
    assert experiment["tool_policy"]["network"] == "gateway"
    assert experiment["gateway"] == {"providers": PROVIDERS}
    table = bench.record(experiment["links"]["prices"])
    assert table["models"] == PRICES["models"]
    # Bound by content: a later edit of the file changes only a new plan.
    changed = dict(PRICES, models={"reporter-2025": {"input": 1, "output": 1, "cached_input": 1}})
    (bench.repo / "prices.json").write_text(json.dumps(changed))
    assert bench.record(experiment["links"]["prices"])["models"] == PRICES["models"]
    again = bench.plan([model])
    assert again.oid != plan.oid
    assert again.experiment["links"]["prices"] != experiment["links"]["prices"]
    # The key's value is nowhere in the plan: only its variable's name.
    text = json.dumps(experiment)
    assert "STAND_API_KEY" in text


def test_without_a_price_table_the_plan_links_none(bench):
    through_gateway(bench, prices=None)
    plan = bench.plan([bench.behaviour("reporter", "envelope succeeded stand reporter\n")])
    assert "prices" not in plan.experiment["links"]


def test_a_plan_without_the_gateway_says_nothing_of_it(bench):
    bench.configure()
    plan = bench.plan([bench.behaviour("reporter", "envelope succeeded stand reporter\n")])
    assert "gateway" not in plan.experiment and "prices" not in plan.experiment["links"]


def test_a_model_whose_provider_the_gateway_lacks_is_refused(bench):
    through_gateway(bench)
    before = sorted(bench.store.refs.names())
    with pytest.raises(UsageError, match="no provider 'other'.*configured: stand"):
        bench.plan(["other/model"])
    assert sorted(bench.store.refs.names()) == before


def test_a_broken_price_table_is_refused_in_one_line(bench):
    through_gateway(bench, prices=dict(PRICES, models={"m": {"input": -1}}))
    done = bench.yyb(
        "plan",
        "--task",
        str(bench.task_path),
        "--models",
        "stand/m",
        "--max-usd",
        "1",
        "--output",
        str(bench.root / "plan.json"),
    )
    assert done.exit_code != 0
    assert "price table" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr
    assert not (bench.root / "plan.json").exists()


@pytest.mark.parametrize("where", ["secrets", "env"])
def test_a_harness_is_never_handed_a_credential_the_gateway_holds(bench, where):
    value = ["STAND_API_KEY"] if where == "secrets" else {"STAND_API_KEY": "sk-live"}
    through_gateway(bench, **{where: value})
    with pytest.raises(configuration.ConfigError) as raised:
        bench.config()
    assert raised.value.problems == [
        (
            f"/harnesses/candidate/{where}",
            "STAND_API_KEY is a credential the gateway holds: a candidate gets a per-attempt "
            "token in its place, never the key",
        )
    ]


def test_the_gateway_network_needs_its_section(bench):
    data = bench.configure(network="gateway")
    bench.config_path.write_text(json.dumps(data))
    with pytest.raises(configuration.ConfigError) as raised:
        bench.config()
    assert raised.value.problems[0][0] == "/tool_policy/network"


def test_a_gateway_plan_on_the_dask_executor_is_refused_before_any_dispatch(bench):
    """The gateway runs in the controller's process: candidates on other machines could not
    reach its socket, so such a plan is refused, not run with the network denied."""
    from yyb.attempts.context import prepare

    through_gateway(bench)
    plan = bench.plan([bench.behaviour("reporter", "envelope succeeded stand reporter\n")])
    before = sorted(bench.store.refs.names())
    chosen = {oid: plan.records[oid] for oid in plan.attempt_oids}
    with pytest.raises(UsageError, match="local executor only"):
        prepare(
            bench.store, bench.config(), plan.oid, plan.experiment, chosen, {},
            candidates_here=False,
        )  # fmt: skip
    assert sorted(bench.store.refs.names()) == before
