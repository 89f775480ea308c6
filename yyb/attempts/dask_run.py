"""The Dask executor: a plan's attempts run by the workers of a Dask cluster (docs/dask.md).

The controller (``yyb run --executor dask``) does everything it does for a local run: the
plan lock, reconciliation, the dispatch intent created from nothing before anything is
submitted, grading and publishing. Only the candidate's part (``execute``) runs on a worker,
shipped and checked by ``remote``. Three things make a distributed run as honest as a local one:

- **A claim per dispatch.** Dask runs a task again when the worker running it is lost (the
  scheduler's ``allowed-failures``; no client can turn that off). So before submitting, the
  controller puts one token in a scheduler queue named after the intent, and the task takes it
  before anything else: a task run a second time finds the queue empty and refuses to start
  the candidate. The attempt is then closed as an indeterminate harness failure, as recovery
  closes an attempt whose run was lost.
- **A watchdog per task.** A running task does not stop when its controller dies or gives
  up. Every task polls a heartbeat the controller keeps on the scheduler; when it says stop,
  or stops changing for ``YYB_DASK_STALE_SECONDS``, or cannot be read for as long (the
  scheduler is gone), the candidate is cancelled as Ctrl-C cancels a local one.
- **A probe of every worker before the first dispatch.** Each worker must run the sandbox's
  probe, find the harness executable and the harness's secrets in its own environment (they
  are never shipped), and run this very yyb version; one that cannot is refused before
  anything is dispatched, and tasks go only to the workers probed.

``distributed`` is imported here and only here, on first use: no other command pays for it.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field, fields

from yyb.attempts import candidate, remote
from yyb.attempts.execute import unprepared
from yyb.errors import UsageError, YybError

EXTRA = "the Dask executor needs distributed: pip install 'yyb[dask]'"
STALE_ENV = "YYB_DASK_STALE_SECONDS"
STALE_SECONDS = 30.0  # a heartbeat this old (or unreadable this long) stops a task's candidate
BEAT_SECONDS = 1.0
CLAIM_SECONDS = 5.0  # how long a task waits for its claim token (put before it was submitted)
CONNECT_SECONDS = 30.0
CLOSE_SECONDS = 5.0
LOST_SCHEDULER = "scheduler-connection-lost"  # the reason distributed gives such cancels


def _distributed():
    try:
        import distributed
    except ImportError:
        raise UsageError(EXTRA) from None
    return distributed


def stale_seconds(environ: dict[str, str]) -> float:
    """``YYB_DASK_STALE_SECONDS`` (a positive number; default 30).

    Raises:
        UsageError: it is set to something else.
    """
    raw = environ.get(STALE_ENV)
    if raw is None:
        return STALE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < 86400:
        raise UsageError(f"{STALE_ENV} must be a number of seconds above 0, not {raw!r}")
    return value


# --- the worker's side ------------------------------------------------------------------------


@dataclass
class Probed:
    """What a worker's probe found (``probe``): returned to the controller, kept here."""

    name: str
    host: str
    nthreads: int
    bwrap: str
    verified: list[str]
    yyb: str


PROBED_FIELDS = frozenset(f.name for f in fields(Probed))
MAX_THREADS = 4096  # a worker's threads, each an attempt in flight: --jobs is their sum

# What each run's probe found in this worker process, by (run id, worker name): the secrets
# of one run are never handed to another run's candidates.
_HERE: dict[tuple[str, str], remote.Worker] = {}
_HERE_LOCK = threading.Lock()


def probe(run_id: str, harness: dict, tools: list[str], dask_worker=None) -> Probed:
    """Run on each worker by the controller (``Client.run``): can this worker run attempts?

    Raises:
        SandboxUnavailable, UsageError: it cannot; the controller refuses the run.
    """
    import yyb
    from yyb.harness import probe

    version, verified = probe.verify()
    candidate.check_program(harness, tools)
    missing = [name for name in harness.get("secrets", []) if name not in os.environ]
    if missing:
        raise UsageError(f"the harness needs the secret {missing[0]}, not set on this worker")
    absent = [path for path in tools if not os.path.exists(path)]
    if absent:
        raise UsageError(f"the plan's read-only tool path {absent[0]} is not on this worker")
    name = _worker_name(dask_worker)
    with _HERE_LOCK:
        _HERE[(run_id, name)] = remote.Worker(
            name, verified, {s: os.environ[s] for s in harness.get("secrets", [])}
        )
    nthreads = dask_worker.state.nthreads if dask_worker is not None else 1
    return Probed(name, socket.gethostname(), nthreads, version, verified, yyb.__version__)


