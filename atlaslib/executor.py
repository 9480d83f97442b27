"""Run the (card, version, model, protocol) matrix serially or on dask.distributed, with retries.

Every request is an independent job: one call of :func:`atlaslib.runner.run` (papermill, cached, atomic
outputs). :func:`run_requests` hands the jobs to one of two executors:

``"serial"``
    one after the other in this process (what ``atlas book`` has always done).
``"dask"``
    one Dask task per request. By default on a :class:`distributed.LocalCluster` started for the
    occasion: ``n_workers`` worker processes (default: the number of cores, at most one per run to
    execute), one thread each, a memory limit per worker, bound to 127.0.0.1, no dashboard. With
    ``scheduler="tcp://HOST:PORT"`` (or the environment variable ``ATLAS_DASK_SCHEDULER``) the tasks go to
    an existing cluster instead, e.g. one that dask-jobqueue started on SLURM (see ``book/methods/scale_out.md``).

Faults. A notebook that raises is a *result*, not a fault: :class:`~atlaslib.runner.RunFailed` comes back
as data and is never retried (a notebook error is deterministic). A worker that dies under a task (killed,
out of memory, node lost: Dask's ``KilledWorker`` or a closed connection) is a fault: the task is submitted
again, ``retries`` times (default once), and if it still does not finish the run is reported by name as
failed (:class:`WorkerLost`). Either way the failure is in ``MatrixReport.failures`` and the build fails
loudly; a run never just goes missing. Because the runner writes outputs by temp file + rename, a killed
run leaves no partial file and the next run resumes from the finished cells. An existing scheduler must
complete the connection within :data:`SCHEDULER_DEADLINE` seconds (:class:`ExecutorError` naming it
otherwise: a server that accepts the connection and never answers cannot hold the command), and a ``tcp://``
server must open with a Dask handshake, read here with bounded reads before Dask's client reads anything (one
that sends anything else is refused at once, naming it: Dask would read a length from the garbage); when no run has
finished for :data:`HEARTBEAT` seconds the scheduler is asked whether it still answers, and one that does not
within the deadline (frozen, its machine gone) fails the runs not yet finished by name
(:class:`SchedulerLost`), keeping the finished ones.

On Dask, the runs whose outputs are current are served from the cache on the client before anything is
submitted (a build with nothing changed starts no cluster), and on the LocalCluster a run is handed out
only when a worker is free, so a worker that dies takes down the run it was executing and no other. A run
done on Dask records its worker address and its number of attempts in ``RunOutcome.extra``.

Results are the same as a serial run's: each run is seeded and does the same work wherever it executes;
only the timing and environment fields of a result cell differ.

Why one module of this size: it has one job, handing runs to a worker and getting every one back, and most
of its lines are the fault cases above (dead workers, lost schedulers, deadlines, retries), each tested.
"""
from __future__ import annotations

import json
import os
import re
import time
import traceback
import uuid
from pathlib import Path

from . import runner
from .matrix import BuildPaths, MatrixReport, print_timing
from .runner import RunFailed, RunOutcome, RunRequest

EXECUTORS = ("serial", "dask")
SCHEDULER_ENV = "ATLAS_DASK_SCHEDULER"
#: the smallest memory limit a LocalCluster worker is started with (below it the nanny stops it at once)
MIN_WORKER_MEMORY = 256 * 2 ** 20
_ADDRESS = re.compile(r"^(tcp|tls|ws|wss|ucx)://[^\s/:]+(:\d+)?$")
#: seconds an existing scheduler has to connect and answer, the whole handshake (book/methods/scale_out.md), and
#: to answer a question asked during the build
SCHEDULER_DEADLINE = 30.0
#: seconds the matrix waits with no run finishing before it asks the scheduler whether it still answers
HEARTBEAT = 15.0


class ExecutorError(RuntimeError):
    """The executor itself cannot work (e.g. the Dask scheduler is unreachable)."""


class WorkerLost(RunFailed):
    """A run whose Dask worker died on every attempt (reported by name, never silently missing)."""

    def __init__(self, request: RunRequest, attempts: int, error: str):
        self.request, self.notebook, self.cell, self.kept = request, None, None, None
        self.error, self.attempts = error, attempts
        RuntimeError.__init__(self, f"{request.label}: the Dask worker running it died on all {attempts} "
                                    f"attempt(s) (last: {error}); giving up on this run")

    def __reduce__(self):
        return (WorkerLost, (self.request, self.attempts, self.error))


class RunCrashed(RunFailed):
    """A run that raised outside its notebook (e.g. an output folder it cannot write): reported by name like a
    failed notebook."""
    what = "the run raised outside its notebook"

    def __init__(self, request: RunRequest, error: str):
        self.request, self.notebook, self.cell, self.kept, self.error = request, None, None, None, error
        RuntimeError.__init__(self, f"{request.label}: {self.what}: {error}")

    def __reduce__(self):
        return (type(self), (self.request, self.error))


class SchedulerLost(RunCrashed):
    """A run not finished when the Dask scheduler stopped answering (reported by name, never silently missing)."""
    what = "not finished"


def check_requests(requests) -> list:
    """Refuse a matrix with unknown cards, versions, protocols or duplicate runs before running anything."""
    reqs, seen = list(requests), {}
    for i, req in enumerate(reqs):
        if not isinstance(req, RunRequest):
            raise TypeError(f"requests[{i}] is a {type(req).__name__}; expected an atlaslib.runner.RunRequest")
        try:
            runner.check_request(req)  # the runner's own checks (tests may substitute a card there)
        except (KeyError, ValueError) as exc:
            raise ValueError(f"requests[{i}] ({req.label}): {exc.args[0]}") from None
        if req in seen:
            raise ValueError(f"requests[{i}] ({req.label}) repeats requests[{seen[req]}]: both would write the "
                             f"same result cell")
        seen[req] = i
    return reqs


