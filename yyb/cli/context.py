"""What every command shares: finding the store, printing findings."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable

import click

from yyb.errors import UsageError
from yyb.store.location import check_apart, find_repository, resolve_store_path
from yyb.store.repo import Store


def store_path(ctx: click.Context) -> str:
    """The store named by --store / YYB_STORE / the default, refused (StoreOverlapsRepository)
    when it overlaps one of ``repositories``."""
    path = resolve_store_path(ctx.find_root().obj.get("store_path"), os.getcwd(), os.environ)
    check_apart(path, repositories(ctx))
    return path


def open_store(ctx: click.Context, create: bool = False) -> Store:
    """Open the store named by --store / YYB_STORE / the default.

    Plumbing requires an existing store (StoreNotFound otherwise); porcelain that records
    evidence passes ``create=True`` and gets a new store where there was none. Either way a
    store that overlaps a repository is refused before it is created or read (``store_path``).
    """
    path = store_path(ctx)
    if create:
        return Store.init(path)[0]
    return Store.open(path)


def repositories(ctx: click.Context) -> list[str]:
    """The repositories a store must lie apart from: the one around the current folder, and
    every one the configuration names, with the repository around each (a configured folder
    inside a repository is snapshotted from that one)."""
    from yyb import config

    found = [find_repository(os.getcwd())]
    try:
        named = config.repositories_named(config_path(ctx))
    except UsageError:  # outside any repository, with no configuration named
        named = []
    for path in named:
        found += [path, find_repository(path)]
    return [repo for repo in found if repo is not None]


def config_path(ctx: click.Context) -> str:
    """The configuration named by --config / YYB_CONFIG, else the one at the top of the
    repository (UsageError outside one)."""
    from yyb import config

    return ctx.find_root().obj.get("config_path") or config.default_path(os.getcwd())


def load_config(ctx: click.Context):
    """The configuration named by --config, else the one at the top of the repository."""
    from yyb import config

    return config.load(config_path(ctx))


def emit_findings(findings: Iterable, as_json: bool) -> tuple[int, int]:
    """Print findings (one per line, or one JSON array); return (errors, infos)."""
    errors = infos = 0
    collected = []
    out = sys.stdout
    for finding in findings:
        if finding.level == "error":
            errors += 1
        else:
            infos += 1
        if as_json:
            collected.append(finding.as_dict())
        else:
            out.write(finding.line() + "\n")
    if as_json:
        json.dump(collected, out, indent=2)
        out.write("\n")
    return errors, infos


# The --plan option every experiment command takes.
plan_option = click.option(
    "--plan",
    "plan_name",
    required=True,
    metavar="PLAN",
    help="A plan file, or a plan oid or ref in the store.",
)


def claim_scratch(store) -> None:
    """Remove run folders that processes now gone left behind (saying so on stderr), and tag
    this process's run folder with ``store`` so that its doctor can name it if it is left."""
    from yyb.harness import cgroups, scratch

    for path in scratch.sweep():
        click.echo(f"yyb: removed {path}, left by a yyb process that is gone", err=True)
    cgroups.sweep()
    scratch.run_folder(store.path)
