"""A compare result's arms in the result cache, and its finishing: the
cached arms read (for the core to skip), the core's result filled in with
them and its fresh arms stored, and the settings, scale marks and
provenance block added. Shared by ``compare`` (one seed, in this process)
and ``compare_many`` (seeds and experiments on an executor)."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Mapping, Optional, Sequence

from . import _provenance
from . import cache as _cache
from .tables import show_scale


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
