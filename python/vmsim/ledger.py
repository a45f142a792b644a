"""The ledger: each built-in experiment's baseline arm in absolute terms,
beside what the old kernel measured, each headline change split into its
terms, and the regime each run is in beside the real run's.

A percentage between two arms can come out right from a baseline that is
several times too fast. The ledger says which absolute term is off, so a
change to the model is judged by the term it was meant to fix.

- ``FIGURES``: every figure the baseline kernels' measurements give
  (their sources quoted), with the model's figure from the baseline arm
  of ``vmsim compare`` at the experiment's default scale, or the reason the
  model has none. ``klass`` is ``check`` unless a preset value was set to
  make the row agree (``calibrated: KEY``), which then is no check.
- ``TERMS``: per experiment, the quantities its change moves (per page, per
  byte, per 4 KiB cleared, per migrated page), baseline and variant.
- ``REGIMES``: per experiment and case, the memory in play against the
  LLC, the per-task footprint against the LLC share per thread, and the
  same for the real run.
- ``fingerprint()``: hashes of the outcomes of a few short runs
  (``FINGERPRINT_CONFIGS``, ``FINGERPRINT_METRICS``); the committed ledger (docs/ledger.json) holds
  the fingerprint it was made at, and a test fails when the model moved
  and the ledger was not made again (``make ledger``).

The ledger is computed from ``vmsim compare`` results (JSON, as
``--json`` writes them); ``build`` runs them, through the result cache.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pathlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

EXPERIMENTS = ("clear-target-last", "copy-target-last", "batched-tlb-flush", "numa-delay-map", "multipage-clear")

Arm = Mapping[str, Any]


@dataclass
class Ctx:
    """What a figure needs beside the arm's metrics: the case's config and
    machine, and the factor from simulated to real memory."""

    config: Mapping[str, Any]
    machine: Mapping[str, Any]
    scale: float
    real_ratio: Optional[float] = None
    #: The experiment's whole result, for a figure that sets two cases apart.
    result: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Figure:
    experiment: str
    case: Optional[str]
    name: str
    unit: str
    published: float
    source: str
    model: Optional[Callable[[Arm, Ctx], float]] = None
    how: str = ""
    why_none: str = ""
    klass: str = "check"
    #: The figure as its source writes it, where not as `published` prints.
    quoted: str = ""


@dataclass
class Term:
    name: str
    unit: str
    value: Callable[[Arm, Ctx], float]
    how: str


def _pages_read(a: Arm, c: Ctx) -> float:
    """lru-file-mmap-read's file pages, each read (and so reclaimed) once:
    the published per-page figures' denominator (BASELINES.md)."""
    w = c.config["workload"]
    return w["file_size"] * w["nr_task"] / 4096


def _reclaimed(a: Arm, c: Ctx) -> float:
    return a["pgsteal_kswapd"] + a["pgsteal_direct"]


def _interrupts_per_s(a: Arm, c: Ctx) -> float:
    """IPIs received and timer ticks per second of elapsed time: vmstat's
    `in` counts both (the model has no device interrupts)."""
    cnt = a["counters"]
    return (cnt["cpu"]["ipis_received"] + cnt["sched"]["nr_ticks"]) / a["elapsed_s"]


def _fn(a: Arm, name: str) -> float:
    return a["sys_cycles_by_function"].get(name, 0)


def _kernel_terms(fn: str, per: str, name: str) -> List["Term"]:
    """A kernel path's cycles per unit of work (`per`, a count metric) and
    the memory-stall part of them."""
    return [
        Term(name, "cycles", lambda a, c: _fn(a, fn) / a[per], f"sys_cycles_by_function.{fn} / {per}"),
        Term("of which memory stalls", "cycles", lambda a, c: a["sys_mem_cycles_by_function"][fn] / a[per],
             f"sys_mem_cycles_by_function.{fn} / {per}"),
    ]


def _per_4k_ns(a: Arm, c: Ctx) -> float:
    return a["elapsed_s"] / a["subpage_clears"] * 1e9


BTF = "batched-tlb-flush"
BTF_SRC = "commit 72b252aed506 (4.3), baseline 4.2.0-rc1 on Mel Gorman's "
BTF_4N = "e5-4655v3-4n"
BTF_1S = "e5-1650v3-1s"
NDM_SRC = "commit b99a342d4f11 (5.13), baseline"
MPC_ICX = "Arora's pf-test, Xeon Platinum 8358, no turbo, baseline per-4 KiB clearing"
MPC_MILAN = "Arora's pf-test, EPYC 7J13, boost off, baseline per-4 KiB clearing"
SCALED = "x the real RAM over the simulated (the files are 10 x RAM at every scale)"


def _btf(case: str, real: str, published: Sequence[float]) -> List[Figure]:
    """The reclaim case's whole-run figures, published in this order:
    mean elapsed, time_range, time_stddv, user, system, elapsed,
    interrupts a second, system share, CPUs of system time."""
    src = BTF_SRC + real
    fig = [
        Figure(BTF, case, "readers' mean elapsed", "s", 0.0, src,
               lambda a, c: a["lru_file_mmap_read_elapsed_s"] * c.real_ratio,
               f"lru_file_mmap_read_elapsed_s {SCALED}"),
        Figure(BTF, case, "readers' time_range", "s", 0.0, src,
               lambda a, c: a["lru_file_mmap_read_time_range_s"] * c.real_ratio,
               f"lru_file_mmap_read_time_range_s {SCALED}"),
        Figure(BTF, case, "readers' time_stddv", "s", 0.0, src,
               lambda a, c: a["lru_file_mmap_read_time_stddev_s"] * c.real_ratio,
               f"lru_file_mmap_read_time_stddev_s {SCALED}"),
        Figure(BTF, case, "user time", "s", 0.0, src, lambda a, c: a["user_s"] * c.real_ratio,
               f"user_s (all CPUs) {SCALED}"),
        Figure(BTF, case, "system time", "s", 0.0, src, lambda a, c: a["sys_s"] * c.real_ratio,
               f"sys_s (all CPUs) {SCALED}"),
        Figure(BTF, case, "elapsed", "s", 0.0, src, lambda a, c: a["elapsed_s"] * c.real_ratio,
               f"elapsed_s {SCALED}"),
        Figure(BTF, case, "interrupts per second", "K/s", 0.0, src,
               lambda a, c: _interrupts_per_s(a, c) / 1e3,
               "(IPIs received + timer ticks) / elapsed_s (no device interrupts in the model)"),
        Figure(BTF, case, "system share of CPU time", "%", 0.0, src,
               lambda a, c: 100 * a["sys_s"] / (a["sys_s"] + a["user_s"]), "sys_s / (sys_s + user_s)"),
        Figure(BTF, case, "CPUs' worth of system time", "CPUs", 0.0, src,
               lambda a, c: a["sys_s"] / a["elapsed_s"], "sys_s / elapsed_s"),
    ]
    for f, v in zip(fig, published, strict=True):
        f.published = v
    return fig


def _mpc(case: str, src: str, gbps: float, secs: float, instr: Optional[float], loads: float,
         misses: float) -> List[Figure]:
    out = [
        Figure("multipage-clear", case, "clearing rate", "GB/s", gbps, src,
               lambda a, c: a["fault_bytes_per_s"] / 1e9, "fault_bytes_per_s / 1e9 (decimal GB/s)"),
        Figure("multipage-clear", case, "ns per 4 KiB cleared", "ns", secs / (64 * GiB / 4096) * 1e9,
               src + f"; derived: {secs} s / 2^24 sub-pages (a 64 GiB region)", _per_4k_ns,
               "elapsed_s / subpage_clears"),
    ]
    if instr is not None:
        out.append(Figure("multipage-clear", case, "instructions per 4 KiB", "", instr / 2 ** 24,
                          src + f"; derived: {instr:.3g} instructions / 2^24 sub-pages",
                          lambda a, c: a["instructions"] / a["subpage_clears"],
                          "instructions / subpage_clears (the kernel's steps at fixed instruction counts)"))
    out.append(Figure("multipage-clear", case, "L1-dcache-loads per 4 KiB", "", loads / 2 ** 24,
                      src + f"; derived: {loads:.3g} loads / 2^24 sub-pages",
                      why_none="the model counts line accesses by loads (l1d_loads), and a clear is stores "
                               "only; perf counts every load instruction of the process, the fault path's too"))
    out.append(Figure("multipage-clear", case, "L1-dcache-load-misses per 4 KiB", "", misses / 2 ** 24,
                      src + f"; derived: {misses:.3g} misses / 2^24 sub-pages",
                      lambda a, c: a["l1d_misses"] / a["subpage_clears"],
                      "l1d_misses / subpage_clears (line misses of the clears' stores; perf's event also "
                      "counts store misses on these parts)"))
    return out


