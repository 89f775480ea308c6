"""RFC 6962 hashing and proofs against published vectors, and every mutation refused.

The vectors (leaf inputs, node hashes, roots, and the inclusion and consistency proofs) are
the ones published with transparency-dev/merkle's RFC 6962 tests."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yyb.store.log import merkle

LEAVES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
ROOTS = [
    bytes.fromhex(h)
    for h in (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    )
]
LEVELS = [
    [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
        "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1",
    ],
    [
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
    ],
    [
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    ["5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"],
]
# (leaf index, tree size, proof); the published vectors number leaves from 1.
INCLUSION = [
    (
        0,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        5,
        8,
        [
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (
        1,
        5,
        [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
    (0, 1, []),
]
CONSISTENCY = [
    (1, 1, []),
    (
        1,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (
        2,
        5,
        [
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
    (
        6,
        7,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
]
NODES = merkle.memory_nodes(LEAVES)


def hexes(values) -> list[bytes]:
    return [bytes.fromhex(v) for v in values]


def test_roots_and_nodes_match_the_published_vectors():
    for size, expected in enumerate(ROOTS):
        assert merkle.root_of(LEAVES[:size]) == expected
        assert merkle.root(NODES, size) == expected
    for level, hashes in enumerate(LEVELS):
        width = 1 << level
        for i, value in enumerate(hashes):
            assert NODES(i * width, (i + 1) * width).hex() == value


@pytest.mark.parametrize("index,size,proof", INCLUSION)
def test_inclusion_proofs_match_and_verify(index, size, proof):
    assert merkle.inclusion_proof(NODES, index, size) == hexes(proof)
    leaf = merkle.leaf_hash(LEAVES[index])
    merkle.verify_inclusion(leaf, index, size, hexes(proof), ROOTS[size])


@pytest.mark.parametrize("first,second,proof", CONSISTENCY)
def test_consistency_proofs_match_and_verify(first, second, proof):
    assert merkle.consistency_proof(NODES, first, second) == hexes(proof)
    merkle.verify_consistency(first, second, ROOTS[first], ROOTS[second], hexes(proof))


def flips(proof: list[bytes]):
    """Every proof with one bit of one byte flipped (each byte, each bit)."""
    for i, node in enumerate(proof):
        for at, bit in itertools.product(range(len(node)), range(8)):
            changed = bytearray(node)
            changed[at] ^= 1 << bit
            yield [*proof[:i], bytes(changed), *proof[i + 1 :]]


def test_every_flipped_bit_of_an_inclusion_proof_is_refused():
    for index, size, proof in INCLUSION:
        leaf = merkle.leaf_hash(LEAVES[index])
        for wrong in flips(hexes(proof)):
            with pytest.raises(merkle.ProofError):
                merkle.verify_inclusion(leaf, index, size, wrong, ROOTS[size])


def test_every_flipped_bit_of_a_consistency_proof_is_refused():
    for first, second, proof in CONSISTENCY:
        for wrong in flips(hexes(proof)):
            with pytest.raises(merkle.ProofError):
                merkle.verify_consistency(first, second, ROOTS[first], ROOTS[second], wrong)


def test_wrong_positions_sizes_roots_and_shapes_are_refused():
    some = bytes.fromhex("abacaba000000000000000000000000000000000000000000060061e00123456")
    for index, size, proof in INCLUSION:
        leaf, good, path = merkle.leaf_hash(LEAVES[index]), ROOTS[size], hexes(proof)
        wrong = [
            (leaf, index - 1, size, path, good),
            (leaf, index + 1, size, path, good),
            (leaf, index ^ 2, size, path, good),
            (leaf, index, size * 2, path, good),
            (leaf, index, size // 2, path, good),
            (merkle.leaf_hash(b"wrong"), index, size, path, good),
            (leaf, index, size, path, merkle.EMPTY_ROOT),
            (leaf, index, size, path, some),
            (leaf, index, size, [*path, good], good),
            (leaf, index, size, [good, *path], good),
            (leaf, index, size, [*path, b""], good),
            (leaf, index, size, path[:-1], good),
        ]
        for case in wrong:
            if case[3] == path and case[1:3] == (index, size) and case[0] == leaf:
                continue  # a mutation that happens to change nothing (an empty proof)
            with pytest.raises(merkle.ProofError):
                merkle.verify_inclusion(*case)
    for first, second, proof in CONSISTENCY:
        path = hexes(proof)
        if not path:
            continue
        r1, r2 = ROOTS[first], ROOTS[second]
        wrong = [
            (first - 1, second, r1, r2, path),
            (first + 1, second, r1, r2, path),
            (first ^ 2, second, r1, r2, path),
            (first, second * 2, r1, r2, path),
            (first, second // 2, r1, r2, path),
            (first, second, some, r2, path),
            (first, second, r1, some, path),
            (first, second, r2, r1, path),
            (first, second, r1, r2, []),
            (first, second, r1, r2, [*path, r1]),
            (first, second, r1, r2, [*path, r2]),
            (first, second, r1, r2, [r1, *path]),
            (first, second, r1, r2, [path[0], *path]),
            (first, second, r1, r2, path[:-1]),
        ]
        for case in wrong:
            with pytest.raises(merkle.ProofError):
                merkle.verify_consistency(*case)


def test_trivial_consistency():
    empty = merkle.EMPTY_ROOT
    merkle.verify_consistency(0, 0, empty, empty, [])
    merkle.verify_consistency(0, 5, empty, ROOTS[5], [])
    merkle.verify_consistency(3, 3, ROOTS[3], ROOTS[3], [])
    for args in [
        (0, 0, empty, ROOTS[1], []),
        (1, 1, ROOTS[1], ROOTS[2], []),
        (2, 1, ROOTS[2], ROOTS[1], []),
        (1, 2, ROOTS[1], ROOTS[2], []),
        (0, 1, empty, empty, [empty]),
        (1, 1, ROOTS[1], ROOTS[1], [empty]),
    ]:
        with pytest.raises(merkle.ProofError):
            merkle.verify_consistency(*args)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=8), min_size=1, max_size=70), st.data())
def test_every_proof_of_any_tree_verifies(leaves, data):
    nodes = merkle.memory_nodes(leaves)
    size = data.draw(st.integers(1, len(leaves)))
    index = data.draw(st.integers(0, size - 1))
    top = merkle.root_of(leaves[:size])
    proof = merkle.inclusion_proof(nodes, index, size)
    merkle.verify_inclusion(merkle.leaf_hash(leaves[index]), index, size, proof, top)
    first = data.draw(st.integers(0, size))
    proof = merkle.consistency_proof(nodes, first, size)
    merkle.verify_consistency(first, size, merkle.root_of(leaves[:first]), top, proof)