def _worker_name(dask_worker) -> str:
    if dask_worker is None:
        return socket.gethostname()
    name = str(dask_worker.name)
    return name if name == dask_worker.address else f"{name} {dask_worker.address}"


def work(shipment: remote.Shipment, run_id: str, stale: float) -> remote.Returned:
    """The task: take the dispatch's claim, then run the attempt under a watchdog.

    Raises:
        Refused: the claim is gone (this task ran before, on a worker that was lost), or the
            worker was never probed by this run.
    """
    distributed = _distributed()
    worker = distributed.get_worker()
    client = distributed.get_client()
    claim = distributed.Queue(claim_name(shipment.intent_oid), client=client)
    try:
        token = claim.get(timeout=CLAIM_SECONDS)
    except (TimeoutError, OSError):
        token = None
    _release(claim)
    if token != run_id:
        raise remote.Refused(
            "its claim was taken already: the task ran before on a worker that was lost, "
            "so the candidate is not started again"
        )
    here = _HERE.get((run_id, _worker_name(worker)))
    if here is None:
        raise remote.Refused(f"worker {_worker_name(worker)} was not probed by this run")
    beat = distributed.Variable(heartbeat_name(run_id), client=client)
    try:
        said = beat.get(timeout=CLAIM_SECONDS)
    except (TimeoutError, OSError):
        said = "stop"
    if said == "stop":
        raise remote.Refused("the run was stopped before its candidate started")
    cancel = threading.Event()
    done = threading.Event()
    watch = threading.Thread(
        target=_watch, args=(beat, stale, cancel, done), name="yyb-watchdog", daemon=True
    )
    watch.start()
    try:
        return remote.run(shipment, here, cancel)
    except remote.Refused:
        raise
    except Exception as exc:  # noqa: BLE001 - raised here, never to be taken for a lost link
        raise remote.Refused(f"the task failed on worker {here.name}: {_describe(exc)}") from None
    finally:
        done.set()


def _watch(beat, stale: float, cancel: threading.Event, done: threading.Event) -> None:
    """Cancel the candidate when the controller says stop, or has not been heard from (its
    heartbeat unchanged, or unreadable) for ``stale`` seconds.

    The heartbeat is read by a thread of its own: a read from a scheduler that is gone can
    block for the whole connect timeout, and the clock must go on meanwhile."""
    heard = {"at": time.monotonic(), "value": None, "stop": False}
    lock = threading.Lock()

    def poll() -> None:
        while not done.is_set():
            try:
                value = beat.get(timeout=max(1.0, stale / 4))
            except Exception:  # noqa: BLE001 - a lost scheduler shows as any comm error
                done.wait(BEAT_SECONDS)
                continue
            with lock:
                if value == "stop":
                    heard["stop"] = True
                elif value != heard["value"]:
                    heard["at"], heard["value"] = time.monotonic(), value
            done.wait(BEAT_SECONDS)

    threading.Thread(target=poll, name="yyb-heartbeat", daemon=True).start()
    while not done.wait(min(0.25, stale / 4)):
        with lock:
            silent = time.monotonic() - heard["at"]
            stop = heard["stop"]
        if stop or silent > stale:
            cancel.set()
            return


def forget(run_id: str) -> int:
    """Drop what a run's probe kept in this worker process (its secrets among it); run on
    every worker when the run ends. Returns how many entries were dropped."""
    with _HERE_LOCK:
        mine = [key for key in _HERE if key[0] == run_id]
        for key in mine:
            del _HERE[key]
    return len(mine)


def claim_name(intent_oid: str) -> str:
    return f"yyb-claim-{intent_oid}"


def heartbeat_name(run_id: str) -> str:
    return f"yyb-alive-{run_id}"


# --- the controller's side ------------------------------------------------------------------