FIGURES: List[Figure] = [
    Figure("clear-target-last", None, "IPC", "", 0.56,
           "commit c79b57e462b5d (4.14), baseline (ascending clear), perf stat",
           lambda a, c: a["ipc"], "ipc (instructions / cycles, every CPU, the whole run)"),
    Figure("clear-target-last", None, "cache miss rate", "%", 33.4,
           "commit c79b57e462b5d (4.14), baseline, perf cache-misses / cache-references",
           lambda a, c: 100 * a["llc_miss_rate"], "100 x llc_miss_rate (the preset's perf_cache_events level)"),
    Figure("copy-target-last", None, "IPC", "", 0.63,
           "Huang Ying, linux-mm 2018-05-24 (4.18 series), baseline (ascending copy), perf stat",
           lambda a, c: a["ipc"], "ipc (instructions / cycles, every CPU, the whole run)"),
    *_btf(BTF_4N, "4-node 64 GB 48-CPU machine", [159.62, 30.59, 6.70, 581.00, 5804.93, 161.03, 900.0, 91.0, 36.0]),
    Figure(BTF, BTF_4N, "system time per page", "us", 34.6,
           BTF_SRC + "4-node machine; derived: 5804.93 s / 167.8 M pages (10 x 64 GiB read once)",
           lambda a, c: a["sys_s"] / _pages_read(a, c) * 1e6, "sys_s / file pages read"),
    Figure(BTF, BTF_4N, "user time per page", "us", 3.46,
           BTF_SRC + "4-node machine; derived: 581.00 s / 167.8 M pages",
           lambda a, c: a["user_s"] / _pages_read(a, c) * 1e6, "user_s / file pages read"),
    Figure(BTF, BTF_4N, "pages per second", "M/s", 1.04,
           BTF_SRC + "4-node machine; derived: 167.8 M pages / 161.03 s",
           lambda a, c: _pages_read(a, c) / a["elapsed_s"] / 1e6, "file pages read / elapsed_s"),
    *_btf(BTF_1S, "single-socket machine", [25.33, 0.91, 0.28, 58.09, 111.82, 27.29, 500.0, 66.0, 4.1]),
    Figure("numa-delay-map", None, "TLB shootdown interrupts", "M", 47.0, NDM_SRC + " (map, then migrate): ~4.7e7",
           lambda a, c: a["tlb_shootdown_interrupts"] / c.scale / 1e6,
           "tlb_shootdown_interrupts / the scale factor (memory and durations scale with it)", quoted="4.7e7"),
    Figure("numa-delay-map", None, "pages migrated", "M", 9.2, NDM_SRC + ": ~9.2e6 pages (35.8 GB)",
           lambda a, c: a["numa_pages_migrated"] / c.scale / 1e6, "numa_pages_migrated / the scale factor",
           quoted="9.2e6"),
    Figure("numa-delay-map", None, "shootdown interrupts per migrated page", "", 47.0 / 9.2,
           NDM_SRC + "; derived: 4.7e7 / 9.2e6",
           lambda a, c: a["tlb_shootdown_interrupts"] / a["numa_pages_migrated"],
           "tlb_shootdown_interrupts / numa_pages_migrated"),
    Figure("numa-delay-map", None, "try_to_unmap and callees, share of cycles", "%", 6.02, NDM_SRC + ", perf",
           lambda a, c: 100 * a["try_to_unmap_cycles_share"], "100 x try_to_unmap_cycles_share"),
    *_mpc("icx-2m", MPC_ICX + " (descending on 2 MB pages)", 8.76, 7.317, 2.58e9, 702e6, 3.2e9),
    *_mpc("icx-1g", MPC_ICX + " (ascending on 1 GB pages)", 8.99, 7.122, 2.01e9, 532e6, 3.2e9),
    *_mpc("milan-2m", MPC_MILAN + " (descending on 2 MB pages)", 12.24, 5.239, None, 2.50e9, 1.08e9),
    *_mpc("milan-1g", MPC_MILAN + " (ascending on 1 GB pages)", 17.98, 3.558, None, 2.418e9, 1.076e9),
    Figure("multipage-clear", "milan-2m", "ns per 4 KiB, descending on 2 MB over ascending on 1 GB", "ns",
           4096 / 12.24 - 4096 / 17.98,
           MPC_MILAN + "; derived: 4096 B / 12.24 GB/s - 4096 B / 17.98 GB/s (BASELINES.md: about 107 ns)",
           lambda a, c: _per_4k_ns(a, c) - _per_4k_ns(c.result["cases"]["milan-1g"]["baseline"], c),
           "ns per 4 KiB of case milan-2m's baseline less case milan-1g's"),
    Figure("multipage-clear", "icx-2m", "ns per 4 KiB, descending on 2 MB over ascending on 1 GB", "ns",
           4096 / 8.76 - 4096 / 8.99,
           MPC_ICX + "; derived: 4096 B / 8.76 GB/s - 4096 B / 8.99 GB/s (BASELINES.md: within 3 %)",
           lambda a, c: _per_4k_ns(a, c) - _per_4k_ns(c.result["cases"]["icx-1g"]["baseline"], c),
           "ns per 4 KiB of case icx-2m's baseline less case icx-1g's"),
]

# The published rows with no model figure at all, said rather than left out.
MODELLESS_NOTE = "the model has no such metric"

