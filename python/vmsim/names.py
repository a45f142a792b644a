"""LKP's namespaced metric names (``--names lkp``).

The kernel test robot's reports (LKP, lkp-tests) name each figure by the
monitor or test that produced it: ``vm-scalability.throughput``,
``vm-scalability.time.system_time``, ``pmbench.throughput.aps``,
``perf-stat.overall.ipc``, ``proc-vmstat.pgfault``,
``interrupts.TLB:TLB_shootdowns``. A vmsim metric is given LKP's name only
where it counts the same quantity over the same run; the value is still
shown in vmsim's units (GB/s, s), which the tables print beside it. Counts
LKP reports only per second or per sampling interval (``perf-stat.ps.*``,
``perf-stat.i.*``: cycles, instructions, cache references and misses) keep
their vmsim names. docs/metrics.md has the table.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional

#: The LKP suite of each workload kind (``tables.workload_kind``): usemem
#: and lru-file-mmap-read are vm-scalability's cases; pf-test, programs of
#: one's own and trace replays are no LKP suite's.
SUITE_OF_KIND: Dict[str, Optional[str]] = {
    "usemem": "vm-scalability",
    "lru-file-mmap-read": "vm-scalability",
    "pmbench": "pmbench",
    "will-it-scale": "will-it-scale",
    "pf-test": None,
    "program": None,
    "trace": None,
}

#: Names that belong to one suite's report: given only in that suite.
ONLY_IN_SUITE: Dict[str, str] = {
    "throughput_bytes_per_s": "vm-scalability",
    "pmbench_throughput_aps": "pmbench",
    "will_it_scale_workload": "will-it-scale",
    "will_it_scale_per_process_ops": "will-it-scale",
    "will_it_scale_per_thread_ops": "will-it-scale",
}

#: vmsim metric -> LKP name; ``{suite}`` is the workload's suite (the
#: metric keeps its vmsim name where the workload has none).
LKP_NAMES: Dict[str, str] = {
    # The benchmark's own figure, and /usr/bin/time of its run.
    "throughput_bytes_per_s": "vm-scalability.throughput",
    "pmbench_throughput_aps": "pmbench.throughput.aps",
    # will-it-scale's rate per task (named by the run's mode, as LKP does)
    # and of all tasks.
    "will_it_scale_per_process_ops": "will-it-scale.per_process_ops",
    "will_it_scale_per_thread_ops": "will-it-scale.per_thread_ops",
    "will_it_scale_workload": "will-it-scale.workload",
    "elapsed_s": "{suite}.time.elapsed_time",
    "user_s": "{suite}.time.user_time",
    "sys_s": "{suite}.time.system_time",
    # perf stat over the whole run.
    "ipc": "perf-stat.overall.ipc",
    # /proc/vmstat deltas over the run.
    "pgfault": "proc-vmstat.pgfault",
    "pgfree": "proc-vmstat.pgfree",
    "pgmajfault": "proc-vmstat.pgmajfault",
    "thp_fault_alloc": "proc-vmstat.thp_fault_alloc",
    "thp_fault_fallback": "proc-vmstat.thp_fault_fallback",
    "thp_split_pmd": "proc-vmstat.thp_split_pmd",
    "nr_tlb_remote_flush": "proc-vmstat.nr_tlb_remote_flush",
    "nr_tlb_remote_flush_received": "proc-vmstat.nr_tlb_remote_flush_received",
    "nr_tlb_local_flush_all": "proc-vmstat.nr_tlb_local_flush_all",
    "numa_pte_updates": "proc-vmstat.numa_pte_updates",
    "numa_huge_pte_updates": "proc-vmstat.numa_huge_pte_updates",
    "numa_hint_faults": "proc-vmstat.numa_hint_faults",
    "numa_hint_faults_local": "proc-vmstat.numa_hint_faults_local",
    "numa_pages_migrated": "proc-vmstat.numa_pages_migrated",
    "pgmigrate_success": "proc-vmstat.pgmigrate_success",
    "pgmigrate_fail": "proc-vmstat.pgmigrate_fail",
    "pgscan_kswapd": "proc-vmstat.pgscan_kswapd",
    "pgsteal_kswapd": "proc-vmstat.pgsteal_kswapd",
    "pgscan_direct": "proc-vmstat.pgscan_direct",
    "pgsteal_direct": "proc-vmstat.pgsteal_direct",
    "pgactivate": "proc-vmstat.pgactivate",
    "pgdeactivate": "proc-vmstat.pgdeactivate",
    "pgrefill": "proc-vmstat.pgrefill",
    "workingset_refault_file": "proc-vmstat.workingset_refault_file",
    # /proc/interrupts summed over CPUs.
    # (pmbench's tlb_shootdown_interrupts counts the same IPIs and keeps its
    # name, so that no two rows share one.)
    "ipis_tlb_shootdown": "interrupts.TLB:TLB_shootdowns",
    "ipis_reschedule": "interrupts.RES:Rescheduling_interrupts",
}

NAME_STYLES = ("vmsim", "lkp")


def suite_of(*metric_sets: Mapping[str, Any]) -> Optional[str]:
    """The LKP suite of the workload that reported ``metric_sets``, or None."""
    from .tables import workload_kind

    return SUITE_OF_KIND[workload_kind(*metric_sets)]


def lkp_name(metric: str, suite: Optional[str]) -> str:
    """LKP's name for ``metric`` in a report of ``suite``, or the metric's
    own name where LKP has none for the same quantity."""
    name = LKP_NAMES.get(metric)
    if name is None or ("{suite}" in name and suite is None):
        return metric
    if metric in ONLY_IN_SUITE and ONLY_IN_SUITE[metric] != suite:
        return metric
    return name.format(suite=suite)


def namer(style: Optional[str], *metric_sets: Mapping[str, Any]) -> Optional[Callable[[str], str]]:
    """A function naming metrics in ``style`` ("vmsim": None, the names as
    they are; "lkp": LKP's names for the workload of ``metric_sets``)."""
    if style in (None, "vmsim"):
        return None
    if style != "lkp":
        raise ValueError(f"names: {style!r} is not one of {', '.join(NAME_STYLES)}")
    suite = suite_of(*metric_sets)
    return lambda metric: lkp_name(metric, suite)
