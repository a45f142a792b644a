//! The kernel's counters as a run's report gives them: each subsystem's
//! group by its owner's name (`counters.vmstat`, `.filemap`, `.reclaim`,
//! `.lock_stat`), kswapd's wake-ups and NUMA balancing's counters. The
//! engine asks for them here instead of reading the subsystems' state.

use super::Kernel;
use crate::stats::Counters;
use serde_json::Value;

impl Kernel {
    /// The kernel's groups of `counters`, by name.
    pub fn counter_groups(&self) -> [(&'static str, Value); 4] {
        [
            ("vmstat", Counters::of(&self.vmstat).0),
            ("filemap", Counters::of(&self.pagecache.stat).0),
            ("reclaim", Counters::of(&self.reclaim.stat).0),
            ("lock_stat", self.locks.stats.to_json()),
        ]
    }

    /// Wake-ups of a sleeping kswapd, every node.
    pub fn nr_kswapd_wakeups(&self) -> u64 {
        self.mem.pgdat.iter().map(|p| p.nr_kswapd_wakeups).sum()
    }

    /// NUMA balancing's scanner, hinting-fault and migration counters so
    /// far, by their report names (/proc/vmstat's where it has them).
    pub fn numa_balancing_counters(&self) -> [(&'static str, u64); 12] {
        let v = &self.vmstat;
        let n = &self.numa.stat;
        [
            ("numa_pte_updates", v.numa_pte_updates),
            ("numa_huge_pte_updates", v.numa_huge_pte_updates),
            ("numa_hint_faults", v.numa_hint_faults),
            ("numa_hint_faults_local", v.numa_hint_faults_local),
            ("numa_pages_migrated", n.numa_pages_migrated),
            ("pgmigrate_success", n.pgmigrate_success),
            ("pgmigrate_fail", n.pgmigrate_fail),
            ("numa_isolate_fail", n.numa_isolate_fail),
            ("numa_migrate_node_full", n.numa_migrate_node_full),
            ("migration_entry_waits", n.migration_entry_waits),
            ("migrate_unmap_flushes", n.migrate_unmap_flushes),
            ("task_numa_work_runs", n.task_numa_work_runs),
        ]
    }
}
