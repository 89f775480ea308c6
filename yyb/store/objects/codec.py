"""Canonical MessagePack: the one encoding of a record body (docs/format.md, "Records").

A value is canonical-encodable when it is built from maps with string keys, arrays, strings,
bytes, integers in [-2**63, 2**64), booleans and nil, nested at most ``MAX_DEPTH`` containers
deep. Maps are written with keys sorted by their UTF-8 bytes; every integer, string, binary,
array and map header takes its shortest form. Decoding re-encodes and refuses any body whose
bytes differ, so a value has exactly one body and one object id.

JSON is the human view of a record: bytes appear as ``{"$bin": "<base64>"}``, which is why a
map whose only key is ``$bin`` is not allowed inside a record.
"""

from __future__ import annotations

# json and base64 are imported where they are used: reading an object needs neither
# (plumbing start-up, docs/performance.md).
from yyb.errors import InvalidRecord, NonCanonical

TYPE_CHECKING = False  # typing is not imported at run time (docs/performance.md)
if TYPE_CHECKING:
    from typing import Any

# msgpack is imported by the functions that use it: plumbing that shows blobs never pays for it.

MAX_DEPTH = 64
INT_MIN = -(2**63)
INT_MAX = 2**64 - 1
BIN_KEY = "$bin"

_packer_options = {"use_bin_type": True, "strict_types": True, "datetime": False}


def json_path(path: tuple) -> str:
    """Render a path of keys and indexes as a JSON path such as ``$.fields.tags[2]``."""
    out = ["$"]
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif part.isidentifier():
            out.append(f".{part}")
        else:
            import json

            out.append(f"[{json.dumps(part)}]")
    return "".join(out)


class _Fault(Exception):
    """Internal: a problem found at ``path``; turned into the caller's error type."""

    def __init__(self, path: tuple, reason: str):
        self.path = path
        self.reason = reason


def _sorted_key(key: Any, path: tuple) -> bytes:
    if type(key) is not str:
        raise _Fault(path, f"map key {key!r} is not a string")
    try:
        return key.encode("utf-8")
    except UnicodeEncodeError:
        raise _Fault(path, f"map key {key!r} is not valid Unicode (lone surrogate)") from None


def _canon(value: Any, depth: int, path: tuple) -> Any:
    """Validate ``value`` and return a copy whose maps iterate in canonical key order."""
    t = type(value)
    if t is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _Fault(path, "string is not valid Unicode (lone surrogate)") from None
        return value
    if t is int:
        if not INT_MIN <= value <= INT_MAX:
            raise _Fault(path, "integer out of range [-2**63, 2**64)")
        return value
    if t is bool or value is None or t is bytes:
        return value
    if t is dict:
        if depth >= MAX_DEPTH:
            raise _Fault(path, f"nesting deeper than {MAX_DEPTH} levels")
        if len(value) == 1 and BIN_KEY in value:
            raise _Fault(path, f'a map whose only key is "{BIN_KEY}" is reserved for bytes')
        keyed = sorted((_sorted_key(k, path), k) for k in value)
        return {k: _canon(value[k], depth + 1, (*path, k)) for _, k in keyed}
    if t is list or t is tuple:
        if depth >= MAX_DEPTH:
            raise _Fault(path, f"nesting deeper than {MAX_DEPTH} levels")
        return [_canon(item, depth + 1, (*path, i)) for i, item in enumerate(value)]
    if t is float:
        raise _Fault(path, "floats are not allowed (use integers: micro-units, milliseconds)")
    if t is bytearray or t is memoryview:
        return bytes(value)
    raise _Fault(path, f"values of type {t.__name__} cannot be stored in a record")


_ALLOWED_LEAVES = (str, int, bytes, bool, type(None))


def _check_decoded(value: dict) -> None:
    """What the decoder alone cannot refuse: floats, timestamps, nesting, ``$bin`` maps.

    Keys, their order and strings were checked while decoding; this only walks the values.
    """
    stack = [(value, 1, ())]
    while stack:
        item, depth, path = stack.pop()
        if depth > MAX_DEPTH:
            raise _Fault(path, f"nesting deeper than {MAX_DEPTH} levels")
        if type(item) is dict:
            if len(item) == 1 and BIN_KEY in item:
                raise _Fault(path, f'a map whose only key is "{BIN_KEY}" is reserved for bytes')
            for key, child in item.items():
                if type(child) in (dict, list):
                    stack.append((child, depth + 1, (*path, key)))
                elif type(child) not in _ALLOWED_LEAVES:
                    _canon(child, depth, (*path, key))  # raises with the precise reason
        else:
            for i, child in enumerate(item):
                if type(child) in (dict, list):
                    stack.append((child, depth + 1, (*path, i)))
                elif type(child) not in _ALLOWED_LEAVES:
                    _canon(child, depth, (*path, i))


class _Slow(Exception):
    """Internal: leave the quick path; ``_canon`` then says precisely what is wrong."""


