"""Isolation: what a candidate can see, read, write and leak into the retained evidence.

The leak tests run on a bench outside the system temp folder (``outside_bench``), so that the
registry, the source repository and the controller's home are hidden by their own masks and
not merely by the mask over the whole temp folder.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import uuid

import pytest

from tests.attempts.conftest import grader
from yyb.harness.environment import SYSTEM_PATH
from yyb.store.repo import Store

SECRET = "sekrit-" + uuid.uuid4().hex  # lowercase, so lowercasing cannot hide a leak
HIDDEN = "hidden-" + uuid.uuid4().hex


@pytest.fixture
def secrets(monkeypatch):
    """A secret the harness names (passed) and one it does not (never passed)."""
    monkeypatch.setenv("YYB_T_SECRET", SECRET)
    monkeypatch.setenv("YYB_T_HIDDEN", HIDDEN)
    return {"YYB_T_SECRET": SECRET, "YYB_T_HIDDEN": HIDDEN}


def test_environment_starts_empty_with_private_roots(bench, secrets):
    bench.configure(secrets=["YYB_T_SECRET"])
    model = bench.behaviour(
        "envdump",
        """
echo "== environment"
tr '\\0' '\\n' < /proc/$$/environ
echo "== end"
echo "secret-sha256 $(printf %s "$YYB_T_SECRET" | sha256sum | cut -d' ' -f1)"
echo "interfaces $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' ')"
echo "workspace $WORKSPACE"
envelope succeeded
""",
    )
    _, [result] = bench.run([model])
    assert result.terminal_class == "grader_failure", result.reason
    lines = bench.linked(result, "stdout").decode().splitlines()
    dumped = lines[lines.index("== environment") + 1 : lines.index("== end")]
    env = dict(line.split("=", 1) for line in dumped)
    workspace = next(line.split(" ", 1)[1] for line in lines if line.startswith("workspace "))
    # bubblewrap sets PWD (to the workspace); git's NOSYSTEM switch is harmless.
    assert env.pop("PWD", workspace) == workspace
    env.pop("GIT_CONFIG_NOSYSTEM", None)
    assert set(env) == {
        "PATH",
        "HOME",
        "TMPDIR",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "LANG",
        "TZ",
        "YYB_MAX_COST_MICROS",
        "YYB_ENVELOPE_FD",
        "YYB_T_SECRET",
    }
    assert env["LANG"] == "C.UTF-8" and env["TZ"] == "UTC"
    assert env["YYB_ENVELOPE_FD"].isdigit()
    # The attempt's spend ceiling, as planned, for the harness to stop itself at.
    attempt = bench.record(result.attempt)
    assert env["YYB_MAX_COST_MICROS"] == str(attempt["budget"]["ceiling_micros"])
    assert env["YYB_T_SECRET"] == "[REDACTED:YYB_T_SECRET]"  # passed, and redacted in stdout
    digest = hashlib.sha256(SECRET.encode()).hexdigest()
    assert f"secret-sha256 {digest}" in lines  # the candidate got the real value
    path = env["PATH"].split(":")
    assert [p for p in path if p in SYSTEM_PATH] == [p for p in SYSTEM_PATH if os.path.isdir(p)]
    attempt_root = os.path.dirname(workspace)
    # Nothing of the controller's: the system folders, the tools, last the envelope helper's.
    assert path[-1] == os.path.join(attempt_root, "control", "bin")
    assert set(path[:-1]) - {str(bench.tools)} <= set(SYSTEM_PATH)
    for name in (
        "HOME",
        "TMPDIR",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
    ):
        value = env[name]
        assert value.startswith(attempt_root + "/"), (name, value)
        assert not value.startswith(workspace), (name, value)
        assert value != os.path.expanduser("~")
    interfaces = next(line for line in lines if line.startswith("interfaces "))
    assert interfaces.split()[1:] == ["lo"]  # network denied: a namespace with loopback only
    receipt = bench.record(bench.terminal(result)["links"]["receipt"])
    assert receipt["sandbox"]["network"] == "denied"
    assert receipt["environment"]["secrets"] == ["YYB_T_SECRET"]
    assert set(receipt["environment"]["variables"]) - {"GIT_CONFIG_NOSYSTEM"} == set(env)
    assert bench.holding(SECRET) == [] and bench.holding(HIDDEN) == []
    assert bench.doctor_errors() == []


def _path_of(bench) -> list[str]:
    model = bench.behaviour("pathdump", 'echo "$PATH"\nenvelope succeeded\n')
    _, [result] = bench.run([model])
    return bench.linked(result, "stdout").decode().strip().split(":")


def test_tool_policy_folder_is_on_path(outside_bench):
    path = _path_of(outside_bench)
    assert path[-1].endswith("/control/bin")  # the envelope helper's folder, last
    assert path[-2] == str(outside_bench.tools)
    assert path[:-2] == [p for p in SYSTEM_PATH if os.path.isdir(p)]


def test_tool_policy_folder_under_the_temp_folder_is_on_path(bench):
    assert str(bench.tools) in _path_of(bench)


def test_missing_named_secret_fails_before_dispatch(bench, monkeypatch):
    from yyb.errors import UsageError

    monkeypatch.delenv("YYB_T_SECRET", raising=False)
    bench.configure(secrets=["YYB_T_SECRET"])
    plan = bench.plan(["stand/idler"])
    with pytest.raises(UsageError, match="YYB_T_SECRET"):
        bench.context(plan)
    assert bench.run_refs() == []


def test_named_secrets_are_redacted_from_stdout_and_stderr(bench, secrets, monkeypatch):
    inner = SECRET[:20]  # a second secret that is part of the first
    monkeypatch.setenv("YYB_T_INNER", inner)
    bench.configure(secrets=["YYB_T_SECRET", "YYB_T_INNER"])
    model = bench.behaviour(
        "blabber",
        """
