"""Plain-text tables of results, in the style of LKP and mmtests compare tables.

Every scalar metric (number or bool) is shown: the well-known ones first in a
fixed order, then any others sorted by name. Nested values (per-CPU lists,
breakdowns) appear only in the JSON output.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

#: Preferred order of the well-known metrics; others follow, sorted.
PREFERRED_METRICS: Sequence[str] = (
    "throughput_bytes_per_s",
    "elapsed_s",
    "user_s",
    "sys_s",
    "instructions",
    "cycles",
    "ipc",
    "llc_references",
    "llc_misses",
    "llc_miss_rate",
    "l1d_misses",
    "l2_misses",
    "pgfault",
    "thp_fault_alloc",
    "nr_tlb_remote_flush",
    "nr_tlb_remote_flush_received",
    "dram_bytes_read",
    "dram_bytes_written",
    "data_verified",
)

_RANK = {name: i for i, name in enumerate(PREFERRED_METRICS)}

#: The experiments' headline metrics, what their published figures are:
#: usemem's throughput, pf-test's fault rate, pmbench's accesses per second,
#: lru-file-mmap-read's elapsed time. The tables of arms keep their rows
#: whatever ``--min-change`` and whether they change.
HEADLINE_METRICS: Sequence[str] = (
    "throughput_bytes_per_s", "fault_bytes_per_s", "pmbench_throughput_aps", "lru_file_mmap_read_elapsed_s",
)


#: A workload's kind, told by a metric only it reports (checked in this
#: order; a workload with none of them is usemem).
_KIND_BY_METRIC: Sequence[Tuple[str, str]] = (
    ("will_it_scale_workload", "will-it-scale"),
    ("pmbench_throughput_aps", "pmbench"),
    ("fault_bytes_per_s", "pf-test"),
    ("lru_file_mmap_read_elapsed_s", "lru-file-mmap-read"),
    ("trace_accesses", "trace"),
)

#: The figures each workload kind's benchmark prints, the rows a compact
#: table starts with (a program's are its phases' rates:
#: ``phase.<name>.throughput_bytes_per_s``).
WORKLOAD_HEADLINES: Dict[str, Sequence[str]] = {
    "usemem": ("throughput_bytes_per_s",),
    "pf-test": ("fault_bytes_per_s",),
    "pmbench": ("pmbench_throughput_aps",),
    "lru-file-mmap-read": ("lru_file_mmap_read_elapsed_s", "lru_file_mmap_read_time_range_s"),
    "will-it-scale": ("will_it_scale_per_process_ops", "will_it_scale_per_thread_ops", "will_it_scale_workload"),
    "trace": ("trace_elapsed_s",),
    "program": (),
}

#: The times a compact table shows after the headline, always.
COMPACT_TIMES: Sequence[str] = ("elapsed_s", "user_s", "sys_s")

#: The counters a compact table shows after the times, each where it is not
#: zero in every run: IPC and the LLC, DRAM traffic, faults and THP, TLB
#: flushes, NUMA balancing and migration, reclaim.
COMPACT_COUNTERS: Sequence[str] = (
    "ipc", "llc_misses", "dram_bytes_read", "dram_bytes_written", "dram_remote_reads",
    "pgfault", "pgmajfault", "pgfault_cow_4k", "thp_fault_alloc", "thp_fault_fallback", "thp_split_pmd",
    "thp_cow_copies", "nr_tlb_remote_flush", "ipis_tlb_shootdown", "tlb_shootdown_interrupts",
    "numa_pte_updates", "numa_hint_faults", "numa_hint_faults_local", "numa_pages_migrated", "pgmigrate_fail",
    "pgscan_kswapd", "pgsteal_kswapd", "pgscan_direct", "pgsteal_direct", "workingset_refault_file",
)


def workload_kind(*metric_sets: Mapping[str, Any]) -> str:
    """The workload kind that reported ``metric_sets`` ("usemem", "pf-test",
    "pmbench", "lru-file-mmap-read", "will-it-scale", "trace" or
    "program"), from the metrics only it reports."""
    for metric, kind in _KIND_BY_METRIC:
        if any(metric in m for m in metric_sets):
            return kind
    if any(k.startswith("phase.") for m in metric_sets for k in m):
        return "program"
    return "usemem"


def headline_metrics(*metric_sets: Mapping[str, Any]) -> List[str]:
    """The headline rows of the workload that reported ``metric_sets``
    (``WORKLOAD_HEADLINES``; a program's phases' byte rates)."""
    kind = workload_kind(*metric_sets)
    if kind == "program":
        return [n for n in metric_names(*metric_sets) if n.startswith("phase.") and n.endswith(".throughput_bytes_per_s")]
    return [n for n in WORKLOAD_HEADLINES[kind] if any(n in m for m in metric_sets)]


def compact_metrics(*metric_sets: Mapping[str, Any]) -> List[str]:
    """The rows of a compact table of ``metric_sets`` (one per run), in
    order: the workload's headline metrics, the times, then each of
    ``COMPACT_COUNTERS`` that is not zero in every run, and
    ``data_verified`` where a run's data check failed (every metric where
    none of these is reported)."""
    present = set(metric_names(*metric_sets))

    def nonzero(n: str) -> bool:
        return any(_is_number(m.get(n)) and m.get(n) != 0 for m in metric_sets)

    rows = headline_metrics(*metric_sets) + [n for n in COMPACT_TIMES if n in present]
    rows += [n for n in COMPACT_COUNTERS if n in present and n not in rows and nonzero(n)]
    if any(m.get("data_verified") is False for m in metric_sets):
        rows.append("data_verified")
    # Metrics of no workload's (a fabricated or foreign result): all of them.
    return rows or metric_names(*metric_sets)


def _compact_footer(shown: Sequence[str], every: Sequence[str], runs: Sequence[Mapping[str, Any]]) -> str:
    """The line under a compact table: how many rows ``--full`` adds, and
    (several runs) how many of them change."""
    rest = [n for n in every if n not in shown]
    if not rest:
        return ""
    text = f"  ({len(rest)} more row(s)"
    if len(runs) > 1:
        changed = sum(1 for n in rest
                      if any(format_change(runs[0].get(n), r.get(n)) not in ("", "+0.0%") for r in runs[1:]))
        text += f", {changed} of them changed"
    return text + ": --full shows every one)"


def _config_diff(a: Any, b: Any, prefix: str = "") -> List[str]:
    """Dotted keys whose values differ between two configs."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out: List[str] = []
        for k in sorted(set(a) | set(b)):
            out += _config_diff(a.get(k), b.get(k), f"{prefix}.{k}" if prefix else str(k))
        return out
    return [] if a == b else [prefix]


