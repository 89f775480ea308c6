"""Plans whose candidates reach their models through the gateway, run (docs/gateway.md, "In a
run"): the candidate has loopback only and a token, the scripted provider on the host's
loopback gets the real key, and the attempt's identity and cost are the gateway's.

The stand-in candidates are the bench's behaviours calling a small client (``client.py``,
stdlib only, in the tools folder) the way an agent's SDK would: the base URL and the key from
the variables the official SDKs read.
"""

from __future__ import annotations

import csv
import io
import json
import os

import pytest

from tests.agents.model_server import Server
from tests.calculator import FIX, write
from yyb.attempts import runner

KEY = "sk-stand-REALKEY-0123456789abcdefghijklmnop"
ENVIRON_KEY = "STAND_API_KEY"
SERVED = "client"  # the scripted provider serves the planned model's own id
# micro-USD per million tokens
PRICES = {
    "schema_version": "yyb_price_table.v1",
    "currency": "USD",
    "models": {SERVED: {"input": 3_000_000, "output": 15_000_000, "cached_input": 300_000}},
}
# Calls the planned model once plainly, once streamed, printing what it got; with CALLS=n,
# n plain calls; with TOKEN_FILE, the token read from that file instead of its own.
CLIENT = r"""
import json, os, sys, urllib.error, urllib.request
base = os.environ["OPENAI_BASE_URL"]
key = os.environ["STAND_API_KEY"]
if os.environ.get("TOKEN_FILE"):
    key = open(os.environ["TOKEN_FILE"]).read().strip()
def call(stream):
    body = {"model": "client", "stream": stream,
            "messages": [{"role": "user", "content": "fix calc, stream=%s" % stream}]}
    request = urllib.request.Request(
        base + "/chat/completions", json.dumps(body).encode(),
        {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            data = answer.read().decode()
            print("status", answer.status, "stream" if stream else "plain", len(data))
    except urllib.error.HTTPError as exc:
        print("status", exc.code, exc.read().decode()[:200])
calls = int(os.environ.get("CALLS", "0"))
if calls:
    for _ in range(calls):
        call(False)
else:
    call(False)
    call(True)
"""


def script() -> dict:
    return {"turns": [], "served_model": SERVED, "fallback": {"text": "I will fix add."}}


@pytest.fixture
def provider():
    with Server(script()) as server:
        yield server


def gateway_bench(bench, provider, prices=PRICES, behaviour: str = "") -> str:
    providers = {"stand": {"base_url": provider.url, "credential": ENVIRON_KEY, "apis": ["openai"]}}
    bench.through_gateway(providers, prices)
    write(bench.tools / "client.py", CLIENT)
    return bench.behaviour("client", behaviour or CALLING)


CALLING = f"""
python3 "$TOOLS/client.py"
{FIX}
envelope succeeded
"""


def run(bench, plan, environ: dict | None = None, jobs: int = 1, runner_options=None):
    env = {**os.environ, ENVIRON_KEY: KEY, **(environ or {})}
    chosen = {oid: plan.records[oid] for oid in plan.attempt_oids}
    records = {plan.oid: plan.experiment, **chosen}
    options = runner.RunOptions(jobs=jobs, **(runner_options or {}))
    outcome = runner.run(bench.store, bench.config(), plan.oid, records, options, env)
    return sorted(outcome.results, key=lambda r: r.ordinal)


def test_a_run_through_the_gateway_is_metered_there(bench, provider):
    model = gateway_bench(bench, provider)
    plan = bench.plan([model])
    (result,) = run(bench, plan)
    terminal = bench.terminal(result)
    assert terminal["class"] == "resolved", terminal["reason"]
    # Identity and cost are the gateway's observations.
    assert terminal["identity"]["observed"] == "stand/client"
    meter = bench.record(terminal["links"]["gateway"])
    assert meter["calls"] == 2 and meter["outcomes"] == {"answered": 2}
    calls = [bench.record(oid) for oid in meter["links"]["calls"]]
    assert [c["stream"] for c in calls] == [False, True]
    assert sum(c["cost"]["micros"] for c in calls) == meter["cost"]["micros"] > 0
    assert terminal["candidate_cost"] == {
        "completeness": "complete",
        "currency": "USD",
        "micros": meter["cost"]["micros"],
    }
    # The envelope claimed a genuine zero: kept beside, the difference named, not fatal.
    metered = terminal["metered"]
    assert metered["claimed"]["cost"]["micros"] == 0
    assert metered["disagreements"] == [
        f"cost: the envelope claims 0 micro-USD (genuine_zero), the gateway metered "
        f"{meter['cost']['micros']} micro-USD (complete)"
    ]
    assert "the envelope disagrees with the gateway" in terminal["reason"]
    # Every call is evidence: the bodies asked and answered.
    request = json.loads(bench.body(calls[0]["links"]["request"]))
    assert request["messages"][0]["content"] == "fix calc, stream=False"
    assert b"data: [DONE]" in bench.body(calls[1]["links"]["response"])
    # The provider got the real key every time; the key is nowhere in the store.
    assert len(provider.requests) == 2
    assert bench.holding(KEY) == []
    assert bench.doctor_errors() == []
    from yyb.evidence.experiment import verify_experiment

    findings, summary = verify_experiment(bench.store, plan.oid)
    assert [str(f) for f in findings if f.level == "error"] == [] and summary["status"] == (
        "complete"
    )


