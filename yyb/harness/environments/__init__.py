"""Environments: declared, content-addressed root filesystems a case's processes run on.

An environment is built once from its spec (docs/environments.md) into a tree under the
registry, described by a manifest (every file's path, mode and SHA-256), verified against it
before use and mounted read-only as the sandbox's root. Three kinds make a tree: ``python``
(a virtual environment over the host's or another environment's interpreter), ``rootfs`` (a
Debian root from mmdebstrap) and ``oci`` (an OCI image layout or a saved image, unpacked).
"""

SPEC = "yyb_environment_spec.v1"  # what a case declares (schemas/yyb_environment_spec.v1)
ENVIRONMENT = "yyb_environment.v1"  # what was built from it (schemas/yyb_environment.v1)
KINDS = ("python", "rootfs", "oci")
WORKSPACE = "/testbed"  # where a case's workspace is shown inside an environment, by default
REFS = "refs/environments/"  # refs/environments/<spec oid> -> the environment last built
PYTHON_MOUNT = "/yyb/python"  # where a ``python`` environment's virtual environment is shown