def same_figures_note(base_name: str, base: Sequence[Mapping[str, Any]], name: str,
                      runs: Sequence[Mapping[str, Any]], differ: Sequence[str] = ()) -> Optional[str]:
    """A one-line note when arm ``name``'s runs give every scalar figure of
    the base arm's runs (seed by seed): what the arms differ in changed
    nothing in these runs (a policy whose path was not taken, or that
    decided as the base arm's did). None otherwise."""
    if not runs or len(runs) != len(base):
        return None
    for a, b in zip(base, runs):
        if scalar_metrics(a) != scalar_metrics(b):
            return None
    what = f" ({', '.join(differ)})" if differ else ""
    return (f"note: {name} gives the same figures as {base_name} in every metric: what they differ in{what} "
            f"changed nothing in this run (its path never ran, or it decided as {base_name}'s does)")


def same_figures_notes(arms: Sequence[Tuple[str, Sequence[Mapping[str, Any]]]],
                       configs: Optional[Mapping[str, Any]] = None) -> List[str]:
    """``same_figures_note`` for each arm after the first that gives the
    figures of an arm before it (the first such), ``arms`` being (name,
    runs) pairs; ``configs``, each arm's config, names what they differ in."""
    configs = configs or {}
    out = []
    for i, (name, runs) in enumerate(arms):
        for other, base in arms[:i]:
            differ: List[str] = []
            if other in configs and name in configs:
                differ = [k for k in _config_diff(configs[other], configs[name]) if k != "seed"]
            note = same_figures_note(other, base, name, runs, differ)
            if note:
                out.append(note)
                break
    return out


