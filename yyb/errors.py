"""Every error yyb raises, each with the exit code the CLI turns it into.

The hierarchy of every error class in yyb, each with its exit code; a class defined in another
module names it last, under ``yyb.`` (tests/test_errors.py compares the drawing with the code)::

    YybError                        exit 1  an operation or a check failed
    ├── UsageError                  exit 2  the request itself is malformed (bad input)
    │   ├── FieldError              exit 2  an input document refused for one of its fields
    │   │   ├── CaseError           exit 2  a task that is not a valid case  [cases]
    │   │   ├── InstanceError       exit 2  an unimportable SWE-bench instance  [swebench.instances]
    │   │   └── EnvironmentSpecError exit 2  an environment spec or image that cannot be used
    │   ├── InvalidArgument         exit 2  a value passed that a parameter refuses
    │   ├── InvalidOid              exit 2  not a (possibly abbreviated) hex object id
    │   ├── AmbiguousOid            exit 2  an abbreviation matches several objects
    │   ├── InvalidRefName          exit 2  a ref name that the rules in docs/format.md refuse
    │   ├── InvalidRecord           exit 2  a value that cannot become a canonical record
    │   ├── SchemaViolation         exit 2  a record its schema refuses (also read-side, below)
    │   ├── InvalidBundle           exit 2  not a bundle; unknown version or capability
    │   ├── StoreNotFound           exit 2  no store where one was named or expected
    │   ├── StoreOverlapsRepository exit 2  a store inside, equal to or around a repository
    │   ├── UnsafeToolPath          exit 2  a tool path showing a protected root  [harness.sandbox]
    │   ├── PatchError              exit 2  a patch unreadable or not applying  [harness.apply]
    │   ├── ConfigError             exit 2  an invalid configuration file  [config]
    │   ├── PlanFileError           exit 2  a plan file that is not one  [plans.planfile]
    │   ├── NotInPlan               exit 2  an attempt not of the plan named  [evidence.attempt]
    │   ├── DirtyCheckout           exit 2  a checkout with changes  [readiness.identity]
    │   ├── UnboundBuild            exit 2  code running that the build lacks  [readiness.identity]
    │   ├── GovernedConfigError     exit 2  an invalid governed configuration  [workflow.config]
    │   ├── ResourceHeld            exit 2  a resource lock another holds  [workflow.locks]
    │   ├── WorkflowFileError       exit 2  an invalid workflow or policy file  [workflow.files]
    │   ├── NoStore                 exit 2  no store at a bucket's prefix  [store.bucket.journal]
    │   └── MissingCredential       exit 2  a boundary credential unset  [workflow.run]
    ├── NotFound                    exit 1  a named object or ref does not exist
    │   ├── ObjectMissing           exit 1  no object by that oid
    │   └── RefNotFound             exit 1  no ref by that name
    ├── CorruptObject               exit 1  stored bytes that are not a valid object
    │   ├── ChecksumMismatch        exit 1  bytes that do not hash to their name
    │   ├── NonCanonical            exit 1  a record body with more than one possible encoding
    │   ├── PackError               exit 1  a pack or index that fails a check  [store.objects.pack]
    │   └── BucketCorrupt           exit 1  a bucket's bad journal  [store.bucket.journal]
    ├── CorruptBundle               exit 1  a bundle whose bytes fail a check (hash, length, end)
    ├── UnsafeListing               exit 1  a file listing naming a path outside its folder
    ├── EnvironmentMismatch         exit 1  a built environment that differs from its manifest
    ├── EnvironmentBuildFailed      exit 1  a step of an environment's build failed
    ├── BadSignature                exit 1  a signature that does not verify, or no trusted one
    ├── RefError                    exit 1  a ref that cannot be read or moved as asked
    │   ├── RefLocked               exit 1  another writer holds (or a crash left) `<ref>.lock`
    │   ├── RefMismatch             exit 1  compare-and-swap found another old value
    │   ├── RefConflict             exit 1  a ref name colliding with a folder of refs (or v.v.)
    │   ├── NotFastForward          exit 1  an import that would move a ref off its own history
    │   └── CorruptRef              exit 1  a ref file or ref log that does not hold what it must
    ├── LockHeld                    exit 1  another process holds a store-wide lock (locks/)
    ├── StoreIOError                exit 1  the file system refused a write (full, read-only, ...)
    ├── DiskUnavailable             exit 1  the host refused the attempt's disk  [harness.disk]
    ├── SandboxUnavailable          exit 1  the host cannot start the sandbox  [harness.sandbox]
    ├── GenerationError             exit 1  not exactly the next evaluation  [grading.evaluate]
    ├── Refused                     exit 1  a worker's return that cannot stand  [attempts.remote]
    ├── GrantError                  exit 1  a grant not authorizing the plan  [plans.grant]
    ├── NothingToRetry              exit 1  a plan with no attempt to retry  [plans.retry]
    ├── NotExtended                 exit 1  a log not extending a checkpoint  [store.log.checkpoint]
    ├── ProtocolError               exit 1  a transfer's peer hung up or misspoke  [store.transfer]
    ├── RemoteRefused               exit 1  a transfer's peer refused it  [store.transfer]
    ├── BucketError                 exit 1  a bucket unreachable or refusing  [store.bucket.client]
    ├── NotInStore                  exit 1  what a page asked for is not there  [view.chain]
    └── HistoricalRefused           exit 1  no verifiable historical v1 object  [workflow.history]

Errors carry structured attributes (``oid``, ``path``, ``ref``, ``field``) so that callers
never parse messages. The library raises; only ``yyb.cli`` prints or exits.
"""

