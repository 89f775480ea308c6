"""One attempt as a handle: its plan, its attempt plan and its records, read from the store once.

Grading, regrade, reports, the viewer and doctor's attempt checks pass this one value where
they used to pass the plan oid beside a dozen loose values and re-read the same evaluation
chain at each step. A handle is a snapshot: it is never refreshed behind its holder's back;
what a step appends (a new generation) makes a new handle (``with_generation``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from yyb.errors import UsageError
from yyb.evidence import chain, names


class Held(NamedTuple):
    """A record as the store holds it: its oid and its value."""

    oid: str
    record: dict


class NotInPlan(UsageError):
    """An attempt that is not one of the plan's attempts."""

    def __init__(self, plan_oid: str, attempt_oid: str):
        super().__init__(f"attempt {attempt_oid} is not an attempt of plan {plan_oid}")
        self.plan = plan_oid
        self.attempt = attempt_oid


@dataclass(frozen=True)
class AttemptHandle:
    """One attempt of one plan and what the store holds of its chain.

    Attributes:
        plan_oid: the experiment plan's oid.
        plan: the experiment plan record.
        oid: the attempt plan's oid.
        attempt: the attempt plan record.
        intent, receipt, execution, terminal, evidence: each record of the chain that exists
            (``Held``), else None.
        chains: profile -> its evaluation generations, oldest first.
    """

    plan_oid: str
    plan: dict
    oid: str
    attempt: dict
    intent: Held | None = None
    receipt: Held | None = None
    execution: Held | None = None
    terminal: Held | None = None
    evidence: Held | None = None
    chains: Mapping[str, tuple[Held, ...]] = field(default_factory=dict)

    @classmethod
    def planned(cls, plan_oid: str, plan: dict, attempt_oid: str, attempt: dict) -> AttemptHandle:
        """The handle of an attempt of ``plan`` with none of its chain read yet.

        Raises:
            NotInPlan: ``attempt_oid`` is not one of the plan's attempts.
        """
        if attempt_oid not in plan.get("links", {}).get("attempts", ()):
            raise NotInPlan(plan_oid, attempt_oid)
        return cls(plan_oid, plan, attempt_oid, attempt)

    @classmethod
    def read(
        cls,
        store,
        plan_oid: str,
        attempt_oid: str,
        plan: dict | None = None,
        attempt: dict | None = None,
    ) -> AttemptHandle:
        """Read the attempt's chain from its refs, each record once (the plan and the
        attempt plan too unless given). What does not exist yet is None (a running attempt
        has no terminal); nothing here checks the links between records: doctor's checks do.

        Raises:
            NotInPlan: the attempt is not one of the plan's.
            ObjectMissing, CorruptObject, CorruptRef: a record that cannot be read.
        """
        plan = store.objects.get_record(plan_oid) if plan is None else plan
        if attempt is None:
            attempt = store.objects.get_record(attempt_oid)
        handle = cls.planned(plan_oid, plan, attempt_oid, attempt)

        def leaf(which: names.Leaf) -> Held | None:
            oid = store.refs.read(names.attempt(plan_oid, attempt_oid, which))
            return None if oid is None else Held(oid, store.objects.get_record(oid))

        terminal, execution = leaf("terminal"), leaf("execution")
        linked = (terminal or execution or Held("", {})).record.get("links", {})
        receipt_oid = linked.get("receipt")
        receipt = None
        if receipt_oid is not None:
            receipt = Held(receipt_oid, store.objects.get_record(receipt_oid))
        chains = {
            profile: tuple(
                Held(*pair) for pair in chain.history(store, plan_oid, attempt_oid, profile)
            )
            for profile in chain.profiles(store, plan_oid, attempt_oid)
        }
        return replace(
            handle,
            intent=leaf("intent"),
            receipt=receipt,
            execution=execution,
            terminal=terminal,
            evidence=leaf("evidence"),
            chains=chains,
        )

    @property
    def ordinal(self) -> int:
        return self.attempt["ordinal"]

    @property
    def case_id(self) -> str | None:
        return self.attempt.get("case_id")

    @property
    def model(self) -> str:
        """The planned model's resolved id."""
        return self.attempt["model"]["resolved"]

    def generations(self, profile: str) -> tuple[Held, ...]:
        """The generations of ``profile``, oldest first (none: an empty tuple)."""
        return tuple(self.chains.get(profile, ()))

    def next_generation(self, profile: str) -> int:
        """The number the next generation of ``profile`` takes."""
        held = self.generations(profile)
        return held[-1].record["generation"] + 1 if held else 1

    def with_generation(self, profile: str, generation: Held) -> AttemptHandle:
        """This handle with ``generation`` appended to the chain of ``profile``."""
        chains = dict(self.chains)
        chains[profile] = (*self.generations(profile), generation)
        return replace(self, chains=chains)

    def histories(self) -> dict[str, list[dict]]:
        """The receipts of every profile of the plan's catalog that has one, oldest first
        (what ``verdict.conclude`` weighs)."""
        out = {}
        for profile in sorted(self.plan["evaluators"]["catalog"]):
            records = [held.record for held in self.generations(profile)]
            if records:
                out[profile] = records
        return out
