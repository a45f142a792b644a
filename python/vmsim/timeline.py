"""Whether tasks run in step: a run's ``thp_timeline`` (``sim.timeline =
true``; docs/metrics.md) says when each task's huge-page faults installed
their PMDs. ``in_step`` sets the tasks' k-th huge page side by side: when
the first and the last task had it, and how long a task takes from one
huge page to the next. Tasks in step have a spread well below that gap.

    import vmsim
    c = vmsim.compare("copy-target-last", set={"sim.timeline": True})
    print(vmsim.timeline.format_markdown(vmsim.timeline.in_step(c["baseline"])))

(or ``vmsim compare copy-target-last --set sim.timeline=true --json
copy.json`` and the same on the JSON's ``baseline``)
"""

from __future__ import annotations

import statistics
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ._errors import config_error

EVENTS = ("thp_fault", "thp_cow")


def per_task(metrics: Mapping[str, Any], event: str = "thp_cow") -> Dict[int, List[tuple]]:
    """Task -> its ``event``s in time order, each (µs, huge page index)."""
    if event not in EVENTS:
        raise config_error("event", f"{event!r} is not a timeline event; accepted: {', '.join(EVENTS)}")
    rows = metrics.get("thp_timeline")
    if rows is None:
        raise config_error("thp_timeline", "the run kept no timeline; run it with sim.timeline = true "
                                           "(vmsim run/compare --set sim.timeline=true)")
    out: Dict[int, List[tuple]] = {}
    for t_us, task, ev, index in rows:
        if ev == event:
            out.setdefault(task, []).append((t_us, index))
    return out


def in_step(metrics: Mapping[str, Any], event: str = "thp_cow",
            ranks: Optional[Sequence[int]] = None) -> Dict[str, Any]:
    """The tasks' k-th ``event`` side by side, for each rank k every task
    reached (or those of ``ranks``): the first and last task's time, their
    spread, the median task's time from its (k-1)-th to its k-th, and
    whether every task had the same huge page (by index) at that rank."""
    tasks = per_task(metrics, event)
    if not tasks:
        return {"event": event, "tasks": 0, "rows": []}
    depth = min(len(v) for v in tasks.values())
    want = range(depth) if ranks is None else [k for k in ranks if 0 <= k < depth]
    rows = []
    for k in want:
        times = [v[k][0] for v in tasks.values()]
        gaps = [v[k][0] - v[k - 1][0] for v in tasks.values()] if k > 0 else []
        indices = {v[k][1] for v in tasks.values()}
        rows.append({"rank": k, "first_us": min(times), "median_us": statistics.median(times),
                     "last_us": max(times), "spread_us": max(times) - min(times),
                     "median_gap_us": statistics.median(gaps) if gaps else None,
                     "same_page": len(indices) == 1})
    return {"event": event, "tasks": len(tasks), "per_task": depth, "rows": rows}


def format_markdown(s: Mapping[str, Any]) -> str:
    """``in_step``'s table."""
    out = [f"{s['tasks']} tasks, {s.get('per_task', 0)} {s['event']} each.", "",
           "| k-th huge page | first task, µs | median, µs | last task, µs | spread, µs | "
           "a task's gap from the one before, median µs | the same page in every task |",
           "|---|---|---|---|---|---|---|"]
    for r in s["rows"]:
        gap = f"{r['median_gap_us']:.1f}" if r["median_gap_us"] is not None else "-"
        out.append(f"| {r['rank']} | {r['first_us']:.1f} | {r['median_us']:.1f} | {r['last_us']:.1f} | "
                   f"{r['spread_us']:.1f} | {gap} | {'yes' if r['same_page'] else 'no'} |")
    return "\n".join(out) + "\n"
