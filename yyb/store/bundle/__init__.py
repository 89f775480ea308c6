"""Bundles: refs, their update chains and every object they reach in one self-checking file
(``exchange``: write, verify, import, transfer; ``reader``: the bytes of one; ``pack_form``: the
objects of a version 2 bundle; ``entry``: one object as read, shared by the two)."""