def resolve_scheduler(scheduler: str | None = None) -> str | None:
    """The address of an existing Dask scheduler: ``scheduler``, else ``$ATLAS_DASK_SCHEDULER``, else None
    (start a LocalCluster)."""
    source = "scheduler"
    if not scheduler:
        scheduler, source = os.environ.get(SCHEDULER_ENV) or None, f"${SCHEDULER_ENV}"
    if scheduler is None:
        return None
    scheduler = str(scheduler).strip()
    if not _ADDRESS.match(scheduler):
        raise ValueError(f"{source} is {scheduler!r}; expected a Dask scheduler address such as "
                         f"tcp://HOST:PORT (tcp, tls, ws, wss or ucx)")
    return scheduler


def _attempt(task, request, kwargs: dict) -> tuple:
    """Run one request; return what happened as plain data (exceptions do not cross processes well)."""
    start = time.perf_counter()
    try:
        out = task(request, **kwargs)
        try:
            from distributed import get_worker

            out.extra = {**(out.extra or {}), "worker": get_worker().address}
        except (ImportError, ValueError):
            pass
        return ("done", out)
    except RunFailed as exc:
        return ("run_failed", {"notebook": exc.notebook, "cell": exc.cell, "error": exc.error, "kept": exc.kept,
                               "message": str(exc), "seconds": round(time.perf_counter() - start, 2)})
    except Exception as exc:  # anything else is still this run's failure, reported by name
        return _error(exc, start)


def _error(exc: BaseException, start: float | None = None) -> tuple:
    """``("error", {error, traceback[, seconds]})``: an exception as plain data (a run's or a preparation part's)."""
    out = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    if start is not None:
        out["seconds"] = round(time.perf_counter() - start, 2)
    return ("error", out)


def _to_failure(request, kind: str, payload: dict):
    if kind == "run_failed":
        exc = RunFailed(request, payload["notebook"], payload["cell"], payload["error"], payload["kept"],
                        payload.get("message"))
    else:
        exc = RunCrashed(request, payload["error"])
    return exc, RunOutcome(request, "failed", seconds=payload.get("seconds", 0.0), error=str(exc))


def _status_line(i: int, n: int, out) -> str:
    if out.status == "failed":
        return f"[{i}/{n}] {out.request.label}: FAILED"
    note = (out.extra or {}).get("note")
    return f"[{i}/{n}] {out.request.label}: {out.status} ({out.cell_status}, {out.seconds:.1f} s)" + (
        f"; note: {note}" if note else "")


def check_options(executor: str | None = "serial", scheduler: str | None = None, n_workers: int | None = None,
                  memory_limit=None, retries: int = 1) -> tuple[str, str | None]:
    """Check :func:`run_requests`' executor options before anything starts (ValueError naming the bad one);
    returns the executor (None resolved) and the scheduler address (None for serial or a LocalCluster)."""
    if executor is None:
        executor = "dask" if resolve_scheduler(scheduler) else "serial"
    if executor not in EXECUTORS:
        raise ValueError(f"executor is {executor!r}; expected one of {', '.join(EXECUTORS)}")
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise ValueError(f"retries is {retries!r}; expected a whole number >= 0")
    if n_workers is not None and (isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1):
        raise ValueError(f"n_workers is {n_workers!r}; expected a whole number >= 1")
    check_memory_limit(memory_limit)
    if executor == "serial" and scheduler:
        raise ValueError(f"scheduler={scheduler!r} needs executor='dask' (the serial executor runs here)")
    address = resolve_scheduler(scheduler) if executor == "dask" else None
    if address and (n_workers is not None or memory_limit not in (None, "auto")):
        raise ValueError(f"n_workers/memory_limit size a LocalCluster; the cluster at {address} "
                         f"sizes its own workers (leave them unset)")
    return executor, address


def check_memory_limit(memory_limit) -> None:
    """Refuse a LocalCluster worker's memory limit that Dask would take for something else or fail on later (in
    its Nanny, with a traceback): ValueError naming it unless it is None, ``"auto"``, 0 (no limit), a share of
    the machine's memory (a number in (0, 1], Dask's rule) or a finite size (bytes, or text such as ``"4GiB"``),
    either coming to at least :data:`MIN_WORKER_MEMORY`. Negative, NaN and infinite sizes are refused."""
    import math

    from dask.utils import parse_bytes

    if memory_limit is None or memory_limit == "auto":
        return
    expected = ("expected a size such as '4GiB' or '8 GB', a number of bytes, a share of the machine's memory "
                "such as 0.5, 0 for no limit, or 'auto'")
    size = None
    if not isinstance(memory_limit, bool) and isinstance(memory_limit, (int, float, str)):
        try:  # Dask reads a number first (as a share of the memory when it is at most 1), else a size
            size = float(memory_limit)
        except ValueError:
            try:
                size = float(parse_bytes(memory_limit))
            except (ValueError, TypeError, OverflowError):
                size = None
    if size is None:
        raise ValueError(f"memory_limit is {memory_limit!r}; {expected}")
    if not math.isfinite(size) or size < 0:
        raise ValueError(f"memory_limit is {memory_limit!r}; {expected} (a size is finite and not negative)")
    if 0 < size <= 1:  # a share of the machine's memory
        from distributed.system import MEMORY_LIMIT

        size = size * MEMORY_LIMIT
    if 0 < size < MIN_WORKER_MEMORY:
        raise ValueError(f"memory_limit {memory_limit!r} ({int(size):,} bytes) is below what a Dask worker needs: "
                         f"at least {MIN_WORKER_MEMORY // 2 ** 20} MiB (a worker with the runner loaded takes "
                         f"about 120 MiB before it runs anything); give e.g. '4GiB', or leave it unset")

