"""What the viewer says about each object it shows: the store's own checks, one by one.

``fsck.inspect`` is what ``yyb doctor`` and ``verify-chain`` run on every object: the bytes
hash to the oid (and the header is well formed), a record decodes canonically, names a
``schema_version`` whose schema accepts it. The viewer runs it on every object a page shows
(never cached: an object file can be damaged while the viewer runs) and splits its findings
into those checks, adds whether every object the record links is present, and lets a page add
what the attempt's chain checks (``yyb doctor --plan``) say about the object. A check after
one that failed is not reached (a record whose bytes are not its oid's is not decoded as
evidence); the page can still show the bytes, marked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from yyb.errors import YybError
from yyb.evidence.record import kind_of
from yyb.store.fsck import inspect
from yyb.store.objects import codec
from yyb.store.objects.format import MAX_RECORD, is_oid, split

CHECKS = ("present", "hash", "canonical", "schema", "links")
# fsck's finding codes, by the check they belong to (docs/cli.md lists the codes).
CODES = {
    "missing": "present",
    "truncated": "hash",
    "trailing-bytes": "hash",
    "malformed": "hash",
    "hash-mismatch": "hash",
    "non-canonical": "canonical",
    "bad-record": "schema",
    "schema": "schema",
}
PASSED, FAILED, NOT_REACHED, NOT_APPLICABLE = "ok", "failed", "not reached", "n/a"


@dataclass
class Verification:
    """One object's checks: each of CHECKS is ok, failed, not reached or n/a (a blob has no
    form, schema or links), with the problems found."""

    oid: str
    kind: str | None = None
    schema_version: str | None = None
    results: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    links: dict[str, list[str]] = field(default_factory=dict)
    value: dict | None = None  # the record, decoded (proved only when ``verified``)

    @property
    def verified(self) -> bool:
        return not self.problems

    @property
    def present(self) -> bool:
        return self.results.get("present") != FAILED


def verify(store, oid: str, chain_problems: Iterable[str] = ()) -> Verification:
    """Run the store's checks on ``oid``; ``chain_problems`` are what the attempt's chain
    checks found about it (they fail its ``links`` check)."""
    found = inspect(store, oid)
    result = Verification(oid, found.kind, results=dict.fromkeys(CHECKS, PASSED))
    for finding in found.findings:
        result.results[CODES.get(finding.code, "hash")] = FAILED
        result.problems.append(f"{finding.code}: {finding.detail}")
    failed = [CHECKS.index(c) for c in CHECKS if result.results[c] == FAILED]
    for check in CHECKS[min(failed) + 1 :] if failed else ():
        result.results[check] = NOT_REACHED
    if found.kind == "blob":
        for check in ("canonical", "schema", "links"):
            result.results[check] = NOT_APPLICABLE
    result.value = found.value if found.value is not None else _unproved(store, oid, found.kind)
    if isinstance(result.value, dict):
        version = kind_of(result.value)
        result.schema_version = version if isinstance(version, str) else None
        result.links = links_of(result.value)
    problems = list(chain_problems)
    if result.results["links"] == PASSED:
        problems[:0] = [
            f"links {target} ({role}), which is missing"
            for role, targets in result.links.items()
            for target in targets
            if not store.objects.contains(target)
        ]
        if problems:
            result.results["links"] = FAILED
    result.problems += problems
    return result


def _unproved(store, oid: str, kind: str | None) -> dict | None:
    """A record that failed its checks, decoded anyway so that a page can show what is
    there (marked unverified); None when it cannot be."""
    if kind != "record":
        return None
    try:
        data = store.objects.read_raw(oid)
        if len(data) > MAX_RECORD:
            return None
        return codec.decode_value(split(data, oid)[1], oid)
    except YybError:
        return None


def links_of(value: dict) -> dict[str, list[str]]:
    """A record's links as {role: [oid, ...]}, leaving out anything that is not an oid (the
    schema check names a malformed map)."""
    links = value.get("links")
    if not isinstance(links, dict):
        return {}
    out = {}
    for role, target in links.items():
        targets = target if isinstance(target, list) else [target]
        out[str(role)] = [t for t in targets if is_oid(t)]
    return out


@dataclass
class Signature:
    """The signatures of one object: ``state`` verified (under a trusted key), failed (none of
    them verifies under a trusted key), or unchecked (no key to check them with)."""

    state: str
    detail: str


def signature(store, oid: str, trusted: list) -> Signature | None:
    """What the signatures recorded for ``oid`` (``refs/signatures/<oid>``) prove, or None
    when it has none."""
    from yyb import signing

    try:
        sigs = signing.signatures_of(store, oid)
    except YybError as exc:
        return Signature("failed", f"its signature ref cannot be read: {exc}")
    if not sigs:
        return None
    if not trusted:
        return Signature(
            "unchecked", f"{len(sigs)} signature(s); no trusted key was given to check them"
        )
    problems = []
    for sig_oid in sigs:
        try:
            signing.verify_record(store, oid, store.objects.get_record(sig_oid), trusted, sig_oid)
            return Signature("verified", f"signature {sig_oid} verifies under a trusted key")
        except YybError as exc:
            problems.append(str(exc))
    return Signature("failed", "; ".join(problems))


def head(store, oid: str, limit: int) -> tuple[bytes, int] | None:
    """The first ``limit`` bytes of ``oid``'s body and its size, for showing (unverified: the
    page shows its verification beside it); None when it cannot be read at all."""
    try:
        _, size, stream = store.objects.open_body(oid)
        with stream:
            return stream.read(limit), size
    except YybError:
        return None
