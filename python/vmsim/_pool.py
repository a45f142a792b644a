"""The local executor: the process pool that runs a study's tasks when no
executor is given (its workers leave Ctrl-C to the parent and die with
it), and stopping a study's work on any executor (a process pool's
workers terminated, a caller's executor or dask client only cancelled).
Dask clusters themselves are ``dask_backend``'s."""

from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Sequence

from . import dask_backend as _dask


def process_pool(jobs: int) -> ProcessPoolExecutor:
    """A process pool whose workers leave Ctrl-C to the parent (see
    ``stop_pool``) and die with it."""
    return ProcessPoolExecutor(max_workers=jobs, initializer=_pool_worker_init, initargs=(os.getpid(),))


def stop_pool(executor: Any, futures: Sequence[Any] = ()) -> None:
    """Stops an executor at once: queued work is cancelled and, for a process
    pool, the workers are terminated (a running simulation cannot be asked to
    stop from another process), so neither a first nor a second Ctrl-C waits
    for queued points."""
    if _dask.is_dask(executor):
        # A dask client's shutdown() would stop the scheduler and its
        # workers, which may serve others: only this study's tasks go.
        _cancel(futures)
        return
    for fut in futures:
        fut.cancel()
    if isinstance(executor, ProcessPoolExecutor):
        procs = list((getattr(executor, "_processes", None) or {}).values())
        executor.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(timeout=5)
    else:
        shutdown = getattr(executor, "shutdown", None)
        if shutdown is not None:
            try:
                shutdown(wait=False, cancel_futures=True)
            except TypeError:
                shutdown(wait=False)


def _cancel(futures: Sequence[Any]) -> None:
    """Cancels what is queued on an executor the caller owns (left running)."""
    for fut in futures:
        try:
            fut.cancel()
        except Exception:  # noqa: BLE001 - a future that cannot be cancelled any more
            pass


def _as_completed(futures: Sequence[Any]):
    """Futures as they finish (concurrent.futures and dask ones), else in order."""
    return _dask.as_completed(futures)


def _pool_worker_init(parent: int) -> None:
    """Pool worker initialiser: Ctrl-C goes to the parent, which stops the
    pool; and the worker dies with the parent, however that ends (SIGKILL,
    a scheduler's SIGTERM, a crash), rather than live on holding the
    caller's pipes."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The default SIGTERM action: the parent's handler (which raises in the
    # parent) must not run in a worker forked from it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if not _kill_on_parent_death():
        import threading

        threading.Thread(target=_watch_parent, args=(parent,), name="vmsim-parent-watch", daemon=True).start()
    if os.getppid() != parent:
        os._exit(1)  # the parent died before the worker could ask to die with it


def _kill_on_parent_death() -> bool:
    """``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills this process
    when its parent exits. False where that is not available."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        return libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    """Ends the process once its parent is gone (where prctl is missing)."""
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(1)