def _labels(style: Optional[str], *metric_sets: Mapping[str, Any]) -> Callable[[str], str]:
    """How a table names metrics: as they are, or LKP's names (vmsim.names)."""
    from .names import namer

    return namer(style, *metric_sets) or str


def is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def metric_names(*metric_sets: Mapping[str, Any]) -> List[str]:
    """Names of the scalar metrics in any of ``metric_sets``, in table order."""
    names = set()
    for metrics in metric_sets:
        names.update(k for k, v in metrics.items() if is_scalar(v) and not isinstance(v, str))
    return sorted(names, key=lambda n: (_RANK.get(n, len(_RANK)), n))


def scalar_metrics(metrics: Mapping[str, Any]) -> Dict[str, Any]:
    """The scalar metrics of one run, in table order."""
    return {name: metrics[name] for name in metric_names(metrics)}


def format_value(value: Any) -> str:
    """Integers as integers, floats with about four significant digits, booleans as true/false."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        a = abs(value)
        if a == 0:
            return "0"
        if a >= 1e7 or a < 1e-3:
            return f"{value:.3e}"
        if a >= 1e3:
            return f"{value:.1f}"
        return f"{value:.4g}"
    return str(value)


#: Units a metric is shown in, by its kind, largest first: (unit, divisor).
_UNITS = {
    "bytes_per_s": (("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3), ("B/s", 1.0)),
    "per_s": (("M/s", 1e6), ("K/s", 1e3), ("/s", 1.0)),
    "s": (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)),
    "bytes": (("GB", 1e9), ("MB", 1e6), ("KB", 1e3), ("B", 1.0)),
}


def metric_kind(metric: str) -> Optional[str]:
    """What a metric measures, from docs/metrics.md's naming: a byte rate
    (``*bytes_per_s``), another rate (``*_per_s``), a time (``*_s``,
    ``sys_s_<path>``), a byte count (``bytes`` as a word of the name:
    ``dram_bytes_read``, ``dram_node1_bytes_written``), or None (a count,
    a ratio, a flag)."""
    if metric.endswith("bytes_per_s"):
        return "bytes_per_s"
    if metric.endswith("_per_s"):
        return "per_s"
    if metric.endswith("_s") or metric.startswith("sys_s_"):
        return "s"
    if "bytes" in metric.split("_"):
        return "bytes"
    return None


def unit_for(metric: str, values: Iterable[Any]) -> Tuple[str, float]:
    """(unit, divisor) to show ``values`` of ``metric`` in: the largest unit
    the largest of them reaches (GB, MB, ...), so one row or column shares
    one unit; ("", 1) for a metric without a unit."""
    kind = metric_kind(metric)
    if kind is None:
        return "", 1.0
    units = _UNITS[kind]
    top = max((abs(v) for v in values if _is_number(v) and math.isfinite(v)), default=0.0)
    for unit, div in units:
        if top >= div:
            return unit, div
    return units[0] if top == 0 else units[-1]


def format_in(value: Any, unit: str, div: float) -> str:
    """A value in ``unit`` (``value / div``, about four significant digits);
    what is not a finite number, or has no unit, as ``format_value`` shows it."""
    if not unit or not _is_number(value) or not math.isfinite(value):
        return format_value(value)
    x = value / div
    a = abs(x)
    if a == 0:
        text = "0"
    elif a >= 100:
        text = f"{x:.1f}"
    else:
        text = f"{x:.4g}"
    return f"{text} {unit}"


def format_metric(metric: str, value: Any) -> str:
    """One metric's value with its unit (``18.62 GB``, ``85.92 GB/s``)."""
    return format_in(value, *unit_for(metric, [value]))


