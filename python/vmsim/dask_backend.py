"""Studies on a ``dask.distributed`` cluster: ``--scheduler ADDRESS`` (a
running scheduler) or ``--workers N`` (a local cluster of N single-threaded
worker processes) for ``vmsim compare --runs``, ``vmsim sweep`` and
``vmsim reproduce``, and a ``dask.distributed.Client`` as the ``executor``
of the Python API.

Each task is one unit the Python layer runs: a sweep point, one seed of an
experiment (its arms run on the worker's threads) or one experiment of
``reproduce``. Results are byte-identical to a local run; only the
provenance fields ``host_seconds`` and ``host_threads`` differ. A worker
that dies has its tasks run again on the others (the scheduler's
``distributed.scheduler.allowed-failures``, 3 by default). Needs the
``dask`` extra: ``pip install 'vmsim[dask]'``.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator, Optional, Sequence

from ._errors import config_error, cut

#: Most workers of a local cluster (``--workers``).
MAX_WORKERS = 4096


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ImportError("--scheduler/--workers need dask.distributed: pip install 'vmsim[dask]'") from None
    return distributed


def is_dask(executor: Any) -> bool:
    """Whether ``executor`` is a ``dask.distributed.Client``."""
    return type(executor).__module__.split(".")[0] == "distributed" and hasattr(executor, "scheduler_info")


def submit(executor: Any, fn: Any, *args: Any) -> Any:
    """``executor.submit(fn, *args)``; on a dask client, as an impure task
    (each submission runs), so retries and re-runs are dask's own."""
    if is_dask(executor):
        return executor.submit(fn, *args, pure=False)
    return executor.submit(fn, *args)


def as_completed(futures: Sequence[Any]) -> Iterator[Any]:
    """Futures as they finish: concurrent.futures ones, dask ones, else in order."""
    from concurrent.futures import Future
    from concurrent.futures import as_completed as cf_as_completed

    futures = list(futures)
    if all(isinstance(f, Future) for f in futures):
        return cf_as_completed(futures)
    if futures and type(futures[0]).__module__.split(".")[0] == "distributed":
        return iter(_distributed().as_completed(futures))
    return iter(futures)


def check_engine(scheduler: Any, workers: Any, jobs: Any = None) -> None:
    """Refuses a bad or contradictory choice of engine (``ConfigError``
    naming the option)."""
    if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise config_error("--scheduler", f"{cut(repr(scheduler))} is not accepted; accepted: a scheduler address "
                                          "such as tcp://host:8786")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or not 1 <= workers <= MAX_WORKERS):
        raise config_error("--workers", f"{cut(repr(workers))} is not accepted; accepted: an integer in "
                                        f"1..{MAX_WORKERS}")
    if scheduler is not None and workers is not None:
        raise config_error("--workers", "--workers starts a local cluster and --scheduler names a running one; "
                                        "give one of them")
    if jobs is not None and (scheduler is not None or workers is not None):
        raise config_error("-j/--jobs", "-j/--jobs sizes the local process pool; with --scheduler or --workers "
                                        "the cluster's workers run the simulations")


#: dask settings of a local cluster (``--workers N``), in force while it
#: runs. A local cluster shares the host's cores with its workers, so what
#: its scheduler, nannies and workers do besides running simulations comes
#: out of the study's time; docs/speed.md, "A local dask cluster's overhead",
#: has the measurements. Workers are forked from the process that starts the
#: cluster (which has vmsim and dask imported already) instead of spawned
#: (which imports both again in each worker); the periodic checks meant for
#: a dashboard or for long-lived shared clusters run seldom or not at all:
#: the event-loop health tick (every 20 ms by default), the workers'
#: statistical profiler (a stack sample every 10 ms while a task runs),
#: the memory monitors (every 100 ms), the system monitor and the active
#: memory manager (nothing to move: a task's result is fetched once).
#: A worker holds one queued task at a time (saturation 1.0: a study's
#: tasks take seconds, so a worker fetching its next one on finishing costs
#: nothing), and work stealing stays on: the first few tasks of a study are
#: assigned at once, and a worker that finishes early takes those another
#: one holds (experiments of ``reproduce`` take minutes to a quarter of an
#: hour each). Heartbeats, and so the detection of a dead worker, are
#: unchanged.
LOCAL_CLUSTER_CONFIG = {
    "distributed.worker.multiprocessing-method": "fork",
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.profile.enabled": False,
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.scheduler.worker-saturation": 1.0,
    "distributed.scheduler.active-memory-manager.start": False,
    "distributed.client.scheduler-info-interval": "10s",
    "distributed.deploy.cluster-repr-interval": "10s",
}

