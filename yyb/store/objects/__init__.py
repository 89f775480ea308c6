"""Objects: what one is (``format``), its canonical record bytes (``codec``), where objects live
(``store``: the base and the memory twin; ``loose``: one file each; ``pack``: packs and their
index) and the forked helper that hashes a share of a bulk pack read (``pack_hashing``).

Empty on purpose: plumbing that reads one object imports only the modules it uses.
"""
