"""The ``compare`` command of the API: an experiment's baseline and
variants at one seed, its arms on this process's threads, through the
result cache (with ``runs`` above 1 or an ``executor``, handed to
``_compare_runs``)."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import Executor
from typing import Any, Dict, Mapping, Optional, Union

from . import _core, _policies
from . import cache as _cache
from ._compare_arms import _cached_arms, _compare_finish, _compare_label, _fill_arms
from ._compare_runs import _compare_runs
from ._data_check import check_verified
from ._options import ProgressCallback, check_scale, check_seed, check_threads
from ._plan import check_min_scale, check_set


def compare(
    experiment: Union[str, "os.PathLike[str]"],
    scale: Optional[float] = None,
    seed: int = 0,
    progress: Optional[ProgressCallback] = None,
    check: bool = True,
    set: Optional[Mapping[str, Any]] = None,
    threads: Optional[int] = None,
    force_scale: bool = False,
    runs: int = 1,
    jobs: Optional[int] = None,
    executor: Optional[Executor] = None,
    cache: bool = True,
) -> Dict[str, Any]:
    """Runs an experiment's baseline and variants.

    ``experiment`` is a built-in experiment name (see ``experiments()``) or a
    path to an experiment TOML. ``scale`` overrides the experiment's memory
    scale. ``set`` maps dotted config keys to values applied to every arm
    (for example ``{"kernel.page_alloc_shuffle": True}``); a bad key raises
    ``ConfigError`` naming it, and so does a key that a case or an arm of the
    experiment sets itself (its own setting would win). The result has keys
    ``experiment``, ``description``, ``machine``, ``scale``, ``seed``,
    ``config``, ``baseline_name``, ``baseline`` (metrics), ``variants``
    (name -> metrics) and ``variant_order``. Raises
    ``DataVerificationError`` as ``run`` does when any arm lost data.

    Each arm (of each case) is a simulation of its own; up to ``threads`` of
    them run at once on host threads (default: one per host CPU). The result
    is the same for any number; ``provenance.host_threads`` records it.

    A scale below the experiment's smallest valid scale (its ``min_scale``,
    where the arms stop doing what they differ in, e.g. less than a huge page
    per task) raises ``ConfigError`` keyed ``scale`` naming it and why;
    ``force_scale=True`` runs anyway and marks the result ``scale_forced``
    (with ``scale_factor``, ``min_scale`` and ``min_scale_why``).

    ``runs=N`` (above 1) runs seeds ``seed`` .. ``seed+N-1`` of every arm,
    as ``vmsim compare --runs N`` does, on up to ``jobs`` worker processes
    (default: one per host CPU; each then runs its arms on ``threads`` host
    threads, default its share of the CPUs), and returns that command's
    JSON document: ``kind`` "compare-runs", ``experiment``, ``description``,
    ``seeds`` and ``runs`` (one compare result per seed), with the same
    marks. ``compare_results(result)`` prints its tables (mean ±stddev and
    Welch's test at 5%, as the command prints them) and
    ``runs_statistics(result)`` gives the same figures as records.
    A ``kernel.*`` policy key takes a Python policy (``vmsim.policy``): a
    ``"FILE.py:NAME"`` string, or, in ``set``, the callable itself (run in
    this process; with ``runs`` above 1 name a file). A policy that fails
    raises ``PolicyError``.

    ``executor`` runs each seed as one task on it instead of the process
    pool: anything with ``submit(fn, *args)``, such as a
    ``dask.distributed.Client`` (``vmsim[dask]``; docs/usage.md). The
    result is the same; ``provenance.host_seconds`` and ``host_threads``
    may differ.

    The result cache (docs/usage.md) holds each arm on its own: an arm
    whose result is there (from this experiment or another with an arm of
    the same config) is read instead of simulated, only the others run, and
    each fresh one is stored; ``cache=False`` does neither. A compare result
    read from the cache has ``provenance.cached``: true, or the list of the
    arms read when only some were.
    """
    if isinstance(set, Mapping):
        set = _policies.replace_callables(dict(set))
    if runs != 1 or isinstance(runs, bool) or executor is not None:
        return _compare_runs(experiment, scale, seed, runs, jobs, threads, set, progress, force_scale, check,
                             executor=executor, cache=cache)
    if jobs is not None:
        check_threads(jobs, "jobs")  # worker processes matter only with runs above 1
    exp = os.fspath(experiment)
    seed = check_seed(seed)
    threads = check_threads(threads)
    scale = check_scale(scale)
    set = check_set(exp, set)
    forced = check_min_scale(exp, scale, set, force_scale)
    runs = _cache.compare_arms(exp, scale, seed, set) if _cache.enabled(cache) else None
    t0 = time.monotonic()
    texts, skip = _cached_arms(runs)
    # Only the arms not in the cache are simulated (none: the core assembles the result).
    text = _core.compare(exp, scale, seed, progress, json.dumps(set) if set else None, threads, skip=skip)
    doc, cached = _fill_arms(text, runs, texts, _compare_label(exp, scale, seed, set))
    result = _compare_finish(doc, exp, seed, scale, set, forced, threads, time.monotonic() - t0, cached)
    if check:
        check_verified(result)
    return result
