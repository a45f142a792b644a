"""Plots of results (needs matplotlib)."""

from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ._errors import cut
from ._io import atomic_path
from ._results import result_problem
from .runtables import arms_of, show, unit_of
from .stats import summarise
from .tables import metric_names

#: Image formats written (from the output's suffix).
FORMATS = ("png", "pdf", "svg")


class PlotError(ValueError):
    """The input is not a result that can be plotted, or an option is wrong."""


def _check_result(result: Any) -> None:
    problem = result_problem(result)
    if problem:
        raise PlotError(problem)
    if result.get("kind") == "sweep" and not result.get("rows"):
        raise PlotError("an empty sweep result: nothing to plot")


def _all_metric_sets(result: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    if result.get("kind") == "sweep":
        return [r for r in result.get("rows", []) if r.get("status", "ok") == "ok"]
    return [m for _, runs in arms_of(result) for m in runs]


def _check_metrics(result: Mapping[str, Any], metrics: Optional[Sequence[str]]) -> None:
    if not metrics:
        return
    known = metric_names(*_all_metric_sets(result))
    unknown = [m for m in metrics if m not in known]
    if unknown:
        raise PlotError(f"unknown metric(s) {', '.join(cut(m) for m in unknown)}; known: {', '.join(known)}")


def _format_of(out: Union[str, "os.PathLike[str]"]) -> str:
    suffix = os.path.splitext(os.fspath(out))[1].lower().lstrip(".")
    if suffix not in FORMATS:
        raise PlotError(f"{cut(os.fspath(out))}: unknown image format {suffix!r}; accepted suffixes: {', '.join('.' + f for f in FORMATS)}")
    return suffix


def _save(fig, out: Union[str, "os.PathLike[str]"], fmt: str) -> str:
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=100, format=fmt)
    return os.fspath(out)


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError("plotting needs matplotlib: pip install 'vmsim[full]'") from e
    return plt


#: Metrics shown by default, the first ones present.
HEADLINE = ("throughput_bytes_per_s", "fault_bytes_per_s", "elapsed_s", "sys_s", "llc_misses", "dram_bytes_read")


def plot(
    result: Mapping[str, Any],
    out: Union[str, "os.PathLike[str]"],
    metrics: Optional[Sequence[str]] = None,
) -> List[str]:
    """Writes a figure of a result to ``out`` (format from its suffix: .png,
    .pdf or .svg) and returns the paths written. Raises ``PlotError`` for
    input that is not a result, unknown metrics or an unknown format.

    - run, compare and ``compare --runs`` results: one row of panels per case
      (an experiment without cases has one): the absolute value of each
      metric per arm (mean with min..max over runs when there are several),
      each variant's change against the baseline written on its bar, then
      system time stacked by kernel path, then user and system time per CPU;
    - sweep results: each metric against the first swept key, one line per
      combination of the other keys (a swept ``seed`` is averaged, with the
      spread shaded).
    """
    _check_result(result)
    _check_metrics(result, metrics)
    fmt = _format_of(out)
    plt = _pyplot()
    if result.get("kind") == "sweep":
        fig = _sweep_figure(plt, result, metrics)
    else:
        fig = _arms_figure(plt, result, metrics)
    try:
        fig.tight_layout(rect=(0, 0, 1, 0.96))  # room for the figure title
        return [_save(fig, out, fmt)]
    finally:
        plt.close(fig)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _cases(result: Mapping[str, Any]) -> List[tuple]:
    """(case name or None, [(arm name, [metrics per run])])."""
    groups: Dict[str, List[tuple]] = {}
    for name, runs in arms_of(result):
        case, _, arm = name.rpartition("/")
        groups.setdefault(case, []).append((arm, runs))
    return [(c or None, arms) for c, arms in groups.items()]


def _title(result: Mapping[str, Any]) -> str:
    first = (result.get("runs") or [result])[0]
    machine = first.get("machine", {}).get("name") if isinstance(first.get("machine"), Mapping) else None
    name = first.get("experiment") or "run"
    return f"{name}" + (f" on {machine}" if machine else "")


