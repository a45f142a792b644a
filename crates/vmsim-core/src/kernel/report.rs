//! The kernel's counters as a run's report gives them: each subsystem's
//! group by its owner's name (`counters.vmstat`, `.filemap`, `.reclaim`,
//! `.lock_stat`), reclaim's cycles by path and reclaimer, kswapd's
//! wake-ups and NUMA balancing's counters. The
//! engine asks for them here instead of reading the subsystems' state.

use super::{KFn, Kernel};
use crate::stats::Counters;
use serde_json::{json, Value};

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

    /// Reclaim's `shrink_node` cycles by path (non-zero ones), direct
    /// reclaim's and kswapd's; None where reclaim never ran.
    pub fn reclaim_cycles_by_function(&self) -> Option<Value> {
        let rs = &self.reclaim.stat;
        if rs.pgscan_kswapd + rs.pgscan_direct + rs.pgrefill == 0 {
            return None;
        }
        let by = |i: usize| -> Value {
            let c = &self.reclaim.cycles_by_fn[i];
            Value::Object(
                KFn::ALL
                    .iter()
                    .filter(|f| c[**f as usize] > 0)
                    .map(|f| (f.name().to_string(), json!(c[*f as usize])))
                    .collect(),
            )
        };
        Some(json!({"direct": by(0), "kswapd": by(1)}))
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