def test_the_candidate_has_a_token_and_never_the_key(bench, provider):
    """A candidate that looks for the key everywhere it can see: its environment, every
    process's, every file it can read (but the host's system folders)."""
    half = len(KEY) // 2  # the behaviour spells the key in two halves: it must not find itself
    hunt = f"""
NEEDLE="{KEY[:half]}""{KEY[half:]}"
python3 "$TOOLS/client.py"
env > "$HOME/env.txt"
for top in /*; do  # all but the host's system folders, which cannot hold it (and are slow)
  case "$top" in /proc|/sys|/usr|/lib|/lib64|/bin|/sbin) continue;; esac
  grep -rlF --binary-files=text "$NEEDLE" "$top" 2>/dev/null | head -5 | sed 's/^/found key in /'
done
echo "scanned"
cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -cF "$NEEDLE" | sed 's/^/environ hits /'
case "$STAND_API_KEY" in yyb-gw-*) echo "given a gateway token of ${{#STAND_API_KEY}}";; esac
envelope succeeded
"""
    model = gateway_bench(bench, provider, behaviour=hunt)
    (result,) = run(bench, bench.plan([model]))
    stdout = bench.linked(result, "stdout").decode()
    assert "scanned" in stdout and "found key in" not in stdout
    assert "environ hits 0" in stdout
    assert f"given a gateway token of {len('yyb-gw-') + 48}" in stdout
    assert bench.holding(KEY) == []


def test_a_candidate_reaches_nothing_but_the_gateway(bench, provider):
    """The scripted provider listens on the host's loopback: from the sandbox, its port (and
    any address) is unreachable; only the gateway's port answers."""
    port = provider.url.rsplit(":", 1)[1]
    probe = f"""
python3 - <<'EOF'
import socket
for host, port in (("127.0.0.1", {port}), ("10.0.2.2", 80), ("8.8.8.8", 53)):
    try:
        socket.create_connection((host, port), timeout=3).close()
        print("reached", host, port)
    except OSError as exc:
        print("refused", host, port)
EOF
python3 "$TOOLS/client.py"
envelope succeeded
"""
    model = gateway_bench(bench, provider, behaviour=probe)
    (result,) = run(bench, bench.plan([model]))
    stdout = bench.linked(result, "stdout").decode()
    assert "reached" not in stdout.replace("reached:", "")
    assert stdout.count("refused") == 3
    assert "status 200 plain" in stdout and "status 200 stream" in stdout
    assert len(provider.requests) == 2  # both through the gateway


def test_calls_past_the_ceiling_are_refused_and_the_terminal_says_so(bench, provider):
    """A price so high one call costs more than the attempt's ceiling: the next calls are
    refused in OpenAI's own shape, and the spend is over the ceiling by that one call only."""
    dear = dict(PRICES, models={SERVED: {"input": 10**13, "output": 10**13, "cached_input": 0}})
    many = f"""
CALLS=4 python3 "$TOOLS/client.py"
{FIX}
envelope succeeded
"""
    model = gateway_bench(bench, provider, prices=dear, behaviour=many)
    plan = bench.plan([model])
    (result,) = run(bench, plan)
    terminal = bench.terminal(result)
    stdout = bench.linked(result, "stdout").decode()
    assert stdout.count("status 200") == 1 and stdout.count("status 429") == 3
    assert "insufficient_quota" in stdout
    meter = bench.record(terminal["links"]["gateway"])
    assert meter["ceiling_reached"] and meter["outcomes"] == {
        "answered": 1,
        "refused_ceiling": 3,
    }
    first = bench.record(meter["links"]["calls"][0])
    ceiling = terminal["spend"]["ceiling_micros"]
    assert terminal["candidate_cost"]["micros"] == first["cost"]["micros"] > ceiling
    assert terminal["spend"]["over_ceiling_micros"] == first["cost"]["micros"] - ceiling
    assert terminal["metered"]["ceiling_reached"] is True
    assert "the gateway refused calls once the attempt's spend ceiling" in terminal["reason"]
    assert len(provider.requests) == 1


