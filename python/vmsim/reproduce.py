"""`vmsim reproduce`: every built-in experiment (or a chosen few) into one
folder: per experiment the full JSON, the compare table, a plot where
matplotlib is installed, and a README.md that lists the headline change of
each variant beside the experiment's reference (what the full-size run is
and what was published). Deterministic: same seed and scale, same files.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import _api
from ._errors import config_error
from ._io import remove_stale

#: Marks a folder as written by ``reproduce``, so a re-run may replace it.
MARKER = ".vmsim-reproduce"
from .tables import forced_scale_line, format_compare, format_value, percent_change

HEADLINE = ("throughput_bytes_per_s", "fault_bytes_per_s", "llc_miss_rate", "dram_bytes_read", "sys_s", "data_verified")


def _headline_rows(name: str, result: Dict[str, Any]) -> List[str]:
    cases = result.get("cases")
    panels = [(c, cases[c]) for c in (result.get("case_order") or sorted(cases))] if cases else [(None, result)]
    rows = []
    for case, r in panels:
        base = r["baseline"]
        for v in r.get("variant_order") or sorted(r["variants"]):
            vm = r["variants"][v]
            cells = []
            for m in HEADLINE:
                if m not in base:
                    continue
                ch = percent_change(base.get(m), vm.get(m))
                cells.append(f"{m} {format_value(base[m])} -> {format_value(vm[m])}" + (f" ({ch:+.1f}%)" if ch is not None else ""))
            label = f"{case}: " if case else ""
            rows.append(f"| {name} | {label}{r['baseline_name']} -> {v} | " + "; ".join(cells) + " |")
    return rows


def _scale_lines(result: Dict[str, Any]) -> List[str]:
    """The README's "Scale:" of one experiment: its own line, or one line
    per case for an experiment with cases (each case says what it ran)."""
    cases = result.get("cases")
    if not isinstance(cases, dict) or not cases:
        return [f"Scale: {result.get('scale', '')}"]
    lines = ["Scale, per case:", ""]
    for c in result.get("case_order") or sorted(cases):
        lines.append(f"- {c}: {cases[c].get('scale', '') if isinstance(cases.get(c), dict) else ''}")
    return lines


def reproduce(out_dir: str, only: Optional[Sequence[str]] = None, scale: Optional[float] = None, seed: int = 0,
              progress: Optional[Callable[[str, float], Any]] = None,
              threads: Optional[int] = None, force_scale: bool = False, executor: Any = None,
              cache: bool = True) -> Dict[str, Any]:
    """Runs the experiments and writes their results into ``out_dir``;
    returns ``{name: result}``. Each experiment runs up to ``threads`` of its
    arms at once (default: one per host CPU). A ``scale`` below an
    experiment's smallest valid scale raises ``ConfigError`` (keyed
    ``scale``) before anything runs, unless ``force_scale``: then its result
    is marked as ``compare`` marks it, and so is its section of the README.

    ``executor`` (e.g. a ``dask.distributed.Client``) runs each experiment
    as one task on it, all at once; the files are the same. Results in the
    result cache are read instead of simulated (``cache=False``: neither
    read nor stored; docs/usage.md)."""
    given_threads = threads
    threads = _api.check_threads(threads)
    from . import cache as _cache

    _cache.enabled(cache)
    names = list(only) if only else list(_api.experiments())
    known = _api.experiments()
    for n in names:
        if n not in known:
            raise config_error("experiment", f"{n!r} is not a built-in experiment; built-in: {', '.join(known)}")
    scale = _api.check_scale(scale)
    for n in names:
        _api.check_min_scale(n, scale, None, force_scale)
    out_dir = os.path.normpath(out_dir)
    if os.path.exists(out_dir):
        if not os.path.isdir(out_dir):
            raise config_error("--out", f"{out_dir} exists and is not a folder")
        if os.listdir(out_dir) and not os.path.exists(os.path.join(out_dir, MARKER)):
            raise config_error("--out", f"{out_dir} exists, is not empty and was not written by vmsim reproduce; give a new folder")
    parent = os.path.dirname(out_dir) or "."
    os.makedirs(parent, exist_ok=True)
    # Everything goes to a fresh folder that replaces out_dir only once complete,
    # so an interrupted run leaves the previous results whole and two runs never mix.
    base = os.path.basename(out_dir)
    # What a killed earlier run to the same folder left (SIGKILL, power loss).
    for kind in ("partial", "old"):
        remove_stale(parent, f".{base}.{kind}-", folders=True)
    work = tempfile.mkdtemp(prefix=f".{base}.partial-{os.getpid()}-", dir=parent)
    try:
        if executor is not None:
            specs = [{"experiment": n, "scale": scale, "seed": seed, "set": None,
                      "forced": _api.check_min_scale(n, scale, None, force_scale)} for n in names]
            done = dict(zip(names, _api.compare_many(specs, executor, threads=given_threads, progress=progress,
                                                     label=f"reproduce ({len(names)} experiments)", cache=cache)))
        else:
            done = None
        results = _reproduce_into(work, names, scale, seed, progress, threads, force_scale, done, cache)
        with open(os.path.join(work, MARKER), "w") as f:
            f.write("written by vmsim reproduce; a re-run replaces this folder\n")
        os.chmod(work, 0o755)
        if os.path.exists(out_dir):
            old = tempfile.mkdtemp(prefix=f".{base}.old-{os.getpid()}-", dir=parent)
            os.rmdir(old)
            os.rename(out_dir, old)
            os.rename(work, out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(work, out_dir)
    except BaseException as e:
        shutil.rmtree(work, ignore_errors=True)
        if isinstance(e, OSError) and e.errno is not None and (e.filename is None or
                                                               os.fspath(e.filename).startswith(work)):
            # A failed write (ENOSPC) names the folder asked for, not the
            # temporary one (or nothing).
            raise OSError(e.errno, e.strerror, out_dir) from None
        raise
    # Lost data fails the command, once the files that show it are in place.
    for result in results.values():
        _api.check_verified(result)
    return results


def _reproduce_into(out_dir: str, names: List[str], scale: Optional[float], seed: int,
                    progress: Optional[Callable[[str, float], Any]], threads: int,
                    force_scale: bool = False, done: Optional[Dict[str, Any]] = None,
                    cache: bool = True) -> Dict[str, Any]:
    results: Dict[str, Any] = {}
    summary = [
        "# vmsim reproduce",
        "",
        f"seed {seed}, " + ("each experiment at its own scale" if scale is None else f"scale {scale} for every experiment")
        + "; the sizes each one ran at are in its section below.",
        "Every figure below is the simulator's prediction; the references say what was measured on real machines.",
        "",
        "| experiment | comparison | headline metrics (baseline -> variant) |",
        "|---|---|---|",
    ]
    details: List[str] = []
    for name in names:
        if done is not None:
            result = done[name]
        else:
            result = _api.compare(name, scale=scale, seed=seed, progress=progress, check=False, threads=threads,
                                  force_scale=force_scale, cache=cache)
        results[name] = result
        with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
            f.write("\n")
        with open(os.path.join(out_dir, f"{name}.txt"), "w") as f:
            f.write(format_compare(result, full=True))
        try:
            from .plot import plot

            plot(result, os.path.join(out_dir, f"{name}.png"))
        except ImportError:
            pass
        summary += _headline_rows(name, result)
        forced = [forced_scale_line(result), ""] if result.get("scale_forced") else []
        details += ["", f"## {name}", "", result.get("description", ""), "", *forced,
                    *_scale_lines(result), "",
                    f"Reference: {result.get('reference', '')}",
                    "", f"Table: `{name}.txt`; full result: `{name}.json`."]
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write("\n".join(summary + details) + "\n")
    return results