def percent_change(base: Any, value: Any) -> Optional[float]:
    """(value - base) / |base| in percent; None when not defined."""
    if not (_is_number(base) and _is_number(value)):
        return None
    if base == 0 or not math.isfinite(base) or not math.isfinite(value):
        return None
    return (value - base) / abs(base) * 100.0


def format_change(base: Any, value: Any) -> str:
    p = percent_change(base, value)
    if p is None:
        return ""
    if abs(p) < 0.05:
        p = 0.0
    return f"{p:+.1f}%"


def _machine_line(machine: Mapping[str, Any]) -> str:
    name = machine.get("name", "?")
    summary = machine.get("summary") or machine.get("description")
    return f"{name} — {summary}" if summary else str(name)


def format_run(result: Mapping[str, Any], names: Optional[str] = None, full: bool = False) -> str:
    """The metric table of one run, headed by the machine and scale lines:
    the compact rows (``compact_metrics``) with a line saying how many more
    there are, or with ``full`` every scalar metric; ``names="lkp"`` gives
    metrics LKP's names where LKP has them (vmsim.names)."""
    lines = [f"machine: {_machine_line(result.get('machine', {}))}"]
    if result.get("scale"):
        lines.append(f"scale:   {result['scale']}")
    lines.append("")
    metrics = result.get("metrics", {})
    label = _labels(names, metrics)
    every = metric_names(metrics)
    names_ = every if full else compact_metrics(metrics)
    cells = [format_metric(n, metrics[n]) for n in names_]
    shown = [label(n) for n in names_]
    nw = max((len(n) for n in shown), default=0)
    vw = max((len(c) for c in cells), default=0)
    for name, cell in zip(shown, cells):
        lines.append(f"  {name.ljust(nw)}  {cell.rjust(vw)}")
    footer = "" if full else _compact_footer(names_, every, [metrics])
    if footer:
        lines.append(footer)
    return "\n".join(lines) + "\n"


#: mmtests' compare rows for vm-scalability's lru-file-mmap-read: (row label, metric).
MMTESTS_LRU_FILE_ROWS: Sequence[tuple] = (
    ("Ops lru-file-mmap-read-elapsed", "lru_file_mmap_read_elapsed_s"),
    ("Ops lru-file-mmap-read-time_range", "lru_file_mmap_read_time_range_s"),
    ("Ops lru-file-mmap-read-time_stddv", "lru_file_mmap_read_time_stddev_s"),
)


def _mmtests_gain(base: Any, value: Any) -> str:
    """mmtests' change for a lower-is-better figure: (base - value) / base,
    so a shorter time is a positive gain."""
    if not (_is_number(base) and _is_number(value)) or base == 0:
        return "(   n/a )"
    return f"({(base - value) / base * 100:6.2f}%)"


def format_mmtests_lru_file(result: Mapping[str, Any]) -> str:
    """The lru-file-mmap-read part of a compare as mmtests' compare-kernels
    prints it: the Ops rows with each arm's gain over the baseline in
    parentheses, then User/System/Elapsed seconds and IPIs per second.
    Times are in milliseconds (simulated RAM is scaled down); empty when the
    result has no such metrics."""
    baseline = result.get("baseline", {})
    if "lru_file_mmap_read_elapsed_s" not in baseline:
        return ""
    variants = result.get("variants", {})
    names = [str(result.get("baseline_name", "baseline"))] + list(result.get("variant_order") or sorted(variants))
    runs = [baseline] + [variants[v] for v in names[1:]]
    label_w = max(len(label) for label, _ in MMTESTS_LRU_FILE_ROWS)
    col_w = max([20] + [len(n) + 2 for n in names])
    lines = ["mmtests compare (ms; gain over the first column in parentheses, positive = faster):"]
    lines.append(" " * label_w + "".join(n.rjust(col_w) for n in names))
    for label, key in MMTESTS_LRU_FILE_ROWS:
        cells = []
        for r in runs:
            v = r.get(key)
            text = f"{v * 1e3:.2f}" if _is_number(v) else "-"
            cells.append(f"{text} {_mmtests_gain(baseline.get(key), v)}".rjust(col_w))
        lines.append(label.ljust(label_w) + "".join(cells))
    lines.append("")
    short_w = max(len("IPIs/s"), 7)
    lines.append(" " * short_w + "".join(n.rjust(col_w) for n in names))
    for label, key, scale, fmt in (
        ("User", "user_s", 1e3, "{:.2f}"),
        ("System", "sys_s", 1e3, "{:.2f}"),
        ("Elapsed", "elapsed_s", 1e3, "{:.2f}"),
        ("IPIs/s", "ipis_per_s", 1.0, "{:.0f}"),
    ):
        cells = []
        for r in runs:
            v = r.get(key)
            cells.append((fmt.format(v * scale) if _is_number(v) else "-").rjust(col_w))
        lines.append(label.ljust(short_w) + "".join(cells))
    return "\n".join(lines) + "\n"