def test_an_envelope_that_forges_its_identity_and_cost_does_not_stand(bench, provider):
    forged = f"""
python3 "$TOOLS/client.py"
{FIX}
cat > "$ENVELOPE" <<EOF
{{"schema_version": "juno_execution_envelope.v1", "provider": "frontier", "model": "best-9",
 "status": "succeeded", "usage": {{"input_tokens": 1, "output_tokens": 1}},
 "cost": {{"completeness": "complete", "currency": "USD", "micros": 1}},
 "started_ms": 0, "ended_ms": 0, "elapsed_ms": 0}}
EOF
"""
    model = gateway_bench(bench, provider, behaviour=forged)
    (result,) = run(bench, bench.plan([model]))
    terminal = bench.terminal(result)
    meter = bench.record(terminal["links"]["gateway"])
    assert terminal["class"] == "resolved", terminal["reason"]
    assert terminal["identity"]["observed"] == "stand/client"
    assert terminal["candidate_cost"]["micros"] == meter["cost"]["micros"] != 1
    metered = terminal["metered"]
    assert metered["claimed"] == {
        "observed": "frontier/best-9",
        "cost": {"completeness": "complete", "currency": "USD", "micros": 1},
    }
    assert [d.split(":")[0] for d in metered["disagreements"]] == ["identity", "cost"]
    assert (
        "the envelope claims frontier/best-9, the gateway observed stand/client"
        in (terminal["reason"])
    )


def test_a_candidate_that_calls_no_model_has_no_observed_identity(bench, provider):
    quiet = f"""
{FIX}
envelope succeeded
"""
    model = gateway_bench(bench, provider, behaviour=quiet)
    (result,) = run(bench, bench.plan([model]))
    terminal = bench.terminal(result)
    assert terminal["class"] == "harness_failure"
    assert "no model call went through the gateway" in terminal["reason"]
    assert terminal["identity"]["observed"] is None
    assert terminal["candidate_cost"]["completeness"] == "genuine_zero"


def test_an_unset_credential_is_refused_before_any_dispatch(bench, provider):
    from yyb.errors import UsageError

    model = gateway_bench(bench, provider)
    plan = bench.plan([model])
    env = {k: v for k, v in os.environ.items() if k != ENVIRON_KEY}
    chosen = {oid: plan.records[oid] for oid in plan.attempt_oids}
    with pytest.raises(UsageError, match=f"gateway cannot start.*{ENVIRON_KEY}"):
        runner.run(
            bench.store,
            bench.config(),
            plan.oid,
            {plan.oid: plan.experiment, **chosen},
            runner.RunOptions(),
            env,
        )
    assert bench.run_refs() == []


def test_a_token_carried_into_another_sandbox_is_refused(bench, provider, monkeypatch):
    """Two attempts at once, each shown the other's live token (as if it had leaked): each
    call with the other's is refused (401), each with its own is answered, and nothing is
    metered to the wrong attempt."""
    from yyb.attempts import metering

    tokens: list[str] = []
    admit = metering.admit

    def admitted(*args, **kwargs):
        admission = admit(*args, **kwargs)
        tokens.append(admission.token)
        if len(tokens) == 2:  # both live: show both to both sandboxes
            write(bench.tools / "tokens", "\n".join(tokens) + "\n")
        return admission

    monkeypatch.setattr(metering, "admit", admitted)
    swap = f"""
i=0; while [ ! -s "$TOOLS/tokens" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done
grep -v "$STAND_API_KEY" "$TOOLS/tokens" > "$HOME/theirs"
echo "holding $(grep -c '^yyb-gw-' "$HOME/theirs") other token"
CALLS=1 python3 "$TOOLS/client.py" | sed 's/^/own: /'
CALLS=1 TOKEN_FILE="$HOME/theirs" python3 "$TOOLS/client.py" | sed 's/^/theirs: /'
{FIX}
envelope succeeded
"""
    model = gateway_bench(bench, provider, behaviour=swap)
    results = run(bench, bench.plan([model], attempts=2), jobs=2)
    assert len(tokens) == 2
    for result in results:
        stdout = bench.linked(result, "stdout").decode()
        assert "holding 1 other token" in stdout, stdout
        assert "own: status 200" in stdout and "theirs: status 401" in stdout, stdout
        meter = bench.record(bench.terminal(result)["links"]["gateway"])
        assert meter["attempt"] == result.attempt and meter["outcomes"] == {"answered": 1}
    assert len(provider.requests) == 2