# Integers out of range are left to the packer, which refuses them (OverflowError).
_QUICK_LEAVES = frozenset((str, bytes, bool, type(None), int))
_STR = {str}


def _quick(value: Any, depth: int) -> Any:
    """``_canon`` without tracking paths: a copy whose maps iterate in canonical key order.

    Raises _Slow (or TypeError) on anything unusual. Strings and integers are not checked
    here: the packer refuses lone surrogates and out-of-range integers itself. Code point
    order is UTF-8 byte order, so keys sort as strings.
    """
    t = type(value)
    if t is dict:
        if depth >= MAX_DEPTH or (len(value) == 1 and BIN_KEY in value):
            raise _Slow
        keys = sorted(value)
        if keys and set(map(type, keys)) != _STR:
            raise _Slow
        if set(map(type, value.values())) <= _QUICK_LEAVES:
            # A map of leaves already in order is packed as it is (no copy).
            return value if keys == list(value) else {key: value[key] for key in keys}
        return {key: _quick(value[key], depth + 1) for key in keys}
    if t is list or t is tuple:
        if depth >= MAX_DEPTH:
            raise _Slow
        if set(map(type, value)) <= _QUICK_LEAVES:
            return value if t is list else list(value)  # strict_types packs no tuple
        return [_quick(item, depth + 1) for item in value]
    if t in _QUICK_LEAVES:
        return value
    raise _Slow


def encode(value: dict) -> bytes:
    """Return the canonical MessagePack body of a record value.

    Raises:
        InvalidRecord: the value holds something a record cannot (the error names its path).
    """
    import msgpack

    if type(value) is not dict:
        raise InvalidRecord("$", "a record must be a map")
    try:
        return msgpack.packb(_quick(value, 0), **_packer_options)
    except (_Slow, TypeError, UnicodeEncodeError, OverflowError):
        pass  # the careful walk below finds the problem and names its path
    try:
        canon = _canon(value, 0, ())
    except _Fault as fault:
        raise InvalidRecord(json_path(fault.path), fault.reason, fault.path) from None
    return msgpack.packb(canon, **_packer_options)


class _PairsCheck:
    """object_pairs_hook that refuses duplicate and unsorted keys while msgpack decodes."""

    def __call__(self, pairs: list) -> dict:
        previous = None
        for key, _ in pairs:
            if type(key) is not str:
                raise _Fault((), f"map key {key!r} is not a string")
            encoded = key.encode("utf-8")
            if previous is not None:
                if encoded == previous:
                    raise _Fault((), f"duplicate map key {key!r}")
                if encoded < previous:
                    raise _Fault(
                        (), f"map keys not sorted by UTF-8 bytes ({key!r} is out of order)"
                    )
            previous = encoded
        return dict(pairs)


def _reject_ext(code: int, data: bytes) -> Any:
    raise _Fault((), f"ext type {code} is not allowed")


def _plainly_canonical(value: Any) -> bool:
    """True when every map's keys are strings in strictly ascending order and every leaf is an
    allowed type, no deeper than ``MAX_DEPTH``: what msgpack's plain decoder does not refuse.

    Code point order is UTF-8 byte order, and a strict UTF-8 decode yields no lone surrogates,
    so comparing the decoded keys as strings compares their encoded bytes.
    """
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return False
        if type(item) is dict:
            previous = None
            for key in item:
                if type(key) is not str or (previous is not None and key <= previous):
                    return False
                previous = key
            if previous == BIN_KEY and len(item) == 1:
                return False
            children = item.values()
        else:
            children = item
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif kind not in _ALLOWED_LEAVES:
                return False
    return True


def decode_value(body: bytes, oid: str | None = None) -> dict:
    """Decode a record body without proving it canonical, for a reader whose bytes are proved
    by their hash and who needs only the value; ``decode`` (as fsck uses) proves the form.

    Raises:
        NonCanonical: the body does not decode to a map of allowed values.
    """
    import msgpack

    try:
        value = msgpack.unpackb(
            body, raw=False, strict_map_key=False, ext_hook=_reject_ext, timestamp=0
        )
    except Exception:  # noqa: BLE001 - any failure is explained by the careful decode
        value = None
    if type(value) is dict:
        return value
    return _decode_carefully(body, oid)


def decode(body: bytes, oid: str | None = None) -> dict:
    """Decode a record body and prove it canonical.

    The common case costs one C decode, a walk over the values and one C re-encode; anything
    that fails it is decoded again, slowly, to say precisely what is wrong.

    Raises:
        NonCanonical: the body is malformed, holds a forbidden type, or re-encodes to other bytes.
    """
    import msgpack

    try:
        value = msgpack.unpackb(
            body, raw=False, strict_map_key=False, ext_hook=_reject_ext, timestamp=0
        )
    except Exception:  # noqa: BLE001 - any failure is explained by the careful decode below
        value = None
    # Decoded maps iterate in the body's order; with their keys proved strictly ascending,
    # re-encoding them as they are must give the body back byte for byte.
    if (
        type(value) is dict
        and _plainly_canonical(value)
        and msgpack.packb(value, **_packer_options) == body
    ):
        return value
    return _decode_carefully(body, oid)


