"""Plots of results (needs matplotlib)."""

from __future__ import annotations

import os
from typing import Any, List, Mapping, Optional, Sequence, Union

from ._errors import cut
from ._io import atomic_path
from .tables import iter_scalar_rows, metric_names, percent_change

#: Image formats written (from the output's suffix).
FORMATS = ("png", "pdf", "svg")


class PlotError(ValueError):
    """The input is not a result that can be plotted, or an option is wrong."""


def _check_result(result: Any) -> None:
    if not isinstance(result, Mapping) or not any(k in result for k in ("metrics", "variants", "cases")):
        shown = cut(repr(result)) if not isinstance(result, Mapping) else "an object without 'metrics', 'variants' or 'cases'"
        raise PlotError(f"not a vmsim run or compare result: {shown}")


def _check_metrics(result: Mapping[str, Any], metrics: Optional[Sequence[str]]) -> None:
    if not metrics:
        return
    known = metric_names(*(m for _, m in iter_scalar_rows(result)))
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


def plot(
    result: Mapping[str, Any],
    out: Union[str, "os.PathLike[str]"],
    metrics: Optional[Sequence[str]] = None,
) -> List[str]:
    """Writes a plot of a result to ``out`` (format from its suffix: .png,
    .pdf or .svg) and returns the paths written. Raises ``PlotError`` for
    input that is not a result, unknown metrics or an unknown format.

    A compare result gives one horizontal bar per metric and variant: the
    change against the baseline in percent. A run result gives its numeric
    metrics on a log scale.
    """
    _check_result(result)
    _check_metrics(result, metrics)
    fmt = _format_of(out)
    plt = _pyplot()
    numeric = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    if "cases" in result or "variants" in result:
        cases = result.get("cases")
        order = (result.get("case_order") or sorted(cases)) if cases else [None]
        panels = [(c, cases[c] if cases else result) for c in order]
        prepared = [(c, r) + _compare_bars(r, metrics, numeric) for c, r in panels]
        heights = [0.35 * max(4, len(names) * max(1, len(rows) - 1)) + 1.0 for _, _, names, rows in prepared]
        fig, axes = plt.subplots(len(prepared), 1, figsize=(8, sum(heights) + 0.5), squeeze=False,
                                 gridspec_kw={"height_ratios": heights})
        for ax, (case, r, names, rows) in zip(axes[:, 0], prepared):
            base_name, base = rows[0]
            height = 0.8 / max(1, len(rows) - 1)
            for j, (vname, vm) in enumerate(rows[1:]):
                changes = [percent_change(base.get(m), vm.get(m)) or 0.0 for m in names]
                ys = [i + j * height for i in range(len(names))]
                ax.barh(ys, changes, height=height, label=f"{vname} vs {base_name}")
            ax.set_yticks([i + height * (len(rows) - 2) / 2 for i in range(len(names))])
            ax.set_yticklabels(names)
            ax.invert_yaxis()
            ax.axvline(0, color="black", linewidth=0.8)
            extent = max((abs(percent_change(base.get(m), vm.get(m)) or 0.0) for m in names for _, vm in rows[1:]), default=0.0)
            if extent > 300:
                # A few huge changes would flatten the rest: linear to ±100%, logarithmic beyond.
                ax.set_xscale("symlog", linthresh=100)
            ax.set_xlabel("change against baseline (%)")
            title = f"{result.get('experiment', '')} on {r.get('machine', {}).get('name', '')}"
            ax.set_title(f"{title} ({case})" if case else title)
            ax.legend(loc="best")
        fig.tight_layout()
        try:
            return [_save(fig, out, fmt)]
        finally:
            plt.close(fig)
    _, m = next(iter(iter_scalar_rows(result)))
    names = [k for k in (metrics or m) if numeric(m.get(k)) and m.get(k) > 0]
    fig, ax = plt.subplots(figsize=(8, 0.35 * max(4, len(names)) + 1.5))
    ax.barh(range(len(names)), [m[k] for k in names])
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_title(f"run on {result.get('machine', {}).get('name', '')}")
    fig.tight_layout()
    try:
        return [_save(fig, out, fmt)]
    finally:
        plt.close(fig)


def _compare_bars(result: Mapping[str, Any], metrics: Optional[Sequence[str]], numeric) -> tuple:
    """The metric names to plot for one compare result, and its rows."""
    rows = list(iter_scalar_rows(result))
    base = rows[0][1]
    names = [m for m in (metrics or base) if numeric(base.get(m))]
    if not metrics:
        # Unless asked for, leave out what no variant changes.
        names = [m for m in names if any(percent_change(base.get(m), vm.get(m)) for _, vm in rows[1:])]
    return names, rows
