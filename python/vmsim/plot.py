"""Plots of results (needs matplotlib)."""

from __future__ import annotations

import json
import math
import os
import textwrap
import zlib
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ._errors import cut
from ._io import atomic_path
from ._results import result_problem
from .runtables import arms_of, show, unit_of
from .stats import summarise
from .tables import headline_metrics, metric_names, show_scale

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


def _save(fig, out: Union[str, "os.PathLike[str]"], fmt: str, dpi: int) -> str:
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=dpi, format=fmt)
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
HEADLINE = ("throughput_bytes_per_s", "fault_bytes_per_s", "pmbench_throughput_aps", "lru_file_mmap_read_elapsed_s",
            "elapsed_s", "sys_s", "llc_misses", "dram_bytes_read")

#: Figure layouts. ``screen``: each case's panels in rows of three at most,
#: 3.4 x 3.0 in each. ``paper``: one column of a two-column paper (3.5 in
#: wide, as IEEE and ACM templates set it), two panels a row, 7-point text,
#: 300 dpi.
STYLES: Dict[str, Dict[str, Any]] = {
    "screen": {"width": None, "panel_w": 3.4, "panel_h": 3.0, "cols": 3, "font": 8, "small": 7, "title": 11,
               "dpi": 100},
    "paper": {"width": 3.5, "panel_w": 1.75, "panel_h": 1.75, "cols": 2, "font": 7, "small": 6, "title": 7.5,
              "dpi": 300},
}

#: Metric titles in words (a metric not listed is named by its key).
TITLES: Dict[str, str] = {
    "throughput_bytes_per_s": "Throughput",
    "fault_bytes_per_s": "Fault-in rate",
    "pmbench_throughput_aps": "pmbench accesses per second",
    "lru_file_mmap_read_elapsed_s": "Mean reader elapsed time",
    "lru_file_mmap_read_time_range_s": "Readers' elapsed time range",
    "will_it_scale_per_process_ops": "will-it-scale ops per process per second",
    "will_it_scale_per_thread_ops": "will-it-scale ops per thread per second",
    "will_it_scale_workload": "will-it-scale ops per second, all tasks",
    "trace_elapsed_s": "Trace replay elapsed time",
    "elapsed_s": "Elapsed time",
    "user_s": "User time",
    "sys_s": "System time",
    "cycles": "Busy cycles",
    "instructions": "Instructions",
    "ipc": "Instructions per cycle",
    "llc_misses": "LLC misses",
    "llc_references": "LLC references",
    "llc_miss_rate": "LLC miss rate",
    "dram_bytes_read": "DRAM bytes read",
    "dram_bytes_written": "DRAM bytes written",
    "pgfault": "Page faults",
    "ipis_per_s": "IPIs per second",
    "tlb_shootdown_interrupts": "TLB shootdown interrupts",
    "nr_tlb_remote_flush": "Remote TLB flushes",
}

#: One colour per kernel path, the same in every figure (matplotlib's
#: tab20b, hues interleaved, in this order; none is one of the arms'
#: colours); a path not listed takes one of tab20c by its name.
KERNEL_PATHS: Sequence[str] = (
    "clear_page", "copy_page", "handle_mm_fault", "exc_page_fault", "free_pages", "flush_tlb", "irq", "tick",
    "schedule", "syscall", "copy_process", "split_huge_pmd", "shrink_folio_list", "rmap_walk", "try_to_unmap",
    "migrate_pages", "task_numa_work", "spin_lock", "folio_referenced", "filemap_add_folio",
    "isolate_lru_folios", "move_folios_to_lru", "shrink_active_list", "__remove_mapping", "lru_cache_add",
)

#: tab20b's shades in an order that puts different hues side by side;
#: the paths past the twentieth take tab20c's coloured shades (not its greys).
_PATH_SHADES: Sequence[int] = (0, 4, 8, 12, 16, 2, 6, 10, 14, 18, 1, 5, 9, 13, 17, 3, 7, 11, 15, 19)
_MORE_SHADES: Sequence[int] = (0, 4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13)
#: Kernel paths under 2% of an arm's system time are drawn together as "other".
OTHER_PATHS_COLOR = "#d9d9d9"
OTHER_PATHS_BELOW = 0.02

