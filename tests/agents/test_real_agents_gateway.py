"""Real agent CLIs through the model gateway (docs/gateway.md, "In a run"), end to end.

The example's case run by mini-swe-agent, aider, Claude Code and Codex as their harness kinds,
with ``tool_policy.network: gateway``: the sandbox has loopback only, the CLI finds the
gateway through the variables the run sets (its base URL and a token in the provider's
credential variable), and the gateway holds the scripted provider's key. The terminal's
identity and cost must be the gateway's, every call in its meter. Deep, and skipped where the
CLI is not installed (tools/install_agents.sh --node).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agents.conftest import AGENTS, EXECUTABLES, needs
from tests.agents.model_server import SERVED_MODEL, Server
from tests.agents.test_real_agents import (
    GIT_IDENTITY,
    KIND_ARGS,
    KIND_TURNS,
    KINDS,
    bench,
    plan_run_report,
)
from yyb.attempts import metering

pytestmark = pytest.mark.deep
UPSTREAM_KEY = "sk-upstream-REAL-0123456789abcdefghij"
PRICES = {
    "schema_version": "yyb_price_table.v1",
    "currency": "USD",
    "models": {SERVED_MODEL: {"input": 3_000_000, "output": 15_000_000, "cached_input": 0}},
}
GATEWAY_URL = f"http://127.0.0.1:{metering.PORT}"


def through_gateway(config_path: Path, server: Server, provider: str, credential: str) -> None:
    """The example's config with its candidates' calls through the gateway to ``server``."""
    data = json.loads(config_path.read_text())
    data["tool_policy"]["network"] = "gateway"
    api = "anthropic" if provider == "anthropic" else "openai"
    data["gateway"] = {
        "providers": {provider: {"base_url": server.url, "credential": credential, "apis": [api]}},
        "prices": "prices.json",
    }
    (config_path.parent / "prices.json").write_text(json.dumps(PRICES))
    if provider == "anthropic":
        data["models"] = {":fixer": {"id": "anthropic/fixer", "accept": ["dated"]}}
    config_path.write_text(json.dumps(data, indent=2))


def harness_for(name: str, metadata: Path) -> dict:
    """The CLI's harness with no base URL and no key: the run gives it the gateway's."""
    if name == "claude":
        env = {"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        return {"kind": "claude_code", "executable": str(EXECUTABLES[name]),
                "env": {**env, **GIT_IDENTITY}}  # fmt: skip
    if name == "codex":
        provider = (
            f'model_providers.yyb={{name="yyb", base_url="{GATEWAY_URL}/v1", '
            'env_key="OPENAI_API_KEY", wire_api="responses"}'
        )
        args = ["-c", "model_provider=yyb", "-c", provider]
        return {"kind": "codex", "executable": str(EXECUTABLES[name]), "args": args,
                "env": dict(GIT_IDENTITY)}  # fmt: skip
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    if name == "mini":
        env |= {"LITELLM_MODEL_REGISTRY_PATH": str(metadata), "MSWEA_CONFIGURED": "true"}
    else:
        env |= {"AIDER_MODEL_METADATA_FILE": str(metadata), **GIT_IDENTITY}
    return {"kind": KINDS[name], "executable": str(EXECUTABLES[name]),
            "args": KIND_ARGS.get(name, []), "env": env}  # fmt: skip


FIX = (
    "sed -i 's/$1 - $2/$1 + $2/' calc.sh && "
    "git -c user.name=agent -c user.email=agent@example.invalid commit -qam 'fix add'"
)


def node_turns(name: str) -> list[dict]:
    tool = (
        {"name": "Bash", "arguments": {"command": FIX, "description": "Make add add"}}
        if name == "claude"
        else {"name": "exec_command", "arguments": {"cmd": FIX}}
    )
    return [{"text": "I'll fix add.", "tool_calls": [tool]}, {"text": "Fixed: add now adds."}]


CLIS = [pytest.param(n, marks=needs(n)) for n in ("mini", "aider", "claude", "codex")]


@pytest.mark.parametrize("name", CLIS)
def test_a_real_cli_through_the_gateway_is_metered_there(name, tmp_path, monkeypatch):
    from tests.agents.conftest import MODEL_METADATA
    from yyb.store.repo import Store

    metadata = tmp_path / "models" / "metadata.json"
    metadata.parent.mkdir()
    metadata.write_text(json.dumps(MODEL_METADATA))
    provider = "anthropic" if name == "claude" else "openai"
    credential = "ANTHROPIC_API_KEY" if name == "claude" else "OPENAI_API_KEY"
    monkeypatch.setenv(credential, UPSTREAM_KEY)  # the controller's, read by the gateway only
    turns = KIND_TURNS.get(name) or node_turns(name)
    with Server(turns) as server:
        read_only = [str(AGENTS), str(metadata.parent)]
        yyb, config_path, task = bench(tmp_path, harness_for(name, metadata), read_only)
        through_gateway(config_path, server, provider, credential)
        terminal = plan_run_report(yyb, config_path, task, tmp_path / "plan.json")
        requests = server.completions()
    assert terminal["class"] == "resolved", (terminal["reason"], terminal["identity"])
    assert terminal["identity"]["observed"] == f"{provider}/{SERVED_MODEL}"
    store = Store.open(yyb.store_path)
    meter = store.objects.get_record(terminal["links"]["gateway"])
    assert meter["outcomes"].get("answered") == len(requests) > 0
    assert terminal["candidate_cost"] == {
        "completeness": "complete",
        "currency": "USD",
        "micros": meter["cost"]["micros"],
    }
    assert all(r.headers.get("authorization", r.headers.get("x-api-key")) for r in requests)
    everything = b"".join(store.objects.get(o).body for o in store.objects.iter_oids())
    assert UPSTREAM_KEY.encode() not in everything