echo "token=$YYB_T_SECRET twice:$YYB_T_SECRET$YYB_T_SECRET inner=$YYB_T_INNER"
echo "on stderr: $YYB_T_SECRET" >&2
env | grep YYB_ >&2
envelope succeeded
""",
    )
    _, [result] = bench.run([model])
    assert result.terminal_class == "grader_failure"
    stdout = bench.linked(result, "stdout").decode()
    stderr = bench.linked(result, "stderr").decode()
    assert stdout == (
        "token=[REDACTED:YYB_T_SECRET] twice:[REDACTED:YYB_T_SECRET]"
        "[REDACTED:YYB_T_SECRET] inner=[REDACTED:YYB_T_INNER]\n"
    )
    assert "on stderr: [REDACTED:YYB_T_SECRET]\n" in stderr
    assert "YYB_T_HIDDEN" not in stderr
    assert bench.holding(SECRET) == [] and bench.holding(inner) == []
    assert bench.holding(HIDDEN) == []


@pytest.mark.parametrize(
    "args",
    [
        'stand "$NAME" "\\"session_id\\": \\"$YYB_T_SECRET\\""',
        'stand "$YYB_T_SECRET"',
        '"$YYB_T_SECRET"',
    ],
    ids=["session_id", "model", "provider"],
)
def test_named_secret_never_retained_from_the_envelope(bench, secrets, args):
    bench.configure(secrets=["YYB_T_SECRET"])
    model = bench.behaviour("envelope-leak", f"envelope succeeded {args}\n")
    _, [result] = bench.run([model])
    assert bench.holding(SECRET) == [], [bench.record(o) for o in bench.holding(SECRET)]


LEAKER = """
sleep 0.5  # the sibling attempt is running by now
{{
echo "== registry"
ls -A "{store}"
cat "{store}/format" "{registry_object}"
echo "== source"
ls -A "{repo}"
cat "{repo}/FUTURE.md" "{repo}/calc.sh" "{repo}/.git/HEAD"
git -C "{repo}" log --all --oneline
git fetch -q "{repo}" main
git fetch -q "file://{repo}" feature
echo "== config"
cat "{config}"
echo "== home"
ls -A "{home}"
cat "{home}/.ssh/id_rsa"
echo "== siblings"
echo "tmp: $(ls -A {tmp} | tr '\\n' ' ')"
for f in {tmp}/yyb-attempt-*/workspace/sibling.txt \\
    {tmp}/yyb-run-*/yyb-attempt-*/workspace/sibling.txt; do
  cat "$f"
done
echo "== history"
git log --all --oneline
git cat-file --batch-all-objects --batch
git fsck --lost-found
git reflog
git branch -a
git tag
git remote -v
echo "== environment"
echo "hidden=${{YYB_T_HIDDEN:-unset}}"
tr '\\0' '\\n' < /proc/1/environ | grep -c HIDDEN
}} > leak.txt 2>&1
cat leak.txt
echo "== writes"
for target in "{repo}/PWNED" "{repo}/.git/hooks/pre-commit" "{store}/PWNED" "{home}/PWNED" \\
    "{tools}/PWNED" "{outside}/PWNED" "/var/tmp/PWNED-$MARK" "/PWNED-$MARK" "/usr/PWNED-$MARK"