def run_requests(requests, paths=None, *, data_dir=None, force: bool = False, executor: str = "serial",
                 scheduler: str | None = None, n_workers: int | None = None, memory_limit=None,
                 retries: int = 1, log=print, timing: bool = True, task=None, connect_timeout=None, prepare=None):
    """Run every request (cached, see :func:`atlaslib.runner.run`) and collect a :class:`~atlaslib.matrix.MatrixReport`.

    ``executor``: ``"serial"``, ``"dask"``, or None for "dask when a scheduler is named (argument or
    ``$ATLAS_DASK_SCHEDULER``), else serial". For Dask, ``scheduler`` (or ``$ATLAS_DASK_SCHEDULER``) names an
    existing scheduler; otherwise a LocalCluster with ``n_workers`` processes (default ``os.cpu_count()``, at
    most one per run to execute), one thread each, ``memory_limit`` per worker (e.g. ``"4GiB"``; default
    Dask's ``"auto"``: the machine's memory shared equally), on 127.0.0.1 without dashboard. ``connect_timeout``: how long an existing
    scheduler has to connect and answer (default :data:`SCHEDULER_DEADLINE`); one that stops answering
    during the build (asked after :data:`HEARTBEAT` seconds without a finished run) fails the runs not yet
    done, naming it, and the finished ones are kept. ``retries``: how many times a run whose worker died is submitted again.
    Outcomes and failures are listed in request order; ``timing`` prints the per-run timing table.
    ``task`` replaces :func:`atlaslib.runner.run` (same signature; tests use it to kill workers).

    On Dask, a run that would bound the schedule is split: each of a fine-tune's training seeds, or each fixed
    slice of a zero-shot run's test items, is a task of its own (:func:`plan_preparation`, :func:`prepare_part`;
    ``prepare`` replaces the latter in tests), handed out before the other runs; the run itself starts when its
    own parts are prepared, finds them in the caches and makes the same cell. A part that fails fails its run,
    by name. A forced build (``force``: every fine-tune retrains in its run) is not split.
    """
    executor, address = check_options(executor, scheduler, n_workers, memory_limit, retries)
    reqs = check_requests(requests)
    paths = paths or BuildPaths()
    recorded = load_run_times(paths.build)
    expected = expected_seconds(reqs, recorded)
    kwargs = {"results_dir": Path(paths.results).resolve(), "runs_dir": Path(paths.runs).resolve(),
              "data_dir": str(Path(data_dir).resolve()) if data_dir else None,
              "failed_dir": (Path(paths.build) / "failed").resolve(), "force": force}
    start = time.perf_counter()

    def record(outcome) -> None:  # each run's time as it finishes: an interrupted build keeps what it measured
        save_run_times(paths.build, [outcome], log)

    if executor == "serial":
        outcomes, failures = _run_serial(reqs, kwargs, task or runner.run, log, expected, record)
    else:
        if kwargs["data_dir"] is None and os.environ.get("ATLAS_DATA_DIR"):
            kwargs["data_dir"] = os.environ["ATLAS_DATA_DIR"]  # workers elsewhere may lack the variable
        # Runs whose outputs are current are served here, from the cache, without a cluster, and those whose
        # predictions are re-scored here without a kernel: a build with nothing to execute starts no worker at all.
        served = {} if (force or task is not None) else _serve_cached(reqs, kwargs, log)
        todo = [r for i, r in enumerate(reqs) if i not in served]
        done, failed = {}, {}
        if todo:
            outs, fails = _run_dask(todo, kwargs, runner.run if task is None else task, log, address=address,
                                    from_env=not scheduler, n_workers=n_workers, memory_limit=memory_limit,
                                    retries=retries, connect_timeout=connect_timeout, count_from=len(served),
                                    count_of=len(reqs), expected=expected, record=record,
                                    # --force retrains every fine-tune in its run: parts prepared before it would
                                    # be trained twice, so a forced build is not split
                                    prepare=None if force else (prepare or prepare_part))
            done, failed = dict(zip(todo, outs)), {f.request: f for f in fails}
        else:
            log(f"dask: all {len(reqs)} run(s) are current; no cluster needed")
        outcomes = [served[i] if i in served else done[r] for i, r in enumerate(reqs)]
        failures = [failed[r] for r in reqs if r in failed]
    report = MatrixReport(outcomes=outcomes, failures=failures, seconds=time.perf_counter() - start)
    save_run_times(paths.build, outcomes, log)
    if timing:
        print_timing(report, log)
    if failures:
        log(f"{len(failures)} of {len(reqs)} run(s) failed:")
        for f in failures:
            log(f"  {f}")
    return report


def _run_serial(reqs, kwargs, task, log, expected=None, record=None):
    from .progress import MatrixStatus

    outcomes, failures = [], []
    status = MatrixStatus([r.label for r in reqs], expected or {}, workers=1, log=log,
                          groups={r.label: r.model for r in reqs})
    try:
        for i, req in enumerate(reqs, 1):
            status.started(req.label)
            kind, payload = _attempt(task, req, kwargs)
            if kind == "done":
                outcomes.append(payload)
            else:
                exc, out = _to_failure(req, kind, payload)
                failures.append(exc)
                outcomes.append(out)
                if kind == "error":
                    status.log(payload["traceback"])
            status.finished(req.label, _status_line(i, len(reqs), outcomes[-1]), ran=outcomes[-1].status == "ran")
            if record:
                record(outcomes[-1])
    finally:
        status.close()
    return outcomes, failures


def _serve_cached(reqs, kwargs, log) -> dict:
    """{index: outcome} for the requests whose stored outputs carry their current cache key, and those whose stored
    cell carries their prediction key and can be re-scored here without a kernel (:func:`atlaslib.runner.rescore`)."""
    served = {}
    for i, req in enumerate(reqs):
        key = None
        try:
            text = (runner.REPO / runner.get_card(req.card).notebook).read_text(encoding="utf-8")
            key = runner.run_key(req, text)
            current = runner.is_current(req, key, kwargs["results_dir"], kwargs["runs_dir"])
        except OSError:
            current = False  # let the run itself report the problem
        if current:
            kind, payload = _attempt(runner.run, req, kwargs)  # the runner's own cache hit: same outcome
            if kind == "done":
                served[i] = payload
                log(_status_line(len(served), len(reqs), payload))
        elif key is not None and _same_predictions(req, key, kwargs):
            try:  # re-scored here, or left to the cluster (None: it needs a kernel)
                out = runner.run(req, **{**kwargs, "execute": False})
            except Exception:  # the run on the cluster reports it
                out = None
            if out is not None:
                served[i] = out
                log(_status_line(len(served), len(reqs), out))
    return served


