"""What every command shares: finding the store, printing findings."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable

import click

from yyb.store.location import resolve_store_path
from yyb.store.repo import Store


def store_path(ctx: click.Context) -> str:
    return resolve_store_path(ctx.find_root().obj.get("store_path"), os.getcwd(), os.environ)


def open_store(ctx: click.Context, create: bool = False) -> Store:
    """Open the store named by --store / YYB_STORE / the default.

    Plumbing requires an existing store (StoreNotFound otherwise); porcelain that records
    evidence passes ``create=True`` and gets a new store where there was none.
    """
    path = store_path(ctx)
    if create:
        return Store.init(path)[0]
    return Store.open(path)


def load_config(ctx: click.Context):
    """The configuration named by --config, else the one at the top of the repository."""
    from yyb import config

    path = ctx.find_root().obj.get("config_path") or config.default_path(os.getcwd())
    return config.load(path)


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