def format_compare(result: Mapping[str, Any], names: Optional[str] = None, full: bool = False,
                   base: Optional[str] = None) -> str:
    """Baseline, then %change and value for each variant, metric name last:
    the compact rows (``compact_metrics``) with a line saying how many more
    there are, or with ``full`` every metric not zero in every run. An
    experiment with cases gives one such table per case. ``base`` names the
    arm to set first and compare the others with (default: the
    experiment's baseline). A variant whose figures are the baseline's in
    every metric gets a note under the table. A result run below its
    experiment's smallest valid scale (``scale_forced``) starts with a line
    that says so."""
    if base is not None:
        result = rebase(result, base)
    if result.get("scale_forced"):
        rest = {k: v for k, v in result.items() if k != "scale_forced"}
        return forced_scale_line(result) + "\n" + format_compare(rest, names, full)
    if "cases" in result:
        cases = result["cases"]
        parts = []
        for c in result.get("case_order") or sorted(cases):
            parts.append(f"case: {c}\n" + format_compare(cases[c], names, full))
        return "\n".join(parts)
    base_name = str(result.get("baseline_name", "baseline"))
    baseline = result.get("baseline", {})
    variants = result.get("variants", {})
    order = list(result.get("variant_order") or sorted(variants))
    description = result.get("description")
    lines = []
    exp = str(result.get("experiment", "?"))
    lines.append(f"experiment: {exp} — {description}" if description else f"experiment: {exp}")
    lines.append(f"machine:    {_machine_line(result.get('machine', {}))}")
    scale = result.get("scale", "")
    seed = result.get("seed")
    tail = f"   seed: {seed}" if seed is not None else ""
    lines.append(f"scale:      {scale}{tail}")
    lines.append("")

    label = _labels(names, baseline, *(variants[v] for v in order))
    runs = [baseline] + [variants[v] for v in order]
    every = metric_names(*runs)
    # As LKP's tables do, leave out what is zero in every run (the JSON has it all).
    # The headline metrics stay, zero or not.
    zero = [n for n in every if n not in _RANK and all(_is_number(r.get(n)) and r.get(n) == 0 for r in runs)]
    shown_rows: List[str] = [n for n in every if n not in zero] if full else compact_metrics(*runs)
    names = shown_rows
    # columns: baseline, then (%change, value) per variant
    headers = [base_name]
    # One unit per row: the one its largest value reaches.
    units = [unit_for(n, [r.get(n) for r in runs]) for n in names]
    columns: List[List[str]] = [[format_in(baseline.get(n), *u) for n, u in zip(names, units)]]
    kinds = ["value"]
    for v in order:
        vm = variants[v]
        headers += ["%change", v]
        columns.append([format_change(baseline.get(n), vm.get(n)) for n in names])
        columns.append([format_in(vm.get(n), *u) for n, u in zip(names, units)])
        kinds += ["change", "value"]
    widths = []
    for h, col, kind in zip(headers, columns, kinds):
        w = max([len(h)] + [len(c) for c in col])
        widths.append(w + (4 if kind == "value" else 0))
    sep = "  "
    lines.append("  " + sep.join(h.center(w) for h, w in zip(headers, widths)).rstrip())
    lines.append("  " + sep.join("-" * w for w in widths))
    for i, name in enumerate(names):
        cells = [col[i].rjust(w - (2 if k == "value" else 0)).ljust(w) for col, w, k in zip(columns, widths, kinds)]
        lines.append("  " + sep.join(cells) + sep + label(name))
    if full and zero:
        lines.append(f"  ({len(zero)} metric(s) zero in every run not shown: {', '.join(zero)})")
    footer = "" if full else _compact_footer(shown_rows, every, runs)
    if footer:
        lines.append(footer)
    configs = result.get("arm_configs") if isinstance(result.get("arm_configs"), Mapping) else {}
    arms = [(base_name, [baseline])] + [(v, [variants[v]]) for v in order]
    lines += ["  " + note for note in same_figures_notes(arms, configs)]
    mmtests = format_mmtests_lru_file(result)
    if mmtests:
        lines += ["", mmtests.rstrip("\n")]
    return "\n".join(lines) + "\n"


