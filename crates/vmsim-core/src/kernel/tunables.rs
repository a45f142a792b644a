//! The kernel's own numbers that versions, boot parameters and sysctls
//! change: the per-CPU page lists' batch and high mark, the LRU-add batch,
//! reclaim's batch, the watermark scale factor, the TLB flush ceiling and
//! the NUMA scanner's delay, periods and size.
//!
//! Each is declared once, below: its `[kernel]` key (the field's name),
//! unit, the range the model accepts, the model's default, and each
//! modelled kernel version's default with its source. The run config's
//! reader, its range check, docs/config.md's table (a test compares it)
//! and `--set kernel.KEY=V` all come from this list, so a new constant is
//! one entry here and the model code that reads it.

use serde::Serialize;

/// One tunable as declared.
#[derive(Debug)]
pub struct Tunable {
    pub key: &'static str,
    pub unit: &'static str,
    /// The values the model accepts, inclusive.
    pub low: u64,
    pub high: u64,
    pub default: u64,
    pub doc: &'static str,
    /// `(kernel versions, their default, the source)`, oldest first.
    pub versions: &'static [(&'static str, u64, &'static str)],
}

macro_rules! kernel_tunables {
    ($($(#[doc = $doc:literal])* $name:ident: $unit:literal, $low:literal..=$high:literal,
       default $default:literal, [$(($ver:literal, $val:literal, $src:literal)),* $(,)?];)*) => {
        /// The tunables as a run uses them.
        #[derive(Clone, Debug, PartialEq, Eq, Serialize)]
        pub struct KernelTunables {
            $($(#[doc = $doc])* pub $name: u64,)*
        }

        impl Default for KernelTunables {
            fn default() -> KernelTunables {
                KernelTunables { $($name: $default,)* }
            }
        }

        impl KernelTunables {
            /// Every tunable, in declaration order.
            pub const ALL: &'static [Tunable] = &[$(Tunable {
                key: stringify!($name),
                unit: $unit,
                low: $low,
                high: $high,
                default: $default,
                doc: concat!($($doc, " "),*),
                versions: &[$(($ver, $val, $src)),*],
            }),*];

            /// The tunables, each read by `value` from its key (None: the
            /// default), in `ALL`'s order.
            pub fn read<E>(
                mut value: impl FnMut(&'static Tunable) -> Result<Option<u64>, E>,
            ) -> Result<KernelTunables, E> {
                let mut t = KernelTunables::default();
                let mut all = Self::ALL.iter();
                $(if let Some(v) = value(all.next().expect("declared"))? {
                    t.$name = v;
                })*
                Ok(t)
            }

            /// The value of `key`.
            pub fn get(&self, key: &str) -> Option<u64> {
                match key {
                    $(stringify!($name) => Some(self.$name),)*
                    _ => None,
                }
            }
        }
    };
}

kernel_tunables! {
    /// `pcp->batch`: pages the per-CPU free list takes from the buddy lists
    /// under `zone->lock` when empty, and gives back when above `high`. The
    /// model keeps the full-size machine's value at every scale.
    pcp_batch: "pages", 1..=4096, default 31, [
        ("2.6.x-5.13", 31, "mm/page_alloc.c zone_batchsize(): managed pages / 1024 capped at 512 KiB of pages (128), / 4 = 32, rounddown_pow_of_two(32 + 16) - 1 = 31 for any zone of 512 MiB or more"),
    ];
    /// `pcp->high`: the per-CPU free list's length at which a batch goes
    /// back to the buddy lists.
    pcp_high: "pages", 1..=1048576, default 186, [
        ("2.6.x-5.13", 186, "mm/page_alloc.c pageset_set_batch(): high = 6 x batch (percpu_pagelist_fraction unset)"),
    ];
    /// `PAGEVEC_SIZE`: pages `lru_cache_add()` gathers per CPU before it
    /// takes the LRU lock to add them all.
    pagevec_size: "pages", 1..=255, default 14, [
        ("2.6.x-4.15", 14, "include/linux/pagevec.h: PAGEVEC_SIZE 14, '14 pointers + two long's align the pagevec structure to a power of two'"),
        ("4.16+", 15, "M. Wilcox, 'mm: get 7% more pages in a pagevec' (linux-mm, 2017-12-06; in the 4.16 merge window's shortlog): PAGEVEC_SIZE 15, '15 pointers + header align the pagevec structure to a power of two'"),
    ];
    /// `SWAP_CLUSTER_MAX`: pages reclaim isolates from an LRU list per
    /// `shrink_*_list` call.
    swap_cluster_max: "pages", 1..=4096, default 32, [
        ("2.6.x+", 32, "include/linux/swap.h: #define SWAP_CLUSTER_MAX 32UL"),
    ];
    /// `vm.watermark_scale_factor`, in 1/10000 of a zone: the gap between
    /// the min, low and high watermarks is the larger of min / 4 and this
    /// share of the zone (0: min / 4 alone, as before the sysctl).
    watermark_scale_factor: "1/10000 of the zone", 0..=3000, default 10, [
        ("2.6.x-4.5", 0, "mm/page_alloc.c __setup_per_zone_wmarks() before 4.6: low = min + min / 4, high = min + min / 2 (0 here gives the same)"),
        ("4.6+", 10, "commit 795ae7a0de6b ('mm: scale kswapd watermarks in proportion to memory', 4.6): watermark_scale_factor, default 10 (0.1% of the zone), accepted 1 to 1000 (3000 from 5.1)"),
    ];
    /// debugfs `x86/tlb_single_page_flush_ceiling`: a range flush of more
    /// pages than this flushes the whole TLB instead.
    tlb_single_page_flush_ceiling: "pages", 0..=1048576, default 33, [
        ("3.15+", 33, "commit a5102476a24b ('x86/mm: Set TLB flush tunable to sane value (33)', D. Hansen, 2014)"),
    ];
    /// `numa_balancing_scan_delay_ms`: a task's first NUMA scan comes this
    /// long after it starts (times the run's scale).
    numa_balancing_scan_delay_ms: "ms", 0..=3600000, default 1000, [
        ("3.8+", 1000, "kernel/sched/fair.c sysctl_numa_balancing_scan_delay = 1000 (sysctl kernel.numa_balancing_scan_delay_ms; debugfs sched/numa_balancing/scan_delay_ms from 5.13)"),
    ];
    /// `numa_balancing_scan_period_min_ms`: the shortest time between a
    /// task's scans (times the run's scale).
    numa_balancing_scan_period_min_ms: "ms", 1..=3600000, default 1000, [
        ("3.8+", 1000, "kernel/sched/fair.c sysctl_numa_balancing_scan_period_min = 1000"),
    ];
    /// `numa_balancing_scan_period_max_ms`: the longest time between a
    /// task's scans (times the run's scale).
    numa_balancing_scan_period_max_ms: "ms", 1..=3600000, default 60000, [
        ("3.8+", 60000, "kernel/sched/fair.c sysctl_numa_balancing_scan_period_max = 60000"),
    ];
    /// `numa_balancing_scan_size_mb`: address space one scan marks for
    /// hinting faults (times the run's scale).
    numa_balancing_scan_size_mb: "MiB", 1..=1048576, default 256, [
        ("3.8+", 256, "kernel/sched/fair.c sysctl_numa_balancing_scan_size = 256"),
    ];
}

/// The tunables a run config records elsewhere, as it did before they
/// were declared here (`numa_scan`, `tlb_single_page_flush_ceiling`).
pub const RECORDED_ELSEWHERE: &[&str] = &[
    "tlb_single_page_flush_ceiling",
    "numa_balancing_scan_delay_ms",
    "numa_balancing_scan_period_min_ms",
    "numa_balancing_scan_period_max_ms",
    "numa_balancing_scan_size_mb",
];

impl KernelTunables {
    /// The values off their default that no other field of the run's
    /// config records: what a result shows under `kernel.tunables`.
    pub fn changed(&self) -> std::collections::BTreeMap<&'static str, u64> {
        Self::ALL
            .iter()
            .filter(|t| !RECORDED_ELSEWHERE.contains(&t.key))
            .filter_map(|t| {
                let v = self.get(t.key).expect("declared");
                (v != t.default).then_some((t.key, v))
            })
            .collect()
    }
}