from __future__ import annotations


class YybError(Exception):
    """Root of every error yyb raises on purpose."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):
        # Rebuilt without __init__, whose arguments differ from class to class, so that an
        # error raised in a worker process (yyb.store.fanout) reaches the caller intact.
        return (_restore, (type(self), self.args, self.__dict__))


def _restore(cls: type, args: tuple, state: dict) -> YybError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class UsageError(YybError):
    """The request is malformed: wrong arguments, bad input files, unknown names."""

    exit_code = 2


class FieldError(UsageError):
    """An input document refused for one of its fields: ``where`` names the document (a path,
    ``FILE:LINE``), ``field`` the field (None: the document as a whole), ``reason`` why."""

    def __init__(self, where: str, field: str | None, reason: str):
        super().__init__(f"{where}: {field}: {reason}" if field else f"{where}: {reason}")
        self.where = where
        self.field = field
        self.reason = reason


class InvalidArgument(UsageError):
    """A value a caller passed refused: ``argument`` names the parameter (the CLI words it as
    the option that gave it), ``reason`` what it must be, ``value`` what was given."""

    def __init__(self, argument: str, reason: str, value: object = None):
        super().__init__(f"{argument}: {reason}")
        self.argument = argument
        self.reason = reason
        self.value = value


class InvalidOid(UsageError):
    def __init__(self, text: str):
        super().__init__(f"not an object id: {text!r} (expected 4 to 64 lowercase hex digits)")
        self.text = text


class AmbiguousOid(UsageError):
    def __init__(self, prefix: str, candidates: list[str]):
        shown = " ".join(candidates[:10])
        more = f" and {len(candidates) - 10} more" if len(candidates) > 10 else ""
        super().__init__(f"ambiguous object id {prefix}: candidates {shown}{more}")
        self.prefix = prefix
        self.candidates = candidates


class InvalidRefName(UsageError):
    def __init__(self, ref: str, reason: str):
        super().__init__(f"invalid ref name {ref!r}: {reason}")
        self.ref = ref
        self.reason = reason


class InvalidRecord(UsageError):
    """A value that cannot be encoded as a canonical record; ``path`` is a JSON path.

    ``parts`` holds the same location as a tuple of keys and indexes when it is known.
    """

    def __init__(self, path: str, reason: str, parts: tuple = ()):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.parts = parts


class SchemaViolation(UsageError):
    """A record that its schema refuses; ``path`` is the JSON path of the offending value."""

    def __init__(self, schema_version: str, path: str, reason: str, oid: str | None = None):
        where = f"{oid}: " if oid else ""
        super().__init__(f"{where}{schema_version}: {path}: {reason}")
        self.schema_version = schema_version
        self.path = path
        self.reason = reason
        self.oid = oid


class InvalidBundle(UsageError):
    """A file that is not a bundle this version reads: magic, version, capability, header."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: not a readable bundle: {reason}")
        self.path = path
        self.reason = reason


class StoreNotFound(UsageError):
    """No store at ``path``; ``named`` is False when none was named and none could be found
    for ``path`` (the CLI then says how to name one)."""

    def __init__(self, path: str, reason: str, named: bool = True):
        super().__init__(f"{reason}: {path}")
        self.path = path
        self.named = named


class StoreOverlapsRepository(UsageError):
    """A store that is, lies inside, or contains a repository (docs/cli.md, "Where a store
    may be"); ``relation`` is ``is``, ``is inside`` or ``contains``."""

    def __init__(self, store: str, real_store: str, repository: str, relation: str):
        shown = store if real_store == store else f"{store} (really {real_store})"
        super().__init__(
            f"store {shown} {relation} repository {repository}: "
            "a store must lie apart from every repository it records"
        )
        self.path = store
        self.real_path = real_store
        self.repository = repository
        self.relation = relation


class NotFound(YybError):
    pass


class ObjectMissing(NotFound):
    def __init__(self, oid: str):
        super().__init__(f"object not found: {oid}")
        self.oid = oid


class RefNotFound(NotFound):
    def __init__(self, ref: str):
        super().__init__(f"no such ref or object: {ref}")
        self.ref = ref


