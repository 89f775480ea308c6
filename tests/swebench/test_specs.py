"""SWE-bench's per-version specs as shipped data: their fields, lookups, and their source."""

from __future__ import annotations

import dataclasses
import json
import re
from importlib import resources

import pytest

from yyb.evidence.records import TEST_RUNNERS
from yyb.swebench import specs
from yyb.swebench.specs import RepoSpec, spec_for

# Every repository of SWE-bench Lite and Verified.
LITE_AND_VERIFIED = [
    "astropy/astropy",
    "django/django",
    "marshmallow-code/marshmallow",
    "matplotlib/matplotlib",
    "mwaskom/seaborn",
    "pallets/flask",
    "psf/requests",
    "pvlib/pvlib-python",
    "pydata/xarray",
    "pydicom/pydicom",
    "pylint-dev/pylint",
    "pytest-dev/pytest",
    "scikit-learn/scikit-learn",
    "sphinx-doc/sphinx",
    "sympy/sympy",
]
VERSION_FIELDS = {
    "python",
    "packages",
    "pip_packages",
    "pre_install",
    "install",
    "eval_commands",
    "test_cmd",
    "env",
    "execute_test_as_nonroot",
    "no_use_env",
    "nano_cpus",
}


def raw() -> dict:
    """specs.json read afresh, as the package ships it."""
    return json.loads(resources.files("yyb.swebench").joinpath("specs.json").read_text())


def every_spec():
    for repo, entry in raw()["repos"].items():
        for version in entry["versions"]:
            yield spec_for(repo, version)


def test_django_3_0_runs_runtests_on_python_3_6():
    spec = spec_for("django/django", "3.0")
    assert spec.python == "3.6"
    assert spec.test_cmd.startswith("./tests/runtests.py --verbosity 2 ")
    assert spec.packages == "requirements.txt"
    assert spec.requirements_paths == ("tests/requirements/py3.txt",)
    assert dict(spec.env)["LC_ALL"] == "en_US.UTF-8"
    assert (spec.log_parser, spec.runner) == ("django", "django")
    # Django 1.9's runtests has no --parallel
    assert "--parallel" not in spec_for("django/django", "1.9").test_cmd


def test_sympy_runs_bin_test():
    spec = spec_for("sympy/sympy", "1.12")
    assert "bin/test -C --verbose" in spec.test_cmd
    assert (spec.log_parser, spec.runner) == ("sympy", "sympy")
    assert "mpmath==1.3.0" in spec.pip_packages


def test_pytest_repositories_use_the_pytest_log_runner():
    for repo in ("astropy/astropy", "pallets/flask", "psf/requests", "sphinx-doc/sphinx"):
        entry = raw()["repos"][repo]
        assert entry["runner"] == "pytest-log", repo
        first = next(iter(entry["versions"]))
        assert "-rA" in spec_for(repo, first).test_cmd or "tox" in spec_for(repo, first).test_cmd


def test_every_repository_of_lite_and_verified_is_there():
    assert set(LITE_AND_VERIFIED) <= set(specs.repositories())


def test_every_entry_has_every_field():
    count = 0
    for repo, entry in raw()["repos"].items():
        assert entry["runner"] in TEST_RUNNERS and entry["runner"] != "junit", repo
        assert entry["log_parser"], repo
        assert entry["versions"], repo
        for version, fields in entry["versions"].items():
            assert set(fields) == VERSION_FIELDS, (repo, version)
            assert re.fullmatch(r"3\.\d+", fields["python"]), (repo, version)
            assert fields["test_cmd"], (repo, version)
            count += 1
    specs_found = list(every_spec())
    assert len(specs_found) == count > 250
    assert all(isinstance(s, RepoSpec) for s in specs_found)


def test_every_env_var_is_one_eval_commands_exports():
    for spec in every_spec():
        for name, value in spec.env:
            assert f"export {name}={value}" in spec.eval_commands, (spec.repo, spec.version)


def test_the_source_names_a_commit_and_the_tables():
    source = raw()["source"]
    assert source["repository"] == "https://github.com/SWE-bench/SWE-bench"
    for part in ("specs", "log_parsers"):
        assert re.fullmatch(r"[0-9a-f]{40}", source[part]["commit"])
        assert source[part]["path"].endswith(".py")


@pytest.mark.parametrize(
    "repo, version",
    [
        ("django/django", "0.1"),
        ("django/django", "3"),
        ("acme/nothing", "1.0"),
        ("", ""),
        ("Django/Django", "3.0"),
        ("swe-bench/humaneval", "1.0"),  # in SWE-bench's table, with no log parser
        ("django/django", 3.0),  # a version as a number is not the published string
    ],
)
def test_an_unknown_repository_or_version_has_no_spec(repo, version):
    assert spec_for(repo, version) is None


def test_a_spec_is_frozen_and_hashable():
    spec = spec_for("pytest-dev/pytest", "5.4")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.python = "2.7"
    assert hash(spec) == hash(spec_for("pytest-dev/pytest", "5.4"))
