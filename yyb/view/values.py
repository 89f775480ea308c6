"""How a record's values read on a page: words for a person, never a Python repr.

A missing value (None) is a dash, a flag is yes or no, a string is its text (no JSON quotes),
a list of plain values is a comma-separated line (``none`` when empty), a small map is a
definition list (nested maps as nested lists, two levels at most) and anything larger or
deeper is a block of pretty JSON, cut at a bound. ``word`` is the one-line form, for a
value inside a sentence; ``shown`` is the form for a cell of its own.
"""

from __future__ import annotations

import json

from yyb.store.objects import codec
from yyb.view.markup import Markup, el, join

MISSING = "—"  # what a page shows for a value that is absent (None)
EMPTY = "none"  # an empty list or map
SHOW_JSON = 2000  # characters of a value shown as JSON in a cell
MAP_KEYS = 30  # keys of a map shown as a definition list; more are JSON
MAP_DEPTH = 2  # levels of maps nested as definition lists; deeper are JSON
SCALARS = (str, int, bool, type(None))


def word(value: object) -> str:
    """``value`` as words in a sentence: ``—`` for None, yes or no for a flag, a list of
    plain values joined by commas; anything else as one line of JSON."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str | int):
        return str(value)
    if isinstance(value, list | tuple) and all(isinstance(v, SCALARS) for v in value):
        return ", ".join(word(v) for v in value) or EMPTY
    if isinstance(value, dict) and not value:
        return EMPTY
    return _cut(json.dumps(_json(value), ensure_ascii=False, sort_keys=True))


def shown(value: object, depth: int = 0) -> Markup | str:
    """``value`` for a cell of its own: a word, a definition list of a small map, or a
    ``<pre><code>`` block of pretty JSON for a nested or large one."""
    if isinstance(value, SCALARS):
        return _cut(word(value))
    if isinstance(value, list | tuple) and all(isinstance(v, SCALARS) for v in value):
        text = word(value)
        return text if len(text) <= SHOW_JSON else block(value)
    if isinstance(value, dict) and not value:
        return EMPTY
    if isinstance(value, dict) and len(value) <= MAP_KEYS and depth < MAP_DEPTH:
        if all(isinstance(v, SCALARS + (dict, list)) for v in value.values()):
            return definitions(value, depth)
    return block(value)


def definitions(value: dict, depth: int = 0) -> Markup:
    """A map as ``<dl>``: each key a term, each value ``shown`` (one level deeper)."""
    items = []
    for key in sorted(value, key=str):
        items += [el("dt", str(key)), el("dd", shown(value[key], depth + 1))]
    return el("dl", *items, class_="values")


def block(value: object) -> Markup:
    """``value`` as pretty JSON in a code block, cut at SHOW_JSON characters."""
    text = json.dumps(_json(value), indent=2, ensure_ascii=False, sort_keys=True)
    return el("pre", el("code", _cut(text)), class_="json")


def _json(value: object) -> object:
    return codec.to_json(list(value) if isinstance(value, tuple) else value)


def _cut(text: str) -> str:
    if len(text) <= SHOW_JSON:
        return text
    return f"{text[:SHOW_JSON]} … (cut at {SHOW_JSON:,} of {len(text):,} characters)"


def sentence(*parts: tuple[str, object]) -> Markup:
    """Named values in a row, ``name value · name value``, each value a ``word``."""
    return join((f"{name} {word(value)}" for name, value in parts), " · ")
