"""The Python API: runs, experiments, sweeps and DataFrames."""

from __future__ import annotations

import itertools
import json
import math
import os
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from . import _core, _policies, _provenance
from . import cache as _cache
from . import dask_backend as _dask
from ._config import ConfigLike, load_dict, load_text, set_dotted
from ._errors import check_json_values, config_error, cut
from ._results import check_result, load_result
from .tables import iter_runs, iter_scalar_rows, metric_names, scalar_metrics, show_scale

ProgressCallback = Callable[[str, float], Any]


def run(
    config: ConfigLike,
    *,
    base_dir: Union[str, "os.PathLike[str]", None] = None,
    progress: Optional[ProgressCallback] = None,
    check: bool = True,
    threads: Optional[int] = None,
    cache: bool = True,
) -> Dict[str, Any]:
    """Runs one simulation and returns its result.

    ``config`` is a dict (sent to the core as JSON), a path to a ``.toml`` or
    ``.json`` run config (its folder becomes ``base_dir``), or TOML text.
    ``progress(label, fraction)`` is called on the calling thread while the
    simulation runs (as it begins, then about four times a second, whatever
    the run does); an exception it raises stops this run within a second.
    The result is a dict with keys ``config`` (the resolved config),
    ``machine`` (``name``, ``description``, ``summary``), ``scale`` and
    ``metrics``. A windowed run (``sim.window_cycles``) spreads its sockets
    over up to ``threads`` host threads (default: one per host CPU); the
    result is the same for any number.

    A result in the result cache (``vmsim.cache``; docs/usage.md) is read
    instead of simulated, and a fresh one is stored there; ``cache=False``
    does neither. A result read from the cache has ``provenance.cached``.

    Raises ``ConfigError`` (with ``.key``, the dotted path of the bad field)
    for a bad config, ``DataVerificationError`` when the simulated workload
    did not read back what it wrote (the full result is its ``result``
    attribute; ``check=False`` returns it instead), and ``FileNotFoundError``
    for a missing config file.
    """
    threads = check_threads(threads)
    if isinstance(config, Mapping):
        # A callable as a policy value runs in this process under a registered name.
        config = _policies.replace_callables(dict(config))
    text, fmt, base = load_text(config, base_dir)
    key = _run_key(text, fmt, base) if _cache.enabled(cache) else None
    t0 = time.monotonic()
    out = _cache.get(key)
    hit = out is not None
    if not hit:
        out = _core.run_config(text, fmt, base, progress, threads)
        _cache.put(key, out, "run")
    result = json.loads(out)
    seed = result.get("config", {}).get("seed", 0)
    _provenance.attach(result, "run", seeds=[seed], scale=None, host_seconds=time.monotonic() - t0, base_dir=base,
                       host_threads=threads)
    if hit:
        result["provenance"]["cached"] = True
    if check:
        check_verified(result)
    return result


def _run_key(text: str, fmt: str, base: Optional[str]) -> Optional[str]:
    """The cache key of a run config's text, or None (not cacheable, or not
    parsed: the run then says what is wrong)."""
    from ._config import parse_json, parse_toml

    try:
        cfg = parse_json(text) if fmt == "json" else parse_toml(text)
        return _cache.run_key(json.dumps(cfg), base)
    except (_core.VmsimError, ValueError, RecursionError):
        return None


def lost_data(result: Mapping[str, Any]) -> List[str]:
    """The runs of a run or compare result whose data check failed, each as
    ``"name: first errors"``."""
    lost: List[str] = []
    if not any(k in result for k in ("metrics", "variants", "cases")):
        return lost  # host measurements and other documents hold no data check
    for name, metrics in iter_runs(result):
        if metrics.get("data_verified") is False:
            errors = metrics.get("data_errors") or []
            shown = "; ".join(str(e) for e in errors[:3]) + (f"; … {len(errors) - 3} more" if len(errors) > 3 else "")
            lost.append(f"{name}: {shown or 'content check failed'}")
    return lost


