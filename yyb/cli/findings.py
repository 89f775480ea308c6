"""Printing findings, and ``yyb doctor`` of a whole store: without click, so that the common
spelling of doctor runs on the fast path (``yyb.cli.fast``) as well as through click."""

from __future__ import annotations

import sys
from collections.abc import Iterable


def emit_findings(findings: Iterable, as_json: bool) -> tuple[int, int]:
    """Print findings (one per line, or one JSON array); return (errors, infos)."""
    errors = infos = 0
    collected = []
    out = sys.stdout
    for finding in findings:
        if finding.level == "error":
            errors += 1
        else:
            infos += 1
        if as_json:
            collected.append(finding.as_dict())
        else:
            out.write(finding.line() + "\n")
    if as_json:
        import json

        json.dump(collected, out, indent=2)
        out.write("\n")
    return errors, infos


def store_doctor(store, as_json: bool) -> int:
    """Every check of ``yyb doctor`` on ``store``, printed; the summary on stderr (with the
    forms of the signatures, when there are any); exit 1 on any problem."""
    from yyb.evidence import names
    from yyb.readiness import doctor as checks

    errors, infos = emit_findings(checks.findings(store), as_json)
    forms = {}
    if store.refs.names(under=names.SIGNATURES):  # signing is imported only when it counts
        from yyb import signing

        forms = signing.signature_forms(store)
    sys.stdout.flush()
    if forms:  # which form each signed object's newest signature is (docs/audit.md)
        said = ", ".join(f"{n} {form}" for form, n in forms.items())
        sys.stderr.write(f"doctor: signatures: {said}\n")
    sys.stderr.write(f"doctor: {errors} problem(s), {infos} note(s) in {store.path}\n")
    sys.stderr.flush()  # a captured stderr (click's test runner) is not line-buffered
    return 1 if errors else 0
