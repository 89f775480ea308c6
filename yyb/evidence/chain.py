"""Reading one attempt's chain from its refs: what doctor, recovery, regrade and reports share."""

from __future__ import annotations

from yyb.evidence import names
from yyb.evidence.record import kind_of
from yyb.evidence.records import EVALUATION

# A chain of generations longer than this is not a chain but a loop or an attack.
MAX_GENERATIONS = 100_000


def history(store, plan_oid: str, attempt_oid: str, profile: str) -> list[tuple[str, dict]]:
    """Every generation of ``profile`` for the attempt, oldest first, each proved by its hash.

    Raises:
        CorruptObject, ObjectMissing, InvalidRecord: a generation that cannot be read.
        CorruptRef: the generations loop or are not evaluation receipts.
    """
    from yyb.errors import CorruptRef

    ref = names.evaluation(plan_oid, attempt_oid, profile)
    out: list[tuple[str, dict]] = []
    oid = store.refs.read(ref)
    seen: set[str] = set()
    while oid is not None:
        if oid in seen or len(out) >= MAX_GENERATIONS:
            raise CorruptRef(ref, f"its generations loop at {oid}")
        seen.add(oid)
        record = store.objects.get_record(oid)
        if kind_of(record) != EVALUATION:
            raise CorruptRef(ref, f"{oid} is not an evaluation receipt")
        out.append((oid, record))
        oid = record["links"].get("previous")
    return list(reversed(out))


def profiles(store, plan_oid: str, attempt_oid: str) -> list[str]:
    """The profiles that have an evaluation ref for the attempt."""
    folder = names.evaluations(plan_oid, attempt_oid)
    return [name[len(folder) + 1 :] for name in store.refs.names(under=folder)]