def check_verified(result: Mapping[str, Any]) -> None:
    """Raises ``DataVerificationError`` (with the result as ``.result``) when
    any run of ``result`` lost or corrupted data."""
    lost = lost_data(result)
    if lost:
        err = _core.DataVerificationError("; ".join(lost))
        err.result = result
        raise err


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


def _arm_name(run: Mapping[str, Any]) -> str:
    """An arm as ``provenance.cached`` lists it: its name, or ``case/arm``."""
    return run["arm"] if run["case"] is None else f"{run['case']}/{run['arm']}"


def _cached_arms(runs: Optional[Sequence[Mapping[str, Any]]]) -> tuple:
    """The cached metrics text of each run of ``runs`` (``cache.compare_arms``;
    None: not cached) and the places of those found, for ``_core.compare``'s
    ``skip``."""
    texts = [_cache.get(r["key"]) for r in runs or []]
    return texts, [i for i, t in enumerate(texts) if t is not None]


def _fill_arms(text: str, runs: Optional[Sequence[Mapping[str, Any]]], texts: Sequence[Optional[str]],
               label: str) -> tuple:
    """The compare result of the core's ``text``, each run the core skipped
    filled in with its cached metrics, and each run it simulated stored in
    the cache; with what ``provenance.cached`` says (True: every arm was read
    from the cache; a list of the arms read; None: none)."""
    doc = json.loads(text)
    if not runs:
        return doc, None
    for run, cached in zip(runs, texts):
        target = doc["cases"][run["case"]] if run["case"] is not None else doc
        where, k = (target, "baseline") if run["baseline"] else (target["variants"], run["arm"])
        if cached is not None:
            where[k] = json.loads(cached)
        else:
            _cache.put(run["key"], json.dumps(where[k], separators=(",", ":"), ensure_ascii=False),
                       f"{label} arm {_arm_name(run)}")
    read = [_arm_name(r) for r, t in zip(runs, texts) if t is not None]
    return doc, (True if len(read) == len(runs) else read or None)


def _compare_label(exp: str, scale: Optional[float], seed: int, settings: Optional[Mapping[str, Any]]) -> str:
    """What ``vmsim cache list`` shows of a cached compare."""
    label = f"compare {exp} seed {seed}" + (f" scale {show_scale(scale)}" if scale is not None else "")
    return label + (f" set {json.dumps(dict(settings), sort_keys=True)}" if settings else "")


def _compare_finish(result: Dict[str, Any], exp: str, seed: int, scale: Optional[float],
                    settings: Optional[Mapping[str, Any]], forced: Optional[Mapping[str, Any]], threads: int,
                    host_seconds: float, cached: Any) -> Dict[str, Any]:
    """A compare result from the core's, parsed and filled in: the settings
    and scale marks and the provenance block (the same whether the result is
    fresh, from a worker or from the cache); ``cached`` as ``_fill_arms``
    gives it."""
    if settings:
        result["set"] = dict(settings)
    if forced:
        result.update(forced)
    exp_dir = os.path.dirname(os.path.abspath(exp)) if os.path.isfile(exp) else None
    _provenance.attach(result, "compare", seeds=[seed], scale=scale, host_seconds=host_seconds,
                       base_dir=exp_dir, host_threads=threads)
    if cached:
        result["provenance"]["cached"] = cached
    return result


def _build() -> List[str]:
    return [_core.__version__, getattr(_core, "__git_revision__", "unknown")]


def _check_build(expected: Optional[Sequence[str]]) -> None:
    """In a worker: refuses to run for a caller of another vmsim build (a
    cluster's workers must run the caller's version, or results differ)."""
    if expected is not None and list(expected) != _build():
        raise _core.VmsimError(f"this worker runs vmsim {' '.join(_build())}, the study was started with "
                               f"vmsim {' '.join(expected)}; install the same version on every worker")