#: The baseline arm's colour; variants take matplotlib's tab10 in order.
BASELINE_COLOR = "#7f7f7f"
VARIANT_COLORS: Sequence[str] = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                                 "#bcbd22", "#17becf")


def path_color(path: str) -> str:
    """The fixed colour of kernel path ``path`` (without ``sys_s_``)."""
    from matplotlib import colormaps

    if path == "other":
        return OTHER_PATHS_COLOR
    if path in KERNEL_PATHS:
        i = KERNEL_PATHS.index(path)
        if i < len(_PATH_SHADES):
            return colormaps["tab20b"](_PATH_SHADES[i])
        return colormaps["tab20c"](_MORE_SHADES[(i - len(_PATH_SHADES)) % len(_MORE_SHADES)])
    return colormaps["tab20c"](zlib.crc32(path.encode()) % 16)


def arm_colors(cases: Sequence[tuple]) -> Dict[str, str]:
    """One colour per arm name for the whole figure: the baselines grey,
    the variants in the order they first appear."""
    colors: Dict[str, str] = {}
    for _, arms in cases:
        for i, (name, _) in enumerate(arms):
            if i == 0:
                colors.setdefault(name, BASELINE_COLOR)
    k = 0
    for _, arms in cases:
        for name, _ in arms:
            if name not in colors:
                colors[name] = VARIANT_COLORS[k % len(VARIANT_COLORS)]
                k += 1
    return colors


def metric_title(metric: str) -> str:
    """``Throughput (GB/s)``: the metric in words, with its unit."""
    unit, _ = unit_of(metric)
    words = TITLES.get(metric)
    if words is None and metric.startswith("sys_s_"):
        words = f"System time in {metric[len('sys_s_'):]}"
    words = words or metric
    return f"{words} ({unit})" if unit else words


def plot(
    result: Mapping[str, Any],
    out: Union[str, "os.PathLike[str]"],
    metrics: Optional[Sequence[str]] = None,
    x: Optional[str] = None,
    style: str = "screen",
) -> List[str]:
    """Writes a figure of a result to ``out`` (format from its suffix: .png,
    .pdf or .svg) and returns the paths written. Raises ``PlotError`` for
    input that is not a result, unknown metrics, an unknown format, style
    or ``x`` key.

    - run, compare and ``compare --runs`` results: per case (an experiment
      without cases has one), the absolute value of each metric per arm
      (mean with min..max over runs when there are several), each variant's
      change against the baseline written on its bar and, where the result
      carries the published measurement (``published``), that change drawn
      beside it; then system time stacked by kernel path, then user and
      system time per CPU. An arm has one colour in every panel, a kernel
      path one colour in every figure;
    - sweep results: each metric against ``x`` (default: the first swept
      key other than ``seed``), one line per combination of the other keys
      (a swept ``seed`` is averaged, with the spread shaded).

    ``style`` is ``screen`` (default) or ``paper`` (one column of a
    two-column paper: 3.5 in wide, 7-point text; use a .pdf or .svg ``out``
    for vector output).
    """
    fmt = _format_of(out)
    fig = figure(result, metrics, x, style)
    try:
        return [_save(fig, out, fmt, STYLES[style]["dpi"])]
    finally:
        _pyplot().close(fig)


def figure(result: Mapping[str, Any], metrics: Optional[Sequence[str]] = None, x: Optional[str] = None,
           style: str = "screen"):
    """The matplotlib figure ``plot`` writes (the caller closes it)."""
    _check_result(result)
    _check_metrics(result, metrics)
    if style not in STYLES:
        raise PlotError(f"style {cut(repr(style))} is not one of {', '.join(STYLES)}")
    plt = _pyplot()
    st = STYLES[style]
    if result.get("kind") == "sweep":
        return _sweep_figure(plt, result, metrics, x, st)
    if x is not None:
        raise PlotError("x applies to sweep results; this is a run or compare result")
    return _arms_figure(plt, result, metrics, st)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _cases(result: Mapping[str, Any]) -> List[tuple]:
    """(case name or None, [(arm name, [metrics per run])])."""
    groups: Dict[str, List[tuple]] = {}
    for name, runs in arms_of(result):
        case, _, arm = name.rpartition("/")
        groups.setdefault(case, []).append((arm, runs))
    return [(c or None, arms) for c, arms in groups.items()]


