"""Hostile bundles, built byte by byte: each is refused with one error and imports nothing."""

from __future__ import annotations

import resource
import zlib
from pathlib import Path

import pytest

from tests.bundle.forge import Forge, accepted, frame, refused, stored, write
from tests.conftest import note
from yyb.errors import CorruptBundle, InvalidBundle
from yyb.store.bundle import exchange as bundle

X = "refs/x"


def _replaced(forge: Forge, oid: str, new_frame: bytes) -> list[bytes]:
    """Every frame in order, with ``oid``'s frame replaced."""
    return [new_frame if o == oid else frame(o, forge.objects[o]) for o in sorted(forge.objects)]


def _hello() -> tuple[Forge, str]:
    forge = Forge()
    oid = forge.blob(b"hello\n")
    forge.ref(X, oid)
    return forge, oid


# --- objects --------------------------------------------------------------------------------


def test_wrong_hash(tmp_path):
    forge, oid = _hello()
    _, other = stored("blob", b"HELLO\n")
    path = write(tmp_path, forge.build(_replaced(forge, oid, frame(oid, other))))
    refused(tmp_path, path, 1, oid, "hash")


def test_giant_declared_size(tmp_path):
    forge, oid = _hello()
    packed = zlib.compress(forge.objects[oid])
    giant = frame(oid, forge.objects[oid], packed, (b"%d" % 10**18, b"%d" % len(packed)))
    refused(tmp_path, write(tmp_path, forge.build(_replaced(forge, oid, giant))), 1, oid)
    length = b"%d" % len(forge.objects[oid])
    huge = frame(oid, forge.objects[oid], packed, (length, b"%d" % 10**18))
    refused(tmp_path, write(tmp_path, forge.build(_replaced(forge, oid, huge))), 1, oid)


def test_decompression_bomb_is_capped_at_the_declared_length(tmp_path):
    forge, oid = _hello()
    bomb = zlib.compress(forge.objects[oid] + b"\0" * (256 << 20), 9)  # 256 MiB from ~256 KiB
    frames = _replaced(forge, oid, frame(oid, forge.objects[oid], bomb))
    path = write(tmp_path, forge.build(frames))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    refused(tmp_path, path, 1, oid, "declared")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 << 10


def test_duplicate_objects(tmp_path):
    forge, oid = _hello()
    frames = []
    for each in sorted(forge.objects):
        frames += [frame(each, forge.objects[each])] * (2 if each == oid else 1)
    refused(tmp_path, write(tmp_path, forge.build(frames)), 1, oid, "twice")


def test_frames_out_of_order(tmp_path):
    forge, _ = _hello()
    forge.ref("refs/y", forge.blob(b"other\n"))
    accepted(tmp_path, forge.build())
    backwards = forge.frames(sorted(forge.objects, reverse=True))
    refused(tmp_path, write(tmp_path, forge.build(backwards)), 1, "order")


def test_missing_linked_object(tmp_path):
    forge = Forge()
    absent, _ = stored("blob", b"absent\n")
    forge.ref(X, forge.record(note("n", log=absent)))
    refused(tmp_path, write(tmp_path, forge.build()), 1, absent, "not in the bundle")


def test_a_non_canonical_record_is_refused(tmp_path):
    import msgpack

    body = msgpack.packb({"schema_version": "yyb_note.v1", "message": "m"}, use_bin_type=True)
    body = body.replace(b"\xa1m", b"\xd9\x01m")  # str8 where fixstr is shortest
    forge = Forge()
    oid, data = stored("record", body)
    forge.objects[oid] = data
    forge.ref(X, oid)
    refused(tmp_path, write(tmp_path, forge.build()), 1, oid)


# --- numbers: one spelling each -------------------------------------------------------------


SPELLINGS = {
    "leading-zero": lambda n: b"0%d" % n,
    "zero-padded": lambda n: b"0" * 22 + b"%d" % n,
    "plus": lambda n: b"+%d" % n,
    "minus-zero": lambda n: b"-0" if n == 0 else b"-%d" % -n,
    "trailing-space": lambda n: b"%d " % n,
    "leading-space": lambda n: b" %d" % n,
    "fraction": lambda n: b"%d.0" % n,
    "exponent": lambda n: b"%de0" % n,
    "hex": lambda n: b"0x%x" % n,
    "underscore": lambda n: b"%d_" % n,
    # The first digit as an ARABIC-INDIC digit: a Unicode digit, not an ASCII one.
    "arabic-digit": lambda n: "٠١٢٣٤٥٦٧٨٩"[int(str(n)[0])].encode() + str(n)[1:].encode(),
}


