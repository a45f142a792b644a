//! The kernel's event counters (include/linux/vm_event_item.h,
//! /proc/vmstat and /proc/meminfo names where they exist): faults, THP,
//! copy-on-write, allocation, remote TLB flushes, and page-table pages.
//! Each subsystem's own counters live with its state (pagemap.rs,
//! reclaim.rs, numa_balancing.rs, locking/).

crate::counters! {
/// Event counters with the names of /proc/vmstat where one exists.
pub struct VmStat {
    pub pgfault: u64,
    pub pgfault_anon_4k: u64,
    pub pgfault_thp: u64,
    /// Write faults on a present read-only 4 KiB PTE (`do_wp_page`), including
    /// those that follow a THP split.
    pub pgfault_cow_4k: u64,
    /// Write faults on a present read-only huge PMD resolved at PMD level
    /// (`do_huge_pmd_wp_page` copying or reusing the huge page).
    pub pgfault_cow_thp: u64,
    /// Huge pages copied by `copy_user_huge_page()` (no /proc/vmstat counter exists).
    pub thp_cow_copies: u64,
    /// Copy-on-write faults that reused the page because no other mapping was left
    /// (no /proc/vmstat counter exists).
    pub cow_reuse: u64,
    /// /proc/vmstat `thp_split_pmd`.
    pub thp_split_pmd: u64,
    pub thp_fault_alloc: u64,
    pub thp_fault_fallback: u64,
    pub pgalloc: u64,
    pub pgfree: u64,
    pub nr_tlb_remote_flush: u64,
    pub nr_tlb_remote_flush_received: u64,
    pub nr_tlb_local_flush_all: u64,
    pub nr_tlb_local_flush_one: u64,
    pub huge_page_clears: u64,
    pub subpage_clears: u64,
    /// Faults on hugetlb mappings (`hugetlb_fault`); Linux has no vmstat counter for them.
    pub hugetlb_faults: u64,
    pub subpage_copies: u64,
    /// Faults that found, on rechecking the entry under the page-table lock,
    /// that another thread had mapped the page first, and freed what they had
    /// allocated (no /proc/vmstat counter exists).
    pub fault_race_backouts: u64,
    /// /proc/vmstat `numa_hint_faults`: faults on PROT_NONE entries of accessible VMAs.
    pub numa_hint_faults: u64,
    /// Faults on file mappings, those that found the page mapped meanwhile
    /// among them (no /proc/vmstat counter of their own).
    pub pgfault_file_vma: u64,
    /// Faults that found a migration entry and waited for the migration
    /// to finish (`migration_entry_wait`).
    pub pgfault_migration_wait: u64,
    /// Faults whose entry already allowed the access when the handler
    /// looked (another CPU mapped it, or a stale TLB entry faulted).
    pub pgfault_spurious: u64,
    /// Faults that ended in SIGSEGV or SIGBUS, or failed for want of memory.
    pub pgfault_failed: u64,
    /// /proc/vmstat `numa_hint_faults_local`: hinting faults on a page of the faulting CPU's node.
    pub numa_hint_faults_local: u64,
    /// /proc/vmstat `numa_pte_updates`: entries made PROT_NONE by the scanner (a huge PMD counts 512).
    pub numa_pte_updates: u64,
    /// /proc/vmstat `numa_huge_pte_updates`: huge PMDs made PROT_NONE by the scanner.
    pub numa_huge_pte_updates: u64,
}
}

/// Page-table pages in use and their traffic (/proc/meminfo `PageTables`,
/// /proc/vmstat has no counter for the rest).
#[derive(Clone, Copy, Debug, Default)]
pub struct PgtableStat {
    /// Table frames held now (`NR_PAGETABLE`).
    pub nr_page_table_pages: u64,
    /// The most held at once.
    pub nr_page_table_pages_max: u64,
    /// Tables allocated and freed.
    pub pgtable_alloc: u64,
    pub pgtable_free: u64,
    /// Tables a path needed that the allocator could not give (the entry
    /// stays, its walks cost the fixed walk as without page tables in
    /// memory).
    pub pgtable_alloc_failed: u64,
}