do
  if (echo pwned > "$target") 2>/dev/null
  then echo "wrote $target"
  else echo "refused $target"
  fi
done
echo "secret=$YYB_T_SECRET"
echo "secret=$YYB_T_SECRET" >&2
commit_all "what I could read"
envelope succeeded
"""

SIBLING = """
marker="SIBLING-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \\n')"
echo "$marker" > sibling.txt
commit_all
sleep 2
envelope succeeded
"""


def _listing_files(bench, terminal: dict) -> dict[str, bytes]:
    post = bench.record(terminal["links"]["manifest"])
    listing = bench.record(post["links"]["listing"])
    files = listing["links"]["files"]
    return {path: bench.body(files[i]) for path, _, i in listing["entries"]}


def test_leaker_reads_and_writes_nothing_it_must_not(outside_bench, secrets, monkeypatch):
    bench = outside_bench
    home = bench.root / "home"
    (home / ".ssh").mkdir(parents=True)
    home_marker = f"CONTROLLER-HOME-{uuid.uuid4().hex[:12]}"
    (home / ".ssh" / "id_rsa").write_text(home_marker + "\n")
    monkeypatch.setenv("HOME", str(home))
    registry_marker = f"REGISTRY-{uuid.uuid4().hex[:12]}"
    registry_blob = bench.store.objects.put("blob", registry_marker.encode())
    bench.configure(secrets=["YYB_T_SECRET"])
    targets = {
        "store": bench.store_path,
        "repo": str(bench.repo),
        "home": str(home),
        "tools": str(bench.tools),
        "outside": str(bench.root),
        "config": str(bench.config_path),
        "tmp": tempfile.gettempdir(),
        "registry_object": bench.store.objects.path(registry_blob),
    }
    leaker = bench.behaviour("leaker", LEAKER.format(**targets))
    sibling = bench.behaviour("sibling", SIBLING)

    _, (leaked, other) = bench.run([leaker, sibling], jobs=2)

    assert bench.alive() == []
    assert (leaked.terminal_class, other.terminal_class) == ("grader_failure", "grader_failure")
    t_leak, t_other = bench.terminal(leaked), bench.terminal(other)
    assert t_leak["runtime"]["started_ms"] < t_other["runtime"]["ended_ms"]
    assert t_other["runtime"]["started_ms"] < t_leak["runtime"]["ended_ms"]  # they overlapped
    stdout = bench.linked(leaked, "stdout").decode(errors="replace")
    for section in (
        "== registry",
        "== source",
        "== home",
        "== siblings",
        "== history",
        "== writes",
    ):
        assert section in stdout  # every attempt was made
    assert "hidden=unset" in stdout
    tmp_line = next(line for line in stdout.splitlines() if line.startswith("tmp: "))
    # A private /tmp: nothing but the way to its own folders (its run folder).
    assert [n for n in tmp_line.split()[1:] if not n.startswith("yyb-run-")] == []
    assert "secret=[REDACTED:YYB_T_SECRET]" in stdout
    assert "secret=[REDACTED:YYB_T_SECRET]" in bench.linked(leaked, "stderr").decode()

    # Nothing the candidate must not see reached the evidence, by any route.
    forbidden = {**bench.markers, "home": home_marker, "secret": SECRET, "hidden": HIDDEN}
    for what, text in forbidden.items():
        assert bench.holding(text) == [], f"{what} leaked into the store"
    assert bench.holding(registry_marker, skip={registry_blob}) == [], "registry leaked"
    sibling_marker = _listing_files(bench, t_other)["sibling.txt"].strip()
    assert sibling_marker.startswith(b"SIBLING-")
    leaker_evidence = [bench.linked(leaked, role) for role in ("stdout", "stderr", "patch")]
    leaker_evidence += list(_listing_files(bench, t_leak).values())
    assert all(sibling_marker not in data for data in leaker_evidence), "sibling leaked"
    assert "leak.txt" in _listing_files(bench, t_leak)

    # Every write outside the workspace failed or landed in a throwaway mask.
    for target in (
        "{repo}/PWNED",
        "{store}/PWNED",
        "{home}/PWNED",
        "{tools}/PWNED",
        "{outside}/PWNED",
    ):
        assert not os.path.exists(target.format(**targets)), target
    for target in ("/var/tmp/PWNED-", "/PWNED-", "/usr/PWNED-"):
        assert not os.path.exists(target + bench.mark), target
    assert not (bench.repo / ".git" / "hooks" / "pre-commit").exists()
    assert f"refused {bench.root}/PWNED" in stdout  # not there, and the sandbox root is read-only
    assert bench.doctor_errors() == []


def test_envelope_symlink_cannot_pull_host_files_into_evidence(bench):
    model = bench.behaviour("linker", f'ln -s "{bench.repo}/FUTURE.md" "$ENVELOPE"\n')
    _, [result] = bench.run([model])
    assert result.terminal_class == "harness_failure"
    assert bench.holding(bench.markers["future"]) == []


def test_envelope_symlink_cannot_pull_the_controller_environment(bench):
    model = bench.behaviour("environ", 'ln -s /proc/self/environ "$ENVELOPE"\n')
    plan_file = bench.plan_file([model])
    env = {**os.environ, "YYB_T_HIDDEN": HIDDEN}
    done = subprocess.run(
        bench.subprocess_argv("run", "--plan", plan_file), env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert b"harness_failure" in done.stdout
    assert bench.holding(HIDDEN) == []


def test_candidate_cannot_read_the_grader(bench):
    grader_marker = f"GRADER-{uuid.uuid4().hex[:12]}"
    bench.configure(grader=grader(grader_marker))
    model = bench.behaviour("peeker", 'cat "$TOOLS/grader.sh"\nenvelope succeeded\n')
    _, [result] = bench.run([model])
    assert result.terminal_class == "grader_failure"
    assert grader_marker.encode() not in bench.linked(result, "stdout")


def test_tool_path_above_the_registry_does_not_expose_it(outside_bench, monkeypatch):
    bench = outside_bench
    home = bench.root / "home"
    local = home / ".local"
    (local / "bin").mkdir(parents=True)
    store_path = str(local / "state" / "yyb" / "stores" / "src-0123456789abcdef")
    Store.init(store_path)
    bench.store_path = store_path
    monkeypatch.setenv("HOME", str(home))
    marker = f"REGISTRY-{uuid.uuid4().hex[:12]}"
    blob = bench.store.objects.put("blob", marker.encode())
    bench.configure(read_only_paths=[str(local)])
    model = bench.behaviour(
        "registry-reader",
        f"""
cat "{bench.store.objects.path(blob)}"
envelope succeeded
""",
    )
    _, [result] = bench.run([model])
    assert result.terminal_class == "grader_failure"
    assert bench.holding(marker, skip={blob}) == []