def test_a_controller_killed_mid_attempt_leaves_its_calls_kept(bench, provider, monkeypatch):
    """Each call is kept as it ends (the attempt's ``calls`` ref): SIGKILL the controller
    while its candidate is still at work, and the rerun closes the attempt, never runs it
    again, and links the calls it made and what they cost."""
    import shutil
    import subprocess

    from tests.attempts.conftest import wait_for
    from yyb.evidence import names

    slow = f"""
CALLS=2 python3 "$TOOLS/client.py"
sleep 120
{FIX}
envelope succeeded
"""
    model = gateway_bench(bench, provider, behaviour=slow)
    plan_file = bench.plan_file([model])
    plan_oid = json.loads(open(plan_file).read())["plan"]
    proc = subprocess.Popen(
        bench.subprocess_argv("run", "--plan", plan_file),
        env={**os.environ, ENVIRON_KEY: KEY},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def kept() -> dict | None:
        for name in bench.store.refs.names():
            if name.startswith(f"refs/runs/{plan_oid}/") and name.endswith("/calls"):
                meter = bench.record(bench.store.refs.read(name))
                return meter if meter["calls"] == 2 else None
        return None

    try:
        assert wait_for(kept, timeout=60), "the calls were never kept"
        roots = bench.attempt_roots()
        proc.kill()
        proc.wait(timeout=30)
        assert wait_for(lambda: bench.alive() == [], timeout=20), bench.alive()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)
    before = kept()
    assert bench.run_refs() and not [n for n in bench.run_refs() if n.endswith("/terminal")]
    monkeypatch.setenv(ENVIRON_KEY, KEY)
    again = bench.yyb("run", "--plan", plan_file)
    assert again.exit_code in (0, 1), again.stderr
    (terminal_ref,) = [n for n in bench.run_refs() if n.endswith("/terminal")]
    terminal = bench.record(bench.store.refs.read(terminal_ref))
    assert terminal["class"] == "harness_failure"
    assert "the gateway kept the 2 calls it made" in terminal["reason"]
    meter = bench.record(terminal["links"]["gateway"])
    assert meter == before and meter["outcomes"] == {"answered": 2}
    assert terminal["candidate_cost"]["micros"] == meter["cost"]["micros"] > 0
    assert len(provider.requests) == 2  # never dispatched again
    attempt = terminal["attempt"]
    assert bench.store.refs.read(names.calls(plan_oid, attempt)) == terminal["links"]["gateway"]
    assert bench.doctor_errors() == []
    from yyb.evidence.experiment import verify_experiment

    findings, _ = verify_experiment(bench.store, plan_oid)
    assert [str(f) for f in findings if f.level == "error"] == []


@pytest.mark.parametrize("forgery", ["cheaper", "meter", "calls-ref"])
def test_doctor_names_a_forged_cost_meter_or_calls_ref(bench, provider, forgery):
    """A forger with the store: a terminal (and its execution) claiming less than the meter,
    a meter whose total is not its calls', or the calls ref moved to another meter."""
    from tests.doctor.forge import forge, plant
    from yyb.evidence import names
    from yyb.evidence.experiment import verify_experiment

    model = gateway_bench(bench, provider)
    plan = bench.plan([model])
    (result,) = run(bench, plan)
    store, terminal = bench.store, bench.terminal(result)
    execution_oid = terminal["links"]["execution"]
    meter_oid = terminal["links"]["gateway"]
    refs = {}
    if forgery == "cheaper":
        cost = dict(terminal["candidate_cost"], micros=1)
        execution = forge(store, execution_oid, candidate_cost=cost)
        refs[names.attempt(plan.oid, result.attempt, "execution")] = execution
        forged = forge(store, result.terminal, candidate_cost=cost, links={"execution": execution})
        expected = "wrong-cost"
    elif forgery == "meter":
        meter = bench.record(meter_oid)
        cheap = forge(store, meter_oid, cost=dict(meter["cost"], micros=1))
        execution = forge(store, execution_oid, links={"gateway": cheap})
        refs[names.attempt(plan.oid, result.attempt, "execution")] = execution
        forged = forge(store, result.terminal, links={"execution": execution, "gateway": cheap})
        refs[names.calls(plan.oid, result.attempt)] = cheap
        expected = "wrong-cost"
    else:
        other = forge(store, meter_oid, calls=0, links={"calls": []})
        refs[names.calls(plan.oid, result.attempt)] = other
        forged = result.terminal
        expected = "wrong-link"
    refs[names.attempt(plan.oid, result.attempt, "terminal")] = forged
    for name, oid in refs.items():
        plant(store, name, oid)
    findings, _ = verify_experiment(store, plan.oid)
    codes = {f.code for f in findings if f.level == "error"}
    assert expected in codes, [str(f) for f in findings]


