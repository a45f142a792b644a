"""The ``sweep`` command of the API: a run config at every point of a grid,
one task per point on an executor (a process pool of this host by
default, or a given one such as a dask client), through the result
cache, as rows."""

from __future__ import annotations

import json
from concurrent.futures import Executor
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from . import _core, _pool
from . import cache as _cache
from . import dask_backend as _dask
from ._config import ConfigLike, load_dict
from ._data_check import lost_data
from ._options import ProgressCallback, default_threads
from ._pool import stop_pool
from ._sweep_grid import _point_key, _sweep_points, sweep_columns
from ._tasks import _build, _run_point_text
from .tables import scalar_metrics


def _have_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def sweep(
    grid: Mapping[str, Sequence[Any]],
    base: ConfigLike,
    executor: Optional[Executor] = None,
    *,
    progress: Optional[ProgressCallback] = None,
    cache: bool = True,
):
    """Runs ``base`` at every point of ``grid`` and returns one row per point.

    ``grid`` maps dotted config keys to lists of values, e.g.
    ``{"workload.nr_task": [1, 2, 4], "kernel.clear_huge_page": ["sequential",
    "target-last"]}``; the points are the cartesian product, in the grid's
    order. ``base`` is a config dict, a path to a run config, or TOML text.

    The points run on ``executor``: anything with a ``concurrent.futures``-style
    ``submit(fn, *args)`` returning futures with ``result()``, such as a
    ``ThreadPoolExecutor`` or a ``dask.distributed.Client``. By default a
    ``ProcessPoolExecutor`` with one worker per CPU is used (and shut down).
    ``progress(label, fraction)`` is called as points finish.

    Each row holds the grid keys with their values, then every scalar metric.
    Returns a ``pandas.DataFrame`` when pandas is installed, otherwise a list
    of dicts (install the ``full`` extra for pandas). The first failing point
    raises its exception.

    A point whose result is in the result cache (docs/usage.md) is read
    instead of run, and a fresh one is stored; ``cache=False`` does neither.
    """
    rows = sweep_rows(grid, base, executor, progress=progress, cache=cache)
    if _have_pandas():
        import pandas as pd

        return pd.DataFrame(rows, columns=sweep_columns(rows, list(grid)))
    return rows


def sweep_rows(
    grid: Mapping[str, Sequence[Any]],
    base: ConfigLike,
    executor: Optional[Executor] = None,
    *,
    progress: Optional[ProgressCallback] = None,
    keep_going: bool = False,
    done: Optional[Sequence[Mapping[str, Any]]] = None,
    on_row: Optional[Callable[[List[Dict[str, Any]]], Any]] = None,
    cache: bool = True,
) -> List[Dict[str, Any]]:
    """Like ``sweep``, but always returns a list of dicts (in grid order).

    Every point's config is checked before the first one runs: a bad point
    raises ``ConfigError`` naming the point and the key. With
    ``keep_going=True`` a point that fails while running (or loses data)
    becomes a row with ``status`` "failed" and its ``error``, and the other
    points still run; otherwise the first failure raises. ``done`` holds rows
    of an earlier, interrupted sweep: points with an "ok" row there are not
    run again. ``on_row(rows)`` is called with all rows so far (grid order)
    each time a point finishes, for writing results as they come. Points in
    the result cache are read, not run (``cache=False``: neither read nor
    stored)."""
    use_cache = _cache.enabled(cache)
    base_config, base_dir = load_dict(base)
    points, configs = _sweep_points(grid, base_config, base_dir)
    keys = list(grid)
    kept = {_point_key(r, keys): dict(r) for r in (done or []) if r.get("status", "ok") == "ok"}
    rows: List[Optional[Dict[str, Any]]] = [kept.get(_point_key(p, keys)) for p in points]
    todo = [i for i, r in enumerate(rows) if r is None]
    finished = len(points) - len(todo)

    def finish(i: int, fut: Any) -> None:
        row = dict(points[i])
        try:
            result = fut.result()
            lost = lost_data(result)
            if lost:
                raise _core.DataVerificationError("; ".join(lost))
            row.update(scalar_metrics(result.get("metrics", {})))
            row["status"] = "ok"
        except (_core.VmsimError, OSError) as e:
            if not keep_going:
                raise
            row.update({"status": "failed", "error": f"{type(e).__name__}: {e}"})
        rows[i] = row

    point_keys = {i: _cache.run_key(configs[i], base_dir) for i in todo} if use_cache else {}
    hits = 0
    for i in list(todo):
        text = _cache.get(point_keys.get(i))
        if text is not None:
            finish(i, _Done(json.loads(text)))
            todo.remove(i)
            hits += 1
    finished += hits
    if hits:
        if on_row is not None:
            on_row([r for r in rows if r is not None])
        if progress is not None:
            progress("sweep", finished / len(points))
    if not todo:
        return [r for r in rows if r is not None]

    own = executor is None
    jobs = max(1, min(len(todo) or 1, default_threads()))
    if own:
        executor = _pool.process_pool(jobs)
    # The CPUs left over once every point at once has one go to windowed
    # points' sockets (the result does not depend on it).
    threads = max(1, default_threads() // jobs) if own or not _dask.is_dask(executor) else 1
    futures: list = []
    build = _build()
    try:
        futures = [_dask.submit(executor, _run_point_text, configs[i], base_dir, threads, build) for i in todo]
        index_of = {id(f): i for f, i in zip(futures, todo)}
        for fut in _dask.as_completed(futures):
            i = index_of[id(fut)]
            try:
                text = fut.result()
            except (_core.VmsimError, OSError) as e:
                finish(i, _Done(error=e))
            else:
                _cache.put(point_keys.get(i), text, "sweep point " + json.dumps(points[i], sort_keys=True))
                finish(i, _Done(json.loads(text)))
            finished += 1
            if on_row is not None:
                on_row([r for r in rows if r is not None])
            if progress is not None:
                progress("sweep", finished / len(points))
    except BaseException:
        # Ctrl-C or a failed point: nothing queued may run on.
        stop_pool(executor, futures)
        raise
    finally:
        if own:
            executor.shutdown(wait=True, cancel_futures=True)
    return [r for r in rows if r is not None]


class _Done:
    """A finished future's stand-in (a cached result, or a worker's text parsed)."""

    def __init__(self, value: Any = None, error: Optional[BaseException] = None):
        self.value, self.error = value, error

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value