@dataclass
class Tally:
    """Progress of a run on the cluster: attempts in flight, and per worker those it returned
    (accepted or refused) and those lost with it."""

    running: int = 0
    done: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        with self.lock:
            self.running += 1

    def end(self, worker: str | None, accepted: bool) -> None:
        """One attempt came back from ``worker`` (None: its run was lost)."""
        with self.lock:
            self.running -= 1
            if worker is None:
                self.lost += 1
            else:
                column = self.done if accepted else self.refused
                column[worker] = column.get(worker, 0) + 1

    def brief(self) -> str:
        """One line of progress: in flight now, and per worker what came back."""
        with self.lock:
            workers = sorted(set(self.done) | set(self.refused))
            back = ", ".join(
                f"{w.split()[0]} {self.done.get(w, 0)}"
                + (f"+{self.refused[w]} refused" if self.refused.get(w) else "")
                for w in workers
            )
            return f"running {self.running}, returned {back or 0}, lost {self.lost}"

    def lines(self) -> list[str]:
        with self.lock:
            workers = sorted(set(self.done) | set(self.refused))
            out = [
                f"dask worker {w}: {self.done.get(w, 0)} returned, {self.refused.get(w, 0)} refused"
                for w in workers
            ]
            out.append(f"dask: {self.lost} lost, {self.running} still running")
        return out