def _same_predictions(req, key: str, kwargs) -> bool:
    """Whether the stored cell of ``req`` carries the prediction key of ``key`` (its run may be re-scored)."""
    from .rescore import split_key
    from .results import read_cell

    try:
        _, res = runner.output_paths(req, kwargs["results_dir"], kwargs["runs_dir"])
        stored = split_key(read_cell(res).get("run_key"))
    except Exception:
        return False
    return stored[1] is not None and stored[0] == split_key(key)[0]


def _scheduler_source(from_env: bool) -> str:
    return f"${SCHEDULER_ENV}" if from_env else "scheduler"


def _seconds(value) -> float:
    """A timeout given as seconds or as Dask's text (``"30s"``); None is :data:`SCHEDULER_DEADLINE`."""
    from dask.utils import parse_timedelta

    return SCHEDULER_DEADLINE if value is None else float(parse_timedelta(value, "s"))


def _connect(address: str, source: str, deadline: float):
    """A Client of the scheduler at ``address``, or ExecutorError naming it within ``deadline`` seconds. Dask's
    own timeout covers the TCP connection only: a server that accepts it and never completes the handshake
    would hold ``Client()`` forever, so the client is made in a thread of its own and waited for at most
    ``deadline`` seconds; one that comes later is closed, unused."""
    import threading

    from distributed import Client

    _probe_handshake(address, source, deadline)
    box, done, lock = {}, threading.Event(), threading.Lock()

    def connect():
        try:  # Dask's timeout ends first for an address that refuses: its own message says why
            client = Client(address, timeout=0.8 * deadline)
        except BaseException as exc:  # noqa: BLE001  (handed to the caller below)
            box["error"] = exc
        else:
            with lock:
                late = done.is_set()
                box["client"] = client
            if late:
                client.close(timeout=deadline)
        done.set()

    threading.Thread(target=connect, name="atlas-dask-connect", daemon=True).start()
    if not done.wait(deadline):
        with lock:
            done.set()  # from here on a client that comes is late: closed by its thread
            client = box.get("client")
        if client is None:
            raise ExecutorError(f"the Dask scheduler at {address} ({source}) did not complete the connection "
                                f"within {deadline:g} s (no Dask handshake); is a Dask scheduler running there?")
    if "error" in box:
        exc = box["error"]
        if isinstance(exc, (OSError, TimeoutError)):
            raise ExecutorError(f"cannot reach the Dask scheduler at {address} ({source}): {exc}") from None
        if isinstance(exc, Exception):  # what Dask's comm raises on bytes that are no Dask message (struct.error,
            # a numpy MemoryError for a length read from garbage, ...): the address is not a Dask scheduler
            raise ExecutorError(_not_dask(address, source, f"{type(exc).__name__}: {_first_line(exc)}")) from None
        raise exc
    return box["client"]


#: the most bytes a Dask handshake may announce (a scheduler's is under 100 bytes), and the most frames
HANDSHAKE_BYTES, HANDSHAKE_FRAMES = 64 * 1024, 16


def _first_line(exc: BaseException, limit: int = 200) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return text if len(text) <= limit else text[:limit] + "..."


def _not_dask(address: str, source: str, why: str) -> str:
    return (f"the server at {address} ({source}) did not answer with a Dask handshake ({why}); expected a Dask "
            f"scheduler there (is the address right?)")


def _probe_handshake(address: str, source: str, deadline: float) -> None:
    """Read the first message of the server at a ``tcp://`` ``address`` (a Dask scheduler sends its handshake as
    soon as it accepts a connection) with bounded reads and an overall ``deadline``, and check that it is a Dask
    handshake: a length, frame lengths that add up, a msgpack mapping. ExecutorError naming the address
    otherwise (garbage would have Dask read a length from it and try to allocate exabytes, or fail in
    ``struct``), or when nothing comes within the deadline. A server that cannot be reached, or that closes
    the connection, is left to Dask's own connect (it retries, and its message says why). A scheduler gets
    its own handshake back, so it sees a complete connection closed by its client."""
    import socket
    import struct

    scheme, _, loc = address.partition("://")
    if scheme != "tcp" or ":" not in loc:
        return  # tls/ws/ucx speak their own protocol first; Dask's connect, and its errors, cover them
    host, port = loc.rsplit(":", 1)
    end = time.monotonic() + deadline
    silent = ExecutorError(f"the Dask scheduler at {address} ({source}) did not complete the connection within "
                           f"{deadline:g} s (no Dask handshake); is a Dask scheduler running there?")
    try:
        sock = socket.create_connection((host, int(port)), timeout=deadline)
    except socket.timeout:
        raise ExecutorError(f"cannot reach the Dask scheduler at {address} ({source}): no connection within "
                            f"{deadline:g} s") from None
    except OSError:
        return
    got = bytearray()

    def read(n: int) -> bool:  # until ``got`` holds n bytes; False when the server closed the connection
        while len(got) < n:
            left = end - time.monotonic()
            if left <= 0:
                raise silent
            sock.settimeout(left)
            try:
                chunk = sock.recv(min(n - len(got), 65536))
            except socket.timeout:
                raise silent from None
            if not chunk:
                return False
            got.extend(chunk)
        return True

    with sock:
        try:
            if not read(8):
                return
            (size,) = struct.unpack_from("<Q", got)
            if not 16 <= size <= HANDSHAKE_BYTES:
                raise ExecutorError(_not_dask(address, source, f"its first 8 bytes announce a message of {size:,} "
                                              f"byte(s); a Dask handshake has 16 to {HANDSHAKE_BYTES:,}"))
            if not read(8 + size):
                return
            body = memoryview(bytes(got))[8:]
            (n_frames,) = struct.unpack_from("<Q", body)
            if not 1 <= n_frames <= HANDSHAKE_FRAMES or 8 * (1 + n_frames) > size:
                raise ExecutorError(_not_dask(address, source, f"a message of {n_frames:,} frames"))
            lengths = struct.unpack_from(f"<{n_frames}Q", body, 8)
            start = 8 * (1 + n_frames)
            if sum(lengths) != size - start:
                raise ExecutorError(_not_dask(address, source, "frame lengths that do not add up"))
            import msgpack  # Dask's own wire format (its loads would log a traceback for what it cannot decode)

            try:
                message = msgpack.unpackb(body[start:start + lengths[0]], raw=False, use_list=False,
                                          strict_map_key=False)
            except Exception as exc:  # noqa: BLE001  (any decoding failure: not a Dask message)
                raise ExecutorError(_not_dask(address, source, f"an undecodable message: {type(exc).__name__}")) \
                    from None
            if not isinstance(message, dict):
                raise ExecutorError(_not_dask(address, source, f"a message that is a {type(message).__name__}, "
                                              f"not a mapping"))
            sock.sendall(bytes(got))  # the same handshake back: a complete connection, then closed
        except OSError:  # reset under us: Dask's connect says what it finds
            return