def _compare_text(experiment: str, scale: Optional[float], seed: int, set_json: Optional[str], threads: int,
                  build: Optional[Sequence[str]] = None, skip: Sequence[int] = ()) -> tuple:
    """One seed of an experiment in a worker (a process pool's or a dask
    cluster's): the core's JSON text (the runs in ``skip`` not simulated,
    their metrics null) and the host seconds it took."""
    _check_build(build)
    t0 = time.monotonic()
    text = _core.compare(experiment, scale, seed, None, set_json, threads, skip=list(skip))
    return text, time.monotonic() - t0


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
        executor = process_pool(jobs)
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


def _cancel(futures: Sequence[Any]) -> None:
    """Cancels what is queued on an executor the caller owns (left running)."""
    for fut in futures:
        try:
            fut.cancel()
        except Exception:  # noqa: BLE001 - a future that cannot be cancelled any more
            pass


def check_scale(scale: Any) -> Optional[float]:
    """A memory scale factor: ``None`` (the experiment's own) or a positive finite number."""
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not (math.isfinite(scale) and scale > 0):
        raise config_error("scale", f"{cut(repr(scale))} is not accepted; accepted: a positive number, "
                                    "or None for the experiment's own scale")
    return float(scale)


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


def runs_statistics(result: Union[Mapping[str, Any], str, "os.PathLike[str]"],
                    metrics: Optional[Sequence[str]] = None, min_change: float = 0.0) -> List[Dict[str, Any]]:
    """The statistics ``compare_results`` and ``vmsim compare --runs`` print,
    as records: for a ``compare(runs=N)`` result (or any compare result, or
    the path of one), one record per case and metric that changes:
    ``case`` (None without cases), ``metric``, ``arms`` (each ``name``,
    ``n``, ``mean``, ``stddev``, ``min``, ``max``; the baseline first),
    ``changes`` (each variant's change of the mean in percent, None for a
    zero baseline) and ``significant`` (Welch's two-sided t-test at 5%, as
    stats.py decides it; None with one run per arm)."""
    from . import runtables

    if isinstance(result, (str, os.PathLike)):
        result = load_result(result)
    elif isinstance(result, Mapping):
        check_result(result, "result")
    else:
        raise config_error("result", f"{cut(repr(result))} is not accepted; accepted: a result dict or the path "
                                     "of a result JSON")
    min_change = check_min_change(min_change)
    if isinstance(metrics, (str, bytes)) or (metrics is not None and not all(isinstance(m, str) for m in metrics)):
        raise config_error("metrics", f"{cut(repr(metrics))} is not accepted; accepted: a list of metric names")
    groups: Dict[Optional[str], list] = {}
    for name, arm_runs in runtables.arms_of(result):
        case = name.split("/", 1)[0] if "/" in name else None
        groups.setdefault(case, []).append((name, arm_runs))
    if metrics:
        known = metric_names(*(m for arms in groups.values() for _, rs in arms for m in rs))
        check_metric_names(list(metrics), known)
    out = []
    for case, arms in groups.items():
        for rec in runtables.rows(arms, metrics, min_change):
            out.append({"case": case, "metric": rec["metric"],
                        "arms": [{"name": n, "n": s.n, "mean": s.mean, "stddev": s.stddev, "min": s.min, "max": s.max}
                                 for (n, _), s in zip(arms, rec["summaries"])],
                        "changes": rec["changes"], "significant": rec["significant"]})
    return out


