"""Tables of arms over runs: LKP's ``base ±%stddev  %change  new ±%stddev
metric`` rows and mmtests' Amean/Stddev/CoeffVar/Min/Max blocks, from fresh
``compare --runs`` results or from saved result files.

An *arm* is one configuration with one or more runs (seeds); each run is a
metrics dict. Values are shown in units (GB/s, s, K/s, GB); the JSON keeps
the raw numbers.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .stats import Summary, significant, summarise
from .tables import HEADLINE_METRICS, _labels, compact_metrics, headline_metrics, iter_runs, metric_kind, metric_names, same_figures_notes

Arm = Tuple[str, List[Mapping[str, Any]]]


def arms_of(result: Mapping[str, Any], label: Optional[str] = None) -> List[Arm]:
    """The arms of a run, compare, or compare-runs result, each with its runs."""
    if result.get("kind") == "compare-runs":
        runs = result.get("runs") or []
        if not runs:
            return []
        names = [n for n, _ in iter_runs(runs[0])]
        per = {n: [] for n in names}
        for r in runs:
            for n, m in iter_runs(r):
                per.setdefault(n, []).append(m)
        return [(n, per[n]) for n in names]
    arms = [(n, [m]) for n, m in iter_runs(result)]
    if label is not None and len(arms) == 1 and arms[0][0] == "run":
        arms = [(label, arms[0][1])]
    return arms


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


#: The fixed unit of each kind of metric in these tables (LKP's columns are
#: fixed widths): GB/s, K/s, s, GB.
_FIXED = {"bytes_per_s": ("GB/s", 1e9), "per_s": ("K/s", 1e3), "s": ("s", 1.0), "bytes": ("GB", 1e9)}


def unit_of(metric: str) -> Tuple[str, float]:
    """(unit, divisor) to show a metric in (per-node DRAM bytes included)."""
    kind = metric_kind(metric)
    return _FIXED[kind] if kind else ("", 1.0)


def show(metric: str, value: float) -> str:
    unit, div = unit_of(metric)
    x = value / div
    a = abs(x)
    if a == 0:
        text = "0"
    elif a >= 1e7 or a < 1e-3:
        # One notation for a metric whatever its runs: a mean of counts is
        # rarely an integer, so large counts are not shown in full either.
        text = f"{x:.4g}"
    elif not unit and float(x).is_integer():
        text = str(int(x))
    elif a >= 100:
        text = f"{x:.1f}"
    else:
        text = f"{x:.4g}"
    return f"{text} {unit}" if unit else text


def higher_is_better(metric: str) -> bool:
    """For mmtests' gain/loss sign: rates and IPC gain upwards, the rest (times, counts) downwards."""
    return metric.endswith("_per_s") or metric == "ipc"


def _summaries(arms: Sequence[Arm], metric: str) -> Optional[List[Summary]]:
    out = []
    for _, runs in arms:
        vals = [r.get(metric) for r in runs]
        if not vals or not all(_num(v) for v in vals):
            return None
        out.append(summarise(vals))
    return out


def _change(a: Summary, b: Summary) -> Optional[float]:
    if a.mean == 0:
        return None
    return (b.mean - a.mean) / abs(a.mean) * 100.0


def _sd_pct(s: Summary) -> str:
    cv = s.cv_percent
    if s.n < 2 or cv is None or cv < 0.5:
        return "      "
    return f"±{cv:3.0f}%"


def _mark(sig: Optional[bool]) -> str:
    return {True: "*", False: "~", None: " "}[sig]


def rows(arms: Sequence[Arm], metrics: Optional[Sequence[str]] = None, min_change: float = 0.0) -> List[Dict[str, Any]]:
    """One record per metric with the arms' summaries and each variant's
    change against the first arm; metrics whose every |change| is below
    ``min_change`` percent (or that no arm changes) are left out, except the
    headline metrics (``tables.HEADLINE_METRICS``) when no ``metrics`` are
    named: a headline that does not move is worth seeing."""
    names = list(metrics) if metrics else metric_names(*(m for _, runs in arms for m in runs))
    out = []
    for name in names:
        sums = _summaries(arms, name)
        if sums is None:
            continue
        base = sums[0]
        changes = [_change(base, s) for s in sums[1:]]
        sigs = [significant(base, s) for s in sums[1:]]
        if not metrics and name in HEADLINE_METRICS:
            pass
        elif not metrics:
            moved = [c for c in changes if c is not None and abs(c) >= max(min_change, 1e-9)]
            if not moved:
                continue
        elif min_change and not any(c is not None and abs(c) >= min_change for c in changes):
            continue
        out.append({"metric": name, "summaries": sums, "changes": changes, "significant": sigs})
    return out