def _scheduler_answers(client, deadline: float) -> bool:
    """Whether the client's scheduler answers a question (its identity) within ``deadline`` seconds."""
    try:
        client.sync(client.scheduler.identity, callback_timeout=deadline)
        return True
    except Exception:  # a timeout, a closed connection: no answer either way
        return False


def cluster_size(n_workers: int | None, n_runs: int) -> int:
    """A LocalCluster's worker processes: ``n_workers`` when given, else one per core but no more than the runs
    to execute (a rebuild that re-executes one run gives it every core's torch threads, not an idle worker's
    share)."""
    if n_workers:
        return n_workers
    return max(1, min(os.cpu_count() or 1, n_runs))


def _open_client(address, from_env, n_workers, memory_limit, log, connect_timeout=None, n_runs: int = 1 << 30):
    """(client, cluster-or-None) for an existing scheduler or a new LocalCluster."""

    from distributed import Client, LocalCluster

    if address:
        client = _connect(address, _scheduler_source(from_env), _seconds(connect_timeout))
        log(f"dask: submitting to the scheduler at {address}")
        return client, None
    n = cluster_size(n_workers, n_runs)
    memory_limit = memory_limit or "auto"
    threads = worker_threads(n)
    with _env(THREADS_ENV, str(threads)):  # the worker processes (and their kernels) start with it
        cluster = _local_cluster(LocalCluster, n, memory_limit)
    log(f"dask: LocalCluster at {cluster.scheduler_address}, {n} worker process(es), 1 thread each, "
        f"{threads} torch thread(s) per model, memory limit {memory_limit} per worker")
    return Client(cluster), cluster


def worker_threads(n_workers: int) -> int:
    """Each worker's torch threads: its share of the machine's cores (``$ATLAS_TORCH_THREADS`` when set)."""
    value = os.environ.get(THREADS_ENV, "").strip()
    if value:
        return int(value) if value.isdigit() and int(value) >= 1 else 1
    return max(1, (os.cpu_count() or 1) // max(1, n_workers))


#: the variable the model adapters read for their torch thread count (atlaslib.models.hf.threads_from_env)
THREADS_ENV = "ATLAS_TORCH_THREADS"


class _env:
    """``os.environ[name] = value`` inside the block (restored after)."""

    def __init__(self, name: str, value: str):
        self.name, self.value = name, value

    def __enter__(self):
        self.old = os.environ.get(self.name)
        os.environ[self.name] = self.value

    def __exit__(self, *exc):
        if self.old is None:
            os.environ.pop(self.name, None)
        else:
            os.environ[self.name] = self.old


def _local_cluster(LocalCluster, n, memory_limit):
    """The atlas's LocalCluster, its scratch space (Dask's ``dask-scratch-space``: worker folders and lock files)
    in a temporary folder of its own, which :func:`_close_cluster` removes (and a cluster that fails to start)."""
    import logging
    import shutil
    import tempfile

    import dask

    scratch = tempfile.mkdtemp(prefix="atlas-dask-")
    try:
        with dask.config.set({"temporary-directory": scratch}):
            cluster = LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                host="127.0.0.1", dashboard_address=None, silence_logs=logging.ERROR, local_directory=scratch,
                # a dead worker surfaces at once as KilledWorker; the retry is ours (same rule as for external
                # clusters, whose allowed-failures we do not control). Without a dashboard the scheduler still
                # serves its health routes over HTTP, by default on port 8787 of every interface: here on a free
                # port of 127.0.0.1, so two builds on one machine neither collide nor warn
                scheduler_kwargs={"allowed_failures": 0, "dashboard_address": "127.0.0.1:0"})
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    cluster.atlas_scratch = scratch
    return cluster


def _close_cluster(cluster) -> None:
    """Close the atlas's LocalCluster and remove its scratch folder."""
    import shutil

    try:
        cluster.close()
    finally:
        scratch = getattr(cluster, "atlas_scratch", None)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


#: the file, in the build folder, where each build records how long each run took (label -> seconds); the next
#: build hands its runs out longest first by it and shows each running run's expected time
RUN_TIMES = "run-times.json"
#: a run's expected seconds when no build has recorded it: a card's own baseline (rules, a majority class) takes
#: seconds; a model's run by protocol (fine-tunes train several seeds; probes embed the train split), any other
#: protocol of a model (a language model reading every test item) MODEL_SECONDS
PROTOCOL_SECONDS = {"finetune": 1500.0, "probe": 600.0}
MODEL_SECONDS, BASELINE_SECONDS = 300.0, 30.0
#: protocols whose runs use every core: on the atlas's own LocalCluster one of them at a time, the other workers
#: take the rest of the matrix. None today: the fine-tune recipes train with one torch thread (one per worker
#: process), so two fine-tunes side by side take one core each instead of four threads fighting over two cores.
EXCLUSIVE_PROTOCOLS: tuple = ()