class CorruptObject(YybError):
    """Stored bytes that are not a valid object; ``code`` names the problem for fsck."""

    code = "corrupt"

    def __init__(self, oid: str | None, reason: str, code: str | None = None):
        super().__init__(f"corrupt object {oid}: {reason}" if oid else f"corrupt object: {reason}")
        self.oid = oid
        self.reason = reason
        if code is not None:
            self.code = code


class ChecksumMismatch(CorruptObject):
    code = "hash-mismatch"

    def __init__(self, expected: str, got: str):
        super().__init__(expected, f"bytes hash to {got}")
        self.expected = expected
        self.got = got


class NonCanonical(CorruptObject):
    """A record body that decodes but is not the one canonical encoding of its value."""

    code = "non-canonical"


class CorruptBundle(YybError):
    """A bundle that fails a check; ``oid`` names the object when one is at fault."""

    def __init__(self, path: str, reason: str, oid: str | None = None, code: str = "corrupt"):
        where = f"object {oid}: " if oid else ""
        super().__init__(f"{path}: bad bundle: {where}{reason}")
        self.path = path
        self.reason = reason
        self.oid = oid
        self.code = code


class UnsafeListing(YybError):
    """A file listing whose entry could not be written inside the folder it is rebuilt into.

    ``path`` is the listed path as stored (shown with ``repr`` so that a NUL or a newline stays
    on one line), None when the entry has no path; ``oid`` is the listing's when known.
    """

    def __init__(self, path: str | None, reason: str, oid: str | None = None):
        where = f"file listing {oid}" if oid else "file listing"
        what = f"refused path {path!r}: " if path is not None else ""
        super().__init__(f"{where}: {what}{reason}")
        self.path = path
        self.reason = reason
        self.oid = oid


class BadSignature(YybError):
    """A signature that does not verify (or names another object); ``oid`` is the signature."""

    def __init__(self, oid: str | None, reason: str):
        super().__init__(f"signature {oid}: {reason}" if oid else f"bad signature: {reason}")
        self.oid = oid
        self.reason = reason


class RefError(YybError):
    pass


class RefLocked(RefError):
    def __init__(self, ref: str, lock_path: str):
        super().__init__(
            f"ref {ref} is locked: {lock_path} exists (another update is running, or one "
            "crashed; remove the lock file only after checking no yyb process is writing)"
        )
        self.ref = ref
        self.path = lock_path


class RefMismatch(RefError):
    def __init__(self, ref: str, expected: str | None, actual: str | None):
        super().__init__(
            f"ref {ref} is at {actual or '(absent)'}, not the expected {expected or '(absent)'}"
        )
        self.ref = ref
        self.expected = expected
        self.actual = actual


class RefConflict(RefError):
    def __init__(self, ref: str, other: str):
        super().__init__(
            f"ref {ref} cannot exist beside ref {other} (one names the other's folder)"
        )
        self.ref = ref
        self.other = other


class NotFastForward(RefError):
    def __init__(self, ref: str, current: str, new: str):
        super().__init__(
            f"ref {ref} is at {current}, which is not in the history of {new} (not a fast-forward)"
        )
        self.ref = ref
        self.current = current
        self.new = new


class CorruptRef(RefError):
    def __init__(self, ref: str, reason: str):
        super().__init__(f"ref {ref}: {reason} (run yyb doctor)")
        self.ref = ref
        self.reason = reason


class LockHeld(YybError):
    def __init__(self, name: str, path: str, holder: dict | None):
        who = f"pid {holder['pid']} on {holder['host']}" if holder else "another process"
        super().__init__(f"{name} is held by {who} ({path}); wait for it to finish")
        self.name = name
        self.path = path
        self.holder = holder


class StoreIOError(YybError):
    def __init__(self, path: str, reason: str):
        super().__init__(f"cannot write {path}: {reason}")
        self.path = path
        self.reason = reason


class EnvironmentSpecError(FieldError):
    """An environment spec, or the image or tree it names, that yyb cannot use: ``where`` is
    the spec (or image) and ``field`` the part refused (docs/environments.md)."""


class EnvironmentMismatch(YybError):
    """A built environment whose files are not the ones its manifest names: ``path`` is the
    first file found changed, added or missing (a path inside the environment's root)."""

    def __init__(self, environment: str, path: str, reason: str):
        super().__init__(f"environment {environment}: {path}: {reason} (rebuild it: yyb env build)")
        self.environment = environment
        self.path = path
        self.reason = reason


class EnvironmentBuildFailed(YybError):
    """A step of an environment's build failed; nothing of the build was kept. ``step`` names
    the step (``download``, ``requirements``, ``install``, ``mmdebstrap``, ``unpack``...)."""

    def __init__(self, environment: str, step: str, reason: str):
        super().__init__(f"environment {environment}: step {step} failed: {reason}")
        self.environment = environment
        self.step = step
        self.reason = reason