def _scale_seed(result: Mapping[str, Any]) -> str:
    """``scale 1/2, seed 0`` (or ``seeds 0..4``) from a result's provenance."""
    first = (result.get("runs") or [result])[0]
    prov = result.get("provenance") if isinstance(result.get("provenance"), Mapping) else {}
    scale = prov.get("scale") if isinstance(prov, Mapping) else None
    parts = []
    if _num(scale):
        parts.append(f"scale {show_scale(scale)}")
    seeds = result.get("seeds") or (prov.get("seeds") if isinstance(prov, Mapping) else None)
    if isinstance(seeds, list) and len(seeds) > 1:
        parts.append(f"seeds {seeds[0]}..{seeds[-1]}")
    elif first.get("seed") is not None:
        parts.append(f"seed {first.get('seed')}")
    if result.get("scale_forced"):
        parts.append("SCALE FORCED below the smallest valid scale")
    return ", ".join(parts)


def _title(result: Mapping[str, Any]) -> str:
    first = (result.get("runs") or [result])[0]
    machine = first.get("machine", {}).get("name") if isinstance(first.get("machine"), Mapping) else None
    name = first.get("experiment") or "run"
    head = f"{name}" + (f" on {machine}" if machine else "")
    tail = _scale_seed(result)
    return head + (f" — {tail}" if tail else "")


def _published(result: Mapping[str, Any]) -> Dict[tuple, Mapping[str, Any]]:
    """The published measurements a result carries, by (case, arm, metric)."""
    first = (result.get("runs") or [result])[0]
    out: Dict[tuple, Mapping[str, Any]] = {}
    for p in first.get("published") or result.get("published") or []:
        if isinstance(p, Mapping) and _num(p.get("change_percent")):
            out[(p.get("case"), p.get("arm"), p.get("metric"))] = p
    return out


