"""Shipped adapters for agent CLIs (placeholder until the adapters land)."""

KINDS: dict = {}


def program(kind: str) -> list[tuple[str, bytes]]:
    raise KeyError(kind)
