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


def open_store(ctx: click.Context) -> Store:
    """Open the store named by --store / YYB_STORE / the default (StoreNotFound if absent)."""
    return Store.open(store_path(ctx))


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
