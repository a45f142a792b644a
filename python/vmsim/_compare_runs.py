"""Compares of many seeds or experiments on an executor: ``compare_many``
(one task per seed or experiment, on a process pool of this host or on a
given executor such as a dask client; used by ``compare(runs=N)``,
``reproduce`` and ``sensitivity``) and ``compare(runs=N)``'s
``compare-runs`` document."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import Executor
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _core, _pool, _provenance
from . import cache as _cache
from . import dask_backend as _dask
from ._compare_arms import _cached_arms, _compare_finish, _compare_label, _fill_arms
from ._data_check import check_verified
from ._errors import config_error, cut
from ._options import ProgressCallback, check_scale, check_seed, check_threads, default_threads
from ._plan import check_min_scale, check_set
from ._pool import _cancel, stop_pool
from ._tasks import _build, _compare_text


def compare_many(specs: Sequence[Mapping[str, Any]], executor: Optional[Executor] = None, *,
                 jobs: Optional[int] = None, threads: Optional[int] = None,
                 progress: Optional[ProgressCallback] = None, label: str = "runs",
                 cache: bool = True) -> List[Dict[str, Any]]:
    """Compare results of several checked experiment runs, each
    ``{"experiment", "scale", "seed", "set", "forced"}``, in order: cached
    ones read, the others one task each on ``executor`` (default: a process
    pool of up to ``jobs`` workers, each running its arms on ``threads``
    host threads, default its share of the CPUs; on a given executor one
    thread, unless ``threads``)."""
    use_cache = _cache.enabled(cache)
    runs = [_cache.compare_arms(s["experiment"], s["scale"], s["seed"], s.get("set")) if use_cache else None
            for s in specs]
    t0 = time.monotonic()
    results: List[Optional[Dict[str, Any]]] = [None] * len(specs)
    cached = [_cached_arms(r) for r in runs]
    todo = []
    for i, s in enumerate(specs):
        texts, skip = cached[i]
        if not runs[i] or len(skip) < len(runs[i]):
            todo.append(i)
            continue
        # Every arm cached: the core assembles the result here, simulating nothing.
        text = _core.compare(s["experiment"], s["scale"], s["seed"], None,
                             json.dumps(s["set"]) if s.get("set") else None, 1, skip=skip)
        doc, mark = _fill_arms(text, runs[i], texts, _compare_label(s["experiment"], s["scale"], s["seed"],
                                                                    s.get("set")))
        results[i] = _compare_finish(doc, s["experiment"], s["seed"], s["scale"], s.get("set"), s.get("forced"),
                                     check_threads(threads), time.monotonic() - t0, mark)
    finished = len(specs) - len(todo)
    if progress is not None and finished:
        progress(label, finished / len(specs))
    if not todo:
        return results  # type: ignore[return-value]
    own = executor is None
    if own:
        jobs = min(jobs or default_threads(), len(todo))
        # The seeds already fill the host's CPUs: each runs its arms on its share.
        threads = threads or max(1, default_threads() // jobs)
        executor = _pool.process_pool(jobs)
    else:
        threads = threads or 1
    build = _build()
    futures: List[Any] = []
    try:
        for i in todo:
            s = specs[i]
            futures.append(_dask.submit(executor, _compare_text, s["experiment"], s["scale"], s["seed"],
                                        json.dumps(s["set"]) if s.get("set") else None, threads, build,
                                        cached[i][1]))
        index_of = {id(f): i for f, i in zip(futures, todo)}
        for fut in _dask.as_completed(futures):
            i = index_of[id(fut)]
            s = specs[i]
            text, seconds = fut.result()
            doc, mark = _fill_arms(text, runs[i], cached[i][0], _compare_label(s["experiment"], s["scale"],
                                                                               s["seed"], s.get("set")))
            results[i] = _compare_finish(doc, s["experiment"], s["seed"], s["scale"], s.get("set"), s.get("forced"),
                                         threads, seconds, mark)
            finished += 1
            if progress is not None:
                progress(label, finished / len(specs))
    except BaseException:
        if own:
            stop_pool(executor, futures)
        else:
            _cancel(futures)
        raise
    finally:
        if own:
            executor.shutdown(wait=True, cancel_futures=True)
    return results  # type: ignore[return-value]


#: Most seeds of one ``compare(runs=N)`` / ``compare --runs``: every run's result is kept in memory.
MAX_RUNS = 10_000


def _compare_runs(experiment: Union[str, "os.PathLike[str]"], scale: Any, seed: Any, runs: Any,
                  jobs: Any, threads: Any, settings: Any,
                  progress: Optional[ProgressCallback], force_scale: Any, check: bool,
                  executor: Optional[Executor] = None, cache: bool = True) -> Dict[str, Any]:
    """``compare(runs=N)``: N seeds of every arm on a process pool, as one
    ``compare-runs`` document (the ``vmsim compare --runs`` JSON)."""
    exp = os.fspath(experiment)
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= MAX_RUNS:
        raise config_error("runs", f"{cut(repr(runs))} is not accepted; accepted: an integer in 1..{MAX_RUNS}")
    seed = check_seed(seed)
    if jobs is not None:
        check_threads(jobs, "jobs")
        if executor is not None:
            raise config_error("jobs", "sizes the process pool; with an executor its workers run the seeds")
    if threads is not None:
        check_threads(threads)
    _cache.enabled(cache)
    scale = check_scale(scale)
    settings = check_set(exp, settings)
    forced = check_min_scale(exp, scale, settings, force_scale)
    seeds = [check_seed(seed + i) for i in range(runs)]
    t0 = time.monotonic()
    specs = [{"experiment": exp, "scale": scale, "seed": s, "set": settings, "forced": forced} for s in seeds]
    results = compare_many(specs, executor, jobs=jobs, threads=threads, progress=progress,
                           label=f"runs ({len(seeds)} seeds)", cache=cache)
    if runs == 1 and executor is not None and not isinstance(runs, bool):
        # compare(executor=...) of one seed: that seed's compare result.
        if check:
            check_verified(results[0])
        return results[0]
    first = results[0]
    doc: Dict[str, Any] = {"kind": "compare-runs", "experiment": first.get("experiment"),
                           "description": first.get("description"), "seeds": seeds, "runs": results}
    if settings:
        doc["set"] = settings
    if forced:
        doc.update(forced)
    doc = _provenance.attach(doc, "compare", seeds=seeds, scale=scale, host_seconds=time.monotonic() - t0)
    if check:
        for r in results:
            check_verified(r)
    return doc