def replan(bench, model: str, max_usd: str = "3"):
    """A second plan of the same case and model (another budget: another plan)."""
    from tests.conftest import authorize
    from yyb.evidence import environment
    from yyb.plans import build

    plan = build.task_plan(
        bench.config(),
        [str(bench.task_path)],
        model,
        1,
        max_usd,
        environment.resolver(lambda: bench.store),
    )
    build.write(bench.store, plan)
    authorize(bench.store, plan.oid, plan.experiment)
    return plan


def test_a_replayed_run_reproduces_its_terminal_spending_nothing(bench, provider):
    model = gateway_bench(bench, provider)
    live = bench.plan([model])
    (first,) = run(bench, live)
    again = replan(bench, model)
    env = {k: v for k, v in os.environ.items() if k != ENVIRON_KEY}  # no key is read
    chosen = {oid: again.records[oid] for oid in again.attempt_oids}
    outcome = runner.run(
        bench.store,
        bench.config(),
        again.oid,
        {again.oid: again.experiment, **chosen},
        runner.RunOptions(replay=live.oid),
        env,
    )
    (second,) = outcome.results
    one, two = bench.terminal(first), bench.terminal(second)
    assert (two["class"], two["identity"]) == (one["class"], one["identity"])
    assert two["candidate_cost"] == {"completeness": "genuine_zero", "currency": "USD", "micros": 0}
    meter = bench.record(two["links"]["gateway"])
    assert meter["outcomes"] == {"answered": 2} and meter["unanswered"] == []
    sources = [bench.record(c)["source"] for c in meter["links"]["calls"]]
    assert sources == ["replay", "replay"]
    assert len(provider.requests) == 2  # the live run's, and nothing since


def test_a_replay_the_candidate_leaves_fails_closed_and_is_named(bench, provider):
    """The candidate asks something the recorded run never asked: refused, and the attempt
    is a harness failure naming the request's hash."""
    model = gateway_bench(bench, provider)
    live = bench.plan([model])
    run(bench, live)
    write(bench.tools / "client.py", CLIENT.replace("fix calc", "break calc"))
    again = replan(bench, model)
    (second,) = run(bench, again, runner_options={"replay": live.oid})
    terminal = bench.terminal(second)
    assert terminal["class"] == "harness_failure"
    assert "replay had no recorded answer for 2 of its calls" in terminal["reason"]
    meter = bench.record(terminal["links"]["gateway"])
    assert meter["outcomes"] == {"unanswered": 2} and len(meter["unanswered"]) == 2
    assert meter["unanswered"][0] in terminal["reason"]
    assert len(provider.requests) == 2


def test_replay_of_a_plan_without_the_gateway_is_refused_in_one_line(bench):
    model = bench.behaviour("plain", "envelope succeeded\n")
    plan_file = bench.plan_file([model])
    done = bench.yyb("run", "--plan", plan_file, "--replay", plan_file)
    assert done.exit_code == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "is not gateway" in done.stderr
    assert bench.run_refs() == []


def test_the_attempt_page_shows_the_calls_as_a_conversation(bench, provider):
    from yyb.view import attempt as page

    model = gateway_bench(bench, provider)
    hostile = CLIENT.replace("fix calc", "<script>alert(1)</script> fix calc")
    write(bench.tools / "client.py", hostile)
    plan = bench.plan([model])
    (result,) = run(bench, plan)
    _, html = page.page(bench.store, [], plan.oid, result.attempt)
    assert "<h2>Model calls</h2>" in html
    assert "2 answered" in html and "chat_completions (streamed)" in html
    assert html.count("I will fix add.") == 2  # each answer, plain and streamed
    assert "&lt;script&gt;alert(1)&lt;/script&gt; fix calc, stream=False" in html
    assert "<script>alert" not in html
    meter = bench.record(bench.terminal(result)["links"]["gateway"])
    assert meter["usage"]["input_tokens"] > 0 and f"{meter['usage']['input_tokens']:,} in" in html