TERMS: Dict[str, List[Term]] = {
    "clear-target-last": [
        *_kernel_terms("clear_page", "subpage_clears", "kernel cycles per 4 KiB cleared"),
        Term("user cycles per 4 KiB written", "cycles",
             lambda a, c: a["roi"]["cpu"]["user_cycles"] / (c.config["workload"]["nr_task"]
                                                            * c.config["workload"]["size_per_task"] / 4096),
             "roi.cpu.user_cycles / the timed pass's 4 KiB pages"),
        Term("DRAM bytes read per 4 KiB written", "B",
             lambda a, c: a["roi"]["dram"]["bytes_read"] / (c.config["workload"]["nr_task"]
                                                            * c.config["workload"]["size_per_task"] / 4096),
             "roi.dram.bytes_read / the timed pass's 4 KiB pages"),
        Term("LLC miss rate", "%", lambda a, c: 100 * a["llc_miss_rate"], "100 x llc_miss_rate"),
        Term("IPC", "", lambda a, c: a["ipc"], "ipc"),
    ],
    "copy-target-last": [
        *_kernel_terms("copy_page", "subpage_copies", "kernel cycles per 4 KiB copied"),
        Term("user cycles per 4 KiB copied", "cycles",
             lambda a, c: a["counters"]["cpu"]["user_cycles"] / a["subpage_copies"],
             "counters.cpu.user_cycles / subpage_copies"),
        Term("DRAM bytes read per 4 KiB copied", "B", lambda a, c: a["dram_bytes_read"] / a["subpage_copies"],
             "dram_bytes_read / subpage_copies"),
        Term("page-lock wait cycles per 4 KiB copied", "cycles",
             lambda a, c: a["lock_stat"].get("PG_locked", {}).get("wait_cycles", 0) / a["subpage_copies"],
             "lock_stat.PG_locked.wait_cycles / subpage_copies"),
        Term("IPC", "", lambda a, c: a["ipc"], "ipc"),
    ],
    BTF: [
        Term("system time per reclaimed page", "us", lambda a, c: a["sys_s"] / _reclaimed(a, c) * 1e6,
             "sys_s / (pgsteal_kswapd + pgsteal_direct)"),
        Term("user time per reclaimed page", "us", lambda a, c: a["user_s"] / _reclaimed(a, c) * 1e6,
             "user_s / reclaimed pages"),
        Term("flush and IPI cycles per reclaimed page", "cycles",
             lambda a, c: (_fn(a, "flush_tlb") + _fn(a, "irq")) / _reclaimed(a, c),
             "(sys_cycles_by_function.flush_tlb + .irq) / reclaimed pages"),
        Term("lock wait cycles per reclaimed page", "cycles",
             lambda a, c: sum(v.get("wait_cycles", 0) for v in a["lock_stat"].values()) / _reclaimed(a, c),
             "sum of lock_stat.*.wait_cycles / reclaimed pages"),
        Term("kernel memory-stall cycles per reclaimed page", "cycles",
             lambda a, c: a["counters"]["cpu"]["sys_mem_cycles"] / _reclaimed(a, c),
             "counters.cpu.sys_mem_cycles / reclaimed pages"),
        Term("IPIs per reclaimed page", "", lambda a, c: a["counters"]["cpu"]["ipis_received"] / _reclaimed(a, c),
             "counters.cpu.ipis_received / reclaimed pages"),
    ],
    "numa-delay-map": [
        Term("shootdown interrupts per migrated page", "",
             lambda a, c: a["tlb_shootdown_interrupts"] / a["numa_pages_migrated"],
             "tlb_shootdown_interrupts / numa_pages_migrated"),
        Term("try_to_unmap cycles per migrated page", "cycles",
             lambda a, c: _fn(a, "try_to_unmap") / a["numa_pages_migrated"],
             "sys_cycles_by_function.try_to_unmap / numa_pages_migrated"),
        Term("IPI handler cycles per migrated page", "cycles",
             lambda a, c: _fn(a, "irq") / a["numa_pages_migrated"], "sys_cycles_by_function.irq / numa_pages_migrated"),
        Term("migration cycles per migrated page", "cycles",
             lambda a, c: (_fn(a, "migrate_pages") + _fn(a, "copy_page")) / a["numa_pages_migrated"],
             "(sys_cycles_by_function.migrate_pages + .copy_page) / numa_pages_migrated"),
        Term("pages migrated", "", lambda a, c: a["numa_pages_migrated"], "numa_pages_migrated"),
        Term("accesses per second", "M/s", lambda a, c: a["pmbench_throughput_aps"] / 1e6, "pmbench_throughput_aps"),
    ],
    "multipage-clear": [
        Term("ns per 4 KiB cleared", "ns", _per_4k_ns, "elapsed_s / subpage_clears"),
        *_kernel_terms("clear_page", "subpage_clears", "kernel clear cycles per 4 KiB"),
        Term("DRAM bytes written per 4 KiB", "B", lambda a, c: a["dram_bytes_written"] / a["subpage_clears"],
             "dram_bytes_written / subpage_clears"),
        Term("DRAM bytes read per 4 KiB", "B", lambda a, c: a["dram_bytes_read"] / a["subpage_clears"],
             "dram_bytes_read / subpage_clears (ownership reads)"),
    ],
}


@dataclass
class Part:
    """One part of reclaim's system time: the kernel paths whose cycles it
    is (``sys_cycles_by_function`` keys, or a function of the arm), what
    it is in 4.2's terms, and the preset costs that set its fixed part."""

    name: str
    kernel: str
    paths: Sequence[str] = ()
    costs: Sequence[str] = ()
    #: Cycles of the part when they are not a sum of paths.
    cycles: Optional[Callable[[Arm], float]] = None
    #: Whether the part runs inside reclaim's rounds (its kswapd and
    #: direct-reclaim shares are known).
    reclaim: bool = False


def _ipi_cause(a: Arm, which: str) -> float:
    """Shootdown IPIs' sender cycles, ``send`` or ``wait``."""
    return a["counters"]["cpu"][f"ipi_{which}_cycles_by_cause"][0]


#: Reclaim's system time (the batched-tlb-flush runs) split into its parts:
#: the fault that reads a hole, reclaim's steps, the flush and its IPIs.
#: The parts add up to the whole: what no part names is "other".
RECLAIM_PARTS: List[Part] = [
    Part("read fault: entry, lookup, readahead, allocation lock", "do_read_fault, filemap_fault, "
         "page_cache_sync/async_readahead, filemap_map_pages, the exception entry and exit",
         ("exc_page_fault", "handle_mm_fault"),
         ("exception_entry_exit_cycles", "page_fault_handler_cycles", "map_pages_per_pte_cycles")),
    Part("page-cache folio: allocation and insertion", "__page_cache_alloc, add_to_page_cache_lru's "
         "__add_to_page_cache_locked under tree_lock", ("filemap_add_folio",),
         ("page_alloc_cycles", "page_cache_add_cycles")),
    Part("LRU add", "lru_cache_add, __pagevec_lru_add under the LRU lock", ("lru_cache_add",)),
    Part("zeroing the holes", "zero_user_segment of the read of a hole (a memset)", ("clear_page",)),
    Part("isolate", "isolate_lru_pages under the LRU lock", ("isolate_lru_folios",), ("shrink_folio_cycles",),
         reclaim=True),
    Part("putback", "putback_inactive_pages, move_active_pages_to_lru under the LRU lock",
         ("move_folios_to_lru",), reclaim=True),
    Part("deactivate", "shrink_active_list", ("shrink_active_list",), ("shrink_folio_cycles",), reclaim=True),
    Part("sort", "shrink_page_list's own steps", ("shrink_folio_list",), ("shrink_folio_cycles",), reclaim=True),
    Part("young bits", "page_referenced: the rmap walk testing and clearing young bits",
         ("folio_referenced",), ("rmap_pte_cycles",), reclaim=True),
    Part("unmap", "try_to_unmap: the rmap walk clearing each PTE", ("rmap_walk",), ("rmap_pte_cycles",),
         reclaim=True),
    Part("page-cache removal", "__remove_mapping under tree_lock", ("__remove_mapping",), reclaim=True),
    Part("flush: sending IPIs", "native_send_call_func_ipi, per target",
         costs=("ipi_send_cycles",), cycles=lambda a: _ipi_cause(a, "send")),
    Part("flush: waiting for acknowledgements", "smp_call_function_many's wait for the last target",
         costs=("ipi_latency_ns", "ipi_handle_cycles", "invlpg_cycles", "tlb_flush_full_cycles"),
         cycles=lambda a: _ipi_cause(a, "wait")),
    Part("flush: local flush and the rest", "flush_tlb_page / try_to_unmap_flush on the reclaiming CPU",
         costs=("invlpg_cycles", "tlb_flush_full_cycles"),
         cycles=lambda a: _fn(a, "flush_tlb") - _ipi_cause(a, "send") - _ipi_cause(a, "wait")),
    Part("IPI handlers on the targets", "flush_tlb_func via the call-function vector (entry, flush, exit)",
         ("irq",), ("ipi_handle_cycles",)),
    Part("freeing", "free_hot_cold_page_list, free_pcppages_bulk under zone->lock", ("free_pages",),
         ("page_free_cycles",), reclaim=True),
    Part("spinning on locks", "the ticket spin of _raw_spin_lock (LRU lock, tree_lock, zone->lock, PTL)",
         ("spin_lock",), reclaim=True),
]


def _part_cycles(p: Part, a: Arm) -> float:
    return p.cycles(a) if p.cycles is not None else sum(_fn(a, f) for f in p.paths)


def _preset_costs(machine: str) -> Dict[str, Dict[str, Any]]:
    """Preset ``machine``'s kernel costs: value, class and source."""
    from . import _core

    try:
        preset = json.loads(_core.preset_json(machine, None))
    except _core.ConfigError:  # a user's preset file not at hand: no classes
        return {}
    prov = preset.get("provenance") or {}
    return {k.split(".", 1)[1]: {"value": v.get("value"), "class": v.get("class"),
                                  "source": (preset.get("sources") or {}).get(k, "")}
            for k, v in prov.items() if k.startswith("costs.")}