class DaskExecutor:
    """Runs each dispatched attempt's candidate on a probed worker of a Dask cluster; a
    callable as ``run_attempt`` takes it (``executor``). Use as a context manager: it starts
    and stops the heartbeat and closes the client."""

    def __init__(
        self,
        address: str,
        environ: dict[str, str],
        timeout: float = CONNECT_SECONDS,
        quiet: bool = False,
    ):
        self.address = address
        self.quiet = quiet
        self.stale = stale_seconds(environ)
        self.timeout = timeout
        self.run_id = secrets.token_hex(16)
        self.client = None
        self.workers: dict[str, Probed] = {}
        self.tally = Tally()
        self._stop = threading.Event()
        self._beater: threading.Thread | None = None
        self._beat = None
        self._lock = threading.Lock()
        self._lost: str | None = None
        self._checked = (0.0, True)  # (when, whether a probed worker was there)
        self._scheduler_gone = False

    def __enter__(self) -> DaskExecutor:
        distributed = _distributed()
        if self.quiet:  # a lost scheduler is said in one line, not in distributed's logs
            for name in [*logging.root.manager.loggerDict, "distributed"]:
                if name.split(".")[0] == "distributed":
                    logging.getLogger(name).setLevel(logging.CRITICAL)
        _reachable(self.address)
        try:
            self.client = distributed.Client(
                self.address, timeout=self.timeout, set_as_default=False
            )
        except (OSError, TimeoutError, ValueError) as exc:
            raise UsageError(f"cannot reach the Dask scheduler at {self.address}: {exc}") from None
        self._beat = distributed.Variable(heartbeat_name(self.run_id), client=self.client)
        self._beat.set(0)
        self._beater = threading.Thread(target=self._keep_beating, daemon=True, name="yyb-beat")
        self._beater.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._beater is not None:
            self._beater.join(timeout=2 * BEAT_SECONDS)  # a beat may hang on a lost scheduler
        if self.client is None:
            return
        if not self._scheduler_gone:
            try:
                self._beat.set("stop")  # whatever still runs for this run stops now
                self.client.run(forget, self.run_id, on_error="return")
                self._beat.delete()
            except Exception:  # noqa: BLE001 - the scheduler may be gone already
                pass
        try:
            self.client.close(timeout=CLOSE_SECONDS)
        except Exception:  # noqa: BLE001 - a client of a lost scheduler is closed already
            pass

    def _keep_beating(self) -> None:
        count = 0
        while not self._stop.wait(BEAT_SECONDS) and self.stopped() is None:
            count += 1
            try:
                self._beat.set("stop" if self.cancelled() else count)
            except Exception:  # noqa: BLE001 - the workers' watchdogs see a silent heartbeat
                pass

    cancel: threading.Event | None = None
    remote = True  # run_plan grades apart from the dispatch slots (``run._pipeline``)

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def probe(self, ctx) -> int:
        """Probe every worker (waiting for the first); return how many attempts may run at
        once (their threads). Called before anything is dispatched; fails closed.

        Raises:
            UsageError, SandboxUnavailable: no worker, or one that cannot run attempts.
        """
        from yyb.harness.sandbox import SandboxUnavailable

        self.cancel = ctx.cancel
        try:
            self.client.wait_for_workers(1, timeout=self.timeout)
        except (TimeoutError, OSError):
            raise UsageError(
                f"no Dask worker joined {self.address} in {self.timeout:g} s"
            ) from None
        tools = list(ctx.tools())
        try:
            found = self.client.run(probe, self.run_id, ctx.harness, tools, on_error="return")
        except (OSError, TimeoutError) as exc:
            raise UsageError(f"the workers of {self.address} could not be probed: {exc}") from None
        import yyb

        for address, answer in sorted(found.items()):
            if isinstance(answer, SandboxUnavailable):
                raise SandboxUnavailable(f"on worker {address}: {answer.reason}")
            if isinstance(answer, BaseException):
                raise UsageError(f"worker {address} cannot run attempts: {_describe(answer)}")
            problem = _misprobed(address, answer)
            if problem is not None:
                raise UsageError(f"worker {address} answered the probe with {problem}")
            if answer.yyb != yyb.__version__:
                raise UsageError(
                    f"worker {address} runs yyb {answer.yyb}, this controller {yyb.__version__}"
                )
            self.workers[address] = answer
        return sum(p.nthreads for p in self.workers.values())

    def __call__(self, ctx, attempt_oid: str, intent_oid: str):
        """Ship one dispatched attempt, wait for it, and accept what comes back: the
        execution (oid, record), its ref created, or ``Early``.

        Raises:
            Refused: the attempt's run was lost or its return refused (the caller closes it).
        """
        try:
            shipment = remote.ship(ctx, attempt_oid, intent_oid)
        except (OSError, YybError) as exc:
            return unprepared(exc, intent_oid, "the attempt could not be shipped")
        distributed = _distributed()
        try:
            claim = distributed.Queue(claim_name(intent_oid), client=self.client, maxsize=1)
            claim.put(self.run_id)
            future = self.client.submit(
                work,
                shipment,
                self.run_id,
                self.stale,
                key=f"yyb-attempt-{intent_oid}",
                workers=sorted(self.workers),
                allow_other_workers=False,
                pure=False,
            )
        except Exception as exc:  # noqa: BLE001 - the scheduler is gone: nothing was started
            self._lose(f"the Dask scheduler at {self.address} was lost ({_describe(exc)})", True)
            raise remote.Refused(
                f"it could not be submitted to {self.address} ({_describe(exc)}); "
                "its candidate never started"
            ) from None
        self.tally.start()
        try:
            returned = self._wait(ctx, future)
            address = self._ran_on(future)
        except remote.Refused:
            self.tally.end(None, False)
            raise
        except Exception as exc:  # noqa: BLE001 - a lost worker, scheduler or connection
            self.tally.end(None, False)
            if self._cluster_lost(exc):
                self._lose(
                    f"the Dask scheduler at {self.address} was lost ({_describe(exc)})", True
                )
            raise remote.Refused(
                f"its run on the Dask cluster was lost ({_describe(exc)})"
            ) from None
        finally:
            try:
                future.release()
            except Exception:  # noqa: BLE001 - nothing to release on a closed client
                pass
            _release(claim)
        probed = self.workers.get(address)
        worker = probed.name if probed is not None else address or "?"
        try:
            if probed is None:
                raise remote.Refused(
                    f"the scheduler names no worker this run probed as the one that ran it "
                    f"({address or 'none'})"
                )
            ran_on = remote.Worker(probed.name, list(probed.verified), host=probed.host)
            accepted = remote.receive(ctx, shipment, returned, ran_on)
        except remote.Refused as exc:
            self.tally.end(worker, False)
            raise remote.Refused(f"worker {worker}'s return was refused: {exc.reason}") from None
        self.tally.end(worker, True)
        return accepted

    def _wait(self, ctx, future):
        """The task's result, watching meanwhile that a worker this run probed is still
        there: tasks may run only on those, so with all of them gone the scheduler would
        keep the task waiting for ever.

        Raises:
            Refused: every probed worker is gone, or the run was stopped and the task did
                not come back within the heartbeat's grace.
            Exception: what the task raised, or the client's error.
        """
        gone_since = stopped_since = None
        while True:
            try:
                return future.result(timeout=BEAT_SECONDS)
            except TimeoutError:
                pass
            except remote.Refused as exc:  # the task's own refusal: the worker's word
                raise remote.Refused(_refusal(exc)) from None
            now = time.monotonic()
            if self.cancelled():
                stopped_since = stopped_since or now
                if now - stopped_since > self.stale + CLOSE_SECONDS:
                    raise remote.Refused("the run was stopped and the task did not come back")
            if self._probed_alive():
                gone_since = None
                continue
            gone_since = gone_since or now
            if now - gone_since > self.stale:
                why = f"every worker this run probed left {self.address}"
                self._lose(why)
                raise remote.Refused(f"{why}; its run is lost")

    def _ran_on(self, future) -> str | None:
        """The address of the worker that ran the task, by the scheduler's record of who
        holds its result (not by the result's word); None when it names no single worker."""
        try:
            held = self.client.who_has([future]).get(future.key, ())
        except Exception:  # noqa: BLE001 - the scheduler is gone: no record to go by
            return None
        return held[0] if len(held) == 1 else None

    def _probed_alive(self) -> bool:
        """Whether one worker this run probed is still connected (asked at most once a beat
        whoever asks)."""
        with self._lock:
            now = time.monotonic()
            if now - self._checked[0] >= BEAT_SECONDS:
                try:
                    present = set(self.client.scheduler_info()["workers"])
                    self._checked = (now, bool(present & set(self.workers)))
                except Exception:  # noqa: BLE001 - the scheduler is gone: the result says so
                    self._checked = (now, True)
            return self._checked[1]

    def _cluster_lost(self, exc: BaseException) -> bool:
        """Whether a task's failure means the cluster is gone (not just this task)."""
        # distributed cancels every future of a client that lost its scheduler, with this
        # reason (FutureCancelledError.reason); a comm failure is an OSError.
        if isinstance(exc, OSError) or getattr(exc, "reason", None) == LOST_SCHEDULER:
            return True
        return self.client.status != "running"

    def _lose(self, why: str, scheduler_gone: bool = False) -> None:
        """Take no more attempts (they stay undispatched for a later run). A client that
        lost its scheduler holds every new dispatch until it gives up reconnecting, so
        waiting to see whether it comes back would only close more attempts unstarted."""
        with self._lock:
            if self._lost is None:
                self._lost = why
            self._scheduler_gone = self._scheduler_gone or scheduler_gone

    def stopped(self) -> str | None:
        """None while attempts may be submitted; why not, once the scheduler is lost."""
        with self._lock:
            return self._lost