def test_the_report_totals_the_metered_tokens_and_cost(bench, provider, monkeypatch):
    model = gateway_bench(bench, provider)
    plan_file = bench.plan_file([model], attempts=2)
    monkeypatch.setenv(ENVIRON_KEY, KEY)
    ran = bench.yyb("run", "--plan", plan_file)
    assert ran.exit_code == 0, ran.stderr
    report = bench.yyb("report", "--plan", plan_file, "--format", "json", "--no-layer")
    assert report.exit_code == 0, report.stderr
    figures = json.loads(report.stdout)
    (entry,) = figures["models"]
    meters = [
        bench.record(bench.store.refs.read(name))
        for name in bench.store.refs.names()
        if name.endswith("/calls")
    ]
    assert len(meters) == 2
    tokens = entry["tokens"]
    assert tokens["metered_attempts"] == 2
    for name in ("input_tokens", "output_tokens"):
        assert tokens[name] == sum(m["usage"][name] for m in meters) > 0
    assert entry["cost"]["candidate"]["micros"] == sum(m["cost"]["micros"] for m in meters)
    assert entry["cases"][0]["tokens"] == tokens
    shown = bench.yyb("report", "--plan", plan_file, "--no-layer")
    assert "tokens metered by the gateway" in shown.stdout
    assert f"{tokens['input_tokens']:,} in" in shown.stdout
    # Each attempt's row carries its own metered tokens and cost, in the JSON and the exports,
    # and yyb.api reads back every call the meters link.
    by_attempt = {m["attempt"]: m for m in meters}
    for row in figures["attempts"]:
        meter = by_attempt[row["attempt"]]
        assert row["tokens"] == {k: meter["usage"][k] for k in row["tokens"]}
        assert row["candidate_cost"]["micros"] == meter["cost"]["micros"]
    exported = bench.yyb("report", "--plan", plan_file, "--format", "csv", "--no-layer")
    table = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert sum(int(r["output_tokens"]) for r in table) == tokens["output_tokens"]
    from yyb import api

    kept = api.calls(plan_file, store=bench.store_path)
    assert len(kept) == sum(m["calls"] for m in meters) > 0
    assert sum(c.input_tokens for c in kept) == tokens["input_tokens"]
    assert {c.attempt for c in kept} == set(by_attempt)


OPENAI_AGENT = r"""
import os, sys
sys.path.insert(0, os.environ["SDK_SITE"])
import openai
client = openai.OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY, as the run set them
ask = [{"role": "user", "content": "Fix calc."}]
plain = client.chat.completions.create(model="client", messages=ask)
print("plain", plain.model, plain.usage.total_tokens, plain.choices[0].message.content)
stream = client.chat.completions.create(model="client", messages=ask, stream=True)
print("stream", "".join(c.choices[0].delta.content or "" for c in stream if c.choices))
print("responses", client.responses.create(model="client", input="Fix calc.").output_text)
"""
ANTHROPIC_AGENT = r"""
import os, sys
sys.path.insert(0, os.environ["SDK_SITE"])
import anthropic
client = anthropic.Anthropic()  # ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY, as the run set them
ask = [{"role": "user", "content": "Fix calc."}]
plain = client.messages.create(model="client", max_tokens=256, messages=ask)
print("plain", plain.model, plain.usage.output_tokens, plain.content[0].text)
with client.messages.stream(model="client", max_tokens=256, messages=ask) as stream:
    print("stream", stream.get_final_text())
"""


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_the_official_sdks_run_in_the_sandbox_through_the_gateway(bench, provider, sdk):
    """A stand-in agent built on the official OpenAI or Anthropic Python SDK, configured by
    nothing but the variables the run sets, streaming and not."""
    from pathlib import Path

    module = pytest.importorskip(sdk)
    site = str(Path(module.__file__).parents[1])  # the folder it was installed in
    credential = "OPENAI_API_KEY" if sdk == "openai" else "ANTHROPIC_API_KEY"
    providers = {"stand": {"base_url": provider.url, "credential": credential, "apis": [sdk]}}
    data = bench.through_gateway(providers, PRICES, env={"SDK_SITE": site})
    data["tool_policy"]["read_only_paths"].append(site)
    bench.config_path.write_text(json.dumps(data, indent=2))
    agent = OPENAI_AGENT if sdk == "openai" else ANTHROPIC_AGENT
    write(bench.tools / "agent.py", agent)
    model = bench.behaviour(
        "client", f'/usr/bin/python3 "$TOOLS/agent.py" 2>&1\n{FIX}\nenvelope succeeded\n'
    )
    plan = bench.plan([model])
    (result,) = run(bench, plan, environ={credential: KEY})
    stdout = bench.linked(result, "stdout").decode()
    terminal = bench.terminal(result)
    assert "plain client" in stdout and "stream I will fix add." in stdout, stdout
    assert terminal["class"] == "resolved", (terminal["reason"], stdout)
    assert terminal["identity"]["observed"] == "stand/client"
    meter = bench.record(terminal["links"]["gateway"])
    expected = 3 if sdk == "openai" else 2
    assert meter["outcomes"] == {"answered": expected}, meter
    streamed = [bench.record(c)["stream"] for c in meter["links"]["calls"]]
    assert streamed.count(True) == 1
    assert terminal["candidate_cost"]["completeness"] == "complete"
    assert bench.holding(KEY) == []


