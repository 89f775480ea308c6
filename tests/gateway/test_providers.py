"""Providers as configuration: routing planned ids, credentials by variable name (never by
value in an error), tokens."""

from __future__ import annotations

import pytest

from tests.gateway.conftest import ENVIRON, OPENAI_KEY, PRICES, providers_for, short_socket
from yyb.errors import InvalidArgument
from yyb.gateway import Gateway, Provider, Providers


def test_a_planned_model_routes_by_its_provider_part():
    providers = providers_for("http://127.0.0.1:1")
    route = providers.route("openai/gpt-5")
    assert (route.provider.name, route.model, route.planned) == ("openai", "gpt-5", "openai/gpt-5")
    assert route.same_model("gpt-5") and route.same_model("openai/gpt-5")
    assert not route.same_model("gpt-5-mini") and not route.same_model(None)
    assert providers.route("openai/org/model").model == "org/model"
    for bad in ("gpt-5", "openai/", "mistral/large"):
        with pytest.raises(InvalidArgument):
            providers.route(bad)


def test_a_provider_is_checked_when_configured():
    with pytest.raises(InvalidArgument):
        Provider("a/b", "http://x", "K", ("openai",))
    with pytest.raises(InvalidArgument):
        Provider("a", "ftp://x", "K", ("openai",))
    with pytest.raises(InvalidArgument):
        Provider("a", "http://x", "K", ("gemini",))
    with pytest.raises(InvalidArgument):
        Providers.of(Provider("a", "http://x", "K", ("openai",)),
                     Provider("a", "http://y", "L", ("anthropic",)))  # fmt: skip


def test_a_missing_credential_is_named_and_no_value_is_shown(tmp_path):
    gateway = Gateway(
        providers_for("http://127.0.0.1:1"), PRICES, short_socket(tmp_path),
        environ={"YYB_TEST_OPENAI_KEY": OPENAI_KEY},
    )  # fmt: skip
    with pytest.raises(InvalidArgument) as raised:
        gateway.start()
    assert "YYB_TEST_ANTHROPIC_KEY" in str(raised.value)
    assert OPENAI_KEY not in str(raised.value) and not gateway.socket_path.exists()


def test_tokens_are_long_random_and_per_attempt(tmp_path):
    with Gateway(providers_for("http://127.0.0.1:1"), PRICES, short_socket(tmp_path),
                 environ=ENVIRON) as gateway:  # fmt: skip
        tokens = {gateway.admit(f"a{i}", "openai/gpt-5", None) for i in range(50)}
        assert len(tokens) == 50
        assert all(t.startswith("yyb-gw-") and len(t) == 7 + 48 for t in tokens)
        with pytest.raises(InvalidArgument):
            gateway.admit("a", "nowhere/model", None)
        with pytest.raises(InvalidArgument):
            gateway.admit("a", "openai/gpt-5", -1)
        token = tokens.pop()
        gateway.retire(token)
        with pytest.raises(InvalidArgument):
            gateway.retire(token)
        assert gateway.socket_path.exists()
    assert not gateway.socket_path.exists()


def test_a_socket_that_cannot_be_bound_fails_the_start_and_leaves_nothing(tmp_path):
    gateway = Gateway(
        providers_for("http://127.0.0.1:1"), PRICES, tmp_path / "missing" / "gw.sock",
        environ=ENVIRON,
    )  # fmt: skip
    with pytest.raises(OSError):
        gateway.start()
    gateway.stop()  # nothing to stop: a no-op
    assert not (tmp_path / "missing").exists()