def format_lkp(arms: Sequence[Arm], metrics: Optional[Sequence[str]] = None, min_change: float = 0.0,
               names: Optional[str] = None) -> str:
    """LKP compare layout: ``base ±%stddev  %change  new ±%stddev  metric``.
    A change beyond the noise (Welch, 5%) ends in ``*``, one inside it in
    ``~``; with a single run per arm no mark is given."""
    recs = rows(arms, metrics, min_change)
    label = _labels(names, *(m for _, runs in arms for m in runs))
    names = [n for n, _ in arms]
    runs = [len(r) for _, r in arms]
    # Columns: base (9) ±sd (6) | per variant: %change (8) mark (1), value (18) ±sd (6).
    head = [f"  {names[0][:20]:>20}" + "".join(f"  {'':>9}  {n[:21]:>21}" for n in names[1:]),
            f"  {'%stddev':>20}" + "".join(f"  {'%change':>9}  {'%stddev':>21}" for _ in names[1:]),
            f"  {'(' + str(runs[0]) + ' runs)':>20}" + "".join(f"  {'':>9}  {'(' + str(n) + ' runs)':>21}" for n in runs[1:])]
    cut_names = [n for i, n in enumerate(names) if len(n) > (20 if i == 0 else 21)]
    if cut_names:
        # The columns are LKP's fixed widths; the names they cut are given whole.
        head.append("  (in full: " + "; ".join(cut_names) + ")")
    lines = head + ["  " + "-" * (20 + 34 * (len(names) - 1))]
    for rec in recs:
        m = rec["metric"]
        s0 = rec["summaries"][0]
        cells = f"  {show(m, s0.mean):>13} {_sd_pct(s0)}"
        for s, c, sig in zip(rec["summaries"][1:], rec["changes"], rec["significant"]):
            ch = "" if c is None else f"{c:+.1f}%"
            cells += f"  {ch:>8}{_mark(sig)}  {show(m, s.mean):>14} {_sd_pct(s)}"
        lines.append(f"{cells}  {label(m)}")
    if not recs:
        lines.append("  (no metric changes" + (f" by {min_change}% or more" if min_change else "") + ")")
    lines.append("  * change beyond the noise (Welch t-test, 5%); ~ change inside the noise; no mark: one run, untested")
    return "\n".join(lines) + "\n"


def format_mmtests(arms: Sequence[Arm], metrics: Optional[Sequence[str]] = None, min_change: float = 0.0,
                   names: Optional[str] = None) -> str:
    """mmtests compare layout: per metric, Amean/Stddev/CoeffVar/Min/Max rows,
    each arm's value with its difference to the first arm in brackets; a mean
    that differs beyond the noise is marked ``*  12.34%*`` as mmtests does."""
    recs = rows(arms, metrics, min_change)
    label = _labels(names, *(m for _, runs in arms for m in runs))
    names = [n for n, _ in arms]
    width = 26
    lw = max([28] + [len(label(r["metric"])) for r in recs])
    lines = [f"{'':<9} {'':<{lw}}" + "".join(f"{n[:width]:>{width}}" for n in names)]
    for rec in recs:
        m = rec["metric"]
        base = rec["summaries"][0]
        for row, get in (("Amean", lambda s: s.mean), ("Stddev", lambda s: s.stddev),
                           ("CoeffVar", lambda s: s.cv_percent), ("Min", lambda s: s.min), ("Max", lambda s: s.max)):
            cells = []
            for i, s in enumerate(rec["summaries"]):
                v = get(s)
                if v is None:
                    cells.append(f"{'-':>{width}}")
                    continue
                text = f"{v:.2f}" if row == "CoeffVar" else show(m, v)
                b = get(base)
                if i == 0 or b in (None, 0) or row in ("CoeffVar", "Stddev"):
                    pct = "" if i else "(   0.00%)"
                    cells.append(f"{text + ' ' + pct if pct else text:>{width}}")
                    continue
                d = (v - b) / abs(b) * 100.0 if higher_is_better(m) else (b - v) / abs(b) * 100.0
                sig = rec["significant"][i - 1] if row == "Amean" else None
                cell = f"{text} *{d:7.2f}%*" if sig else f"{text} ({d:7.2f}%)"
                cells.append(f"{cell:>{width}}")
            lines.append(f"{row:<9} {label(m):<{lw}}" + "".join(cells))
    if not recs:
        lines.append("(no metric changes" + (f" by {min_change}% or more" if min_change else "") + ")")
    lines.append("Differences in brackets are gains (+) and losses (-) as mmtests shows them: for times a lower value is a gain;"
                 " *…* marks a mean that differs beyond the noise (Welch t-test, 5%).")
    return "\n".join(lines) + "\n"


