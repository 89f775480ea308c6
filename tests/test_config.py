"""The configuration file: template, validation with one error per problem, resolution."""

from __future__ import annotations

import json

import pytest

from yyb import config
from yyb.errors import UsageError


def test_template_is_valid():
    loaded = config.parse(json.dumps(config.template("src")), "x.json")
    assert loaded.data["repositories"] == {"src": "."}
    assert loaded.excluded_paths() == list(config.DEFAULT_EXCLUDED)


def test_every_problem_is_reported_with_its_pointer():
    data = config.template("src")
    data["workspace"]["attempts_root"] = 3
    data["harnesses"]["other"] = {"kind": "command"}
    data["tool_policy"]["network"] = "sometimes"
    data["models"] = {"mini": "a/b"}
    with pytest.raises(config.ConfigError) as caught:
        config.parse(json.dumps(data), "cfg.json")
    pointers = [p for p, _ in caught.value.problems]
    assert pointers == [
        "/harnesses/other",
        "/models",
        "/tool_policy/network",
        "/workspace/attempts_root",
    ]
    assert len(str(caught.value).splitlines()) == 4
    assert all(line.startswith("config cfg.json: /") for line in str(caught.value).splitlines())


@pytest.mark.parametrize(
    "mutate, pointer, needle",
    [
        (
            lambda d: d.update(default_candidate_harness="nope"),
            "/default_candidate_harness",
            "configured harness",
        ),
        (lambda d: d.update(default_evaluators=["ghost"]), "/default_evaluators/0", "ghost"),
        (lambda d: d.update(attempt_timeout_ms=1.5), "/attempt_timeout_ms", "float"),
        (
            lambda d: d.update(schema_version="juno_benchmark_config.v1"),
            "/schema_version",
            "yylo_benchmark_config.v2",
        ),
        (lambda d: d.pop("harnesses"), "", "'harnesses' is a required property"),
        (lambda d: d.update(extra=1), "", "'extra' was unexpected"),
        (
            lambda d: d["evaluators"].update(
                j={
                    "kind": "llm_judge",
                    "version": "1",
                    "harness": "none",
                    "model": "m",
                    "prompt": "",
                    "rubric": "",
                }
            ),
            "/evaluators/j/harness",
            "configured harness",
        ),
    ],
)
def test_single_problems(mutate, pointer, needle):
    data = config.template("src")
    mutate(data)
    with pytest.raises(config.ConfigError) as caught:
        config.parse(json.dumps(data), "c")
    assert [p for p, _ in caught.value.problems] == [pointer]
    assert needle in caught.value.problems[0][1]


def test_not_json():
    with pytest.raises(config.ConfigError):
        config.parse("{", "c")


def test_model_resolution():
    data = config.template("src")
    data["models"] = {":mini": "vendor/mini-1"}
    loaded = config.parse(json.dumps(data), "c")
    assert loaded.resolve_model(":mini") == "vendor/mini-1"
    assert loaded.resolve_model("v/m") == "v/m"
    with pytest.raises(UsageError, match="unknown model selector"):
        loaded.resolve_model(":max")
    with pytest.raises(UsageError, match="not a model identity"):
        loaded.resolve_model("justaname")


def test_init_never_overwrites(project, monkeypatch):
    before = project.config_path.read_bytes()
    monkeypatch.chdir(project.root)
    result = project.yyb("init")
    assert result.exit_code == 2 and "never overwritten" in result.stderr
    assert project.config_path.read_bytes() == before
    with pytest.raises(UsageError, match="never overwritten"):
        config.write_new(str(project.config_path), config.template("x"))
    assert project.config_path.read_bytes() == before


def test_init_stdout_prints_a_valid_config(project):
    result = project.yyb("init", "--stdout")
    assert result.exit_code == 0
    config.parse(result.stdout, "stdout")


def test_init_writes_at_the_repository_top(tmp_path, monkeypatch):
    from tests.conftest import Yyb, git

    repo = tmp_path / "r"
    (repo / "sub").mkdir(parents=True)
    git(repo, "init", "-q")
    monkeypatch.chdir(repo / "sub")
    result = Yyb(str(tmp_path / "s"))("init")
    assert result.exit_code == 0
    assert (repo / config.CONFIG_NAME).exists()
    again = Yyb(str(tmp_path / "s"))("init")
    assert again.exit_code == 2 and "never overwritten" in again.stderr


def test_init_harness_writes_a_valid_configuration_for_every_shipped_agent(
    yyb, tmp_path, monkeypatch
):
    from yyb import config
    from yyb.agents import start

    monkeypatch.chdir(tmp_path)
    for kind in start.names():
        done = yyb("init", "--stdout", "--harness", kind)
        assert done.exit_code == 0, done.stderr
        loaded = config.parse(done.stdout, "c.json")
        harness = loaded.harness(loaded.data["default_candidate_harness"])
        assert harness["kind"] == kind
        (selector,) = loaded.data["models"]
        assert loaded.accepted(loaded.resolve_model(selector)) == ["dated"]
    done = yyb("init", "--stdout", "--harness", "nope")
    assert done.exit_code == 2
    assert done.stderr.count("\n") == 1 and "claude_code" in done.stderr
