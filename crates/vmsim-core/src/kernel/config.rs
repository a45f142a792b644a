//! `KernelConfig`: the kernel as a run configures it (its policies, boot
//! parameters and sysctls). config/ parses it; the kernel only reads it.

use super::policy::clear::ClearPlan;
use super::policy::cow::{CopyPlan, ThpCowPolicy};
use super::policy::numa::NumaHintPolicy;
use super::policy::tlb::UnmapFlush;
use super::policy::Hook;
use crate::policy::{ClearPage, Preempt, Thp};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct KernelConfig {
    pub thp: Thp,
    pub clear_huge_page: Hook<dyn ClearPlan>,
    pub clear_page: ClearPage,
    pub preempt: Preempt,
    /// Order of `copy_user_huge_page()` (used when `thp_cow` is `copy`).
    pub copy_huge_page: Hook<dyn CopyPlan>,
    /// THP copy-on-write: copy the huge page (4.18 .. 5.7) or split the PMD (5.8+).
    pub thp_cow: Hook<dyn ThpCowPolicy>,
    /// Boot parameter `page_alloc.shuffle`: shuffle the free lists at boot
    /// (seeded by the run's seed). Off by default, as in the kernel.
    pub page_alloc_shuffle: bool,
    /// TLB flushing after reclaim unmaps pages: per page (before 4.3) or batched (4.3+).
    pub tlb_flush_on_unmap: Hook<dyn UnmapFlush>,
    /// sysctl `kernel.numa_balancing`: the scanner and hinting faults run.
    /// Off unless a config turns it on (most distribution kernels enable it
    /// on NUMA machines; off here so runs that are not about it are unchanged).
    pub numa_balancing: bool,
    /// `do_numa_page()`: map the page before migrating it (before 5.13) or after.
    pub numa_hint_fault: Hook<dyn NumaHintPolicy>,
    /// `migrate_pages()`' TLB flushing: per page (before 6.3) or batched.
    pub migrate_tlb_flush: Hook<dyn UnmapFlush>,
    /// The scanner's tunables, with the run's scale factor.
    pub numa_scan: crate::kernel::sched::numa::ScanKnobs,
    /// `CONFIG_HZ`: scheduler ticks per second on a busy CPU.
    pub hz: u64,
    /// debugfs `x86/tlb_single_page_flush_ceiling`: a range flush of more
    /// entries than this flushes the whole TLB (default 33).
    pub tlb_single_page_flush_ceiling: u64,
    /// debugfs `fault_around_bytes`: file read faults map up to this much
    /// around the fault from the page cache (default 64 KiB; 4096 turns it off).
    pub fault_around_bytes: u64,
    /// The file's backing device `read_ahead_kb` (`ra_pages` = this / 4 KiB;
    /// default 128).
    pub read_ahead_kb: u64,
    /// Boot parameter `skew_tick`: offset each CPU's tick by
    /// `cpu * TICK_NSEC / 2 / nr_cpus` (off by default, as in the kernel).
    pub skew_tick: bool,
    /// Each frame's `struct page` lives in a simulated vmemmap and the paths
    /// built on it touch it through the caches: today `do_huge_pmd_wp_page`'s
    /// page lock (a sleeping lock) and `reuse_swap_page`'s mapcount scan
    /// (kernel/huge_memory_wp.rs). Off by default while the rest of the
    /// kernel's own memory is still fixed costs.
    pub struct_pages: bool,
    /// `kernel.spinlocks`: the allocator's, the LRU's and the page cache's
    /// spinlocks as lines of simulated memory, and which implementation;
    /// None: their sections are fixed costs.
    pub spinlocks: Option<crate::kernel::locking::spinlock::SpinImpl>,
    /// `kernel.page_tables`: each mm's page tables are frames of simulated
    /// memory that the hardware walk and the kernel's walks touch through
    /// the caches (kernel/pgtable.rs); off: the walk is a fixed cost.
    pub page_tables: bool,
    /// `kernel.rwsems`: `mmap_lock` and `i_mmap_rwsem` as lines of
    /// simulated memory, taken by the faults, the address-space system
    /// calls and the rmap walks (kernel/locking/rwsem.rs); off: their cost
    /// is in the fixed costs and nobody waits.
    pub rwsems: bool,
    /// `kernel.pte_locks`: the split page-table locks (`ptlock_ptr()`: a
    /// spinlock in the `struct page` of each page-table page), taken around
    /// the entries the faults install and the rmap, NUMA-scan and migration
    /// walks change, by fork's copy and a zap once per table, and once per
    /// fault-around window (kernel/pgtable.rs); needs `struct_pages`,
    /// `spinlocks` and `page_tables`. Off: their cost is in the fixed costs.
    pub pte_locks: bool,
    /// `kernel.wakeups`: every wake-up is a `try_to_wake_up()` with its
    /// costs: a task that wakes another pays `try_to_wake_up_cycles`, and a
    /// woken task whose CPU is idle runs only after that CPU has left its
    /// idle state (the menu governor's state for the idle period, `[idle]`
    /// of the preset); timers, `kswapd`'s wake-up, migration waiters, the
    /// futex, pipe and `wait()` wake-ups alike. Off: only the page lock's
    /// waiters (`kernel.struct_pages`) pay the idle exit, and the rest wake
    /// at the waker's time for nothing.
    pub wakeups: bool,
    /// The kernel's own numbers (kernel/tunables.rs); a result records
    /// those a run sets off their default (the scanner's and the flush
    /// ceiling's also under `numa_scan` and `tlb_single_page_flush_ceiling`).
    #[serde(skip_serializing_if = "unchanged", serialize_with = "changed")]
    pub tunables: super::tunables::KernelTunables,
}

fn unchanged(t: &super::tunables::KernelTunables) -> bool {
    t.changed().is_empty()
}

fn changed<S: serde::Serializer>(
    t: &super::tunables::KernelTunables,
    s: S,
) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&t.changed(), s)
}

/// The kernel as a run config gets it when it names no policy: each policy's
/// declared default (policy.rs, through the built-in registry), the
/// boot-time page shuffle off.
impl Default for KernelConfig {
    fn default() -> KernelConfig {
        let p = super::policy::registry::builtin();
        KernelConfig {
            thp: Thp::DEFAULT,
            clear_huge_page: p.clear.default_hook(),
            clear_page: ClearPage::DEFAULT,
            preempt: Preempt::DEFAULT,
            copy_huge_page: p.copy.default_hook(),
            thp_cow: p.thp_cow.default_hook(),
            page_alloc_shuffle: false,
            tlb_flush_on_unmap: p.reclaim_flush.default_hook(),
            numa_balancing: false,
            numa_hint_fault: p.numa_hint.default_hook(),
            migrate_tlb_flush: p.migrate_flush.default_hook(),
            numa_scan: Default::default(),
            hz: 1000,
            tlb_single_page_flush_ceiling: super::tunables::KernelTunables::default()
                .tlb_single_page_flush_ceiling,
            fault_around_bytes: super::filemap::FAULT_AROUND_BYTES,
            read_ahead_kb: super::filemap::VM_READAHEAD_PAGES * 4,
            skew_tick: false,
            struct_pages: false,
            spinlocks: None,
            page_tables: false,
            rwsems: false,
            pte_locks: false,
            wakeups: false,
            tunables: Default::default(),
        }
    }
}