def arm_names(result: Mapping[str, Any]) -> List[str]:
    """The arm names of a compare or ``compare --runs`` result, baseline
    first (without their case)."""
    if result.get("kind") == "compare-runs":
        runs = result.get("runs") or []
        return arm_names(runs[0]) if runs and isinstance(runs[0], Mapping) else []
    if isinstance(result.get("cases"), Mapping):
        out: List[str] = []
        for c in result["cases"].values():
            out += [n for n in arm_names(c) if n not in out]
        return out
    if "variants" not in result:
        return []
    variants = result.get("variants") or {}
    return [str(result.get("baseline_name", "baseline"))] + list(result.get("variant_order") or sorted(variants))


def rebase(result: Mapping[str, Any], base: str) -> Dict[str, Any]:
    """The same compare (or ``compare --runs``) result with arm ``base`` as
    its baseline: first, and the one every change is against; the others
    follow in their order. Raises ``ValueError`` naming the accepted arms
    when the result has no such arm."""
    names = arm_names(result)
    if base not in names:
        raise ValueError(f"{base!r} is not an arm of this result; accepted: {', '.join(names) or 'none'}")
    if result.get("kind") == "compare-runs":
        return dict(result, runs=[rebase(r, base) for r in result.get("runs") or []])
    if isinstance(result.get("cases"), Mapping):
        return dict(result, cases={c: rebase(r, base) for c, r in result["cases"].items()})
    variants = dict(result.get("variants") or {})
    old = str(result.get("baseline_name", "baseline"))
    if base == old:
        return dict(result)
    arms = {old: result.get("baseline", {}), **variants}
    order = [n for n in names if n != base]
    return dict(result, baseline_name=base, baseline=arms[base], variants={n: arms[n] for n in order},
                variant_order=order)


def show_scale(scale: float) -> str:
    """A scale as the docs write it: ``1/16`` where it is one over a whole number."""
    if 0 < scale < 1:
        inv = 1.0 / scale
        if math.isfinite(inv) and abs(inv - round(inv)) < 1e-9 * inv:
            return f"1/{round(inv)}"
    return f"{scale:g}"


def forced_scale_line(result: Mapping[str, Any]) -> str:
    """The warning line of a compare run below its smallest valid scale."""
    least = result.get("min_scale")
    shown = show_scale(least) if _is_number(least) else "?"
    scale = result.get("scale_factor")
    used = show_scale(scale) if _is_number(scale) else "?"
    return (f"SCALE FORCED: {used} is below the smallest valid scale {shown} ({result.get('min_scale_why', '')}); "
            "the changes below may not be those at full size")