FLOOD = r"""
import json, os, threading, urllib.error, urllib.request
from collections import Counter
base, key = os.environ["OPENAI_BASE_URL"], os.environ["STAND_API_KEY"]
body = json.dumps({"model": "flood", "messages": [{"role": "user", "content": "x" * 2_000_000}]})
seen = Counter()
def call():
    request = urllib.request.Request(base + "/chat/completions", body.encode(),
        {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            answer.read()
            seen[answer.status] += 1
    except urllib.error.HTTPError as exc:
        seen[exc.code] += 1
    except OSError:
        seen["cut"] += 1
threads = [threading.Thread(target=call) for _ in range(48)]
for t in threads: t.start()
for t in threads: t.join()
print("flood", dict(seen))
"""


def test_a_flooding_candidate_is_refused_past_its_share_and_the_other_is_served(bench, provider):
    """Two attempts at once: one sends 48 calls of 2 MB at once, the other its two calls.
    The flood is held to its token's concurrency (the rest refused, 429), every body it sent
    is kept whole or cut at the documented bound, and the other attempt is served in full."""
    gateway_bench(bench, provider)
    write(bench.tools / "flood.py", FLOOD)
    flooder = bench.behaviour("flood", 'python3 "$TOOLS/flood.py"\nenvelope succeeded\n')
    plan = bench.plan(["stand/client", flooder])
    results = run(bench, plan, jobs=2)
    by_model = {r.model: r for r in results}
    calm = bench.terminal(by_model["stand/client"])
    assert calm["class"] == "resolved", calm["reason"]
    assert bench.record(calm["links"]["gateway"])["outcomes"] == {"answered": 2}
    flood = bench.terminal(by_model[flooder])
    stdout = bench.linked(by_model[flooder], "stdout").decode()
    meter = bench.record(flood["links"]["gateway"])
    assert meter["calls"] == 48, (meter["outcomes"], stdout)
    assert meter["outcomes"].get("refused_busy", 0) >= 48 - 8 * 3, meter["outcomes"]
    assert "429" in stdout
    for oid in meter["links"]["calls"]:
        call = bench.record(oid)
        assert call["request"]["kept_bytes"] <= 4 * 1024 * 1024


def judged_bench(bench, provider) -> str:
    """The gateway bench with an LLM judge (profile ``judge``, model stand/client) whose
    harness calls its model through the gateway, then answers pass."""
    from tests.grading.conftest import JUDGE_HEAD

    model = gateway_bench(bench, provider)
    data = json.loads(bench.config_path.read_text())
    script = JUDGE_HEAD + (
        'CALLS=1 python3 "$TOOLS/client.py" >&2\n'
        "envelope\n"
        """echo '{"verdict": "pass", "reason": "it adds"}'\n"""
    )
    data["harnesses"]["judge-gw"] = {
        "kind": "command",
        "argv": ["/bin/sh", "-c", f'TOOLS="{bench.tools}"\n' + script, "judge", "{model}",
                 "{workspace}", "{envelope}", "{prompt_file}"],
    }  # fmt: skip
    data["evaluators"]["judge"] = {
        "kind": "llm_judge", "version": "1", "harness": "judge-gw", "model": "stand/client",
        "prompt": "Judge it.", "rubric": "Does calc add?", "evidence": ["patch"],
        "identity": "blinded", "parsing": "strict_json", "timeout_ms": 30_000,
        "required": True, "purpose": "quality",
    }  # fmt: skip
    data["default_evaluators"] = ["tests", "judge"]
    bench.config_path.write_text(json.dumps(data, indent=2))
    return model


