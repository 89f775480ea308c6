"""`yyb envelope`: write an execution envelope to the channel, for adapters in any language.

The flags and their meaning live once, in ``yyb.agents.envelope`` (the helper that also runs
as ``python3 envelope.py`` in the sandbox); this command hands it the command line and turns
its refusals into yyb's usage error (one stderr line, exit 2).
"""

from __future__ import annotations

import click

from yyb.agents import envelope
from yyb.errors import UsageError


class _Verbatim(click.Command):
    """A command whose arguments reach it as typed: click would drop the ``--`` before CMD."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.params["argv"] = tuple(args)
        return []


@click.command("envelope", cls=_Verbatim, add_help_option=False)
def envelope_command(argv):
    """Write a juno_execution_envelope.v1 to YYB_ENVELOPE_FD (or print it with --print).

    yyb envelope [--json FILE|-] [--provider P] [--model M] [--status S] [--usage NAME=N]...
    [--cost-usd X | --cost-micros N] [--cost-completeness C] [--session-id S] [--print]
    [-- CMD ARGS...]; -h for the flags.
    """
    try:
        return envelope.execute(envelope.parse(list(argv), "yyb envelope"), "yyb envelope")
    except (envelope.EnvelopeError, envelope.ChannelError) as exc:
        raise UsageError(str(exc)) from None
