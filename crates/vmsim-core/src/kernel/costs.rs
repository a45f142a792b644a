//! The software costs the kernel model charges for its own paths (entry and
//! exit, fault handlers, the page allocator, the page cache, reclaim and
//! its rmap walks, the scheduler), in cycles.
//! Hardware costs (IPIs, TLB flushes) belong to the machine, not here.

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct KernelCosts {
    pub exception_entry_exit_cycles: u64,
    pub syscall_entry_exit_cycles: u64,
    pub page_fault_handler_cycles: u64,
    pub thp_fault_handler_cycles: u64,
    pub page_alloc_cycles: u64,
    pub page_free_cycles: u64,
    pub context_switch_cycles: u64,
    /// `filemap_add_folio` per folio, allocation and zeroing excluded.
    pub page_cache_add_cycles: u64,
    /// `filemap_map_pages` per page it maps (fault-around).
    pub map_pages_per_pte_cycles: u64,
    /// `shrink_folio_list` and its callers per folio isolated and sorted.
    pub shrink_folio_cycles: u64,
    /// An rmap walk per PTE it visits (`folio_referenced`, `try_to_unmap`).
    pub rmap_pte_cycles: u64,
    /// `migrate_pages()`' own software per 4 KiB folio (isolation, set-up,
    /// `folio_migrate_mapping`/`_flags`, putback), the copy excluded.
    pub migrate_folio_cycles: u64,
    /// `change_pte_range` per entry visited by the NUMA scanner.
    pub change_pte_cycles: u64,
    /// `task_numa_work`'s own software per call (mmap lock, VMA walk set-up).
    pub task_numa_work_cycles: u64,
    /// The scheduler tick's handler (`tick_sched_timer` → `update_process_times`
    /// → `scheduler_tick`), interrupt entry and exit excluded.
    pub tick_handler_cycles: u64,
}