def check_min_scale(experiment: str, scale: Optional[float], settings: Optional[Mapping[str, Any]] = None,
                    force_scale: Any = False) -> Optional[Dict[str, Any]]:
    """Holds a compare's scale to the experiment's smallest valid scale (its
    ``min_scale``, read from the core's plan). Below it: ``ConfigError``
    keyed ``scale`` naming the smallest valid scale and why, or, with
    ``force_scale``, the marks for the result (``scale_forced``,
    ``scale_factor``, the scale run, ``min_scale`` and ``min_scale_why``).
    None when the scale is valid (or the experiment cannot be planned: the
    run then says why)."""
    if not isinstance(force_scale, bool):
        raise config_error("force_scale", f"{cut(repr(force_scale))} is not accepted; accepted: True or False")
    try:
        plan = json.loads(_core.experiment_plan(experiment, None, 0, json.dumps(dict(settings)) if settings else None,
                                                False))
    except (_core.VmsimError, OSError, ValueError):
        return None
    least, why = plan.get("min_scale"), plan.get("min_scale_why")
    used = plan["scale"] if scale is None else scale
    if least is None or used >= least * (1 - 1e-12):
        return None
    if not force_scale:
        quick = plan.get("quick_scale")
        hint = (f"; its quick scale is {show_scale(quick['scale'])}, measured within {quick['tolerance']:g} "
                f"percentage {'point' if quick['tolerance'] == 1 else 'points'} of scale {show_scale(plan['scale'])}'s headline change"
                ) if isinstance(quick, dict) else ""
        raise config_error("scale", f"{show_scale(used)} is below {plan['experiment']}'s smallest valid scale "
                                    f"{show_scale(least)}: {why}; accepted: at least {show_scale(least)} "
                                    "(force_scale=True, --force-scale on the command line, runs anyway and "
                                    f"marks the result){hint}")
    return {"scale_forced": True, "scale_factor": used, "min_scale": least, "min_scale_why": why}


def quick_scale_note(experiment: str, scale: Optional[float]) -> Optional[str]:
    """A note for a compare run at ``scale`` below the experiment's quick
    scale (the smallest measured to give the headline change of the
    experiment's default scale, scale 1 unless its file says otherwise,
    within its tolerance), or None: such a scale is valid, but its answer
    may differ from that scale's by more than that."""
    if scale is None:
        return None
    try:
        plan = json.loads(_core.experiment_plan(experiment, None, 0, None, False))
    except (_core.VmsimError, OSError, ValueError):
        return None
    quick = plan.get("quick_scale")
    if not isinstance(quick, dict) or scale >= quick["scale"] * (1 - 1e-12):
        return None
    reference = show_scale(plan["scale"])
    return (f"{show_scale(scale)} is below {plan['experiment']}'s quick scale {show_scale(quick['scale'])}, "
            f"the smallest measured to give scale {reference}'s headline change within {quick['tolerance']:g} "
            f"percentage {'point' if quick['tolerance'] == 1 else 'points'}: this answer may differ from scale "
            f"{reference}'s by more")


def check_set(experiment: str, settings: Any) -> Optional[Dict[str, Any]]:
    """``compare``'s ``set`` as a dict of dotted keys to JSON values, or None.

    A key that a case or an arm of the experiment also sets is refused: the
    core applies those after ``set``, so the value given would be lost."""
    if settings is None:
        return None
    if not isinstance(settings, Mapping):
        raise config_error("set", f"{cut(repr(settings))} is not accepted; accepted: a mapping of dotted config keys "
                                  "to values, e.g. {'workload.nr_task': 4}")
    settings = dict(settings)
    for key in settings:
        if not isinstance(key, str) or not key.strip():
            raise config_error("set", f"the key {cut(repr(key))} is not a dotted config key (e.g. 'workload.nr_task')")
    check_json_values(settings, "set")
    if settings:
        # The core refuses a key that a case or an arm sets itself (its own
        # value would win); an experiment it cannot load is left for the run
        # to report.
        try:
            _core.experiment_plan(experiment, None, 0, json.dumps(settings), False)
        except _core.ConfigError as e:
            if e.key == "set" or e.key.startswith("set."):
                raise
    return settings or None


