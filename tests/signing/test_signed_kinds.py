"""The signed kinds are defined once, in docs/format.md ("Signed kinds"), and the code signs
and demands signatures of exactly those; the other pages point there instead of listing them."""

from __future__ import annotations

import re
from pathlib import Path

from yyb.evidence import records

DOCS = Path(__file__).parent.parent.parent / "docs"


def documented_kinds() -> list[str]:
    """The first column of the table under "### Signed kinds" in docs/format.md."""
    text = (DOCS / "format.md").read_text()
    section = text.split("\n### Signed kinds\n", 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\| `([a-z0-9_.]+)` \|", section, re.M)


def test_the_documented_signed_kinds_are_the_codes():
    kinds = documented_kinds()
    assert len(kinds) == len(set(kinds)) == 8
    assert set(kinds) == records.SIGNED_KINDS


def test_the_other_pages_point_to_the_one_list():
    for page in ("audit.md", "cli.md"):
        text = (DOCS / page).read_text()
        assert '"Signed kinds"' in text, page
        for kind in records.SIGNED_KINDS:
            assert kind not in text, (page, kind)