def reclaim_decomposition(result: Mapping[str, Any], case: Optional[str],
                          published_sys_us: Optional[float] = None) -> Dict[str, Any]:
    """System time per reclaimed page of one batched-tlb-flush case, by
    part (``RECLAIM_PARTS``), both arms; each reclaim part split between
    kswapd and direct reclaim, each part beside the preset costs that set
    it and their class."""
    one = _arms(result, case)
    machine = one["config"]["machine"]
    costs = _preset_costs(machine)
    variants = one.get("variant_order") or list(one.get("variants", {}))
    head = (next((p["arm"] for p in result.get("published") or [] if p.get("case") == case), None)
            or (variants[0] if variants else None))
    arms = {"baseline": one["baseline"]}
    if head:
        arms["variant"] = one["variants"][head]

    def per_page(a: Arm) -> Tuple[float, float]:
        total = sum(a["sys_cycles_by_function"].values())
        us_per_cycle = a["sys_s"] * 1e6 / total if total else 0.0
        pages = a["pgsteal_kswapd"] + a["pgsteal_direct"]
        return us_per_cycle, pages

    rows = []
    named = {f for p in RECLAIM_PARTS for f in p.paths} | {"flush_tlb"}
    parts = RECLAIM_PARTS + [Part("other", "the scheduler tick, schedule, system calls, exit",
                                  cycles=lambda a: sum(v for k, v in a["sys_cycles_by_function"].items()
                                                       if k not in named))]
    for p in parts:
        row: Dict[str, Any] = {"part": p.name, "kernel": p.kernel, "paths": list(p.paths),
                               "costs": [dict(key=k, **costs[k]) for k in p.costs if k in costs]}
        for arm, a in arms.items():
            k, pages = per_page(a)
            row[arm] = _part_cycles(p, a) * k / pages
            by = a.get("reclaim_cycles_by_function") or {}
            if p.reclaim and by:
                for who in ("kswapd", "direct"):
                    row[f"{arm}_{who}"] = sum(by.get(who, {}).get(f, 0) for f in p.paths) * k / pages
        rows.append(row)
    out: Dict[str, Any] = {"experiment": BTF, "case": case, "machine": machine, "parts": rows,
                           "baseline_arm": one.get("baseline_name"), "variant_arm": head}
    for arm, a in arms.items():
        k, pages = per_page(a)
        out[f"{arm}_sys_us"] = a["sys_s"] * 1e6 / pages
        out[f"{arm}_pages"] = pages
        out[f"{arm}_kswapd_share"] = a["pgsteal_kswapd"] / pages
    out["published_sys_us"] = published_sys_us
    return out


def _user_stall(a: Arm) -> float:
    cpu = a["counters"]["cpu"]
    return max(0.0, cpu["stall_cycles"] - cpu["sys_mem_cycles"])


def _mem(a: Arm, name: str) -> float:
    return a["sys_mem_cycles_by_function"].get(name, 0)


#: The copy baseline's busy cycles (user and system, every CPU) split into
#: parts: the user loop's issue and its memory stalls, the copies' issue and
#: stalls, the fault path, and the rest of the kernel. They add up to the
#: run's cycles; idle time is beside them, not in them (perf's cycles count
#: no halted cycles).
COPY_PARTS: List[Part] = [
    Part("user loop: issue", "usemem's write loop, instructions at the core's width",
         cycles=lambda a: a["counters"]["cpu"]["user_cycles"] - _user_stall(a)),
    Part("user loop: memory stalls", "its stores waiting for the store queue, fill buffers and lines "
         "(stall_cycles less the kernel's)", cycles=_user_stall),
    Part("copy: issue", "copy_user_huge_page's copy_page (rep movsq), instructions",
         cycles=lambda a: _fn(a, "copy_page") - _mem(a, "copy_page")),
    Part("copy: memory stalls", "copy_page waiting for lines, fill buffers and the super queue",
         cycles=lambda a: _mem(a, "copy_page")),
    Part("fault entry and handler", "the exception entry and exit, do_huge_pmd_wp_page with its page lock "
         "and reuse_swap_page, the allocation", ("exc_page_fault", "handle_mm_fault"),
         ("exception_entry_exit_cycles", "thp_fault_handler_cycles", "page_alloc_cycles")),
    Part("populating clears", "the parent's clear_huge_page before the fork", ("clear_page",)),
    Part("fork", "copy_process / dup_mmap of the 36 children", ("copy_process",)),
    Part("spinning on locks", "the spin of contended spinlocks", ("spin_lock",)),
]


def copy_decomposition(result: Mapping[str, Any]) -> Dict[str, Any]:
    """The copy-target-last baseline's and variant's busy cycles per 4 KiB
    copied, by part (``COPY_PARTS``, then "rest of the kernel"), with the
    IPC of user and kernel code, the idle share and the page lock's sleeps."""
    one = _arms(result, None)
    machine = one["config"]["machine"]
    costs = _preset_costs(machine)
    variants = one.get("variant_order") or list(one.get("variants", {}))
    head = (next((p["arm"] for p in result.get("published") or [] if p.get("case") is None), None)
            or (variants[0] if variants else None))
    arms = {"baseline": one["baseline"]}
    if head:
        arms["variant"] = one["variants"][head]
    named = {f for p in COPY_PARTS for f in p.paths} | {"copy_page"}
    parts = COPY_PARTS + [Part("rest of the kernel", "schedule, the tick, freeing, flushes, system calls",
                               cycles=lambda a: sum(v for k, v in a["sys_cycles_by_function"].items()
                                                    if k not in named))]
    rows = []
    for p in parts:
        row: Dict[str, Any] = {"part": p.name, "kernel": p.kernel, "paths": list(p.paths),
                               "costs": [dict(key=k, **costs[k]) for k in p.costs if k in costs]}
        for arm, a in arms.items():
            row[arm] = _part_cycles(p, a) / a["subpage_copies"]
        rows.append(row)
    out: Dict[str, Any] = {"experiment": "copy-target-last", "case": None, "machine": machine, "parts": rows,
                           "baseline_arm": one.get("baseline_name"), "variant_arm": head}
    for arm, a in arms.items():
        cpu = a["counters"]["cpu"]
        busy = cpu["user_cycles"] + cpu["sys_cycles"]
        idle = a["counters"]["idle"]["idle_cycles"]
        out[arm] = {
            "busy_cycles_per_4k": busy / a["subpage_copies"],
            "user_ipc": cpu["user_instructions"] / cpu["user_cycles"] if cpu["user_cycles"] else None,
            "kernel_ipc": cpu["sys_instructions"] / cpu["sys_cycles"] if cpu["sys_cycles"] else None,
            "ipc": a["ipc"],
            "idle_share": idle / (busy + idle) if busy + idle else 0.0,
            "page_lock_wait_per_4k": a["lock_stat"].get("PG_locked", {}).get("wait_cycles", 0) / a["subpage_copies"],
            "dram_queue_per_4k": a["dram_queue_cycles"] / a["subpage_copies"],
        }
    return out


@dataclass
class Regime:
    """The real run's regime, from the sources the experiment cites."""

    memory_bytes: float
    memory_what: str
    tasks: int
    footprint_bytes: float
    llc_bytes: float
    threads: int
    source: str
    why_departs: str = ""
    #: The timed window the real run measured (s), where a source gives it.
    window_s: Optional[float] = None
    #: Bytes the real run moved through memory at the least (what it wrote,
    #: read or copied once), against which its LLC was filled.
    traffic_bytes: Optional[float] = None
    traffic_what: str = ""
    #: The periodic kernel work inside the real run's window.
    periodic: str = ""


