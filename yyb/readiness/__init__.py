"""`yyb release-readiness`: an offline receipt that this build, on this host, isolates
candidates and grades honestly (docs/readiness.md).

- ``identity``: what the receipt binds (the build, the configured harnesses, the sandbox,
  the kernel and Python).
- ``suite``: the synthetic source repository, graders and cases, the canaries and where they
  are planted, and the built-in stand-in candidate with its probe.
- ``run``: runs the suite as real attempts through the real sandbox and writes the check
  records and the receipt.
- ``verify``: what ``yyb doctor`` checks of a receipt, from the retained attempts.
"""