def _grid(plt, n_panels: int, n_rows_of_cases: int, st: Mapping[str, Any]):
    """Figure and axes: each case's panels in rows of ``cols`` at most (a
    case with fewer panels is as wide as they are); returns (fig, [[axes
    of a case]])."""
    cols = min(st["cols"], n_panels) if st["width"] is None else st["cols"]
    rows_per_case = math.ceil(n_panels / cols)
    nrows = rows_per_case * n_rows_of_cases
    width = st["width"] or st["panel_w"] * cols
    height = st["panel_h"] * nrows + (0.38 if st["width"] else 0.35)  # and the title
    fig, axes = plt.subplots(nrows, cols, figsize=(width, height), squeeze=False, layout="constrained")
    pad = 2 / 72 if st["width"] else 4 / 72
    fig.get_layout_engine().set(w_pad=pad, h_pad=pad)
    per_case = []
    for c in range(n_rows_of_cases):
        flat = [axes[c * rows_per_case + i // cols][i % cols] for i in range(rows_per_case * cols)]
        for ax in flat[n_panels:]:
            ax.set_visible(False)
        per_case.append(flat[:n_panels])
    return fig, per_case


def _arms_figure(plt, result: Mapping[str, Any], metrics: Optional[Sequence[str]], st: Mapping[str, Any]):
    cases = _cases(result)
    sets = _all_metric_sets(result)
    # Default: the workload's headline metrics (tables.headline_metrics), then the usual ones.
    usual = [m for m in headline_metrics(*sets) + [m for m in HEADLINE] if any(_num(s.get(m)) for s in sets)]
    names = list(metrics) if metrics else list(dict.fromkeys(usual))[:4]
    if not names:  # none of the usual metrics: the first numeric ones
        names = [m for m in metric_names(*sets) if any(_num(s.get(m)) for s in sets)][:4]
    if not names:
        raise PlotError("no numeric metric to plot")
    # The breakdown panels are drawn on a screen figure of the default
    # metrics only: metrics asked for are drawn alone, and a paper figure
    # has the metrics alone.
    extras = not metrics and not st["width"]
    paths = sorted({k for s in sets for k, v in s.items() if k.startswith("sys_s_") and _num(v) and v > 0}) if extras else []
    # Per CPU is worth a panel only when the work was spread over CPUs.
    per_cpu = extras and any(isinstance(s.get("per_cpu"), list) and len(s.get("per_cpu")) > 1 for s in sets)
    npanels = len(names) + (1 if paths else 0) + (1 if per_cpu else 0)
    fig, axes = _grid(plt, npanels, len(cases), st)
    nruns = max(len(runs) for _, arms in cases for _, runs in arms)
    title = _title(result)
    if nruns > 1:
        title += f"; bars: mean, whiskers: min..max over {nruns} runs"
    published = _published(result)
    if any(k[2] in names for k in published):
        title += "; hatched: published"
    if st["width"]:  # paper: the title wraps at the column's width
        title = title.replace(" — ", "\n", 1)
    fig.suptitle(title, fontsize=st["title"])
    colors = arm_colors(cases)
    for row, (case, arms) in enumerate(cases):
        panels = iter(axes[row])
        for m in names:
            _absolute_panel(next(panels), arms, m, case, colors, published, st)
        if paths:
            _sys_stack_panel(next(panels), arms, paths, case, st)
        if per_cpu:
            _per_cpu_panel(next(panels), arms, case, colors, st)
    return fig


def _case_title(case: Optional[str], text: str) -> str:
    return f"{case}: {text}" if case else text


def _set_title(ax, text: str, st: Mapping[str, Any]) -> None:
    """A panel's title; at a paper's column width, wrapped to fit its panel."""
    if st["width"]:
        text = "\n".join(textwrap.wrap(text, 22))
    ax.set_title(text, fontsize=st["font"] + 1)


def _absolute_panel(ax, arms, metric: str, case: Optional[str], colors: Mapping[str, str],
                    published: Mapping[tuple, Mapping[str, Any]], st: Mapping[str, Any]) -> None:
    unit, div = unit_of(metric)
    title = metric_title(metric)
    big = [abs(r.get(metric)) for _, runs in arms for r in runs if _num(r.get(metric))]
    if not unit and big and max(big) >= 1e6:
        # Counts in millions: a readable axis without an offset label.
        unit, div, title = "millions", 1e6, f"{title} (millions)"
    labels, means, lo, hi = [], [], [], []
    for name, runs in arms:
        vals = [r.get(metric) for r in runs if _num(r.get(metric))]
        if not vals:
            continue
        s = summarise(vals)
        labels.append(name)
        means.append(s.mean / div)
        lo.append(max(0.0, s.mean - s.min) / div)
        hi.append(max(0.0, s.max - s.mean) / div)
    pub = [published.get((case, name, metric)) for name in labels]
    width = 0.4 if any(pub) else 0.8
    xs = list(range(len(labels)))
    bars = ax.bar(xs, means, width=width, color=[colors.get(n, BASELINE_COLOR) for n in labels],
                  yerr=[lo, hi] if any(lo) or any(hi) else None, capsize=3)
    base = means[0] if means else 0
    # At a column's width, more than three bars' labels side by side collide: upright.
    # (A published bar stands right beside its prediction: labels upright too.)
    crowded = bool(st["width"]) and (len(labels) > 3 or any(p is not None for p in pub))
    note = dict(rotation=90, xytext=(0, 2)) if crowded else dict(xytext=(0, 2))
    for i, b in enumerate(bars):
        if i == 0 or not base:
            if st["width"]:
                continue  # paper: the axis gives the baseline's value
            text = show(metric, means[i] * div) if unit != "millions" else f"{means[i]:.4g} M"
        else:
            change = (means[i] - base) / abs(base) * 100
            text = f"{change if abs(change) >= 0.05 else 0.0:+.1f}%"
        ax.annotate(text, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                    fontsize=st["small"], textcoords="offset points", fontweight="bold" if i else "normal", **note)
    # The published measurement beside the prediction: its change applied to
    # the model's baseline (published absolute figures are of other machines
    # and sizes; the experiment file's source gives them).
    for i, p in enumerate(pub):
        if p is None or not base:
            continue
        height = base * (1 + p["change_percent"] / 100.0)
        b = ax.bar(xs[i] + width, height, width=width, color="white", edgecolor=colors.get(labels[i], BASELINE_COLOR),
                   hatch="////", linewidth=0.8)[0]
        ax.annotate(f"{p['change_percent']:+.1f}%", (b.get_x() + b.get_width() / 2, height), ha="center",
                    va="bottom", fontsize=st["small"], textcoords="offset points", style="italic", **note)
    # A tick under each arm's bar, or between it and its published one.
    ax.set_xticks([x + (width / 2 if p is not None else 0) for x, p in zip(xs, pub)])
    ax.set_xticklabels(labels, rotation=35 if crowded else 20, ha="right", fontsize=st["font"])
    ax.tick_params(axis="y", labelsize=st["small"])
    ax.set_ylabel(unit or "", fontsize=st["font"])
    heights = [m + h for m, h in zip(means, hi)] + [base * (1 + q["change_percent"] / 100.0) for q in pub if q]
    if heights and min(means + [0.0]) >= 0 and max(heights) > 0:
        # Room above the bars for their labels (upright ones are taller).
        ax.set_ylim(0, max(heights) * (1.9 if crowded else 1.18))
    else:
        ax.margins(y=0.18)
    _set_title(ax, _case_title(case, title), st)


def _sys_stack_panel(ax, arms, paths: Sequence[str], case: Optional[str], st: Mapping[str, Any]) -> None:
    xs = list(range(len(arms)))
    bottom = [0.0] * len(arms)
    shown = 0
    means = {}
    for path in paths:
        vals = []
        for _, runs in arms:
            v = [r.get(path) for r in runs if _num(r.get(path))]
            vals.append(sum(v) / len(v) if v else 0.0)
        means[path] = vals
    totals = [sum(v[i] for v in means.values()) for i in range(len(arms))]
    major = [p for p in paths if any(t and v / t >= OTHER_PATHS_BELOW for v, t in zip(means[p], totals))]
    minor = [p for p in paths if p not in major]
    stack = [(p[len("sys_s_"):], means[p]) for p in major]
    if minor:
        stack.append(("other", [sum(means[p][i] for p in minor) for i in range(len(arms))]))
    for name, vals in stack:
        if not any(vals):
            continue
        ax.bar(xs, vals, bottom=bottom, label=name, color=path_color(name))
        bottom = [b + v for b, v in zip(bottom, vals)]
        shown += 1
    ax.set_xticks(xs)
    ax.set_xticklabels([n for n, _ in arms], rotation=20, ha="right", fontsize=st["font"])
    ax.tick_params(axis="y", labelsize=st["small"])
    top = max(bottom + [1e-12])
    ax.set_ylim(0, top * 1.05)
    ax.set_ylabel("s", fontsize=st["font"])
    _set_title(ax, _case_title(case, "System time by path (s)"), st)
    # Beside the axes, not over the bars; top of the stack first.
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], fontsize=st["small"] - 1, loc="upper left", bbox_to_anchor=(1.0, 1.0),
              frameon=False, borderaxespad=0.2)