def load_run_times(build_dir) -> dict:
    """label -> seconds from the last builds' record (:data:`RUN_TIMES`); {} when there is none or it cannot be
    read (a damaged record costs only the ordering: it is rewritten at the end of this build)."""
    from .results import read_cache_json

    data = read_cache_json(Path(build_dir) / RUN_TIMES)
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(k, str) and isinstance(v, (int, float))
            and not isinstance(v, bool) and 0 <= v < 1e7}


def save_run_times(build_dir, outcomes, log=print) -> None:
    """Add the runs that executed in this build (served ones keep their earlier record) to :data:`RUN_TIMES`.
    A record that cannot be written costs the next build its ordering, never this build: a warning says so."""
    from .results import atomic_write_text

    ran = {o.request.label: round(float(o.seconds), 1) for o in outcomes if o.status in ("ran", "failed")
           and o.seconds}
    if not ran:
        return
    path = Path(build_dir) / RUN_TIMES
    try:
        atomic_write_text(path, json.dumps({**load_run_times(build_dir), **ran}, indent=1, sort_keys=True))
    except OSError as exc:
        log(f"warning: the runs' times could not be recorded in {path} ({exc.strerror or exc}); the next build "
            f"orders its runs by estimate")


#: the runs' wall seconds in a cold build of the default matrix on the atlas's 2-core machine (the build of
#: commit 712934a, 2026-12-02, beside other work: what matters is how the runs compare): the expected times of a
#: machine's first build, before it has a record of its own
REFERENCE_TIMES = Path(__file__).with_name("run_times_reference.json")