def _arms_figure(plt, result: Mapping[str, Any], metrics: Optional[Sequence[str]]):
    cases = _cases(result)
    sets = _all_metric_sets(result)
    names = list(metrics) if metrics else [m for m in HEADLINE if any(_num(s.get(m)) for s in sets)][:4]
    if not names:  # none of the usual metrics: the first numeric ones
        names = [m for m in metric_names(*sets) if any(_num(s.get(m)) for s in sets)][:4]
    if not names:
        raise PlotError("no numeric metric to plot")
    paths = sorted({k for s in sets for k, v in s.items() if k.startswith("sys_s_") and _num(v) and v > 0})
    # Per CPU is worth a panel only when the work was spread over CPUs.
    per_cpu = any(isinstance(s.get("per_cpu"), list) and len(s.get("per_cpu")) > 1 for s in sets)
    ncols = len(names) + (1 if paths else 0) + (1 if per_cpu else 0)
    fig, axes = plt.subplots(len(cases), ncols, figsize=(3.4 * ncols, 3.2 * len(cases) + 0.6), squeeze=False)
    nruns = max(len(runs) for _, arms in cases for _, runs in arms)
    fig.suptitle(_title(result) + (f" — mean and min..max over {nruns} runs" if nruns > 1 else ""), fontsize=11)
    for row, (case, arms) in enumerate(cases):
        col = 0
        for m in names:
            _absolute_panel(axes[row][col], arms, m, case)
            col += 1
        if paths:
            _sys_stack_panel(axes[row][col], arms, paths, case)
            col += 1
        if per_cpu:
            _per_cpu_panel(axes[row][col], arms, case)
    return fig


def _absolute_panel(ax, arms, metric: str, case: Optional[str]) -> None:
    unit, div = unit_of(metric)
    labels, means, lo, hi = [], [], [], []
    for name, runs in arms:
        vals = [r.get(metric) for r in runs if _num(r.get(metric))]
        if not vals:
            continue
        st = summarise(vals)
        labels.append(name)
        means.append(st.mean / div)
        lo.append(max(0.0, st.mean - st.min) / div)
        hi.append(max(0.0, st.max - st.mean) / div)
    xs = list(range(len(labels)))
    colors = ["#777777"] + [f"C{i}" for i in range(len(labels) - 1)]
    bars = ax.bar(xs, means, color=colors, yerr=[lo, hi] if any(lo) or any(hi) else None, capsize=4)
    base = means[0] if means else 0
    for i, b in enumerate(bars):
        if i == 0 or not base:
            text = show(metric, means[i] * div)
        else:
            change = (means[i] - base) / abs(base) * 100
            text = f"{change if abs(change) >= 0.05 else 0.0:+.1f}%"
        ax.annotate(text, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 2), textcoords="offset points", fontweight="bold" if i else "normal")
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(f"{metric}" + (f" ({unit})" if unit else ""), fontsize=8)
    ax.margins(y=0.15)
    ax.set_title(f"{case}: {metric}" if case else metric, fontsize=9)


def _sys_stack_panel(ax, arms, paths: Sequence[str], case: Optional[str]) -> None:
    xs = list(range(len(arms)))
    bottom = [0.0] * len(arms)
    for k, path in enumerate(paths):
        vals = []
        for _, runs in arms:
            v = [r.get(path) for r in runs if _num(r.get(path))]
            vals.append(sum(v) / len(v) if v else 0.0)
        if not any(vals):
            continue
        ax.bar(xs, vals, bottom=bottom, label=path[len("sys_s_"):], color=f"C{k % 10}")
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(xs)
    ax.set_xticklabels([n for n, _ in arms], rotation=20, ha="right", fontsize=8)
    # Head room above the bars for the legend.
    ax.set_ylim(0, max(bottom + [1e-12]) * (1.25 + 0.09 * len(paths)))
    ax.set_ylabel("system time (s)", fontsize=8)
    ax.set_title(f"{case}: sys_s by kernel path" if case else "sys_s by kernel path", fontsize=9)
    ax.legend(fontsize=6, loc="upper center", ncol=2)