def _per_cpu_panel(ax, arms, case: Optional[str], colors: Mapping[str, str], st: Mapping[str, Any]) -> None:
    """System (solid) and user (dashed) cycles per CPU that ran work, in each arm's colour (first run)."""
    for name, runs in arms:
        rows = runs[0].get("per_cpu") or []
        cpus = [r.get("cpu", i) for i, r in enumerate(rows)]
        step = dict(drawstyle="steps-mid") if len(rows) > 1 else dict(marker="o")
        color = colors.get(name, BASELINE_COLOR)
        ax.plot(cpus, [r.get("sys_cycles", 0) / 1e6 for r in rows], color=color, label=f"{name} sys", **step)
        ax.plot(cpus, [r.get("user_cycles", 0) / 1e6 for r in rows], color=color, linestyle="--",
                label=f"{name} user", **step)
    ax.set_xlabel("CPU", fontsize=st["font"])
    ax.set_ylabel("M cycles", fontsize=st["font"])
    ax.tick_params(labelsize=st["small"])
    ax.set_ylim(bottom=0)
    _set_title(ax, _case_title(case, "Cycles per CPU (M)"), st)
    # Beside the axes, not over the lines.
    ax.legend(fontsize=st["small"] - 1, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False,
              borderaxespad=0.2)