def _flatten(obj: Any, prefix: str, out: List[tuple], tables: List[tuple]) -> None:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out, tables)
    elif isinstance(obj, list) and obj and all(isinstance(x, Mapping) for x in obj):
        tables.append((prefix, obj))
    elif isinstance(obj, list):
        out.append((prefix, ", ".join(format_value(x) if is_scalar(x) else str(x) for x in obj)))
    else:
        out.append((prefix, format_value(obj)))


def _flat_row(row: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    """A record with nested records flattened to dotted columns; a summary
    statistic ({median, min, max, ...}) becomes one `median [min..max]` cell."""
    out: Dict[str, Any] = {}
    for k, v in row.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and "median" in v:
            med, lo, hi = v.get("median"), v.get("min"), v.get("max")
            cell = format_value(med)
            if lo is not None and hi is not None:
                cell += f" [{format_value(lo)}..{format_value(hi)}]"
            out[key] = cell
        elif isinstance(v, Mapping):
            out.update(_flat_row(v, key + "."))
        else:
            out[key] = v
    return out


def format_rows(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str] = (), names: Optional[str] = None) -> List[str]:
    """A list of records as a table with a header line (scalar fields, nested
    records flattened). Columns named in ``metrics`` are shown with their
    unit, one per column, and headed by LKP's names with ``names="lkp"``."""
    rows = [_flat_row(r) for r in rows]
    cols: List[str] = []
    for row in rows:
        for k, v in row.items():
            if k not in cols and is_scalar(v):
                cols.append(k)
    units = [unit_for(c, [row.get(c) for row in rows]) if c in metrics else ("", 1.0) for c in cols]
    cells = [[format_in(row.get(c), *u) if c in row else "" for c, u in zip(cols, units)] for row in rows]
    label = _labels(names, *rows)
    heads = [label(c) if c in metrics else c for c in cols]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(heads)]
    text_cols = [all(isinstance(row.get(c), str) or c not in row for row in rows) for c in cols]
    out = ["  " + "  ".join(h.ljust(w) if t else h.rjust(w) for h, w, t in zip(heads, widths, text_cols)).rstrip()]
    out.append("  " + "  ".join("-" * w for w in widths))
    for r in cells:
        out.append("  " + "  ".join(v.ljust(w) if t else v.rjust(w) for v, w, t in zip(r, widths, text_cols)).rstrip())
    return out


def format_tree(result: Mapping[str, Any]) -> str:
    """Any JSON result as readable text: scalar fields as `key  value` lines
    (nested keys dotted), lists of records as tables."""
    pairs: List[tuple] = []
    tables: List[tuple] = []
    _flatten(result, "", pairs, tables)
    lines: List[str] = []
    if pairs:
        kw = max(len(k) for k, _ in pairs)
        lines += [f"{k.ljust(kw)}  {v}" for k, v in pairs]
    for name, rows in tables:
        if lines:
            lines.append("")
        lines.append(f"{name}:")
        lines += format_rows(rows)
    return "\n".join(lines) + "\n"


def iter_runs(result: Mapping[str, Any]) -> Iterable[tuple]:
    """(run name, metrics) for a run or compare result; runs of a case are
    named `case/arm`."""
    if "cases" in result:
        cases = result["cases"]
        for c in result.get("case_order") or sorted(cases):
            for name, metrics in iter_runs(cases[c]):
                yield f"{c}/{name}", metrics
    elif "variants" in result:
        yield str(result.get("baseline_name", "baseline")), result.get("baseline", {})
        variants = result.get("variants", {})
        for v in result.get("variant_order") or sorted(variants):
            yield str(v), variants[v]
    elif "metrics" in result:
        yield "run", result["metrics"]
    else:
        raise ValueError("not a vmsim run or compare result (no 'metrics', 'variants' or 'cases')")


def iter_scalar_rows(result: Mapping[str, Any]) -> Iterable[tuple]:
    """(run name, scalar metrics) for a run or compare result."""
    for name, metrics in iter_runs(result):
        yield name, scalar_metrics(metrics)