def _machines(result: Mapping[str, Any]) -> List[str]:
    """The machine presets a saved result ran on (one per case)."""
    if result.get("kind") == "compare-runs":
        runs = result.get("runs") or []
        return _machines(runs[0]) if runs and isinstance(runs[0], Mapping) else []
    cases = result.get("cases")
    if isinstance(cases, Mapping):
        return sorted({m for c in cases.values() if isinstance(c, Mapping) for m in _machines(c)})
    machine = result.get("machine")
    name = machine.get("name") if isinstance(machine, Mapping) else None
    return [str(name)] if name else []


def mismatch_warning(results: Sequence[Tuple[str, Mapping[str, Any]]]) -> Optional[str]:
    """A one-line warning when saved results set side by side come from
    different experiments or ran on different machines (their changes then
    mix two questions); None when they agree or there is one result."""
    if len(results) < 2:
        return None
    problems = []
    experiments = [(label, r.get("experiment")) for label, r in results]
    if len({e for _, e in experiments}) > 1:
        problems.append("different experiments (" + ", ".join(f"{lb}: {e or 'a single run'}" for lb, e in experiments) + ")")
    machines = [(label, _machines(r)) for label, r in results]
    if len({tuple(m) for _, m in machines}) > 1:
        problems.append("different machines (" + ", ".join(f"{lb}: {'+'.join(m) or '?'}" for lb, m in machines) + ")")
    if not problems:
        return None
    return "comparing results of " + " and of ".join(problems) + "; their changes are not one experiment's"


def saved_arms(results: Sequence[Tuple[str, Mapping[str, Any]]]) -> List[List[Arm]]:
    """Groups of arms to tabulate from saved results ``(label, result)``.

    One file: its own arms (baseline first). Several files: for each arm name
    found in every file, the files side by side (the first file is the base);
    single-run results are one arm each, named by their file."""
    per_file = [arms_of(r, label) for label, r in results]
    if len(results) == 1:
        return [per_file[0]]
    if all(len(a) == 1 for a in per_file):
        return [[(label, arms[0][1]) for (label, _), arms in zip(results, per_file)]]
    common = [n for n, _ in per_file[0] if all(any(m == n for m, _ in arms) for arms in per_file[1:])]
    if not common:
        raise ValueError("the files share no arm (configuration name) to compare")
    groups = []
    for n in common:
        groups.append([(f"{label}:{n}", dict(arms)[n]) for (label, _), arms in zip(results, per_file)])
    return groups


def _verdict(sig: Optional[bool]) -> str:
    if sig is None:
        return "untested (one run per arm)"
    return "beyond the noise" if sig else "inside the noise"


def format_compact(arms: Sequence[Arm], names: Optional[str] = None,
                   configs: Optional[Mapping[str, Any]] = None) -> str:
    """The default table of ``compare --runs``: LKP's layout over the
    compact rows (``tables.compact_metrics``: the workload's headline
    metrics, the times, the key counters not zero in every run), then each
    variant's headline change with the significance result in words, how
    many metrics the full output (``--full``) adds, and a note for a variant
    whose every run gives the base arm's figures (``configs``: each arm's
    config, ``arm_configs``, to name what the arms differ in)."""
    every_run = [m for _, runs in arms for m in runs]
    shown = compact_metrics(*every_run)
    text = format_lkp(arms, shown, names=names)
    label = _labels(names, *every_run)
    recs = {r["metric"]: r for r in rows(arms, shown)}
    names = [n for n, _ in arms]
    n_runs = min((len(r) for _, r in arms), default=0)
    for m in headline_metrics(*every_run):
        rec = recs.get(m)
        if rec is None:
            continue
        for name, c, sig in zip(names[1:], rec["changes"], rec["significant"]):
            change = "no change to compare (a zero baseline)" if c is None else f"{c:+.1f}%"
            text += f"  {name} vs {names[0]}: {label(m)} {change}, {_verdict(sig)} (Welch's t-test, 5%; {n_runs} runs per arm)\n"
    more = sum(1 for r in rows(arms) if r["metric"] not in recs)
    if more > 0:
        text += f"  {more} more metric(s) change: --full shows every one in LKP's and mmtests' layouts\n"
    text += "".join(f"  {n}\n" for n in same_figures_notes(arms, configs))
    return text


def arm_configs(result: Mapping[str, Any]) -> Dict[str, Any]:
    """Each arm's config of a compare or ``compare --runs`` result, by the
    arm's name as ``arms_of`` gives it (``case/arm`` in a case)."""
    if result.get("kind") == "compare-runs":
        runs = result.get("runs") or []
        return arm_configs(runs[0]) if runs and isinstance(runs[0], Mapping) else {}
    cases = result.get("cases")
    if isinstance(cases, Mapping):
        return {f"{c}/{n}": cfg for c, r in cases.items() if isinstance(r, Mapping)
                for n, cfg in arm_configs(r).items()}
    configs = result.get("arm_configs")
    return dict(configs) if isinstance(configs, Mapping) else {}