def _sweep_figure(plt, result: Mapping[str, Any], metrics: Optional[Sequence[str]], x: Optional[str],
                  st: Mapping[str, Any]):
    rows = [r for r in result.get("rows", []) if r.get("status", "ok") == "ok"]
    grid = list(result.get("grid_keys") or result.get("grid") or {})
    if not rows or not grid:
        raise PlotError("a sweep without finished points: nothing to plot")
    if x is not None and x not in grid:
        raise PlotError(f"x: {cut(repr(x))} is not a swept key; swept: {', '.join(grid)}")
    names = list(metrics) if metrics else [m for m in HEADLINE if any(_num(r.get(m)) for r in rows)][:3]
    if not names:
        names = [m for m in metric_names(*rows) if m not in grid and any(_num(r.get(m)) for r in rows)][:3]
    if not names:
        raise PlotError("no numeric metric to plot")
    xkey = x or next((k for k in grid if k != "seed"), grid[0])
    values = {k: list(dict.fromkeys(json.dumps(r.get(k), sort_keys=True) for r in rows)) for k in grid}
    # Keys swept over one value are stated in the title, not in every label.
    fixed = [k for k in grid if k not in (xkey, "seed") and len(values[k]) == 1]
    series_keys = [k for k in grid if k not in (xkey, "seed") and k not in fixed]
    fig, axes = _grid(plt, len(names), 1, dict(st, panel_w=st["panel_w"] * 1.2, panel_h=st["panel_h"] * 1.15))
    seeds = sorted(set(r.get("seed") for r in rows if r.get("seed") is not None)) if "seed" in grid else []
    config = result.get("config") if isinstance(result.get("config"), Mapping) else {}
    machine = config.get("machine")
    title = f"sweep of {xkey}" + (f" on {machine}" if isinstance(machine, str) else "")
    if xkey != "seed" and len(seeds) > 1:
        title += f"; mean and min..max over seeds {seeds[0]}..{seeds[-1]}"
    elif "seed" not in grid and "seed" in config:
        title += f", seed {config['seed']}"
    if fixed:
        title += "; " + ", ".join(f"{k}={rows[0].get(k)}" for k in fixed)
    if st["width"]:
        title = "\n".join(textwrap.wrap(title, 60))
    fig.suptitle(title, fontsize=st["title"])
    short = _short_names(series_keys)
    xs_all = list(dict.fromkeys(r.get(xkey) for r in rows))
    numeric_x = all(_num(v) for v in xs_all)
    if numeric_x:
        xs_all = sorted(xs_all)
    scale = x_scale(xs_all) if numeric_x else "linear"
    markers = ("o", "s", "^", "D", "v", "P", "X", "*")
    for ax, m in zip(axes[0], names):
        unit, div = unit_of(m)
        series: Dict[tuple, Dict[Any, List[float]]] = {}
        for r in rows:
            if _num(r.get(m)):
                series.setdefault(tuple(r.get(k) for k in series_keys), {}).setdefault(r.get(xkey), []).append(r[m] / div)
        for i, (label, pts) in enumerate(series.items()):
            xs = [v for v in xs_all if v in pts]
            pos = xs if numeric_x else [xs_all.index(v) for v in xs]
            mean = [sum(pts[v]) / len(pts[v]) for v in xs]
            name = ", ".join(f"{short[k]}={v}" for k, v in zip(series_keys, label)) or m
            color = VARIANT_COLORS[i % len(VARIANT_COLORS)]
            # Points only: a swept setting has no values between those run,
            # and a line between two of them would draw a step as a slope.
            # Hollow markers of their own shapes: series on one point all show.
            ax.plot(pos, mean, linestyle="none", marker=markers[i % len(markers)], markersize=6 if st["width"] is None
                    else 4, markerfacecolor="none", markeredgewidth=1.2, color=color, label=name)
            if any(len(pts[v]) > 1 for v in xs):
                ax.errorbar(pos, mean, yerr=[[m - min(pts[v]) for m, v in zip(mean, xs)],
                                             [max(pts[v]) - m for m, v in zip(mean, xs)]],
                            linestyle="none", color=color, capsize=2, linewidth=0.8)
        if not numeric_x:
            ax.set_xticks(range(len(xs_all)))
            ax.set_xticklabels([str(v) for v in xs_all], rotation=20, ha="right", fontsize=st["font"])
        else:
            if scale == "symlog":
                ax.set_xscale("symlog", linthresh=min(v for v in xs_all if v > 0), linscale=0.5)
            elif scale == "log":
                ax.set_xscale("log")
            if len(xs_all) <= 12:
                # A tick at each value run, labelled as given.
                ax.set_xticks(xs_all)
                ax.set_xticklabels([f"{v:g}" for v in xs_all], fontsize=st["small"])
                ax.minorticks_off()
            ax.margins(x=0.08)
        ax.margins(y=0.12)
        ax.tick_params(labelsize=st["small"])
        ax.set_xlabel(_axis_key(xkey, st), fontsize=st["font"])
        ax.set_ylabel(unit or "", fontsize=st["font"])
        _set_title(ax, metric_title(m), st)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if series_keys and handles:
        # One legend for all panels, under them.
        ncol = min(len(labels), 2 if st["width"] else 4)
        fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=st["small"], frameon=False)
    return fig


