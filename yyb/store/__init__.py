"""The object database: ``objects/`` (objects, the codec, loose objects, packs), ``refs/`` (ref
names, the update protocol and its chains, loose and packed refs), ``log/`` (the transparency
log, its proofs and checkpoints), ``bundle/``, ``fsck/`` (the store-wide check by phase, and
chain verification), and ``repo.Store`` over them.

This package knows nothing about benchmarks and imports nothing above it.
"""

from yyb.store.repo import Store

__all__ = ["Store"]