def _misprobed(address: str, answer) -> str | None:
    """What is wrong with a probe's answer, which is the worker's word like a return (None:
    it is a ``Probed`` whose fields have their types, naming the worker's own address)."""
    if type(answer) is not Probed or set(vars(answer)) != PROBED_FIELDS:
        return "something other than a Probed"
    texts = (answer.name, answer.host, answer.bwrap, answer.yyb)
    if not all(type(t) is str and 0 < len(t) <= remote.MAX_NAME for t in texts):
        return f"a name, host or version that is not a text of 1 to {remote.MAX_NAME} characters"
    if answer.name != address and not answer.name.endswith(f" {address}"):
        return "another worker's name"
    if type(answer.nthreads) is not int or not 0 < answer.nthreads <= MAX_THREADS:
        return f"a thread count that is not a number from 1 to {MAX_THREADS}"
    verified = answer.verified
    if type(verified) is not list or not all(type(v) is str and v for v in verified):
        return "verified properties that are not a list of texts"
    return None


def _refusal(exc: remote.Refused) -> str:
    """The reason a task gave for refusing, if it is a text of at most ``MAX_REASON``
    characters; else a sentence saying it was not."""
    reason = vars(exc).get("reason")
    if type(reason) is str and 0 < len(reason) <= remote.MAX_REASON:
        return reason
    return (
        "the task refused to run, with a reason that is not a text of 1 to "
        f"{remote.MAX_REASON} characters"
    )


def _release(claim) -> None:
    """Drop this client's hold on a claim queue; the scheduler deletes the queue once neither
    the controller nor the task holds it (a task run again after that finds a new, empty
    queue, and refuses as it would have)."""
    try:
        claim.close()
    except Exception:  # noqa: BLE001 - a client that is no longer running holds nothing
        pass


def _reachable(address: str) -> None:
    """Refuse at once a plain TCP address where nothing listens (the client would retry for
    its whole connect timeout); other schemes are left to the client.

    Raises:
        UsageError: the connection is refused or the name does not resolve.
    """
    scheme, sep, rest = address.rpartition("://")
    if sep and scheme != "tcp":
        return
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except (ConnectionRefusedError, socket.gaierror) as exc:
        raise UsageError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    except OSError:
        pass  # slow or filtered: the client's own timeout decides


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
