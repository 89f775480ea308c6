"""Historical v1 governed objects: read and checked against their SHA-256, bounded, strict,
frozen, and never written."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from tests.conftest import Yyb
from yyb.workflow import history

OLD = {
    "schema_version": "juno_benchmark_step_terminal.v1",
    "juno_version": "0.9.3",
    "step": "first",
    "score": 0.75,
    "tags": ["daily", "ops"],
}


def stored(tmp_path, value=OLD, raw: bytes | None = None, named: bool = True):
    data = raw if raw is not None else json.dumps(value).encode()
    digest = hashlib.sha256(data).hexdigest()
    path = tmp_path / (f"{digest}.json" if named else "object.json")
    path.write_bytes(data)
    return path, digest


def test_an_object_is_read_by_its_name_and_frozen(tmp_path):
    path, digest = stored(tmp_path)
    before = (path.read_bytes(), os.stat(path).st_mtime_ns)
    found = history.read(str(path))
    assert (found.sha256, found.juno_version, found.value["score"]) == (digest, "0.9.3", 0.75)
    assert found.value["tags"] == ("daily", "ops")
    with pytest.raises(TypeError):
        found.value["step"] = "second"  # read-only
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before


@pytest.mark.parametrize(
    "value, raw, reason",
    [
        (dict(OLD, juno_version=None), None, "no juno_version"),
        ({k: v for k, v in OLD.items() if k != "juno_version"}, None, "no juno_version"),
        (dict(OLD, schema_version="yylo_benchmark_terminal.v2"), None, "not a v1 schema"),
        (None, b'{"juno_version": "1", "juno_version": "2"}', "appears twice"),
        (None, b'{"juno_version": "1", "x": NaN}', "not strict JSON"),
        (None, b"[1, 2]", "not a JSON object"),
        (None, b"\xff\xfe", "not strict JSON"),
    ],
)
def test_what_is_not_a_historical_object_is_refused(tmp_path, value, raw, reason):
    path, _ = stored(tmp_path, value, raw)
    with pytest.raises(history.HistoricalRefused) as info:
        history.read(str(path))
    assert reason in info.value.reason


def test_a_changed_byte_or_an_unknown_hash_is_refused(tmp_path):
    path, digest = stored(tmp_path)
    data = bytearray(path.read_bytes())
    data[-2] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(history.HistoricalRefused, match="hash to"):
        history.read(str(path))
    unnamed, digest = stored(tmp_path, named=False)
    with pytest.raises(history.HistoricalRefused, match="no SHA-256"):
        history.read(str(unnamed))
    assert history.read(str(unnamed), digest).sha256 == digest


def test_a_large_object_is_refused_without_reading_it_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(history, "MAX_BYTES", 64)
    path, _ = stored(tmp_path, dict(OLD, padding="x" * 100))
    with pytest.raises(history.HistoricalRefused, match="larger than 64 bytes"):
        history.read(str(path))


def test_the_command_reports_each_file_and_fails_on_any_refusal(tmp_path):
    good, digest = stored(tmp_path)
    bad, _ = stored(tmp_path, dict(OLD, schema_version="x.v2"))
    run = Yyb(str(tmp_path / "store"))
    done = run("workflow", "history", str(good), "--json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)[0]["sha256"] == digest
    both = run("workflow", "history", str(good), str(bad))
    assert both.exit_code == 1
    assert both.lines[0].startswith(f"ok {digest}") and both.lines[1].startswith("refused")
    assert not (tmp_path / "store").exists()  # reading history touches no store
