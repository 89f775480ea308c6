"""Refs: names for objects moved by compare-and-swap, each move on a hash chain (``store``: the
update protocol and the memory twin; ``loose``: a file per ref; ``packed``: the packed-refs
file).

Empty on purpose: plumbing that names only objects never imports a ref module.
"""