def _decode_carefully(body: bytes, oid: str | None) -> dict:
    """Decode with every check made as the bytes are read, raising NonCanonical with the
    precise reason; returns the value only if, against expectation, it is canonical."""
    import msgpack

    try:
        value = msgpack.unpackb(
            body,
            raw=False,
            use_list=True,
            strict_map_key=False,
            object_pairs_hook=_PairsCheck(),
            ext_hook=_reject_ext,
            timestamp=0,
        )
    except _Fault as fault:
        raise NonCanonical(oid, fault.reason) from None
    except msgpack.ExtraData:
        raise NonCanonical(oid, "trailing bytes after the top-level map") from None
    except UnicodeDecodeError:
        raise NonCanonical(oid, "a string is not valid UTF-8") from None
    except msgpack.exceptions.StackError:
        raise NonCanonical(oid, f"nesting deeper than {MAX_DEPTH} levels") from None
    except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as exc:
        detail = str(exc) or exc.__class__.__name__
        raise NonCanonical(oid, f"not decodable MessagePack ({detail})") from None
    if type(value) is not dict:
        raise NonCanonical(oid, "the body is not a map")
    try:
        _check_decoded(value)
    except _Fault as fault:
        raise NonCanonical(oid, f"{json_path(fault.path)}: {fault.reason}") from None
    if msgpack.packb(value, **_packer_options) != body:
        raise NonCanonical(
            oid, "an integer, string, binary, array or map header is not in its shortest form"
        )
    return value


# --- the JSON view -------------------------------------------------------------------------


class _Float:
    def __init__(self, text: str):
        self.text = text


class _Pairs(list):
    """A JSON object kept as its list of pairs so duplicates survive until we can name them."""


def _from_json(value: Any, path: tuple) -> Any:
    t = type(value)
    if t is _Pairs:
        keys = [k for k, _ in value]
        if len(keys) == 1 and keys[0] == BIN_KEY:
            text = value[0][1]
            if type(text) is not str:
                raise _Fault(path, f'"{BIN_KEY}" must hold a base64 string')
            import base64
            import binascii

            try:
                return base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError):
                raise _Fault(path, f'"{BIN_KEY}" holds invalid base64') from None
        out = {}
        for key, item in value:
            if key in out:
                raise _Fault((*path, key), "duplicate key")
            out[key] = _from_json(item, (*path, key))
        return out
    if t is list:
        return [_from_json(item, (*path, i)) for i, item in enumerate(value)]
    if t is _Float:
        raise _Fault(
            path,
            f"{value.text} is a float; floats are not allowed (use integers: "
            "micro-units, milliseconds)",
        )
    return value


def _no_constant(name: str) -> Any:
    return _Float(name)


def from_json(text: str | bytes) -> dict:
    """Parse JSON text into a record value, refusing floats and duplicate keys by JSON path.

    Raises:
        InvalidRecord: the text is not JSON, or holds what a record cannot.
    """
    import json

    try:
        raw = json.loads(
            text, object_pairs_hook=_Pairs, parse_float=_Float, parse_constant=_no_constant
        )
    except json.JSONDecodeError as exc:
        raise InvalidRecord(
            "$", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except (UnicodeDecodeError, RecursionError) as exc:
        raise InvalidRecord("$", f"not valid JSON: {exc.__class__.__name__}") from None
    except ValueError:  # an integer with more digits than Python converts
        raise InvalidRecord("$", "not valid JSON: a number is too long") from None
    try:
        value = _from_json(raw, ())
        if type(value) is not dict:
            raise _Fault((), "a record must be a JSON object")
        _canon(value, 0, ())
    except _Fault as fault:
        raise InvalidRecord(json_path(fault.path), fault.reason, fault.path) from None
    except RecursionError:
        raise InvalidRecord("$", f"nesting deeper than {MAX_DEPTH} levels") from None
    return value


def loads_strict(text: str) -> Any:
    """JSON another program wrote, read strictly but not as a record: any number, but no key
    twice in an object and no NaN or Infinity. Raises ValueError (json's, or saying which)."""
    import json

    return json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_not_json)


def _unique_pairs(pairs: list) -> dict:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key appears twice")
    return dict(pairs)


def _not_json(name: str):
    raise ValueError(f"{name} is not JSON")


def to_json(value: Any) -> Any:
    """Return a JSON-serializable view of a decoded record (bytes become ``{"$bin": ...}``)."""
    t = type(value)
    if t is dict:
        return {k: to_json(v) for k, v in value.items()}
    if t is list:
        return [to_json(v) for v in value]
    if t is bytes:
        import base64

        return {BIN_KEY: base64.b64encode(value).decode("ascii")}
    return value
