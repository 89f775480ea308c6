"""Merkle tree hashing and proofs as RFC 6962 defines them (and RFC 9162 verifies them).

A tree of ``n`` leaves ``D[0:n]`` hashes as ``MTH``: the empty tree is SHA-256 of nothing, a
leaf is ``SHA-256(0x00 || data)``, and a larger tree splits at ``k``, the largest power of two
below ``n``: ``SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n]))``. Proofs are lists of 32-byte
node hashes; ``inclusion_proof`` and ``consistency_proof`` build them from any ``Nodes``
(something that can give the hash of a range of leaves), and ``verify_inclusion`` and
``verify_consistency`` check them with nothing but hashes. docs/format.md states the same
for an independent verifier.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()

# (lo, hi) -> MTH(D[lo:hi]); the proofs below only ask for ranges that start at a multiple of
# the largest power of two not above their length (aligned, as RFC 6962's splits make them).
Nodes = Callable[[int, int], bytes]


class ProofError(ValueError):
    """A proof that does not verify, or a request no proof answers."""


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def split(n: int) -> int:
    """The largest power of two strictly below ``n`` (``n`` > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def root_of(leaves: Sequence[bytes]) -> bytes:
    """MTH of the leaf data ``leaves``, computed from scratch (the reference)."""
    if not leaves:
        return EMPTY_ROOT
    level = [leaf_hash(data) for data in leaves]
    return _fold(level, 0, len(level))


def _fold(hashes: Sequence[bytes], lo: int, hi: int) -> bytes:
    if hi - lo == 1:
        return hashes[lo]
    k = split(hi - lo)
    return node_hash(_fold(hashes, lo, lo + k), _fold(hashes, lo + k, hi))


def memory_nodes(leaves: Sequence[bytes]) -> Nodes:
    """``Nodes`` over leaf data held in memory."""
    hashes = [leaf_hash(data) for data in leaves]
    return lambda lo, hi: _fold(hashes, lo, hi)


def root(nodes: Nodes, size: int) -> bytes:
    return EMPTY_ROOT if size == 0 else nodes(0, size)


def inclusion_proof(nodes: Nodes, index: int, size: int) -> list[bytes]:
    """The audit path of leaf ``index`` in the tree of the first ``size`` leaves."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size}")
    proof: list[bytes] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = split(hi - lo)
        if index - lo < k:
            proof.append(nodes(lo + k, hi))
            hi = lo + k
        else:
            proof.append(nodes(lo, lo + k))
            lo += k
    proof.reverse()  # the sibling nearest the leaf first
    return proof


def consistency_proof(nodes: Nodes, first: int, second: int) -> list[bytes]:
    """The proof that the tree of the first ``first`` leaves is a prefix of the tree of the
    first ``second`` (empty when ``first`` is 0 or equals ``second``)."""
    if not 0 <= first <= second:
        raise ProofError(f"no consistency proof from {first} to {second} leaves")
    if first in (0, second):
        return []
    proof: list[bytes] = []
    lo, hi, whole = 0, second, True
    m = first
    while True:
        n = hi - lo
        if m == n:
            if not whole:
                proof.append(nodes(lo, hi))
            break
        k = split(n)
        if m <= k:
            proof.append(nodes(lo + k, hi))
            hi = lo + k
        else:
            proof.append(nodes(lo, lo + k))
            lo, m, whole = lo + k, m - k, False
    proof.reverse()
    return proof


def _check(hashes: Sequence[bytes], what: str) -> None:
    if any(len(h) != HASH_SIZE for h in hashes):
        raise ProofError(f"{what}: every hash is {HASH_SIZE} bytes")


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], expected_root: bytes
) -> None:
    """Check that the leaf hash ``leaf`` is leaf ``index`` of the tree of ``size`` whose
    root is ``expected_root`` (RFC 9162, 2.1.3.2).

    Raises:
        ProofError: it is not.
    """
    _check([leaf, expected_root, *proof], "inclusion proof")
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size}")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise ProofError("the inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("the inclusion proof is shorter than the tree is deep")
    if r != expected_root:
        raise ProofError("the inclusion proof does not lead to the root")


def verify_consistency(
    first: int, second: int, first_root: bytes, second_root: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree of ``first`` leaves (root ``first_root``) is a prefix of the tree
    of ``second`` leaves (root ``second_root``) (RFC 9162, 2.1.4.2).

    Raises:
        ProofError: it is not.
    """
    _check([first_root, second_root, *proof], "consistency proof")
    if not 0 <= first <= second:
        raise ProofError(f"a tree of {second} cannot extend one of {first}")
    if first == second:
        if proof:
            raise ProofError("a tree is consistent with itself by an empty proof")
        if first_root != second_root:
            raise ProofError("two trees of one size with different roots")
        return
    if first == 0:
        if proof:
            raise ProofError("the empty tree is consistent with any by an empty proof")
        return
    if not proof:
        raise ProofError("the consistency proof is empty")
    path = list(proof)
    if first & (first - 1) == 0:  # a power of two: the first tree is a node of the second
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("the consistency proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("the consistency proof is shorter than the tree is deep")
    if fr != first_root or sr != second_root:
        raise ProofError("the consistency proof does not lead to both roots")
