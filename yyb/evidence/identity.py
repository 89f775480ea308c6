"""Which observed model ids a planned model accepts (docs/agents.md, "Identity").

A provider often answers with a dated snapshot of the id it was asked for
(``claude-sonnet-4-5`` is served as ``claude-sonnet-4-5-20250929``). A model entry of the
configuration may name what it accepts beside its own id, and the plan binds those rules with
the model, so the decision is made by the plan, never by the candidate:

- ``dated``: the planned id followed by a date, as providers write one: ``-YYYYMMDD``,
  ``-YYYY-MM-DD`` or ``@YYYYMMDD``;
- an exact id, ``provider/model``;
- a pattern, an id in which ``*`` stands for any run of characters other than ``/``.

Ids are compared lowercased, as envelopes are normalized (docs/attempts.md, step 6).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

DATED = "dated"
_DATE = r"(?:-[0-9]{8}|-[0-9]{4}-[0-9]{2}-[0-9]{2}|@[0-9]{8})"
_ID = re.compile(r"[a-z0-9][a-z0-9._-]*/[a-z0-9*][a-z0-9._:@+/*-]*")


def problem(rule: str) -> str | None:
    """Why ``rule`` is not an identity rule, or None."""
    if rule == DATED:
        return None
    if not _ID.fullmatch(rule.lower()):
        return f"{rule!r} is not 'dated', a provider/model id or a pattern with *"
    return None


def _pattern(rule: str) -> re.Pattern:
    parts = (re.escape(part) for part in rule.lower().split("*"))
    return re.compile("[^/]*".join(parts))


def accepts(planned: str, rules: Iterable[str], observed: str) -> bool:
    """Whether ``observed`` is ``planned`` or an id one of ``rules`` accepts for it."""
    planned, observed = planned.lower(), observed.lower()
    if observed == planned:
        return True
    for rule in rules:
        if rule == DATED:
            if re.fullmatch(re.escape(planned) + _DATE, observed):
                return True
        elif _pattern(rule).fullmatch(observed):
            return True
    return False