REAL: Dict[tuple, Regime] = {
    ("clear-target-last", None): Regime(
        128 * GiB, "RAM", 72, 889 * MiB, 90 * MiB, 72,
        "the experiment's reference: usemem -n 72 $((mem / nr_task / 2)) on 128 GiB, about 889 MiB per task",
        traffic_bytes=72 * 889 * MiB, traffic_what="written once by the 72 tasks",
        periodic="no reclaim (half the RAM mapped); NUMA balancing as LKP ran it, not stated"),
    ("copy-target-last", None): Regime(
        128 * GiB, "RAM", 36, 1.8 * GiB, 90 * MiB, 72,
        "the experiment's reference: about 1.8 GiB populated and written by each of 36 children on 128 GiB",
        traffic_bytes=2 * 36 * 1.8 * GiB, traffic_what="read and written once by the 36 children's copies",
        periodic="no reclaim; NUMA balancing as LKP ran it, not stated"),
    (BTF, "e5-2699v3-2s"): Regime(
        128 * GiB, "RAM", 72, 10 * 128 * GiB / 72, 90 * MiB, 72,
        "no published run on this machine; the preset's 2-socket box taken with 128 GiB",
        "the simulated RAM ({memory}) is below the LLC ({llc}): struct pages, page-cache nodes and PTE lines "
        "stay cached; a real-regime size needs a few GiB of simulated RAM per node and hours of host time, "
        "not yet run",
        traffic_bytes=10 * 128 * GiB, traffic_what="read once (files 10 x RAM)",
        periodic="kswapd and direct reclaim throughout"),
    (BTF, BTF_4N): Regime(
        64 * GiB, "RAM", 48, 10 * 64 * GiB / 48, 120 * MiB, 48,
        "BASELINES.md: 4-node, 64 GB, 48 CPUs; files 10 x RAM",
        "the simulated RAM ({memory}) is below the LLC ({llc}): struct pages, page-cache nodes and PTE lines "
        "stay cached where the real run streamed 640 GB through 64 GB; a real-regime size needs a few GiB "
        "of simulated RAM per node and hours of host time, not yet run",
        window_s=161.03, traffic_bytes=10 * 64 * GiB, traffic_what="read once (files 10 x RAM)",
        periodic="kswapd and direct reclaim throughout"),
    (BTF, BTF_1S): Regime(
        8 * GiB, "RAM", 12, 10 * 8 * GiB / 12, 15 * MiB, 12,
        "the experiment's reference: Mel Gorman's single-socket 8 GB machine (BASELINES.md does not state "
        "its RAM); files 10 x RAM",
        window_s=27.29, traffic_bytes=10 * 8 * GiB, traffic_what="read once (files 10 x RAM)",
        periodic="kswapd and direct reclaim throughout"),
    (BTF, "milan-7j13"): Regime(
        512 * GiB, "RAM", 256, 10 * 512 * GiB / 256, 512 * MiB, 256,
        "no published run; the 2-socket EPYC 7J13 taken with 512 GiB",
        "the simulated RAM ({memory}) is below the LLC ({llc} in eight 32 MiB instances); no published "
        "baseline to check it against",
        traffic_bytes=10 * 512 * GiB, traffic_what="read once (files 10 x RAM)",
        periodic="kswapd and direct reclaim throughout"),
    ("numa-delay-map", None): Regime(
        128 * GiB, "RAM", 64, 8960 * MiB / 8, 60.5 * MiB, 88,
        "BASELINES.md: 2 x 64 GB, pmbench 8 processes x 8 threads, 8960 MB per process",
        traffic_bytes=(8 * 8960 * MiB + 35.8e9), traffic_what="the working set touched once and 35.8 GB migrated",
        periodic="the NUMA scanner: 1 s delay, then a scan every 1 to 60 s; the eater killed after 10 s"),
    ("multipage-clear", "icx-2m"): Regime(
        64 * GiB, "region", 1, 64 * GiB, 48 * MiB, 1, "BASELINES.md: a 64 GB region on the local node, one CPU",
        window_s=7.317, traffic_bytes=64e9, traffic_what="cleared once", periodic="none"),
    ("multipage-clear", "icx-1g"): Regime(
        64 * GiB, "region", 1, 64 * GiB, 48 * MiB, 1, "BASELINES.md: a 64 GB region on the local node, one CPU",
        window_s=7.122, traffic_bytes=64e9, traffic_what="cleared once", periodic="none"),
    ("multipage-clear", "milan-2m"): Regime(
        64 * GiB, "region", 1, 64 * GiB, 32 * MiB, 1,
        "BASELINES.md: a 64 GB region on the local node, one CPU (the LLC of its CCX, 32 MiB)",
        window_s=5.239, traffic_bytes=64e9, traffic_what="cleared once", periodic="none"),
    ("multipage-clear", "milan-1g"): Regime(
        64 * GiB, "region", 1, 64 * GiB, 32 * MiB, 1,
        "BASELINES.md: a 64 GB region on the local node, one CPU (the LLC of its CCX, 32 MiB)",
        window_s=3.558, traffic_bytes=64e9, traffic_what="cleared once", periodic="none"),
}


#: A cold share above this (and above 10 x the real run's) is noted beside
#: a case in regime: that much of its window fills the caches.
COLD_SHARE_NOTED = 0.05


def _llc_total(m: Mapping[str, Any], one_cpu: bool = False) -> float:
    """The LLC the run's CPUs share: every instance, or one CPU's own."""
    one = m["llc"]["size_kib"] * KiB
    return one if one_cpu else one * m["llc"]["instances_per_socket"] * m["cpu"]["sockets"]


def _threads(m: Mapping[str, Any]) -> int:
    return m["cpu"]["sockets"] * m["cpu"]["cores_per_socket"] * m["cpu"]["threads_per_core"]


def model_regime(config: Mapping[str, Any], m: Mapping[str, Any]) -> Dict[str, Any]:
    """The memory in play and the per-task footprint of a run config."""
    w = config["workload"]
    kind = w["kind"]
    if kind == "usemem":
        tasks = w["nr_task"]
        foot = w["size_per_task"]
        memory, what = tasks * foot, "mapped by the tasks"
    elif kind == "lru-file-mmap-read":
        tasks, memory, what = w["nr_task"], w["ram"], "RAM"
        foot = w["file_size"]
    elif kind == "pmbench":
        tasks = w["nr_processes"]
        memory, what = w["node_memory"] * m["cpu"]["sockets"] * m["memory"]["nodes_per_socket"], "RAM"
        foot = w["mapsize"]
    elif kind == "pf-test":
        tasks, memory, what, foot = 1, w["size"], "region", w["size"]
    else:  # pragma: no cover - the built-in experiments only
        raise ValueError(f"no regime for workload kind {kind}")
    return {"memory_bytes": memory, "memory_what": what, "tasks": tasks, "footprint_bytes": foot}


def model_window(config: Mapping[str, Any], base: Arm, llc: Optional[float]) -> Dict[str, Any]:
    """The baseline arm's timed window against the periodic kernel work in
    it (the NUMA scanner, kswapd) and against its LLC: how many times the
    window's DRAM traffic could fill the LLC, and the share of the traffic
    one fill takes (the cold share: 1 when the LLC never fills once)."""
    window = base.get("timed_span_s") or base.get("elapsed_s") or 0.0
    traffic = float(base.get("dram_bytes_read", 0) + base.get("dram_bytes_written", 0))
    fills = traffic / llc if llc else None
    k = config.get("kernel", {})
    periodic = []
    if k.get("numa_balancing"):
        scan = k.get("numa_scan", {})
        sc = float(scan.get("scale", 1.0))
        delay = scan.get("scan_delay_ms", 1000) * sc / 1000
        lo, hi = scan.get("scan_period_min_ms", 1000) * sc / 1000, scan.get("scan_period_max_ms", 60000) * sc / 1000
        runs = base.get("task_numa_work_runs")
        ran = (f" ({runs:g} scans ran)" if runs is not None
               else " (none in the window: it is shorter than the delay)" if window < delay else "")
        periodic.append(f"the NUMA scanner: {delay:.3g} s delay, then a scan every {lo:.3g} to {hi:.3g} s{ran}")
    scanned = base.get("pgscan_kswapd")
    if scanned:
        periodic.append(f"kswapd scanned {scanned:g} pages, direct reclaim {base.get('pgscan_direct', 0):g}")
    return {"window_s": window, "traffic_bytes": traffic, "llc_fills": fills,
            "cold_share": min(1.0, 1 / fills) if fills else 1.0,
            "periodic": "; ".join(periodic) or "none"}


