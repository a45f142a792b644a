"""`vmsim hw validate`: the simulator's prediction for this host against a
real measurement on this host.

Two comparisons, both with 2 MiB pages and the target sub-page first:

1. *Clearing routines*: each clearing strategy run for real by `vmsim hw
   clear` (pre-faulted memory, the routine alone), against the simulator's
   pf-test with the matching `kernel.clear_huge_page` policy on the host's
   calibrated preset (which also pays the modeled fault entry and handler:
   a few microseconds per 2 MiB, a few percent of the clear).
2. *The kernel's own fault path*: `vmsim hw pf-test` on hugetlb 2 MiB pages
   (needs root; skipped otherwise), against the simulator with the policy of
   the host kernel's version (`sequential` before 4.14, `target-last` up to
   6.19, `contiguous-7.0` from 7.0).
3. *Microbenchmarks*: the rows of `vmsim validate` (pointer-chase latency
   at L1/L2/LLC/DRAM sizes, single-thread load, fill and copy bandwidth at
   cache and DRAM sizes, update, `x += y` at L2 and LLC sizes, `rep stosb`
   and `movnti` fills, a non-temporal copy, and the all-CPU load) run for real on this host by
   `vmsim hw microbench`, each beside the model's figure for the same
   microbenchmark on the calibrated preset (`microbench` in the result;
   its `table` is what the command line prints).
4. *Store sweep*: `vmsim hw store-sweep` on hugetlb 2 MiB memory (THP
   without root; one
   core clearing it in calls of 4 KiB to 1 GiB with `rep stosb`, `movnti`
   and, where the CPU has it, `clzero`; 4 KiB calls in both page orders,
   a `mov` loop beside them), each row beside the model's figure for the
   same calls on the calibrated preset (`store_sweep` in the result).

The preset comes from `vmsim hw calibrate` (run here unless `preset=PATH`
names one). Each row gives both figures and the difference in percent. A
microbenchmark row whose buffer was capped says so (the DRAM rows take 4 x
the LLC, at most the model's 1 GiB benchmark node and what the host's
memory holds); one the preset's benchmark machine cannot run is skipped with
its reason; and a calibrated value that the preset's bounds changed (a
fence's drain above the memory latency, say) is listed under `clamped` and
at the end of the table.
"""

from __future__ import annotations

import os
import platform
import tempfile
from typing import Any, Dict, List, Optional

from . import _core
from ._api import hw, run
from ._core import HwError

# vmsim hw strategy -> simulator kernel.clear_huge_page policy
STRATEGIES = {
    "seq-stosb": "sequential",
    "target-last": "target-last",
    "multipage-2023": "multipage-2023",
    "contiguous-7.0": "contiguous-7.0",
    "nontemporal-far": "nontemporal-far",
}

ACCEPTED = ("preset", "pages", "reps", "quick", "microbench_reps")


def _config_error(key: str, message: str) -> Exception:
    """A ConfigError shaped like the ones the core raises (`key`, `message`)."""
    err = _core.ConfigError(f"{key}: {message}")
    err.key, err.message = key, message
    return err


def kernel_policy(release: str) -> str:
    """The clear_huge_page policy of a kernel release string ("6.18.4-x")."""
    try:
        major, minor = (int(x) for x in release.split("-")[0].split(".")[:2])
    except ValueError:
        return "target-last"
    if (major, minor) < (4, 14):
        return "sequential"
    if major < 7:
        return "target-last"
    return "contiguous-7.0"


def _median(stat: Any) -> Optional[float]:
    return stat.get("median") if isinstance(stat, dict) else None


def _diff(sim: Optional[float], real: Optional[float]) -> Optional[float]:
    if sim is None or not real:
        return None
    return round((sim - real) / real * 100.0, 1)


def _sim_gbps(preset: str, policy: str, size_mib: int) -> float:
    r = run({
        "machine": preset,
        "kernel": {"clear_huge_page": policy},
        "workload": {"kind": "pf-test", "size_mib": size_mib, "page_size": "2m"},
    })
    m = r["metrics"]
    if not m.get("data_verified"):
        raise _core.DataVerificationError(f"simulated pf-test with {policy} did not verify")
    return round(m["fault_bytes_per_s"] / 1e9, 3)


def _positive(options: Dict[str, Any], key: str, default: int, most: int = 1 << 16) -> int:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise _config_error(key, f"expected an integer in 1..{most}, got {value!r}")
    return value