def expected_seconds(reqs, record: dict):
    """label -> expected seconds of each run (a :class:`atlaslib.progress.Expected`): the recorded time of its
    last execution here (``record``; those labels are its ``measured_here``), else its time in the reference
    build (:data:`REFERENCE_TIMES`), else an estimate (:data:`PROTOCOL_SECONDS`)."""
    from .progress import Expected

    try:
        reference = json.loads(REFERENCE_TIMES.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        reference = {}
    here = {r.label for r in reqs if r.label in record}
    record = {**reference, **record}

    def estimate(r) -> float:
        try:
            if r.model in runner.get_card(r.card).baselines:
                return BASELINE_SECONDS
        except KeyError:
            pass
        return PROTOCOL_SECONDS.get(r.protocol, MODEL_SECONDS)

    return Expected({r.label: record[r.label] if r.label in record else estimate(r) for r in reqs}, here)


def next_run(queue, reqs, running, exclusive: bool = True, blocked=()) -> int | None:
    """The position in ``queue`` (``(request index, attempt)`` pairs, in hand-out order) of the next run to
    start while the runs ``running`` (request indices) are in flight: the first, except that with
    ``exclusive`` a run of an :data:`EXCLUSIVE_PROTOCOLS` protocol waits while another one runs (the first
    other run goes instead), and a run in ``blocked`` (one whose preparation tasks are not all done) waits. A
    preparation task's index is ``len(reqs)`` or more (:func:`plan_preparation`). None when no queued run may
    start now."""
    n = len(reqs)
    busy = exclusive and any(j < n and reqs[j].protocol in EXCLUSIVE_PROTOCOLS for j in running)
    for k, (i, _) in enumerate(queue):
        if i >= n:
            return k
        if i not in blocked and not (busy and reqs[i].protocol in EXCLUSIVE_PROTOCOLS):
            return k
    return None


def training_seeds(req) -> list[int]:
    """The training seeds of a fine-tune request: its card's ``FINETUNE_RECIPE["seeds"]`` ([] for another
    protocol, or a card that declares none)."""
    if req.protocol != "finetune":
        return []
    from .cards.run import card_module

    try:
        recipe = getattr(card_module(req.card), "FINETUNE_RECIPE", None) or {}
    except Exception:  # an unknown card: its run reports it
        return []
    return [int(s) for s in recipe.get("seeds") or []]


#: the protocols whose runs may be cut into slices of their test items (each slice's model calls fill the store the
#: whole run then reads): a model's own answers, one item at a time. Not a probe (each slice would embed the whole
#: train split again) or a fine-tune (split by its seeds instead), nor a card's own baseline (seconds)
SHARDABLE_PROTOCOLS = ("zero_shot",)


def _shardable(req) -> bool:
    """A zero-shot run of a model (not a card's own baseline, not a built-in rule system or majority class)."""
    if req.protocol not in SHARDABLE_PROTOCOLS:
        return False
    try:
        if req.model in runner.get_card(req.card).baselines:
            return False
    except KeyError:  # an unknown card: its run reports it
        return False
    from .models import get_profile

    try:
        return get_profile(req.model).source != "builtin"
    except Exception:  # a hub id or a local folder: a model
        return True


def plan_preparation(reqs, expected: dict, workers) -> list[tuple[int, tuple]]:
    """The preparation tasks of a build on ``workers`` workers: ``[(request index, part)]``, a part
    ``("seed", training seed)`` or ``("shard", k, n)``. A run whose expected time (``expected``: label -> seconds)
    is more than the build's total over the workers would bound the schedule as one task, so it is split: a
    fine-tune into its training seeds (:func:`training_seeds`), a model's zero-shot run into ``n`` fixed slices
    of its test items (:func:`atlaslib.cards.run.shard_of`; ``n`` the smallest that brings each under the bound,
    at most the workers). Each part is a task of its own (:func:`prepare_part`); the run itself then finds every
    part's weights and answers in the caches and makes the same cell. A run that does not bound the schedule is not
    split (on 2 workers the default book is not: each task costs a process's loading and the items' encoding
    again). Longest runs first."""
    import math

    if not workers or workers == float("inf") or workers < 2:
        return []
    bound = sum(expected[r.label] for r in reqs) / workers
    out = []
    for i in longest_first(reqs, expected):
        seconds = expected[reqs[i].label]
        if seconds <= bound:
            continue
        seeds = training_seeds(reqs[i])
        if len(seeds) > 1:
            out += [(i, ("seed", seed)) for seed in seeds]
        elif _shardable(reqs[i]):
            n = min(int(workers), max(2, math.ceil(seconds / bound)))
            out += [(i, ("shard", k, n)) for k in range(n)]
    return out


def part_label(part: tuple) -> str:
    """``seed 7`` or ``shard 2/4`` (1-based), for logs and messages."""
    return f"seed {part[1]}" if part[0] == "seed" else f"shard {part[1] + 1}/{part[2]}"


def prepare_part(request, part: tuple, *, data_dir=None, **_) -> float:
    """A preparation task: one part of ``request`` (:func:`plan_preparation`) run through the card's contract
    (:func:`atlaslib.cards.run.run`), no cell written: a training seed of a fine-tune (``ATLAS_FINETUNE_SEEDS`` set
    to it: its weights go to the fine-tune weight cache, its test predictions to the model-call store), or a
    slice of a zero-shot run's test items (its model calls go to the store). Returns the seconds it took; a part
    that cannot be prepared raises, naming it."""
    from .cards.run import run as contract_run
    from .protocols.finetune import SEEDS_ENV

    start = time.perf_counter()
    args = (request.card, request.version, request.model, request.protocol)
    if part[0] == "seed":
        with _env(SEEDS_ENV, str(int(part[1]))):
            cell = contract_run(*args, data_dir=data_dir)
    elif part[0] == "shard":
        cell = contract_run(*args, data_dir=data_dir, test_shard=(int(part[1]), int(part[2])))
    else:
        raise ValueError(f"{request.label}: unknown preparation part {part!r}")
    if cell.get("status") != "ok":
        raise RuntimeError(f"{request.label}: {part_label(part)} could not be prepared "
                           f"({cell.get('status')}: {cell.get('reason') or cell.get('error') or 'no reason given'})")
    return round(time.perf_counter() - start, 2)


def _prepare_attempt(prepare, request, part, kwargs) -> tuple:
    """A preparation task's outcome as plain data: ``("done", seconds)`` or ``("error", {error, traceback})``."""
    try:
        return ("done", prepare(request, part, **kwargs))
    except Exception as exc:
        return _error(exc)


def longest_first(reqs, expected: dict | None = None) -> list[int]:
    """The order in which the runs are handed to the workers: the longest expected first (``expected``: label
    -> seconds, :func:`expected_seconds`; by default the protocols' estimates), so that no long run starts last
    and keeps one worker busy while the others idle (longest-processing-time-first scheduling). Among equal
    expectations, a card's second run of a protocol comes after every card's first: runs of one card and
    protocol share caches (fine-tuned weights trained on the same train split, embeddings of the same
    sentences), so the second should start when the first has filled them. Outcomes keep the matrix order."""
    expected = expected or expected_seconds(reqs, {})
    rank, seen = {}, {}
    for i, r in enumerate(reqs):
        rank[i] = seen.get((r.card, r.protocol), 0)
        seen[(r.card, r.protocol)] = rank[i] + 1
    return sorted(range(len(reqs)), key=lambda i: (-expected[reqs[i].label], rank[i], i))


def _run_dask(reqs, kwargs, task, log, *, address, from_env, n_workers, memory_limit, retries, connect_timeout=None,
              no_worker_timeout: float = 600.0, count_from: int = 0, count_of: int | None = None,
              expected: dict | None = None, record=None, prepare=None):
    from collections import deque
    from concurrent.futures import CancelledError

    from distributed import wait
    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    import dask

    lost_errors = (KilledWorker, CommClosedError, OSError, TimeoutError, CancelledError)
    # Our LocalCluster (in this process) closes a lost worker's nanny for good when the worker has not come back
    # within distributed.deploy.lost-worker-timeout (15 s by default): on a loaded machine a restarted worker
    # takes longer to start, and the build was left with no worker at all. It is given as long as we wait.
    lost = dask.config.set({"distributed.deploy.lost-worker-timeout": f"{no_worker_timeout:g}s"})
    try:
        client, cluster = _open_client(address, from_env, n_workers, memory_limit, log, connect_timeout, len(reqs))
    except BaseException:
        lost.__exit__(None, None, None)
        raise

    def capacity() -> float:
        # On our own LocalCluster a run is handed out only when a worker thread is free, so a worker that
        # dies takes down the run it was executing and no other (an external, possibly adaptive, cluster
        # gets every run at once and schedules them itself).
        return sum(client.nthreads().values()) if cluster is not None else float("inf")

    from .progress import MatrixStatus

    expected = expected or expected_seconds(reqs, {})
    workers = capacity()
    status = MatrixStatus([r.label for r in reqs], expected, workers=len(reqs) if workers == float("inf") else
                          int(workers), log=log, groups={r.label: r.model for r in reqs})
    log = status.log
    results: dict[int, tuple] = {}
    n = len(reqs)
    # preparation tasks (a long run's seeds or item slices) have indices n, n + 1, ...: handed out first, their run
    # after them
    preps = plan_preparation(reqs, expected, workers) if prepare is not None else []
    waiting = {}
    for p, (i, _) in enumerate(preps):
        waiting.setdefault(i, set()).add(n + p)
    if preps:
        kind = {i: part[0] for i, part in preps}    # a run's parts are all seeds or all item slices
        log(f"dask: {len(waiting)} run(s) split into {len(preps)} task(s): " + "; ".join(
            f"{reqs[i].label} ({len(ps)} {kind[i]}s)" for i, ps in waiting.items()))

    def label(i: int) -> str:
        return reqs[i].label if i < n else f"{reqs[preps[i - n][0]].label} · {part_label(preps[i - n][1])}"

    def main(i: int) -> int:
        return i if i < n else preps[i - n][0]

    queue = deque([(n + p, 0) for p in range(len(preps))] + [(i, 0) for i in longest_first(reqs, expected)])
    in_flight: dict = {}
    done, count_of = count_from, count_of or len(reqs)
    starved_since = None
    deadline, heard = _seconds(connect_timeout), time.monotonic()  # when a run last finished or the scheduler answered
    try:
        while queue or in_flight:
            if queue:
                cap = capacity()
                while queue and len(in_flight) < cap:
                    k = next_run(queue, reqs, [j for j, _ in in_flight.values()], exclusive=cluster is not None,
                                 blocked={i for i, ps in waiting.items() if ps})
                    if k is None:
                        break  # only exclusive runs are left and one is running, or runs wait for their seeds
                    i, attempt = queue[k]
                    del queue[k]
                    key = f"atlas-run-{label(i)}-{attempt}-{uuid.uuid4().hex[:8]}".replace(" · ", "-")
                    if i < n:
                        fut = client.submit(_attempt, task, reqs[i], kwargs, key=key, pure=False, retries=0)
                        status.started(reqs[i].label)
                    else:
                        fut = client.submit(_prepare_attempt, prepare, reqs[preps[i - n][0]], preps[i - n][1], kwargs,
                                            key=key, pure=False, retries=0)
                    in_flight[fut] = (i, attempt)
                if not in_flight:  # every worker is (re)starting
                    starved_since = starved_since or time.monotonic()
                    if time.monotonic() - starved_since > no_worker_timeout:
                        raise ExecutorError(f"no Dask worker came up for {no_worker_timeout:.0f} s; "
                                            f"{len(queue)} run(s) not started")
                    time.sleep(0.2)
                    continue
                starved_since = None
            try:
                finished, _ = wait(list(in_flight), timeout=0.5 if queue else HEARTBEAT, return_when="FIRST_COMPLETED")
            except TimeoutError:
                finished = ()
            if finished:
                heard = time.monotonic()
            elif time.monotonic() - heard >= HEARTBEAT:  # nothing finished for a while: is the scheduler there?
                if not _scheduler_answers(client, deadline):
                    why = (f"the Dask scheduler at {client.scheduler.address} stopped answering (no answer within "
                           f"{deadline:g} s, after {time.monotonic() - heard:.0f} s without a finished run); the "
                           f"runs finished before are kept")
                    log(f"dask: {why}; {len(reqs) - len(results)} run(s) not finished")
                    for i in [j for j, _ in in_flight.values()] + [j for j, _ in queue]:
                        results.setdefault(main(i), ("scheduler", {"error": why}))
                    break
                heard = time.monotonic()
            for fut in finished:
                i, attempt = in_flight.pop(fut)
                req = reqs[main(i)]
                try:
                    kind, payload = fut.result()
                except lost_errors as exc:
                    why = f"{type(exc).__name__}: {str(exc).split('. ')[0]}"
                    if attempt < retries:
                        log(f"{label(i)}: worker lost ({why}); retrying ({attempt + 1}/{retries})")
                        queue.appendleft((i, attempt + 1))
                        continue
                    kind, payload = "lost", {"error": why, "attempts": attempt + 1}
                except Exception as exc:  # e.g. a result that cannot be deserialised: not a worker fault
                    kind, payload = "error", {"error": f"{type(exc).__name__}: {exc}", "traceback": ""}
                finally:
                    fut.release()
                if i >= n:  # a training seed prepared (its run may start when its others are) or failed (so does it)
                    req_i = main(i)
                    if kind == "done":
                        log(f"{label(i)}: prepared ({payload:.1f} s)")
                        waiting.get(req_i, set()).discard(i)   # (its run may have failed by another seed)
                        continue
                    if req_i in results:  # its run already failed by another seed
                        continue
                    why = payload.get("error", "") if isinstance(payload, dict) else str(payload)
                    kind, payload = "error", {"error": f"{label(i)} failed: {why}",
                                              "traceback": payload.get("traceback", "") if isinstance(payload, dict)
                                              else ""}
                    queue = deque((j, a) for j, a in queue if main(j) != req_i)
                    waiting.pop(req_i, None)
                    status.started(req.label)
                    i = req_i
                elif i in results:  # a run already failed by one of its seeds (cannot start, but be safe)
                    continue
                if kind == "done":
                    payload.extra = {**(payload.extra or {}), "attempts": attempt + 1}
                results[i] = (kind, payload)
                done += 1
                outcome = _outcome(req, kind, payload)[1]
                status.finished(req.label, _status_line(done, count_of, outcome), ran=outcome.status == "ran")
                if record:
                    record(outcome)
    finally:
        status.close()
        client.close(timeout=deadline)  # a scheduler that stopped answering cannot hold the close either
        if cluster is not None:
            _close_cluster(cluster)
        lost.__exit__(None, None, None)
    outcomes, failures = [], []
    for i, req in enumerate(reqs):
        exc, out = _outcome(req, *results[i])
        outcomes.append(out)
        if exc is not None:
            failures.append(exc)
    return outcomes, failures


def _outcome(req, kind, payload):
    """(failure-or-None, RunOutcome) from what a task returned."""
    if kind == "done":
        return None, payload
    if kind == "lost":
        exc = WorkerLost(req, payload["attempts"], payload["error"])
        return exc, RunOutcome(req, "failed", error=str(exc), extra={"attempts": payload["attempts"]})
    if kind == "scheduler":
        exc = SchedulerLost(req, payload["error"])
        return exc, RunOutcome(req, "failed", error=str(exc))
    return _to_failure(req, kind, payload)
