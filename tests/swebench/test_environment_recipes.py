"""Which spec files an imported instance's environment recipe becomes (no build here)."""

from __future__ import annotations

import json
import os

import pytest

from yyb.swebench import environments
from yyb.swebench.importer import environment_specs
from yyb.swebench.instances import Instance, InstanceError

BASE = "a" * 40


def instance(instance_id="acme__kit-1", repo="acme/kit", version="1.0", setup=None) -> Instance:
    kept = {"version": version, **({"environment_setup_commit": setup} if setup else {})}
    return Instance(instance_id, repo, BASE, b"", b"", "", [], [], kept, "rows.jsonl:1")


def recipe(**fields) -> dict:
    return {
        "python": "3.11",
        "requirements": ["pytest==8.4.2"],
        "install": ["pip install -e ."],
    } | fields


def specs_of(items, out, given):
    chosen, files = environment_specs(items, str(out), given)
    return chosen, {os.path.relpath(p, out): json.loads(d) for p, d in files.items()}


@pytest.mark.skipif(not os.path.exists("/usr/bin/python3.11"), reason="needs the host's 3.11")
def test_the_hosts_interpreter_needs_no_base(tmp_path):
    chosen, files = specs_of([instance()], tmp_path, {"acme__kit-1": recipe()})
    assert list(files) == ["envs/acme__kit-1.0.json"]
    spec = files["envs/acme__kit-1.0.json"]
    assert "base" not in spec and spec["python"]["interpreter"] == "/usr/bin/python3.11"
    assert spec["python"]["install_commit"] == BASE
    assert chosen == {"acme__kit-1": str(tmp_path / "envs" / "acme__kit-1.0.json")}


def test_system_packages_give_a_debian_root_with_them(tmp_path):
    given = {"acme__kit-1": recipe(system_packages=["libmagic1", "libmagic1"])}
    _, files = specs_of([instance(setup="b" * 40)], tmp_path, given)
    base = files["envs/debian-bookworm-python3.11-libmagic1.json"]
    assert base["kind"] == "rootfs" and base["rootfs"]["suite"] == "bookworm"
    assert base["rootfs"]["packages"] == ["git", "libmagic1", "python3.11"]
    spec = files["envs/acme__kit-1.0.json"]
    assert spec["base"] == "debian-bookworm-python3.11-libmagic1.json"
    assert spec["python"]["install_commit"] == "b" * 40  # the environment's setup commit


def test_a_python_no_suite_ships_is_refused_naming_it(tmp_path):
    with pytest.raises(InstanceError, match="needs Python 3.6 on a Debian root"):
        specs_of([instance()], tmp_path, {"acme__kit-1": recipe(python="3.6")})


def test_instances_of_one_version_share_a_spec_and_differing_ones_are_refused(tmp_path):
    two = [instance("acme__kit-1"), instance("acme__kit-2")]
    given = {i.instance_id: recipe(system_packages=["zlib1g"]) for i in two}
    chosen, files = specs_of(two, tmp_path, given)
    assert len(set(chosen.values())) == 1 and len(files) == 2
    given["acme__kit-2"] = recipe(requirements=["pytest==7.4.4"], system_packages=["zlib1g"])
    with pytest.raises(InstanceError, match="would differ from another instance's"):
        specs_of(two, tmp_path, given)


def test_swe_benchs_specs_are_the_recipe_when_none_is_given():
    found = environments.recipe(instance("m-1", "marshmallow-code/marshmallow", "3.0"), {})
    assert found.python == "3.9" and "pytest" in " ".join(found.requirements)
    assert environments.recipe(instance(), {}) is None  # not a repository SWE-bench knows


def test_a_recipe_with_a_bad_field_is_refused():
    with pytest.raises(InstanceError, match="must be a list of strings"):
        environments.recipe(instance(), {"acme__kit-1": recipe(install="pip install .")})


def test_a_recipes_variables_are_the_specs(tmp_path):
    given = {"acme__kit-1": recipe(variables={"LC_ALL": "C.UTF-8"})}
    _, files = specs_of([instance()], tmp_path, given)
    assert files["envs/acme__kit-1.0.json"]["variables"] == {"LC_ALL": "C.UTF-8"}
    with pytest.raises(InstanceError, match="must map variable names to strings"):
        environments.recipe(instance(), {"acme__kit-1": recipe(variables={"A-B": "x"})})