@pytest.mark.parametrize("spell", SPELLINGS.values(), ids=SPELLINGS.keys())
@pytest.mark.parametrize("where", ["length", "clen", "count"])
def test_numbers_have_one_spelling(tmp_path, spell, where):
    forge, oid = _hello()
    data = forge.objects[oid]
    packed = zlib.compress(data)
    length, clen = b"%d" % len(data), b"%d" % len(packed)
    end = None
    if where == "length":
        length = spell(len(data))
    elif where == "clen":
        clen = spell(len(packed))
    else:
        end = spell(len(forge.objects))
    frames = _replaced(forge, oid, frame(oid, data, packed, (length, clen)))
    path = write(tmp_path, forge.build(frames, end))
    refused(tmp_path, path, 1)


def test_end_count_must_count_the_objects(tmp_path):
    forge, _ = _hello()
    path = write(tmp_path, forge.build(end=b"5"))
    with pytest.raises(CorruptBundle):
        bundle.verify(path)


# --- the header -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["refs/../etc/passwd", "/etc/passwd", "refs/a/../../b", "x"])
def test_bad_ref_names_are_bad_input(tmp_path, name):
    forge = Forge()
    forge.ref(name, forge.blob(b"hello\n"))
    refused(tmp_path, write(tmp_path, forge.build()), 2, "ref name")


def test_unknown_capability_and_version(tmp_path):
    forge, _ = _hello()
    forge.caps = "zlib ref-logs shallow"
    path = write(tmp_path, forge.build())
    refused(tmp_path, path, 2, "unknown capability 'shallow'")
    Path(path).write_bytes(b"yyb-bundle 3\n" + Path(path).read_bytes()[13:])
    refused(tmp_path, path, 2, "version")
    Path(path).write_bytes(b"PK\x03\x04 not a bundle")
    refused(tmp_path, path, 2)
    Path(path).write_bytes(b"")
    with pytest.raises(InvalidBundle):
        bundle.verify(path)


@pytest.mark.parametrize("caps", ["zlib", "ref-logs", "zlib ref-logs ref-logs", "zlib  ref-logs"])
def test_capabilities_zlib_and_ref_logs_are_required_once(tmp_path, caps):
    forge, _ = _hello()
    forge.caps = caps
    refused(tmp_path, write(tmp_path, forge.build()), 2, "capabilit")


def test_a_bundle_without_ref_logs_is_refused_not_rewritten(tmp_path):
    """Without its chain a ref would be re-created by new updates, hiding the producer's."""
    forge, oid = _hello()
    forge.caps = "zlib"
    head = forge.logs[X]
    del forge.objects[head]
    del forge.logs[X]
    refused(tmp_path, write(tmp_path, forge.build()), 2, "ref-logs")


def test_every_ref_needs_its_log_head_line(tmp_path):
    forge, _ = _hello()
    lines = [f"{forge.refs[X]} {X}".encode()]
    refused(tmp_path, write(tmp_path, forge.build(lines=lines)), 2, "log head")


def test_header_lines_in_order(tmp_path):
    forge, _ = _hello()
    forge.ref("refs/y", forge.blob(b"other\n"))
    x, y = (f"{forge.refs[n]} {n}" for n in (X, "refs/y"))
    lx, ly = (f"{forge.logs[n]} logs/{n}" for n in (X, "refs/y"))
    accepted(tmp_path, forge.build(lines=[s.encode() for s in (x, lx, y, ly)]))
    for order in ((y, ly, x, lx), (lx, x, y, ly), (x, y, lx, ly), (x, lx, x, lx, y, ly)):
        path = write(tmp_path, forge.build(lines=[s.encode() for s in order]))
        refused(tmp_path, path, 2)


# --- update chains: every rule of docs/format.md ------------------------------------------


def _chain_of_two() -> tuple[Forge, dict]:
    """refs/x: None -> a -> b, the second update able to carry a discarded head."""
    forge = Forge()
    ids = {name: forge.blob(name.encode()) for name in ("a", "b", "c")}
    ids["u1"] = forge.update(X, None, ids["a"], target=ids["a"])
    return forge, ids


