"""The object database: objects, refs, update chains, fsck and chain verification.

This package knows nothing about benchmarks and imports nothing above it.
"""

from yyb.store.repo import Store

__all__ = ["Store"]
