"""The transparency log: every ref update in order as Merkle leaves (``transparency``), RFC 6962
hashing and proofs (``merkle``), signed checkpoints of it (``checkpoint``) and a store's audit
against it (``audit``)."""