def test_a_valid_discarding_chain_is_accepted(tmp_path):
    forge, ids = _chain_of_two()
    lost = forge.update(X, ids["a"], ids["c"], target=ids["c"], previous=ids["u1"])
    head = forge.update(X, ids["a"], ids["b"], target=ids["b"], previous=ids["u1"], discarded=lost)
    forge.ref(X, ids["b"], head)
    accepted(tmp_path, forge.build())


def _forged_discard(forge: Forge, ids: dict, kind: str) -> str:
    if kind == "blob":
        return ids["c"]
    if kind == "note":
        return forge.record(note("not an update"))
    if kind == "other-ref":
        return forge.update("refs/other", ids["a"], ids["c"], target=ids["c"], previous=ids["u1"])
    if kind == "other-old":
        return forge.update(X, ids["c"], ids["c"], target=ids["c"], previous=ids["u1"])
    assert kind == "other-previous"
    return forge.update(X, ids["a"], ids["c"], target=ids["c"])


@pytest.mark.parametrize("kind", ["blob", "note", "other-ref", "other-old", "other-previous"])
def test_a_bad_discarded_head_is_refused(tmp_path, kind):
    forge, ids = _chain_of_two()
    lost = _forged_discard(forge, ids, kind)
    head = forge.update(X, ids["a"], ids["b"], target=ids["b"], previous=ids["u1"], discarded=lost)
    forge.ref(X, ids["b"], head)
    refused(tmp_path, write(tmp_path, forge.build()), 1, X, "discard")


@pytest.mark.parametrize(
    "links",
    [
        {"target": "c", "previous": "u1"},  # target is not new
        {"previous": "u1"},  # no target although new is set
    ],
    ids=["other-target", "no-target"],
)
def test_an_update_must_link_its_new_value_as_target(tmp_path, links):
    forge, ids = _chain_of_two()
    head = forge.update(X, ids["a"], ids["b"], **{k: ids[v] for k, v in links.items()})
    forge.ref(X, ids["b"], head)
    refused(tmp_path, write(tmp_path, forge.build()), 1, X, "target")


def test_a_deletion_links_no_target(tmp_path):
    forge, ids = _chain_of_two()
    gone = forge.update(X, ids["a"], None, target=ids["a"], previous=ids["u1"])
    head = forge.update(X, None, ids["b"], target=ids["b"], previous=gone)
    forge.ref(X, ids["b"], head)
    refused(tmp_path, write(tmp_path, forge.build()), 1, X, "target")
    honest = forge.update(X, ids["a"], None, previous=ids["u1"])
    forge.ref(X, ids["b"], forge.update(X, None, ids["b"], target=ids["b"], previous=honest))
    forge.objects = {o: d for o, d in forge.objects.items() if o not in (gone, head, ids["c"])}
    accepted(tmp_path, forge.build())


@pytest.mark.parametrize("fault", ["not-from-nothing", "gap", "other-ref", "newest-not-value"])
def test_chain_continuity(tmp_path, fault):
    forge, ids = _chain_of_two()
    if fault == "not-from-nothing":
        head = forge.update(X, ids["c"], ids["b"], target=ids["b"])
    elif fault == "gap":
        head = forge.update(X, ids["c"], ids["b"], target=ids["b"], previous=ids["u1"])
    elif fault == "other-ref":
        first = forge.update("refs/y", None, ids["a"], target=ids["a"])
        head = forge.update(X, ids["a"], ids["b"], target=ids["b"], previous=first)
    else:
        head = forge.update(X, ids["a"], ids["c"], target=ids["c"], previous=ids["u1"])
    forge.ref(X, ids["b"], head)
    refused(tmp_path, write(tmp_path, forge.build()), 1, X)


def test_a_log_head_that_is_not_an_update(tmp_path):
    forge = Forge()
    value = forge.blob(b"a")
    forge.ref(X, value, forge.record(note("head", target=value)))
    refused(tmp_path, write(tmp_path, forge.build()), 1, X)


def test_a_ref_beside_a_folder_of_refs(tmp_path):
    forge = Forge()
    for name in ("refs/a", "refs/a-b", "refs/a/b"):  # "-" sorts between "refs/a" and "refs/a/"
        forge.ref(name, forge.blob(name.encode()))
    refused(tmp_path, write(tmp_path, forge.build()), 2, "cannot exist beside")
