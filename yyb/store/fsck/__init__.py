"""The store-wide check, by phase, and verifying one object's or ref's chain.

``run.fsck`` runs the phases in order (``layout``, ``packs``, ``objects``, ``refs``,
``reachability``), each a module of its own; ``findings`` is what they all yield; ``update_chain``
checks one ref's update chain (for bundles too) and ``verify_chain`` is ``yyb verify-chain``.
The names below are the ones the rest of yyb reads, gathered here so that a caller need not
know which phase defines them.
"""

from yyb.store.fsck.findings import Finding, error, info
from yyb.store.fsck.objects import Inspection, check_body, inspect
from yyb.store.fsck.reachability import reach
from yyb.store.fsck.run import fsck
from yyb.store.fsck.update_chain import check_ref_chain, walk_ref_chain

__all__ = [
    "Finding",
    "Inspection",
    "check_body",
    "check_ref_chain",
    "error",
    "fsck",
    "info",
    "inspect",
    "reach",
    "walk_ref_chain",
]
