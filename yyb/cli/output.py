"""``--json``: the one machine-readable form every reporting command shares.

With ``--json`` a command writes one JSON object on stdout (keys sorted, indented, one
trailing newline) holding the facts its text form prints. Errors stay one stderr line with the
same exit code: ``--json`` changes only the form of stdout (docs/cli.md, "Exit codes").
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterable, Iterator

import click

from yyb.errors import YybError

# The commands without --json, each with why: their stdout is already the data itself (no
# report around it), or they serve rather than report. Every other command takes --json
# (tests/cli/test_json_everywhere.py walks the command tree).
NO_JSON = {
    "hash-object": "prints the oids it computed, one per input line: the data itself",
    "rev-parse": "prints the oid each name stands for, one per line: the data itself",
    "checkpoint": "prints the signed note itself, a document verify-log reads back",
    "envelope": "writes an execution envelope to its channel; its --json names an input",
    "view": "serves pages (or writes them, --bundle) and prints only where they are",
    "receive-pack": "speaks the transfer protocol on stdin and stdout (docs/remotes.md)",
    "upload-pack": "speaks the transfer protocol on stdin and stdout (docs/remotes.md)",
    "remote add": "prints nothing: it names a URL",
    "remote remove": "prints nothing: it forgets a name",
}

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON (docs/cli.md gives its fields)."
)


def emit_json(value) -> None:
    """Write ``value`` on stdout as JSON: keys sorted, indented by two, a trailing newline."""
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True) + "\n")
    sys.stdout.flush()


def verdict(findings: Iterable) -> dict:
    """A verifying command's answer: ``ok`` (no error among ``findings``), the counts of
    errors and notes, and every finding as a map (``Finding.as_dict``)."""
    found = [finding.as_dict() for finding in findings]
    errors = sum(finding["level"] == "error" for finding in found)
    return {"ok": errors == 0, "errors": errors, "infos": len(found) - errors, "findings": found}


def failure_finding(exc: YybError, subject: str) -> dict:
    """A check that stopped at ``exc`` as one error finding: its code (the error's ``code``,
    else its class name in kebab case), the object at fault (else ``subject``), its message."""
    code = getattr(exc, "code", None) or re.sub(r"(?<!^)(?=[A-Z])", "-", type(exc).__name__)
    return {
        "level": "error",
        "code": code.lower(),
        "subject": getattr(exc, "oid", None) or subject,
        "detail": exc.message,
    }


@contextlib.contextmanager
def failed_check(as_json: bool, subject: str, **fields) -> Iterator[None]:
    """Around a check that raises when it fails: with ``as_json``, a failure (an error of
    exit code 1, not bad input) is first printed as ``{**fields, ok: false, findings: [...]}``,
    then raised on, so that stderr and the exit code are those of the text form."""
    try:
        yield
    except YybError as exc:
        if as_json and exc.exit_code == 1:
            found = [failure_finding(exc, subject)]
            emit_json({**fields, "ok": False, "errors": 1, "infos": 0, "findings": found})
        raise