def validate(*, quiet: bool = False, **options: Any) -> Dict[str, Any]:
    for k in options:
        if k not in ACCEPTED:
            raise _config_error(k, f"unknown option; accepted: {', '.join(ACCEPTED)}")
    quick = options.get("quick", False)
    if not isinstance(quick, bool):
        raise _config_error("quick", f"expected true or false, got {quick!r}")
    pages = _positive(options, "pages", 4 if quick else 64)
    reps = _positive(options, "reps", 1 if quick else 3, most=1000)
    micro_reps = _positive(options, "microbench_reps", 3 if quick else 11, most=1000)
    size_mib = 2 * pages
    preset = options.get("preset")
    calibration = None
    if preset is None:
        out_dir = tempfile.mkdtemp(prefix="vmsim-validate-")
        calibration = hw("calibrate", quiet=quiet, out_dir=out_dir, quick=quick)
        preset = calibration.get("preset_path") or next(
            os.path.join(out_dir, f) for f in sorted(os.listdir(out_dir)) if f.endswith(".toml"))
    preset = os.path.abspath(str(preset))
    if not os.path.isfile(preset):
        raise _config_error("preset", f"no such preset file: {preset}")

    real = hw("clear", quiet=quiet, pages=pages, reps=reps, corunner=False, target="first", strategies=list(STRATEGIES))
    by_strategy = {r["strategy"]: r for r in real["results"]}
    rows: List[Dict[str, Any]] = []
    for strategy, policy in STRATEGIES.items():
        real_gbps = _median(by_strategy.get(strategy, {}).get("gbps"))
        sim_gbps = _sim_gbps(preset, policy, size_mib)
        rows.append({"scenario": f"clear routine {strategy}", "sim_policy": policy,
                     "real_gbps": real_gbps, "sim_gbps": sim_gbps, "diff_percent": _diff(sim_gbps, real_gbps)})

    release = platform.release()
    policy = kernel_policy(release)
    try:
        pf = hw("pf-test", quiet=quiet, size_mib=size_mib, reps=reps, kinds=["hugetlb-2m"])
        res = pf["results"][0]
        skipped = res.get("skipped")
        real_gbps = None if skipped else _median(res.get("gbps"))
    except HwError as e:
        skipped, real_gbps = str(e), None
    sim_gbps = _sim_gbps(preset, policy, size_mib)
    row = {"scenario": f"kernel fault path (hugetlb 2 MiB, {release})", "sim_policy": policy,
           "real_gbps": real_gbps, "sim_gbps": sim_gbps, "diff_percent": _diff(sim_gbps, real_gbps)}
    if skipped:
        row["skipped"] = skipped
    rows.append(row)
    micro = hw("microbench", quiet=quiet, preset=preset, quick=quick, reps=micro_reps)
    sweep_mib = 256 if quick else 1024
    # hugetlb needs root for its pool; THP needs none and is as contiguous.
    backing = "hugetlb-2m" if os.geteuid() == 0 else "thp"
    sweep = hw("store-sweep", quiet=quiet, preset=preset, size_mib=sweep_mib, reps=micro_reps,
               strategies=[], l2=False, backing=backing)
    clamped = (calibration or {}).get("clamped") or []
    return {
        "command": "validate",
        "preset": preset,
        "host": real.get("host"),
        "options": {"pages": pages, "reps": reps, "quick": quick, "size_mib": size_mib,
                    "microbench_reps": micro_reps, "store_sweep_mib": sweep_mib},
        "method": "real: vmsim hw clear (median GB/s, no co-runner, target sub-page 0) and vmsim hw pf-test "
                  "hugetlb-2m; simulated: pf-test on the calibrated preset, 2 MiB hugetlb pages, the matching "
                  "clear_huge_page policy (the simulated figure includes modeled fault costs)",
        "calibration": calibration,
        "clamped": clamped,
        "rows": rows,
        "microbench": micro,
        "store_sweep": sweep,
        "table": format_table(rows) + "\n" + micro["table"] + "\n" + sweep["table"] + format_clamped(clamped),
    }


def format_clamped(clamped: List[Dict[str, Any]]) -> str:
    """The calibration's values that the preset's bounds changed, as text."""
    if not clamped:
        return ""
    out = ["", "calibration: values the preset's bounds changed (measured or defaulted -> written)"]
    for c in clamped:
        out.append(f"  {c['key']}: {c['found']} -> {c['written']}: {c['reason']}")
    return "\n".join(out) + "\n"


def format_table(rows: List[Dict[str, Any]]) -> str:
    """The clearing and fault-path rows as text: real | simulated | difference."""
    def num(x: Optional[float]) -> str:
        return "-" if x is None else f"{x:.2f}"

    out = ["host: real | simulated (calibrated host preset) | difference, GB/s",
           f"  {'scenario':<46} {'policy':<16} {'real':>8} {'simulated':>10} {'diff':>8}"]
    for r in rows:
        diff = "-" if r.get("diff_percent") is None else f"{r['diff_percent']:+.1f}%"
        out.append(f"  {r['scenario']:<46} {r['sim_policy']:<16} {num(r.get('real_gbps')):>8} "
                   f"{num(r.get('sim_gbps')):>10} {diff:>8}")
        if r.get("skipped"):
            out.append(f"    skipped: {r['skipped']}")
    return "\n".join(out) + "\n"
