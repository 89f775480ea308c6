"""The yyb command line: the one place that prints errors and chooses exit codes.

``main`` runs the plumbing's common forms (``cat-object``, ``hash-object``) without importing
click (``yyb.cli.fast``), because shell pipelines call them thousands of times; every other
command line goes through the click group in ``yyb.cli.app``, whose subcommands load lazily so
that each pays only for what it uses.
"""

from __future__ import annotations

import signal
import sys

# name -> "module:attribute", imported only when the command runs (or help lists it).
COMMANDS = {
    "hash-object": "yyb.cli.plumbing:hash_object",
    "cat-object": "yyb.cli.plumbing:cat_object",
    "update-ref": "yyb.cli.refs:update_ref",
    "show-ref": "yyb.cli.refs:show_ref",
    "rev-parse": "yyb.cli.refs:rev_parse",
    "log": "yyb.cli.refs:log",
    "pack-refs": "yyb.cli.refs:pack_refs",
    "verify-chain": "yyb.cli.check:verify_chain",
    "doctor": "yyb.cli.check:doctor",
    "store": "yyb.cli.store:store",
    "example": "yyb.cli.example:example",
    "init": "yyb.cli.plans:init",
    "validate": "yyb.cli.plans:validate",
    "import": "yyb.cli.swebench:import_group",
    "plan": "yyb.cli.plans:plan",
    "authorize": "yyb.cli.plans:authorize",
    "run": "yyb.cli.run:run",
    "recover": "yyb.cli.run:recover",
    "regrade": "yyb.cli.grading:regrade_command",
    "rejudge": "yyb.cli.grading:rejudge_command",
    "report": "yyb.cli.report:report",
    "investigate": "yyb.cli.investigate:investigate",
    "bundle": "yyb.cli.bundle:bundle",
    "push": "yyb.cli.bundle:push",
    "fetch": "yyb.cli.bundle:fetch",
    "key": "yyb.cli.signing:key",
    "sign": "yyb.cli.signing:sign",
    "workflow": "yyb.cli.workflow:workflow",
    "release-readiness": "yyb.cli.readiness:release_readiness",
    "checkpoint": "yyb.cli.translog:checkpoint",
    "log-proof": "yyb.cli.translog:log_proof",
    "verify-log": "yyb.cli.translog:verify_log",
    "gc": "yyb.cli.packs:gc_command",
    "repack": "yyb.cli.packs:repack_command",
    "count-objects": "yyb.cli.packs:count_objects",
    "verify-pack": "yyb.cli.packs:verify_pack",
    "view": "yyb.cli.view:view",
}


def fail(message: str, code: int) -> int:
    """Print ``message`` as ``yyb: error:`` lines on stderr; return ``code``."""
    for line in message.splitlines() or [""]:
        sys.stderr.write(f"yyb: error: {line}\n")
    sys.stderr.flush()
    return code


def main(argv: list[str] | None = None) -> None:
    """Run the command line ``argv`` (default: the process's) and exit with its code."""
    # Behave like other Unix tools in pipelines: `yyb ... | head` ends quietly.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = sys.argv[1:] if argv is None else list(argv)
    from yyb.cli import fast

    code = fast.run(args)
    if code is None:
        from yyb.cli import app

        code = app.run(args)
    sys.stdout.flush()
    sys.exit(code)
