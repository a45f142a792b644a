"""Plots of results (needs matplotlib)."""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence, Union

from .tables import iter_scalar_rows, percent_change


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
) -> None:
    """Writes a plot of a result to ``out`` (format from its suffix).

    A compare result gives one horizontal bar per metric and variant: the
    change against the baseline in percent. A run result gives its numeric
    metrics on a log scale.
    """
    plt = _pyplot()
    rows = list(iter_scalar_rows(result))
    numeric = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    if "variants" in result:
        base_name, base = rows[0]
        names = [m for m in (metrics or base) if numeric(base.get(m))]
        if not metrics:
            # Unless asked for, leave out what no variant changes.
            names = [m for m in names if any(percent_change(base.get(m), vm.get(m)) for _, vm in rows[1:])]
        fig, ax = plt.subplots(figsize=(8, 0.35 * max(4, len(names) * max(1, len(rows) - 1)) + 1.5))
        height = 0.8 / max(1, len(rows) - 1)
        for j, (vname, vm) in enumerate(rows[1:]):
            changes = [percent_change(base.get(m), vm.get(m)) or 0.0 for m in names]
            ys = [i + j * height for i in range(len(names))]
            ax.barh(ys, changes, height=height, label=f"{vname} vs {base_name}")
        ax.set_yticks([i + height * (len(rows) - 2) / 2 for i in range(len(names))])
        ax.set_yticklabels(names)
        ax.invert_yaxis()
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlabel("change against baseline (%)")
        ax.set_title(f"{result.get('experiment', '')} on {result.get('machine', {}).get('name', '')}")
        ax.legend(loc="best")
    else:
        _, m = rows[0]
        names = [k for k in (metrics or m) if numeric(m.get(k)) and m.get(k) > 0]
        fig, ax = plt.subplots(figsize=(8, 0.35 * max(4, len(names)) + 1.5))
        ax.barh(range(len(names)), [m[k] for k in names])
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_title(f"run on {result.get('machine', {}).get('name', '')}")
    fig.tight_layout()
    fig.savefig(os.fspath(out), dpi=100)
    plt.close(fig)