#: Local clusters this process runs now; a process forked meanwhile is a
#: worker of one (see ``_after_fork_in_child``).
_local_clusters = 0
_fork_hook = False


def _after_fork_in_child() -> None:
    """In a worker forked for a local cluster: Ctrl-C is left to the process
    that started the study (it closes the cluster, as it stops a process
    pool), and SIGTERM ends the worker (the ``vmsim`` command's own handler,
    inherited by the fork, would raise in it instead)."""
    if not _local_clusters:
        return
    import signal

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except (ValueError, OSError):  # pragma: no cover - not the main thread
        pass


#: How long to wait for a scheduler to answer, in seconds: a service that
#: is not a Dask scheduler may accept the connection and say nothing.
CONNECT_TIMEOUT_S = 10


def _connect(distributed: Any, scheduler: str) -> Any:
    """A client of the scheduler at ``scheduler``; anything that keeps it
    from answering as a Dask scheduler within ``CONNECT_TIMEOUT_S`` is a
    ``ConfigError`` keyed ``scheduler`` (one line, not a traceback)."""
    import threading

    # The client's own timeout covers the connection, not a handshake the
    # other end never answers: the whole of it runs under a deadline here,
    # on a daemon thread (left waiting, it does not hold up the exit).
    got: dict = {}

    def connect() -> None:
        try:
            got["client"] = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT_S)
        except BaseException as e:  # handed to the caller
            got["error"] = e

    t = threading.Thread(target=connect, name="vmsim-dask-connect", daemon=True)
    t.start()
    t.join(CONNECT_TIMEOUT_S + 2)
    if "client" in got:
        return got["client"]
    e = got.get("error")
    what = (str(e).splitlines()[0] if e is not None and str(e).strip() else
            type(e).__name__ if e is not None else "it accepted the connection and said nothing")
    raise config_error("scheduler", f"{cut(scheduler)}: no Dask scheduler answered within {CONNECT_TIMEOUT_S} s "
                                    f"({cut(what, 160)}); start one with `dask scheduler`, or leave --scheduler "
                                    "out for a local cluster")


@contextlib.contextmanager
def client(scheduler: Optional[str] = None, workers: Optional[int] = None) -> Iterator[Any]:
    """A ``dask.distributed.Client`` of the scheduler at ``scheduler``, or of
    a local cluster of ``workers`` single-threaded worker processes (closed
    on exit; ``LOCAL_CLUSTER_CONFIG`` in force while it runs)."""
    global _local_clusters, _fork_hook
    check_engine(scheduler, workers)
    distributed = _distributed()
    if scheduler is not None:
        c = _connect(distributed, scheduler)
        try:
            yield c
        finally:
            c.close()
        return
    import dask

    if not _fork_hook:
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_hook = True
    with dask.config.set(LOCAL_CLUSTER_CONFIG):
        _local_clusters += 1
        try:
            # No dashboard; the scheduler's HTTP server (health checks) on a
            # free port of the loopback, not 8787, which another cluster may hold.
            cluster = distributed.LocalCluster(n_workers=workers or 1, threads_per_worker=1, processes=True,
                                               host="127.0.0.1", dashboard_address=None,
                                               scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})
            try:
                c = distributed.Client(cluster)
                try:
                    yield c
                finally:
                    c.close()
            finally:
                cluster.close()
        finally:
            _local_clusters -= 1


def add_options(parser: Any) -> None:
    """``--scheduler``, ``--workers`` and ``--no-cache`` of a CLI sub-command."""
    g = parser.add_argument_group("cluster and cache (docs/usage.md)")
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the simulations on the dask.distributed scheduler at ADDRESS (needs vmsim[dask])")
    g.add_argument("--workers", type=int, metavar="N",
                   help="run the simulations on a local dask cluster of N worker processes (needs vmsim[dask])")
    g.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the result cache (vmsim cache path shows where it is)")


@contextlib.contextmanager
def engine(args: Any) -> Iterator[Optional[Any]]:
    """The dask client the CLI's ``--scheduler``/``--workers`` ask for, or
    None (the local process pool) when neither is given."""
    scheduler, workers = getattr(args, "scheduler", None), getattr(args, "workers", None)
    check_engine(scheduler, workers, getattr(args, "jobs", None))
    if scheduler is None and workers is None:
        yield None
        return
    with client(scheduler, workers) as c:
        yield c
