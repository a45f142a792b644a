"""Saved results shown: ``compare_results``' tables (as ``vmsim compare
A.json B.json`` prints them) and ``runs_statistics``' records (the
statistics of a ``compare(runs=N)`` result)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ._errors import config_error, cut
from ._options import check_metric_names, check_min_change
from ._results import check_result, load_result
from .tables import metric_names


def compare_results(
    *results: Union[Mapping[str, Any], str, "os.PathLike[str]"],
    min_change: float = 0.0,
    metrics: Optional[Sequence[str]] = None,
    layout: str = "lkp",
    names: str = "vmsim",
    base: Optional[str] = None,
) -> str:
    """The table of saved results, as ``vmsim compare A.json B.json`` prints it.

    Each argument is a result dict or the path of a result JSON (run, compare
    or ``compare --runs``). One result shows its own arms; several are set
    side by side, the first as the base. ``layout`` is "lkp" or "mmtests";
    ``min_change`` keeps the metrics that change by at least that many percent;
    ``metrics`` (a list of names) shows just those; ``names="lkp"`` gives
    the rows LKP's metric names where LKP has them (``vmsim.names``, as
    ``--names lkp``); ``base`` names the arm of a single result to compare
    the others with (as ``--base ARM``). Results of different
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
    if base is not None:
        if len(labelled) > 1:
            raise config_error("base", "applies to one result's arms; with several results the first is the base")
        labelled = [(labelled[0][0], _rebased(labelled[0][1], base))]
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


def _rebased(result: Mapping[str, Any], base: Any) -> Dict[str, Any]:
    from .tables import rebase

    if not isinstance(base, str):
        raise config_error("base", f"{cut(repr(base))} is not accepted; accepted: an arm's name")
    try:
        return rebase(result, base)
    except ValueError as e:
        raise config_error("base", str(e)) from None


def runs_statistics(result: Union[Mapping[str, Any], str, "os.PathLike[str]"],
                    metrics: Optional[Sequence[str]] = None, min_change: float = 0.0,
                    base: Optional[str] = None) -> List[Dict[str, Any]]:
    """The statistics ``compare_results`` and ``vmsim compare --runs`` print,
    as records: for a ``compare(runs=N)`` result (or any compare result, or
    the path of one), one record per case and metric that changes:
    ``case`` (None without cases), ``metric``, ``arms`` (each ``name``,
    ``n``, ``mean``, ``stddev``, ``min``, ``max``; the baseline first),
    ``changes`` (each variant's change of the mean in percent, None for a
    zero baseline) and ``significant`` (Welch's two-sided t-test at 5%, as
    stats.py decides it; None with one run per arm). ``base`` names the arm
    to test the others against (default: the baseline; ``ConfigError``
    naming the accepted arms for an unknown one)."""
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
    if base is not None:
        result = _rebased(result, base)
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