def experiment_plan(experiment: Union[str, "os.PathLike[str]"], scale: Optional[float] = None, seed: int = 0,
                    settings: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """What ``compare`` would simulate, from the core, without simulating:
    ``{"experiment", "scale", "seed", "min_scale", "min_scale_why",
    "quick_scale", "cases": [{"name", "arms": [{"name", "baseline", "config",
    "metrics"}]}]}`` (a case ``name`` of None for an experiment without
    cases; ``min_scale``, the smallest valid scale, its reason, and
    ``quick_scale`` (``{"scale", "tolerance", "measured"}``) None where the
    experiment states none). Raises what ``compare`` would raise before
    its first run."""
    return json.loads(_core.experiment_plan(os.fspath(experiment), scale, seed,
                                            json.dumps(dict(settings)) if settings else None))


def experiment_metric_names(experiment: Union[str, "os.PathLike[str]"],
                            settings: Optional[Mapping[str, Any]] = None,
                            scale: Optional[float] = None) -> Optional[List[str]]:
    """The scalar metrics an experiment's arms report, known before anything
    runs (from the core's plan), or None when the plan cannot be made: the
    run then says what is wrong."""
    try:
        plan = experiment_plan(experiment, scale, 0, settings)
    except (_core.VmsimError, OSError, ValueError):
        return None
    return sorted({m for case in plan["cases"] for arm in case["arms"] for m in arm["metrics"]})


def check_metric_names(metrics: Sequence[str], known: Sequence[str], key: str = "metrics") -> None:
    """Refuses metric names that are not in ``known``, listing the known ones."""
    unknown = [m for m in metrics if m not in set(known)]
    if unknown:
        raise config_error(key, f"unknown metric(s) {', '.join(cut(m) for m in unknown)}; known: {', '.join(known)}")


def check_min_change(min_change: Any) -> float:
    """A ``min_change`` percentage: a finite number of at least 0."""
    if isinstance(min_change, bool) or not isinstance(min_change, (int, float)) or not (
            math.isfinite(min_change) and min_change >= 0):
        raise config_error("min_change", f"{cut(repr(min_change))} is not accepted; accepted: a finite number "
                                         "of at least 0 (percent)")
    return float(min_change)


def default_threads() -> int:
    """Simulations run at once by default (``compare``'s threads, a sweep's or
    ``--runs``' worker processes): one per host CPU this process may use."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


#: Most host threads asked for: far beyond any host's CPUs (the core uses
#: no more threads than it has arms or sockets to run).
MAX_THREADS = 1 << 16

#: Largest seed: a run config's ``seed`` is a TOML integer (at most 2^63-1),
#: and every seed of a ``compare --runs`` or a sweep is one.
MAX_SEED = 2**63 - 1


def check_threads(threads: Any, key: str = "threads") -> int:
    """A host thread count: ``None`` (one per host CPU) or an integer in 1..``MAX_THREADS``."""
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise config_error(key, f"{cut(repr(threads))} is not accepted; accepted: an integer in 1..{MAX_THREADS}")
    return threads


def check_seed(seed: Any) -> int:
    """A seed as the core takes it: an integer in 0..2^63-1 (``MAX_SEED``)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise config_error("seed", f"{cut(repr(seed))} is not accepted; accepted: an integer in 0..{MAX_SEED}")
    return seed


def machines() -> Dict[str, str]:
    """Built-in machine presets: name -> one-line description."""
    return dict(_core.list_machines())


def experiments() -> Dict[str, str]:
    """Built-in experiments: name -> one-line description."""
    return dict(_core.list_experiments())


def hw(command: str, *, quiet: bool = False, **options: Any) -> Dict[str, Any]:
    """Runs a host measurement (``"clear"``, ``"copy"``, ``"pf-test"``,
    ``"calibrate"`` or ``"microbench"``) with keyword options; returns its
    result. ``quiet`` silences its progress notes on stderr."""
    return json.loads(_core.hw_run(command, json.dumps(options), bool(quiet)))


def _run_point(config_json: str, base_dir: Optional[str], threads: int = 1) -> Dict[str, Any]:
    """One sweep point (module level so that process pools can pickle it);
    a windowed point spreads its sockets over ``threads`` host threads."""
    return json.loads(_core.run_config(config_json, "json", base_dir, None, threads))


def _run_point_text(config_json: str, base_dir: Optional[str], threads: int = 1,
                    build: Optional[Sequence[str]] = None) -> str:
    """One sweep point in a worker: the core's JSON text (what the cache stores)."""
    _check_build(build)
    return _core.run_config(config_json, "json", base_dir, None, threads)


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
        executor = process_pool(jobs)
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


def sweep_points(grid: Mapping[str, Sequence[Any]], base: ConfigLike) -> List[Dict[str, Any]]:
    """The points of a sweep, each checked by the core (raises ``ConfigError``
    naming the point and the key for the first bad one)."""
    base_config, base_dir = load_dict(base)
    return _sweep_points(grid, base_config, base_dir)[0]


def sweep_metric_names(grid: Mapping[str, Sequence[Any]], base: ConfigLike) -> List[str]:
    """The scalar metrics the sweep's rows will hold besides the grid keys,
    known before anything runs: the union over the points' machines and
    workloads (the names depend on nothing else)."""
    base_config, base_dir = load_dict(base)
    _, configs = _sweep_points(grid, base_config, base_dir)
    names: set = set()
    seen: set = set()
    for text in configs:
        cfg = json.loads(text)
        workload = cfg.get("workload") if isinstance(cfg.get("workload"), dict) else {}
        kind = json.dumps([cfg.get("machine"), workload.get("kind")], sort_keys=True)
        if kind in seen:
            continue
        seen.add(kind)
        names.update(_core.metric_names(text, "json", base_dir))
    return sorted(names)


def _as_completed(futures: Sequence[Any]):
    """Futures as they finish (concurrent.futures and dask ones), else in order."""
    return _dask.as_completed(futures)


def sweep_columns(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> List[str]:
    """The columns of a sweep's table: the swept keys first, in the grid's
    order, then the metrics in table order (``tables.metric_names``), then
    any other field (``status``, then ``error``). The same order whether the
    rows were just run or read back from a saved sweep (whose JSON keys are
    sorted)."""
    keys = list(keys)
    names: List[str] = []
    for r in rows:
        names.extend(k for k in r if k not in keys and k not in names)
    metrics = metric_names(*({k: r[k] for k in r if k in names and k not in ("status", "error")} for r in rows))
    tail = [k for k in ("status", "error") if k in names]
    others = sorted(k for k in names if k not in metrics and k not in tail)
    return keys + metrics + others + tail


def grid_extension_problem(old: Any, new: Mapping[str, Sequence[Any]]) -> Optional[str]:
    """Why a saved sweep's grid ``old`` cannot be resumed as ``new``, or None
    when ``new`` is the same grid or extends it: the same keys (in any
    order), each keeping every value it had (new values may be added)."""
    if not isinstance(old, dict):
        return "it has no grid"
    if set(old) != set(new):
        return f"its keys are {', '.join(sorted(old)) or 'none'}, not {', '.join(sorted(new))}"
    for key, values in new.items():
        had = old[key] if isinstance(old[key], list) else []
        now = {json.dumps(v, sort_keys=True) for v in values}
        lost = [v for v in had if json.dumps(v, sort_keys=True) not in now]
        if lost:
            return f"{key} drops {', '.join(json.dumps(v) for v in lost)}"
    return None


def _point_key(row: Mapping[str, Any], keys: Sequence[str]) -> str:
    return json.dumps([row.get(k) for k in keys], sort_keys=True)


def _sweep_points(grid: Mapping[str, Sequence[Any]], base_config: Dict[str, Any], base_dir: Optional[str]):
    """The grid's points and their config texts, each checked by the core."""
    keys = list(grid)
    for i, key in enumerate(keys):
        if not isinstance(key, str):
            raise config_error("grid", f"the key {cut(repr(key))} is not a dotted config key (e.g. 'workload.nr_task')")
        for other in keys[:i]:
            if key.startswith(other + ".") or other.startswith(key + "."):
                raise config_error(cut(key), f"overlaps the grid key {cut(other)} (one is inside the other); "
                                             "give each key once")
    value_lists = []
    for key in keys:
        values = grid[key]
        if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__iter__"):
            values = None  # a single value (5, True, None) is no list of values either
        else:
            values = list(values)
        if not values:
            raise config_error(cut(str(key)), f"{cut(repr(grid[key]))} is not accepted; expected a non-empty list "
                                              "of values to sweep")
        value_lists.append(values)
    points = [dict(zip(keys, combo)) for combo in itertools.product(*value_lists)]
    configs = []
    for point in points:
        cfg = json.loads(json.dumps(base_config))
        for key, value in point.items():
            set_dotted(cfg, key, value)
        check_json_values(cfg)
        text = json.dumps(cfg)
        try:
            _core.check_config(text, "json", base_dir)
        except _core.ConfigError as e:
            shown = ", ".join(f"{k}={cut(json.dumps(v), 30)}" for k, v in point.items())
            raise config_error(e.key, f"{e.message} (at sweep point {shown}; no point was run)") from None
        configs.append(text)
    return points, configs


def sweep_document(grid: Mapping[str, Sequence[Any]], base: ConfigLike, rows: List[Dict[str, Any]], *,
                   host_seconds: float = 0.0) -> Dict[str, Any]:
    """The JSON document of a sweep: ``kind`` "sweep", the ``grid``, the
    ``base`` config, one row per point (``rows``) and the provenance block."""
    base_config, base_dir = load_dict(base)
    seeds = sorted({int(r["seed"]) for r in rows if isinstance(r.get("seed"), int)} or {int(base_config.get("seed", 0))})
    doc: Dict[str, Any] = {"kind": "sweep", "grid": {k: list(v) for k, v in grid.items()}, "grid_keys": list(grid),
                           "config": base_config, "rows": rows}
    return _provenance.attach(doc, "sweep", seeds=seeds, scale=None, host_seconds=host_seconds, base_dir=base_dir)


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


def compare_results(
    *results: Union[Mapping[str, Any], str, "os.PathLike[str]"],
    min_change: float = 0.0,
    metrics: Optional[Sequence[str]] = None,
    layout: str = "lkp",
    names: str = "vmsim",
) -> str:
    """The table of saved results, as ``vmsim compare A.json B.json`` prints it.

    Each argument is a result dict or the path of a result JSON (run, compare
    or ``compare --runs``). One result shows its own arms; several are set
    side by side, the first as the base. ``layout`` is "lkp" or "mmtests";
    ``min_change`` keeps the metrics that change by at least that many percent;
    ``metrics`` (a list of names) shows just those; ``names="lkp"`` gives
    the rows LKP's metric names where LKP has them (``vmsim.names``, as
    ``--names lkp``). Results of different
    experiments or machines give a ``UserWarning`` (shown on stderr) that
    says so. Raises ``ConfigError`` for
    a result that is not one (keyed by its path, or ``results[i]``), an
    unknown metric or a bad option.
    """
    from . import runtables

    if layout not in ("lkp", "mmtests"):
        raise config_error("layout", f"{cut(repr(layout))} is not accepted; accepted: 'lkp', 'mmtests'")
    min_change = check_min_change(min_change)
    if names not in ("vmsim", "lkp"):
        raise config_error("names", f"{cut(repr(names))} is not accepted; accepted: 'vmsim', 'lkp'")
    if isinstance(metrics, (str, bytes)) or (metrics is not None and not all(isinstance(m, str) for m in metrics)):
        raise config_error("metrics", f"{cut(repr(metrics))} is not accepted; accepted: a list of metric names")
    labelled = []
    for i, r in enumerate(results):
        if isinstance(r, Mapping):
            origin, label = f"results[{i}]", f"result{i + 1}"
            check_result(r, origin)
        elif isinstance(r, (str, os.PathLike)):
            origin = os.fspath(r)
            label = os.path.splitext(os.path.basename(origin))[0]
            r = load_result(origin)
        else:
            raise config_error(f"results[{i}]", f"{cut(repr(r))} is not accepted; accepted: a result dict or "
                                                "the path of a result JSON")
        if r.get("kind") == "sweep":
            raise config_error(origin, "a sweep result has no arms to compare; to_dataframe() or vmsim plot show it")
        labelled.append((label, r))
    if not labelled:
        raise config_error("results", "give at least one result")
    warning = runtables.mismatch_warning(labelled)
    if warning:
        import warnings

        warnings.warn(warning, UserWarning, stacklevel=2)
    if metrics:
        known = metric_names(*(m for _, r in labelled for _, runs in runtables.arms_of(r) for m in runs))
        check_metric_names(list(metrics), known)
    fmt = runtables.format_lkp if layout == "lkp" else runtables.format_mmtests
    parts = []
    for arms in runtables.saved_arms(labelled):
        groups: Dict[str, list] = {}
        for name, runs in arms:
            case = name.split("/", 1)[0] if "/" in name and len(labelled) == 1 else ""
            groups.setdefault(case, []).append((name, runs))
        parts += [fmt(g, metrics, min_change, names=names) for g in groups.values()]
    return "\n".join(parts)


def to_dataframe(result: Union[Mapping[str, Any], Sequence[Mapping[str, Any]], str, "os.PathLike[str]"], *,
                 per_cpu: bool = False):
    """A ``pandas.DataFrame`` of a result.

    - ``run`` result: one row (index ``"run"``), a column per scalar metric;
    - ``compare`` result: a row per configuration (baseline first, then the
      variants in order), a column per scalar metric;
    - a list of rows (``sweep`` without pandas): one row each;
    - the path of a result JSON: that result, as above.

    With ``per_cpu=True``, the per-CPU counters instead: one row per CPU (and
    per configuration for a compare result, in a ``run`` column).
    Needs pandas (``pip install 'vmsim[full]'``).
    """
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("to_dataframe needs pandas: pip install 'vmsim[full]'") from e
    if isinstance(result, (str, os.PathLike)):
        result = load_result(result)
    elif isinstance(result, Mapping):
        check_result(result, "result")
    else:
        try:
            rows = list(result)
        except TypeError:
            rows = None
        if rows is None or not all(isinstance(r, Mapping) for r in rows):
            raise config_error("result", f"{cut(repr(result))} is not accepted; accepted: a result dict, the path "
                                         "of a result JSON, or a list of row dicts")
        return pd.DataFrame(rows)
    if result.get("kind") == "sweep":
        return pd.DataFrame(result.get("rows", []))
    if result.get("kind") == "compare-runs" and not per_cpu:
        rows = [dict(scalar_metrics(m), run=name, seed=seed)
                for seed, r in zip(result.get("seeds", []), result.get("runs", [])) for name, m in iter_runs(r)]
        return pd.DataFrame(rows).set_index(["run", "seed"])
    if per_cpu:
        frames = []
        for name, metrics in iter_runs(result):
            df = pd.DataFrame(metrics.get("per_cpu", []))
            df.insert(0, "run", name)
            frames.append(df)
        return pd.concat(frames, ignore_index=True)
    rows = list(iter_scalar_rows(result))
    df = pd.DataFrame([m for _, m in rows], index=[n for n, _ in rows])
    df.index.name = "run"
    return df
