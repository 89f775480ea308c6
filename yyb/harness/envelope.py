"""The execution envelope (``juno_execution_envelope.v1``): the only execution evidence.

The harness writes it to a channel only it holds (yyb/harness/channel.py): the descriptor
named by ``YYB_ENVELOPE_FD``, or ``/dev/fd/N`` as a path. Its provider and model are
observations that must normalize to the planned identity: ``provider/model`` lowercased,
where a model that already starts with ``provider/`` is not prefixed twice. The launcher
replaces its timing fields with its own measurements before it is stored.
"""

from __future__ import annotations

from yyb.errors import YybError
from yyb.harness.channel import Channel
from yyb.store import schema
from yyb.store.objects import codec

ENVELOPE = "juno_execution_envelope.v1"
MAX_ENVELOPE = 1 << 20
# The environment variable that names the envelope channel's descriptor (docs/attempts.md).
FD_ENV = "YYB_ENVELOPE_FD"


def channel() -> Channel:
    """A new envelope channel; the harness inherits ``.fd`` (``FD_ENV``), ``.path`` is its
    argument ``{envelope}``."""
    return Channel(MAX_ENVELOPE)


def normalize(provider: str, model: str) -> str:
    provider, model = provider.strip().lower(), model.strip().lower()
    return model if model.startswith(provider + "/") else f"{provider}/{model}"


def read(data: bytes | None, started_ms: int, ended_ms: int) -> tuple[dict | None, str | None]:
    """(envelope value with the launcher's timing, None) or (None, why it is unusable), from
    what the harness wrote to its channel (None: nothing)."""
    if not data:
        return None, "the harness wrote no execution envelope"
    if len(data) > MAX_ENVELOPE:
        return None, "the execution envelope is larger than 1 MiB"
    try:
        value = codec.from_json(data)
    except YybError as exc:
        return None, f"the execution envelope is malformed ({exc})"
    if value.get("schema_version") != ENVELOPE:
        return None, f"the execution envelope is not {ENVELOPE}"
    value.update(started_ms=started_ms, ended_ms=ended_ms, elapsed_ms=ended_ms - started_ms)
    found = schema.problem(value, ENVELOPE)
    if found is not None:
        return None, f"the execution envelope is invalid: {found[0]}: {found[1]}"
    return value, None


def observed(envelope: dict) -> str:
    return normalize(envelope["provider"], envelope["model"])
