"""Finding the store and the configuration from the global options, without click (the fast
plumbing path shares this with every click command through ``yyb.cli.context``).

``options`` is the root command's ``{"store_path": ..., "config_path": ...}``: ``--store`` /
``$YYB_STORE`` and ``--config`` / ``$YYB_CONFIG`` as given, None when absent.
"""

from __future__ import annotations

import os

from yyb.errors import UsageError
from yyb.store.location import ENV_STORE, check_apart, find_repository, resolve_store_path

CONFIG_ENV = "YYB_CONFIG"
# The global options, as ``options`` keys, and the variables that stand in for them.
OPTION_ENV = {"store_path": ENV_STORE, "config_path": CONFIG_ENV}


def store_path(options: dict) -> str:
    """The store named by --store / YYB_STORE / the default, refused (StoreOverlapsRepository)
    when it overlaps one of ``repositories``."""
    path = resolve_store_path(options.get("store_path"), os.getcwd(), os.environ)
    check_apart(path, repositories(options))
    return path


def open_store(options: dict, create: bool = False):
    """Open the store named by --store / YYB_STORE / the default.

    Plumbing requires an existing store (StoreNotFound otherwise); porcelain that records
    evidence passes ``create=True`` and gets a new store where there was none. Either way a
    store that overlaps a repository is refused before it is created or read (``store_path``).
    """
    from yyb.store.repo import Store

    path = store_path(options)
    if create:
        return Store.init(path)[0]
    return Store.open(path)


def repositories(options: dict) -> list[str]:
    """The repositories a store must lie apart from: the one around the current folder, and
    every one the configuration names, with the repository around each (a configured folder
    inside a repository is snapshotted from that one)."""
    from yyb import config

    found = [find_repository(os.getcwd())]
    try:
        named = config.repositories_named(config_path(options))
    except UsageError:  # outside any repository, with no configuration named
        named = []
    for path in named:
        found += [path, find_repository(path)]
    return [repo for repo in found if repo is not None]


def config_path(options: dict) -> str:
    """The configuration named by --config / YYB_CONFIG, else the one at the top of the
    repository (UsageError outside one)."""
    from yyb import config

    return options.get("config_path") or config.default_path(os.getcwd())
