"""What an evaluator is started with: the run's controls and one evaluator's invocation.

Every evaluator kind (command, tests, judge, pairwise judge) is started inside the same walls:
the roots it must not see, the tool policy's read-only paths, the cancel event of the run.
These travel together as one ``Invocation`` instead of as loose values beside each spec.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Controls:
    """What one run (a plan's attempts, a regrade pass) gives each evaluation it makes.

    Attributes:
        protected: roots no evaluator may see (the store, the source repository, ...).
        cancel: set when the run is interrupted; None when it cannot be.
        environ: where a judge harness's secrets are read from, by name.
        signer: the key each published evaluation receipt is signed with (None: unsigned).
        gateway: a gateway plan's judges' way to their models (``JudgeAccess``), None for a
            plan whose judges have the network.
    """

    protected: list[str]
    cancel: threading.Event | None = None
    environ: Mapping[str, str] = field(default_factory=dict)
    signer: Any = None
    gateway: Any = None


@dataclass(frozen=True)
class Invocation:
    """One evaluator's run: its profile's spec and the walls it runs inside.

    Attributes:
        spec: the evaluator profile's spec from the plan's catalog.
        protected: roots hidden from it.
        read_only: the tool policy's read-only paths, visible (and on its PATH).
        cancel: the run's cancel event.
        harness: a judge's harness config (None for other kinds).
        secrets: a judge's secrets, name -> value, redacted from what it answers.
        environment: the built environment the case runs in (harness.environments.build.
            Ready), None for the host's OS folders.
        gateway: a judge's way to its model through the run's gateway (``JudgeAccess``);
            None: the judge has the network.
    """

    spec: dict
    protected: list[str]
    read_only: list[str] = field(default_factory=list)
    cancel: threading.Event | None = None
    harness: dict | None = None
    secrets: Mapping[str, str] = field(default_factory=dict)
    environment: Any = None
    gateway: Any = None


@dataclass(frozen=True)
class JudgeCalls:
    """What the gateway metered of one judge run: its meter's oid and the cost object."""

    meter: str
    cost: dict


class JudgeAccess(Protocol):
    """What a judge's gateway access is (yyb/attempts/metering.py has the one a run makes):
    ``open(model)`` admits one judge run and gives what its sandbox needs (``.port``,
    ``.variables``, ``.secrets``); ``close(opened)`` retires it, keeps its calls, and
    returns ``JudgeCalls``."""

    def open(self, model: str) -> Any: ...

    def close(self, opened: Any) -> JudgeCalls: ...
