"""Every command that reports takes --json: the command tree walked, the exemptions checked."""

from __future__ import annotations

from pathlib import Path

import click

from yyb.cli.app import cli
from yyb.cli.output import NO_JSON


def commands(group: click.Group, ctx: click.Context, prefix: str = ""):
    """Every leaf command under ``group``: (its full name, the command), subgroups walked."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        path = f"{prefix} {name}".strip()
        if isinstance(command, click.Group):
            yield from commands(command, click.Context(command, parent=ctx, info_name=name), path)
        else:
            yield path, command


def every_command() -> dict[str, click.Command]:
    return dict(commands(cli, click.Context(cli, info_name="yyb")))


def takes_json(command: click.Command) -> bool:
    return any("--json" in getattr(param, "opts", ()) for param in command.params)


def test_the_walk_reaches_every_group_and_leaf():
    found = every_command()
    for name in ("show-ref", "bundle verify", "key generate", "log-proof inclusion", "view"):
        assert name in found
    assert "bundle" not in found and "key" not in found  # groups are walked, not listed


def test_every_command_that_reports_takes_json():
    missing = sorted(
        name
        for name, command in every_command().items()
        if name not in NO_JSON and not takes_json(command)
    )
    assert missing == [], f"without --json (add it, or exempt with a reason): {missing}"


def test_the_exemptions_name_commands_that_exist_and_say_why():
    found = every_command()
    assert set(NO_JSON) <= set(found), sorted(set(NO_JSON) - set(found))
    assert all(reason.strip() for reason in NO_JSON.values())
    # An exempt command that takes --json after all should leave the list (envelope's --json
    # is an input and is parsed by the envelope helper, not by click).
    assert [name for name in NO_JSON if takes_json(found[name])] == []


def test_docs_state_the_rule_and_name_every_exemption():
    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    rule = text[text.index("**`--json` changes only stdout's form.**") :].split("\n\n")[0]
    assert "exit code is the text form's" in rule
    assert [name for name in NO_JSON if f"`{name}`" not in rule] == []