/// docs/config.md's table of the tunables, as the declarations give it.
pub fn doc_table() -> String {
    let mut out = String::from(
        "| `[kernel]` key | unit | accepted | default | kernel versions: default (source) |\n| --- | --- | --- | --- | --- |\n",
    );
    for t in KernelTunables::ALL {
        let versions: Vec<String> = t
            .versions
            .iter()
            .map(|(v, x, s)| format!("{v}: {x} ({s})"))
            .collect();
        out.push_str(&format!(
            "| `{}` | {} | {} to {} | {} | {} |\n",
            t.key,
            t.unit,
            t.low,
            t.high,
            t.default,
            versions.join("; ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_is_accepted_and_is_a_versions_default() {
        for t in KernelTunables::ALL {
            assert!((t.low..=t.high).contains(&t.default), "{}", t.key);
            assert!(!t.doc.trim().is_empty(), "{}", t.key);
            assert!(
                t.versions.iter().any(|(_, v, _)| *v == t.default),
                "{}: the default is no modelled version's",
                t.key
            );
            for (_, v, s) in t.versions {
                assert!((t.low..=t.high).contains(v) && !s.is_empty(), "{}", t.key);
            }
        }
        let d = KernelTunables::default();
        for t in KernelTunables::ALL {
            assert_eq!(d.get(t.key), Some(t.default));
        }
    }
}