def _per_cpu_panel(ax, arms, case: Optional[str]) -> None:
    """System (solid) and user (dashed) time per CPU that ran work, one colour per arm (first run)."""
    for j, (name, runs) in enumerate(arms):
        rows = runs[0].get("per_cpu") or []
        cpus = [r.get("cpu", i) for i, r in enumerate(rows)]
        step = dict(drawstyle="steps-mid") if len(rows) > 1 else dict(marker="o")
        ax.plot(cpus, [r.get("sys_cycles", 0) / 1e6 for r in rows], color=f"C{j}", label=f"{name} sys", **step)
        ax.plot(cpus, [r.get("user_cycles", 0) / 1e6 for r in rows], color=f"C{j}", linestyle="--",
                label=f"{name} user", **step)
    ax.set_xlabel("CPU", fontsize=8)
    ax.set_ylabel("Mcycles", fontsize=8)
    ax.set_ylim(bottom=0)
    ax.set_title(f"{case}: per CPU" if case else "time per CPU", fontsize=9)
    ax.legend(fontsize=6)


def _sweep_figure(plt, result: Mapping[str, Any], metrics: Optional[Sequence[str]]):
    rows = [r for r in result.get("rows", []) if r.get("status", "ok") == "ok"]
    grid = list(result.get("grid_keys") or result.get("grid") or {})
    if not rows or not grid:
        raise PlotError("a sweep without finished points: nothing to plot")
    names = list(metrics) if metrics else [m for m in HEADLINE if any(_num(r.get(m)) for r in rows)][:3]
    if not names:
        names = [m for m in metric_names(*rows) if m not in grid and any(_num(r.get(m)) for r in rows)][:3]
    if not names:
        raise PlotError("no numeric metric to plot")
    xkey = next((k for k in grid if k != "seed"), grid[0])
    series_keys = [k for k in grid if k not in (xkey, "seed")]
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    seeds = len(set(r.get("seed") for r in rows)) if "seed" in grid else 1
    fig.suptitle(f"sweep of {xkey}" + (f" — mean and min..max over {seeds} seeds" if seeds > 1 else ""), fontsize=11)
    xs_all = list(dict.fromkeys(r.get(xkey) for r in rows))
    numeric_x = all(_num(x) for x in xs_all)
    for ax, m in zip(axes[0], names):
        unit, div = unit_of(m)
        series: Dict[tuple, Dict[Any, List[float]]] = {}
        for r in rows:
            if _num(r.get(m)):
                series.setdefault(tuple(r.get(k) for k in series_keys), {}).setdefault(r.get(xkey), []).append(r[m] / div)
        for i, (label, pts) in enumerate(series.items()):
            xs = [x for x in xs_all if x in pts]
            pos = xs if numeric_x else [xs_all.index(x) for x in xs]
            mean = [sum(pts[x]) / len(pts[x]) for x in xs]
            name = ", ".join(f"{k}={v}" for k, v in zip(series_keys, label)) or m
            ax.plot(pos, mean, marker="o", color=f"C{i}", label=name)
            if any(len(pts[x]) > 1 for x in xs):
                ax.fill_between(pos, [min(pts[x]) for x in xs], [max(pts[x]) for x in xs], color=f"C{i}", alpha=0.2)
        if not numeric_x:
            ax.set_xticks(range(len(xs_all)))
            ax.set_xticklabels([str(x) for x in xs_all], rotation=20, ha="right", fontsize=8)
        ax.set_xlabel(xkey, fontsize=8)
        ax.set_ylabel(m + (f" ({unit})" if unit else ""), fontsize=8)
        ax.set_title(m, fontsize=9)
        ax.legend(fontsize=7)
    return fig
