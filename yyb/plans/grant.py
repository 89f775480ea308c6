"""Authorization grants: a typed record that lets a live run of one task plan spend money.

A grant binds the plan oid, the exact resolved models, the currency, both ceilings and an
expiry. ``check`` is what a live run calls: every field must match the plan exactly.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from yyb.errors import InvalidArgument, UsageError, YybError
from yyb.evidence import records
from yyb.evidence.kinds.plan import Grant, GrantLinks
from yyb.evidence.record import kind_of

GRANT = records.GRANT


class GrantError(YybError):
    """A grant that does not authorize this plan; ``field`` names the mismatch, ``missing``
    says there is no grant at all (the command line then says how to make one)."""

    def __init__(self, field: str, reason: str, missing: bool = False):
        super().__init__(f"authorization grant refused: {field}: {reason}")
        self.field = field
        self.reason = reason
        self.missing = missing


def now_ms() -> int:
    return time.time_ns() // 1_000_000


_RELATIVE = re.compile(r"\+?(\d+)([smhd])")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_expiry(text: str, now: int) -> int:
    """``+24h`` / ``7d`` / ``30m`` from now, or an ISO 8601 time with a zone; ms since epoch.

    Raises:
        UsageError: unparseable, no time zone, or not in the future.
    """
    match = _RELATIVE.fullmatch(text.strip())
    if match:
        expires = now + int(match.group(1)) * _UNIT_MS[match.group(2)]
    else:
        try:
            moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArgument(
                "expires", f"{text!r} is neither +N[smhd] nor an ISO 8601 time", text
            ) from None
        if moment.tzinfo is None:
            raise InvalidArgument("expires", f"{text!r} needs a time zone (for example Z)", text)
        expires = int(moment.astimezone(UTC).timestamp() * 1000)
    if expires <= now:
        raise InvalidArgument("expires", f"{text!r} is not in the future", text)
    return expires


def grant_for(plan_oid: str, plan: dict, expires_ms: int, created_ms: int) -> dict:
    """The grant record (its value, as the store takes it) authorizing exactly ``plan`` until
    ``expires_ms``."""
    spend = plan.get("budget")
    if plan.get("kind") != "task" or spend is None:
        raise UsageError(
            "only task plans carry a budget to authorize (workflow plans take a "
            "policy sidecar instead)"
        )
    return Grant(
        plan=plan_oid,
        models=tuple(sorted(m["resolved"] for m in plan["models"])),
        currency=spend["currency"],
        total_ceiling_micros=spend["total_micros"],
        attempt_ceiling_micros=_attempt_ceiling(spend),
        expires_ms=expires_ms,
        created_ms=created_ms,
        links=GrantLinks(plan=plan_oid),
    ).to_value()


def _attempt_ceiling(spend: dict) -> int:
    return spend["per_attempt_micros"] + (1 if spend["remainder_micros"] else 0)


def check(grant: dict, plan_oid: str, plan: dict, now: int) -> None:
    """Refuse unless ``grant`` authorizes exactly ``plan`` and has not expired.

    Raises:
        GrantError: naming the first field that does not match.
    """
    expected = grant_for(plan_oid, plan, grant.get("expires_ms", 0), grant.get("created_ms", 0))
    if not Grant.holds(grant):
        raise GrantError("schema_version", f"{kind_of(grant)!r} is not {GRANT}")
    for name in ("plan", "models", "currency", "total_ceiling_micros", "attempt_ceiling_micros"):
        if grant.get(name) != expected[name]:
            raise GrantError(
                name, f"grant has {grant.get(name)!r}, the plan needs {expected[name]!r}"
            )
    if grant.get("links", {}).get("plan") != plan_oid:
        raise GrantError("links.plan", "the grant does not link this plan")
    if not isinstance(grant.get("expires_ms"), int) or grant["expires_ms"] <= now:
        raise GrantError("expires_ms", "the grant has expired")
