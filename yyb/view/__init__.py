"""`yyb view`: the store in a browser, every object with its verification status, read-only.

The server (``server.py``) routes each GET to a page module (``experiments``, ``attempt``,
``objects``), which reads the store only through its API (an attempt's chain: ``chain.py``),
verifies what it shows with the store's own checks (``verify.py``, shown by ``status.py``)
and builds HTML from ``markup.py``, where every string is escaped unless this package made
it, and every link target is a ``urls.Url`` built from a validated oid or ref name.
docs/view.md is the contract: the URL layout, the headers, what "verified" means.
"""