def _axis_key(key: str, st: Mapping[str, Any]) -> str:
    """A swept key as an axis label: its last dotted part (the title names
    it in full), and at a paper's column width broken after underscores to
    fit its panel."""
    short = key.rsplit(".", 1)[-1]
    if not st["width"]:
        return key
    return "\n".join(line.replace("_ ", "_") for line in textwrap.wrap(short.replace("_", "_ "), 22))


def x_scale(values: Sequence[float]) -> str:
    """A sweep's x axis: "log" where its values (all above 0) span more
    than an order of magnitude (the largest 20 times the smallest or more),
    "symlog" where those above 0 do with a 0 among them (linear from 0 to
    the smallest value above 0), otherwise "linear"."""
    positive = [v for v in values if v > 0]
    if len(positive) < 2 or any(v < 0 for v in values) or max(positive) / min(positive) < 20:
        return "linear"
    return "symlog" if any(v == 0 for v in values) else "log"


def _short_names(keys: Sequence[str]) -> Dict[str, str]:
    """Dotted keys by their last part (``nr_task`` for ``workload.nr_task``)
    where that names one key only."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (s if last.count(s) == 1 else k) for k, s in zip(keys, last)}


def plot_tornado(doc: Mapping[str, Any], out: Union[str, "os.PathLike[str]"], top: int = 10) -> str:
    """A sensitivity screening (``vmsim sensitivity``) as tornado plots, one
    panel per headline: a bar per screened value from the headline at one
    end of its range to the other, the values moving it most on top, the
    headline at the preset's values as a line. Returns the path written."""
    fmt = _format_of(out)
    plt = _pyplot()
    heads = doc["headlines"]
    from .sensitivity import moves

    rows_of = [[r for r in h["rows"] if moves(r)][:top] or h["rows"][:1] for h in heads]
    height = sum(max(1, len(r)) * 0.32 + 0.9 for r in rows_of)
    fig, axes = plt.subplots(len(heads), 1, figsize=(8.0, max(2.5, height)), squeeze=False)
    for ax, h, rows in zip(axes[:, 0], heads, rows_of):
        for i, r in enumerate(reversed(rows)):
            got = [e for e in r["ends"] if e["headline"] is not None]
            xs = [e["headline"] for e in got] + [h["nominal"]]
            ax.barh(i, max(xs) - min(xs), left=min(xs), color="#4c72b0", height=0.6)
            for e in got:
                ax.annotate(json.dumps(e["value"]), (e["headline"], i), fontsize=7, ha="center", va="center",
                            xytext=(0, 8), textcoords="offset points")
        ax.axvline(h["nominal"], color="black", linewidth=1)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([r["param"] for r in reversed(rows)], fontsize=7)
        label = "/".join(str(x) for x in (h["case"], h["arm"]) if x is not None)
        ax.set_title(f"{label}: {h['metric']} change, % (line: the presets' values)", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle(f"{doc['experiment']}: one value at a time over its plausible range (scale {doc['scale']})",
                 fontsize=10)
    fig.tight_layout()
    path = _save(fig, out, fmt, 150)
    plt.close(fig)
    return path