def test_a_judge_of_a_gateway_plan_reaches_its_model_through_the_gateway(bench, provider):
    """The judge has loopback only and a token; its meter stands for its cost."""
    model = judged_bench(bench, provider)
    plan = bench.plan([model])
    (result,) = run(bench, plan)
    terminal = bench.terminal(result)
    assert terminal["class"] == "resolved", terminal["reason"]
    receipts = [bench.record(oid) for oid in terminal["links"]["evaluations"]]
    (judged,) = [r for r in receipts if r["profile"] == "judge"]
    assert judged["verdict"] == "pass"
    (meter_oid,) = judged["links"]["gateway"]
    meter = bench.record(meter_oid)
    assert meter["model"] == "stand/client" and meter["outcomes"] == {"answered": 1}
    assert judged["judge_cost"]["micros"] == meter["cost"]["micros"] != 1500
    assert len(provider.requests) == 3  # the candidate's two, the judge's one
    assert bench.holding(KEY) == []


def test_a_judge_model_without_a_provider_is_refused_at_plan_time(bench, provider):
    from yyb.errors import UsageError

    judged_bench(bench, provider)
    data = json.loads(bench.config_path.read_text())
    data["evaluators"]["judge"]["model"] = "elsewhere/j1"
    bench.config_path.write_text(json.dumps(data, indent=2))
    with pytest.raises(UsageError, match="elsewhere/j1: the gateway has no provider"):
        bench.plan(["stand/client"])


def test_a_replay_answers_the_judges_too(bench, provider):
    model = judged_bench(bench, provider)
    live = bench.plan([model])
    run(bench, live)
    (second,) = run(bench, replan(bench, model), runner_options={"replay": live.oid})
    terminal = bench.terminal(second)
    assert terminal["class"] == "resolved", terminal["reason"]
    receipts = [bench.record(oid) for oid in terminal["links"]["evaluations"]]
    (judged,) = [r for r in receipts if r["profile"] == "judge"]
    meter = bench.record(judged["links"]["gateway"][0])
    assert [bench.record(c)["source"] for c in meter["links"]["calls"]] == ["replay"]
    assert len(provider.requests) == 3


def test_rejudge_of_a_gateway_plan_starts_a_gateway_for_its_judges(bench, provider, monkeypatch):
    model = judged_bench(bench, provider)
    plan_file = bench.plan_file([model])
    monkeypatch.setenv(ENVIRON_KEY, KEY)
    assert bench.yyb("run", "--plan", plan_file).exit_code == 0
    again = bench.yyb("rejudge", "--plan", plan_file, "--profile", "judge")
    assert again.exit_code == 0, again.stderr
    (name,) = [n for n in bench.store.refs.names() if n.endswith("/evaluations/judge")]
    receipt = bench.record(bench.store.refs.read(name))
    assert receipt["generation"] == 2 and receipt["verdict"] == "pass"
    meter = bench.record(receipt["links"]["gateway"][0])
    assert meter["outcomes"] == {"answered": 1}
    assert len(provider.requests) == 4
    monkeypatch.delenv(ENVIRON_KEY)
    refused = bench.yyb("rejudge", "--plan", plan_file, "--profile", "judge")
    assert refused.exit_code == 2 and ENVIRON_KEY in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_doctor_names_a_judge_cost_that_is_not_its_meters(bench, provider):
    from tests.doctor.forge import forge, plant
    from yyb.evidence import names
    from yyb.evidence.experiment import verify_experiment

    model = judged_bench(bench, provider)
    plan = bench.plan([model])
    (result,) = run(bench, plan)
    findings, _ = verify_experiment(bench.store, plan.oid)
    assert [str(f) for f in findings if f.level == "error"] == []
    ref = names.evaluation(plan.oid, result.attempt, "judge")
    receipt_oid = bench.store.refs.read(ref)
    receipt = bench.record(receipt_oid)
    cheaper = forge(bench.store, receipt_oid, judge_cost=dict(receipt["judge_cost"], micros=1))
    plant(bench.store, ref, cheaper)
    findings, _ = verify_experiment(bench.store, plan.oid)
    assert "wrong-cost" in {f.code for f in findings if f.level == "error"}


def test_every_attempt_socket_path_fits_a_unix_socket(tmp_path):
    """However long the run's folder, an attempt's socket path fits in 107 bytes: the socket
    folder is in the run's folder while it leaves room, else in /tmp."""
    import shutil

    from yyb.attempts import metering

    base = tmp_path / "r"
    for length in range(len(str(base)) + 2, 140, 7):
        run_folder = str(base) + "x" * (length - len(str(base)))
        os.makedirs(run_folder, exist_ok=True)
        folder = metering.socket_folder(run_folder)
        try:
            socket = os.path.join(folder, "0123456789abcdef.sock")
            assert len(socket.encode()) <= 107, (length, socket)
            assert folder.startswith(run_folder if length + 38 <= 107 else "/tmp/")
        finally:
            shutil.rmtree(folder)