def _ratio(model: Optional[float], published: float) -> Optional[float]:
    if model is None or not published or not math.isfinite(model):
        return None
    return model / published


def _arms(result: Mapping[str, Any], case: Optional[str]) -> Mapping[str, Any]:
    return result["cases"][case] if case is not None else result


def _ctx(result: Mapping[str, Any], exp: str, case: Optional[str],
         machines: Optional[Mapping[str, Any]] = None) -> Ctx:
    """Case `case` of `result`: its config, its machine (from the case's
    provenance, else from `machines`), its scale and real-RAM factor."""
    one = _arms(result, case)
    config = one["config"]
    name = config["machine"]
    scale = float(config["kernel"]["numa_scan"]["scale"])
    real = REAL.get((exp, case))
    ratio = None
    if real is not None and config["workload"]["kind"] == "lru-file-mmap-read":
        ratio = real.memory_bytes / config["workload"]["ram"]
    prov = one.get("provenance") or {}
    machine = (prov.get("machines") or {}).get(name) or (machines or {}).get(name, {})
    return Ctx(config, machine, scale, ratio, result)


def regime(result: Mapping[str, Any], exp: str, case: Optional[str],
           machines: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The regime of one case of a compare result beside the real run's
    (``REAL``): the memory in play and the per-task footprint against the
    LLC, whether both lie on the same side of it, and the departure."""
    one = _arms(result, case)
    c = _ctx(result, exp, case, machines)
    m = c.machine
    mr = model_regime(one["config"], m)
    one_cpu = mr["tasks"] == 1
    llc = _llc_total(m, one_cpu) if m else None
    threads = (1 if one_cpu else _threads(m)) if m else None
    reg: Dict[str, Any] = {
        "experiment": exp, "case": case, "scale": c.scale, "machine": one["config"]["machine"],
        "model": {**mr, "llc_bytes": llc, "threads": threads,
                  "memory_over_llc": mr["memory_bytes"] / llc if llc else None,
                  "footprint_over_llc_per_thread": mr["footprint_bytes"] / (llc / threads)
                  if llc and threads else None,
                  **model_window(one["config"], one["baseline"], llc)},
    }
    real = REAL.get((exp, case))
    if real is not None:
        reg["real"] = {"memory_bytes": real.memory_bytes, "memory_what": real.memory_what,
                       "tasks": real.tasks, "footprint_bytes": real.footprint_bytes,
                       "llc_bytes": real.llc_bytes, "threads": real.threads,
                       "memory_over_llc": real.memory_bytes / real.llc_bytes,
                       "footprint_over_llc_per_thread": real.footprint_bytes / (real.llc_bytes / real.threads),
                       "source": real.source, "window_s": real.window_s,
                       "traffic_bytes": real.traffic_bytes, "traffic_what": real.traffic_what,
                       "llc_fills": real.traffic_bytes / real.llc_bytes if real.traffic_bytes else None,
                       "cold_share": min(1.0, real.llc_bytes / real.traffic_bytes) if real.traffic_bytes else None,
                       "periodic": real.periodic or "not stated"}
        model_side = reg["model"]["memory_over_llc"]
        reg["in_regime"] = bool(model_side is not None
                                and (model_side >= 1) == (reg["real"]["memory_over_llc"] >= 1))
        reg["departure"] = real.why_departs.format(memory=_bytes(mr["memory_bytes"]), llc=_bytes(llc or 0)) or None
        mw, rc = reg["model"], reg["real"]["cold_share"]
        if reg["in_regime"] and rc is not None and mw["cold_share"] > max(COLD_SHARE_NOTED, 10 * rc):
            cold = (f"the timed window's traffic fills the LLC {mw['llc_fills']:.3g} times (cold share "
                    f"{mw['cold_share']:.2g}) where the real run's filled it {reg['real']['llc_fills']:.3g} "
                    f"times ({rc:.2g}): part of the window is the caches' warm-up")
            reg["departure"] = f"{reg['departure']}; {cold}" if reg["departure"] else cold
        if not reg["in_regime"] and not real.why_departs:
            what = {"RAM": "the simulated RAM", "region": "the faulted region"}.get(
                mr["memory_what"], f"the memory {mr['memory_what']}")
            reg["departure"] = (f"{what} ({_bytes(mr['memory_bytes'])}) is "
                                f"{model_side:.2g} x the LLC ({_bytes(llc or 0)}), where the real run's was "
                                f"{reg['real']['memory_over_llc']:.3g} x its LLC: they lie on different sides of it")
    return reg


def regime_notes(result: Mapping[str, Any]) -> List[str]:
    """One line per case of a built-in experiment's compare result whose
    run lies outside the real run's regime, naming the departure."""
    exp = result.get("experiment")
    if not any(k[0] == exp for k in REAL):
        return []
    machines = (result.get("provenance") or {}).get("machines") or {}
    out = []
    for case in result.get("case_order") or [None]:
        try:
            g = regime(result, exp, case, machines)
        except (KeyError, TypeError, ZeroDivisionError):
            continue
        if g.get("real") and not g.get("in_regime"):
            where = f"{exp}, case {case}" if case else exp
            out.append(f"regime: {where}: {g['departure']}")
    return out


def ledger(results: Mapping[str, Mapping[str, Any]], fingerprint_of: Optional[Mapping[str, str]] = None
           ) -> Dict[str, Any]:
    """The ledger of `results` (experiment name -> its `vmsim compare`
    result at the default scale): figures, terms, regimes and predictions."""
    machines: Dict[str, Any] = {}
    for r in results.values():
        machines.update((r.get("provenance") or {}).get("machines") or {})

    def ctx(exp: str, case: Optional[str]) -> Ctx:
        return _ctx(results[exp], exp, case, machines)

    rows = []
    for f in FIGURES:
        row: Dict[str, Any] = {"experiment": f.experiment, "case": f.case, "figure": f.name, "unit": f.unit,
                               "published": f.published, "source": f.source, "class": f.klass}
        if f.model is None:
            row.update(model=None, ratio=None, how=None, why_none=f.why_none or MODELLESS_NOTE)
        else:
            one = _arms(results[f.experiment], f.case)
            v = float(f.model(one["baseline"], ctx(f.experiment, f.case)))
            row.update(model=v, ratio=_ratio(v, f.published), how=f.how, why_none=None)
        rows.append(row)

    terms = []
    predictions = []
    regimes = []
    for exp in EXPERIMENTS:
        r = results[exp]
        cases = r.get("case_order") or [None]
        published = r.get("published") or []
        for case in cases:
            one = _arms(r, case)
            c = ctx(exp, case)
            variants = one.get("variant_order") or list(one.get("variants", {}))
            head = next((p["arm"] for p in published if p.get("case") == case), None) or (variants[0] if variants else None)
            base = one["baseline"]
            var = one["variants"][head] if head else None
            for t in TERMS[exp]:
                b = float(t.value(base, c))
                v = float(t.value(var, c)) if var is not None else None
                terms.append({"experiment": exp, "case": case, "term": t.name, "unit": t.unit, "how": t.how,
                              "baseline_arm": one.get("baseline_name"), "variant_arm": head,
                              "baseline": b, "variant": v,
                              "change_percent": (v / b - 1) * 100 if v is not None and b else None})
            for p in published:
                if p.get("case") != case:
                    continue
                b = base[p["metric"]]
                v = one["variants"][p["arm"]][p["metric"]]
                predictions.append({"experiment": exp, "case": case, "metric": p["metric"], "arm": p["arm"],
                                    "model_percent": (v / b - 1) * 100 if b else None,
                                    "published_percent": p["change_percent"], "source": p["source"]})
            reg = regime(r, exp, case, machines)
            regimes.append(reg)

    worst: Dict[str, Dict[str, Any]] = {}
    for row in rows:
        if row["class"] != "check" or row["ratio"] is None:
            continue
        key = f"{row['experiment']}/{row['case'] or ''}"
        off = max(row["ratio"], 1 / row["ratio"]) if row["ratio"] > 0 else math.inf
        if key not in worst or off > worst[key]["off"]:
            worst[key] = {"off": off, "ratio": row["ratio"], "figure": row["figure"]}
    published_sys = {f.case: f.published for f in FIGURES if f.experiment == BTF and f.name == "system time per page"}
    decomposition = [reclaim_decomposition(results[BTF], case, published_sys.get(case))
                     for case in (results[BTF].get("case_order") or [None])
                     if "reclaim_cycles_by_function" in _arms(results[BTF], case)["baseline"]]
    decomposition.append(copy_decomposition(results["copy-target-last"]))
    return {"figures": rows, "terms": terms, "predictions": predictions, "regimes": regimes,
            "decomposition": decomposition, "worst": worst, "fingerprint": dict(fingerprint_of or {})}


# ---------------------------------------------------------------------------
# The fingerprint: a few short runs whose metrics change with the model.

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: Each built-in experiment's own fingerprint run: its baseline arm in
#: miniature, with the experiment's kernel. A screening of the experiment
#: is current while that run's outcomes are (sensitivity.current).
FINGERPRINT_OF = {
    "clear-target-last": "bench/ledger/clear.toml",
    "copy-target-last": "bench/ledger/copy.toml",
    "numa-delay-map": "bench/ledger/numa.toml",
    "batched-tlb-flush": "bench/ledger/reclaim.toml",
    "multipage-clear": "bench/ledger/pftest-milan.toml",
}
FINGERPRINT_CONFIGS = ("bench/prof/clear.toml", "bench/prof/copy.toml", "bench/prof/pmbench.toml",
                       *FINGERPRINT_OF.values())


# The outcomes the fingerprint hashes: what the model decides (times, work,
# traffic, events), not how a report breaks them down, so that a metric
# added or an attribution refined leaves the fingerprint, and the
# screenings made with it, as they were.
FINGERPRINT_METRICS = (
    "elapsed_s", "user_s", "sys_s", "cycles", "instructions", "stall_cycles", "simulated_line_accesses",
    "l1d_loads", "l1d_stores", "l1d_misses", "l2_misses", "llc_references", "llc_misses", "dram_bytes_read",
    "dram_bytes_written", "dram_queue_cycles", "tlb_walks", "pgfault", "pgalloc", "pgfree", "pgsteal_kswapd",
    "pgsteal_direct", "ipis_sent", "context_switches", "data_verified", "data_errors",
)


def _digest(metrics: Mapping[str, Any]) -> str:
    picked = {k: metrics.get(k) for k in FINGERPRINT_METRICS}
    text = json.dumps(picked, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def fingerprint(root: pathlib.Path = ROOT) -> Dict[str, str]:
    """Config path -> a hash of its run's outcomes (``FINGERPRINT_METRICS``),
    run without the cache."""
    from ._api import run

    out = {}
    for rel in FINGERPRINT_CONFIGS:
        r = run(os.fspath(root / rel), cache=False)
        out[rel] = _digest(r["metrics"])
    return out


# ---------------------------------------------------------------------------
# Text.

def _num(x: Optional[float]) -> str:
    if x is None:
        return "-"
    a = abs(x)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def _bytes(b: float) -> str:
    if b >= GiB:
        return f"{b / GiB:.3g} GiB"
    return f"{b / MiB:.3g} MiB"


def format_markdown(led: Mapping[str, Any]) -> str:
    """The ledger as markdown tables (docs/validation.md carries them)."""
    out = ["### Baseline figures", "",
           "| experiment | case | figure | unit | published | model | model / published | class |",
           "|---|---|---|---|---|---|---|---|"]
    for r in led["figures"]:
        model = _num(r["model"]) if r["model"] is not None else "none (below)"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        out.append(f"| {r['experiment']} | {r['case'] or ''} | {r['figure']} | {r['unit']} | "
                   f"{_num(r['published'])} | {model} | {ratio} | {r['class']} |")
    out += ["", "How each model figure is computed, and the published figure's source:", ""]
    seen = set()
    for r in led["figures"]:
        key = (r["experiment"], r["figure"])
        if key in seen:
            continue
        seen.add(key)
        how = r["how"] or r["why_none"]
        out.append(f"- {r['experiment']}, {r['figure']}: {how}. Published: {r['source']}.")
    out += ["", "### The changes in terms", "",
            "| experiment | case | term | unit | baseline | variant | change |",
            "|---|---|---|---|---|---|---|"]
    for t in led["terms"]:
        ch = f"{t['change_percent']:+.1f}%" if t["change_percent"] is not None else "-"
        out.append(f"| {t['experiment']} | {t['case'] or ''} | {t['term']} | {t['unit']} | "
                   f"{_num(t['baseline'])} ({t['baseline_arm']}) | {_num(t['variant'])} ({t['variant_arm']}) | {ch} |")
    out += _format_decomposition(led.get("decomposition") or [])
    out += ["", "### Regimes", "",
            "| experiment | case | scale | model: memory / LLC | real: memory / LLC | model: footprint / LLC per thread "
            "| real: footprint / LLC per thread | in regime |",
            "|---|---|---|---|---|---|---|---|"]
    for g in led["regimes"]:
        m, r = g["model"], g.get("real")
        mm = f"{_bytes(m['memory_bytes'])} {m['memory_what']} / {_bytes(m['llc_bytes'])} = {m['memory_over_llc']:.3g}"
        rr = (f"{_bytes(r['memory_bytes'])} {r['memory_what']} / {_bytes(r['llc_bytes'])} = {r['memory_over_llc']:.3g}"
              if r else "-")
        mf = f"{m['footprint_over_llc_per_thread']:.3g}"
        rf = f"{r['footprint_over_llc_per_thread']:.3g}" if r else "-"
        inr = "yes" if g.get("in_regime") else f"no: {g.get('departure')}"
        if g.get("in_regime") and g.get("departure"):
            inr = f"yes; {g['departure']}"
        out.append(f"| {g['experiment']} | {g['case'] or ''} | {g['scale']:g} | {mm} | {rr} | {mf} | {rf} | {inr} |")
    out += ["", "The timed window of each baseline arm: its length, the periodic kernel work in it, and its memory "
            "traffic in LLC fills (DRAM bytes read and written over the LLC; for the real run, the bytes it "
            "moved at the least). The cold share is the part of the traffic one fill of the LLC takes: near 1, "
            "the window is mostly the caches' warm-up; near 0, the steady state.", "",
            "| experiment | case | window: model / real | periodic work: model | periodic work: real "
            "| LLC fills (cold share): model | LLC fills (cold share): real |",
            "|---|---|---|---|---|---|---|"]
    for g in led["regimes"]:
        m, r = g["model"], g.get("real") or {}
        rw = f"{r['window_s']:.4g} s" if r.get("window_s") else "not stated"
        mfill = f"{m['llc_fills']:.3g} ({m['cold_share']:.2g})" if m.get("llc_fills") is not None else "-"
        rfill = (f"{r['llc_fills']:.3g} ({r['cold_share']:.2g}; {_bytes(r['traffic_bytes'])} {r['traffic_what']})"
                 if r.get("llc_fills") is not None else "-")
        out.append(f"| {g['experiment']} | {g['case'] or ''} | {m['window_s']:.4g} s / {rw} | {m['periodic']} "
                   f"| {r.get('periodic', '-')} | {mfill} | {rfill} |")
    return "\n".join(out) + "\n"


def _format_decomposition(decomp: Sequence[Mapping[str, Any]]) -> List[str]:
    """Reclaim's system time per reclaimed page by part, per case."""
    out: List[str] = []
    for d in decomp:
        if d["experiment"] == "copy-target-last":
            out += _format_copy(d)
            continue
        pub = (f"; published {_num(d['published_sys_us'])} us, model / published "
               f"{d['baseline_sys_us'] / d['published_sys_us']:.2f}" if d.get("published_sys_us") else "")
        out += ["", f"### {d['experiment']} {d['case'] or ''}: system time per reclaimed page", "",
                f"Baseline ({d['baseline_arm']}): {_num(d['baseline_sys_us'])} us per reclaimed page{pub}; "
                f"{100 * d['baseline_kswapd_share']:.0f}% of pages reclaimed by kswapd. Variant "
                f"({d['variant_arm']}): {_num(d.get('variant_sys_us'))} us. Each part's kswapd and direct-reclaim "
                "shares are given where the part is reclaim's own (the flush's IPI cycles are counted per CPU, "
                "not per reclaimer). The preset costs that set a part's fixed cycles follow it, with their "
                "class (docs/machines.md, \"Provenance\").", "",
                "| part | in 4.2 | baseline, us | kswapd / direct | variant, us | share of baseline | preset costs |",
                "|---|---|---|---|---|---|---|"]
        for r in d["parts"]:
            split = (f"{_num(r['baseline_kswapd'])} / {_num(r['baseline_direct'])}"
                     if "baseline_kswapd" in r else "-")
            share = f"{100 * r['baseline'] / d['baseline_sys_us']:.1f}%" if d["baseline_sys_us"] else "-"
            costs = ", ".join(f"`{c['key']}` {c['value']} ({c['class']})" for c in r["costs"]) or "-"
            out.append(f"| {r['part']} | {r['kernel']} | {_num(r['baseline'])} | {split} | "
                       f"{_num(r.get('variant'))} | {share} | {costs} |")
    return out


def _format_copy(d: Mapping[str, Any]) -> List[str]:
    b, v = d["baseline"], d.get("variant") or {}

    def ipcs(x: Mapping[str, Any]) -> str:
        return (f"IPC {_num(x['ipc'])} (user {_num(x['user_ipc'])}, kernel {_num(x['kernel_ipc'])}), "
                f"{_num(x['busy_cycles_per_4k'])} busy cycles per 4 KiB copied, idle {100 * x['idle_share']:.0f}% "
                f"of CPU time, page-lock sleeps {_num(x['page_lock_wait_per_4k'])} and DRAM queueing "
                f"{_num(x['dram_queue_per_4k'])} cycles per 4 KiB (each summed over the waits, which overlap)")
    out = ["", "### copy-target-last: the baseline's cycles", "",
           f"Baseline ({d['baseline_arm']}): {ipcs(b)}. Variant ({d['variant_arm']}): {ipcs(v) if v else '-'}. "
           "The parts add up to the busy cycles (user and system, every CPU; perf's cycles count no halted "
           "ones); idle time, the page lock's sleeps and DRAM queueing are beside them (the last is inside the "
           "memory stalls).", "",
           "| part | what | baseline, cycles per 4 KiB | variant | share of baseline | preset costs |",
           "|---|---|---|---|---|---|"]
    for r in d["parts"]:
        share = f"{100 * r['baseline'] / b['busy_cycles_per_4k']:.1f}%" if b["busy_cycles_per_4k"] else "-"
        costs = ", ".join(f"`{c['key']}` {c['value']} ({c['class']})" for c in r["costs"]) or "-"
        out.append(f"| {r['part']} | {r['kernel']} | {_num(r['baseline'])} | {_num(r.get('variant'))} | {share} "
                   f"| {costs} |")
    return out


def trust_rows(led: Mapping[str, Any]) -> List[Dict[str, str]]:
    """README's trust table: one row per experiment and case with a
    published change: the prediction, the published change, the baseline's
    worst check ratio (model / published), and how far the preset values
    no source settles move the prediction (docs/sensitivity/)."""
    from .sensitivity import load_screenings, spread

    screenings = load_screenings()
    rows = []
    for p in led["predictions"]:
        key = f"{p['experiment']}/{p['case'] or ''}"
        w = led["worst"].get(key)
        rows.append({
            "experiment": p["experiment"], "case": p["case"] or "", "metric": p["metric"],
            "model": f"{p['model_percent']:+.1f}%", "published": f"{p['published_percent']:+.1f}%",
            "worst": f"{w['ratio']:.2f}x ({w['figure']})" if w else "no baseline figure",
            "spread": spread(screenings, p["experiment"], p["case"], p["arm"], p["metric"],
                             led.get("fingerprint")) or "not screened yet",
        })
    return rows


def format_trust(led: Mapping[str, Any], measured: str) -> str:
    out = ["| experiment | case | metric | model | published | baseline's worst figure, model / published "
           "| moved by unsourced values |",
           "|---|---|---|---|---|---|---|"]
    for r in trust_rows(led):
        e = r["experiment"]
        out.append(f"| [`{e}`](docs/experiments/{e}.md) | {r['case']} | {r['metric']} | {r['model']} | "
                   f"{r['published']} | {r['worst']} | {r['spread']} |")
    out.append("")
    out.append(f"Measured {measured}, seed 0, each experiment at its default scale (docs/validation.md, "
               "\"The ledger\"). The last column: the lowest and highest the prediction reaches, in points from "
               "its value, when each preset value that no source settles is set to either end of its plausible "
               "range, one at a time, at the experiment's quick scale ([docs/sensitivity.md](docs/sensitivity.md)).")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# Making it.

def run_experiments(threads: Optional[int] = None, progress: Optional[Callable[[str], None]] = None
                    ) -> Dict[str, Dict[str, Any]]:
    """Each built-in experiment at its default scale, seed 0 (the result
    cache serves what it holds)."""
    from ._api import compare

    out = {}
    for exp in EXPERIMENTS:
        if progress:
            progress(exp)
        out[exp] = compare(exp, threads=threads) if threads else compare(exp)
    return out


def load_results(folder: os.PathLike) -> Dict[str, Dict[str, Any]]:
    """`vmsim compare --json` results saved as FOLDER/<experiment>.json."""
    d = pathlib.Path(folder)
    return {exp: json.loads((d / f"{exp}.json").read_text()) for exp in EXPERIMENTS}


def results_date(folder: os.PathLike) -> str:
    """The UTC date of the newest of FOLDER's results (their files' times):
    the day the ledger's figures were measured."""
    import datetime

    d = pathlib.Path(folder)
    newest = max((d / f"{exp}.json").stat().st_mtime for exp in EXPERIMENTS)
    return datetime.datetime.fromtimestamp(newest, datetime.timezone.utc).strftime("%Y-%m-%d")


LEDGER_JSON = ROOT / "docs" / "ledger.json"
MARKS = {"docs/validation.md": ("<!-- ledger -->", "<!-- /ledger -->"),
         "README.md": ("<!-- trust -->", "<!-- /trust -->")}


def _between(text: str, marks: Sequence[str], body: str, where: str) -> str:
    a, b = marks
    i, j = text.find(a), text.find(b)
    if i < 0 or j < i:
        raise ValueError(f"{where}: no {a} ... {b} section to write the ledger into")
    return text[:i + len(a)] + "\n" + body + text[j:]


def section(text: str, marks: Sequence[str]) -> str:
    """What stands between a pair of marks."""
    a, b = marks
    i, j = text.find(a), text.find(b)
    return text[i + len(a):j].strip("\n") + "\n" if 0 <= i < j else ""


def documents(led: Mapping[str, Any]) -> Dict[str, str]:
    """Each document's ledger section, from a ledger with its date."""
    return {"docs/validation.md": format_markdown(led), "README.md": format_trust(led, led["measured"])}


def write_docs(led: Dict[str, Any], root: pathlib.Path = ROOT, measured: Optional[str] = None) -> None:
    """docs/ledger.json, and the ledger's sections of docs/validation.md and
    README.md; ``measured`` is the results' date (default today's)."""
    import datetime

    led["measured"] = measured or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    (root / "docs" / "ledger.json").write_text(json.dumps(led, indent=1, sort_keys=True) + "\n")
    for rel, body in documents(led).items():
        p = root / rel
        p.write_text(_between(p.read_text(), MARKS[rel], body, rel))
    from .sensitivity import write_page

    write_page(led.get("fingerprint"), root)
