//! The modeled Linux memory management. File and function names follow
//! Linux's mm/: `memory.rs` holds the fault handler, `huge_memory.rs` the
//! huge-page orders, `tlbflush.rs` the flush paths, `sched/` the scheduler's
//! run queues, wait queues and NUMA scanner. The engine that runs tasks on
//! CPUs and executes the queued work is sim/, not the kernel.
//!
//! The kernel changes its own state (page tables, free lists, content tags)
//! at once and hands the hardware work to the faulting CPU as a queue of
//! `Work` items, which the CPU then executes in simulated time; steps that
//! must happen after that work (installing a PMD once the clear is done) are
//! queued as work items too. The kernel touches the hardware only through
//! line accesses, TLB operations, IPIs and fixed costs.

pub mod config;
pub mod costs;
pub mod cpuinfo;
pub mod entry;
pub mod exit;
pub mod fault;
pub mod filemap;
pub mod folio_zero;
pub mod fork;
pub mod gfp;
pub mod gup;
pub mod huge_memory;
pub mod huge_memory_wp;
pub mod hugetlb;
pub mod hw;
pub mod kdata;
pub mod kthread;
pub mod locking;
pub mod memory;
pub mod mempolicy;
pub mod migrate;
pub mod mm;
pub mod mmap;
pub mod mmzone;
pub mod numa_balancing;
pub mod page_alloc;
pub mod pagemap;
pub mod pgtable;
pub mod policy;
pub mod reclaim;
pub mod report;
pub mod resume;
pub mod rmap;
pub mod sched;
pub mod swap;
pub mod timeline;
pub mod tlbflush;
pub mod tunables;
pub mod uapi;
pub mod vmemmap;
pub mod vmscan;
pub mod vmstat;
pub mod workingset;

pub use config::KernelConfig;
pub use costs::KernelCosts;
use mm::Mm;
use page_alloc::PageAlloc;
pub use vmstat::VmStat;

/// How a run of line stores (or copies) is issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StoreHow {
    /// One string instruction over the run (start-up cost once, stores at the
    /// string width): `rep stosb` for a clear, `rep movsq` for a copy.
    String,
    /// A loop of `movq`: `clear_page_orig` (8 stores per line) or
    /// `copy_page_regs` (8 loads and 8 stores per line).
    MovLoop,
    /// A loop of 8 `movnti` per line: non-temporal, no cache allocation.
    NonTemporal,
    /// A loop of one `clzero` per line (AMD): the line zeroed without a
    /// read, weakly ordered and not allocated, as a non-temporal store.
    /// Only on a CPU that has it (`string.clzero`); a clear only.
    Clzero,
}

impl StoreHow {
    /// Store-queue entries one line's ordinary stores take: eight `movq`
    /// for the loop; the others store no line with ordinary stores (one,
    /// the machine's default).
    pub fn stores_per_line(self) -> u64 {
        match self {
            StoreHow::MovLoop => instr::MOVQ_STORES_PER_LINE,
            StoreHow::String | StoreHow::NonTemporal | StoreHow::Clzero => 1,
        }
    }
}

/// The kernel paths system time is broken down by (`sys_cycles_by_function`).
/// Names are the kernel functions (or entry points) that own the time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KFn {
    /// Page-fault exception entry and return (`asm_exc_page_fault` … `iret`).
    ExcPageFault,
    /// Fault-handler software: page allocation, accounting, setting entries.
    HandleMmFault,
    /// Zeroing pages: `clear_page`, `clear_pages`, non-temporal clears.
    ClearPage,
    /// Copy-on-write copies: `copy_page`.
    CopyPage,
    /// `__split_huge_pmd`.
    SplitHugePmd,
    /// Local TLB flushes and shootdowns sent (`flush_tlb_mm_range`, waits for acknowledgements).
    FlushTlb,
    /// Freeing pages and unmapping entries (`zap_pte_range`, `free_pages`).
    FreePages,
    /// System-call entry and exit and the calls' own bookkeeping (mmap, munmap, exit).
    Syscall,
    /// `copy_process` / `dup_mmap` of fork.
    Fork,
    /// `schedule` / `switch_mm`: context switches.
    Schedule,
    /// Interrupt handling on IPI targets (entry, the flush, exit).
    Interrupt,
    /// Page reclaim's per-folio sorting in `shrink_folio_list` (the checks
    /// and bookkeeping around the steps below), and its callers' own.
    ShrinkFolioList,
    /// Reclaim's `try_to_unmap` of a file folio: the reverse-map walk that
    /// clears every PTE mapping it (the flushes it sends are `FlushTlb`).
    RmapWalk,
    /// `folio_referenced`: the reverse-map walk that tests and clears the
    /// young bits of every PTE mapping a folio (`shrink_folio_list`'s
    /// `folio_check_references` and `shrink_active_list`).
    FolioReferenced,
    /// `isolate_lru_folios` (`isolate_lru_pages` before 5.17): taking
    /// folios off an LRU list under the LRU lock.
    IsolateLru,
    /// `move_folios_to_lru` (`putback_inactive_pages` and
    /// `move_active_pages_to_lru` before 5.19): folios kept back on the
    /// lists under the LRU lock.
    PutbackLru,
    /// `shrink_active_list`'s deactivation of each folio it scans.
    ShrinkActiveList,
    /// `__remove_mapping`: a reclaimed folio out of the page cache under
    /// the mapping's `tree_lock` (`i_pages` lock), a shadow entry left.
    RemoveMapping,
    /// `filemap_add_folio` (`add_to_page_cache_lru` before 5.16, less its
    /// LRU add) of a folio read from a hole: its allocation and its
    /// insertion in the file's tree, under `tree_lock` (a refill of the
    /// per-CPU free list under `zone->lock` stays `HandleMmFault`'s, as in
    /// every fault).
    FilemapAddFolio,
    /// `lru_cache_add` of a new page-cache folio: the per-CPU pagevec and,
    /// when it is full, its drain onto the LRU under the LRU lock.
    LruCacheAdd,
    /// NUMA balancing's scanner: `task_numa_work` → `change_prot_numa`.
    TaskNumaWork,
    /// `migrate_pages()` of a misplaced page: isolation, allocation, set-up.
    MigratePages,
    /// `try_to_unmap()` of a page being migrated and its callees, the TLB
    /// shootdown it sends and waits for included (the figure perf reports).
    TryToUnmap,
    /// The scheduler tick: the local timer interrupt's entry and exit and
    /// `update_process_times` → `scheduler_tick`.
    Tick,
    /// Spinning for a contended spinlock (`kernel.spinlocks`):
    /// `native_queued_spin_lock_slowpath`, or the ticket lock's spin in
    /// `_raw_spin_lock` before 4.2.
    SpinLock,
}

impl KFn {
    pub const ALL: [KFn; 25] = [
        KFn::ExcPageFault,
        KFn::HandleMmFault,
        KFn::ClearPage,
        KFn::CopyPage,
        KFn::SplitHugePmd,
        KFn::FlushTlb,
        KFn::FreePages,
        KFn::Syscall,
        KFn::Fork,
        KFn::Schedule,
        KFn::Interrupt,
        KFn::ShrinkFolioList,
        KFn::RmapWalk,
        KFn::FolioReferenced,
        KFn::IsolateLru,
        KFn::PutbackLru,
        KFn::ShrinkActiveList,
        KFn::RemoveMapping,
        KFn::FilemapAddFolio,
        KFn::LruCacheAdd,
        KFn::TaskNumaWork,
        KFn::MigratePages,
        KFn::TryToUnmap,
        KFn::Tick,
        KFn::SpinLock,
    ];
    pub fn name(self) -> &'static str {
        match self {
            KFn::ExcPageFault => "exc_page_fault",
            KFn::HandleMmFault => "handle_mm_fault",
            KFn::ClearPage => "clear_page",
            KFn::CopyPage => "copy_page",
            KFn::SplitHugePmd => "split_huge_pmd",
            KFn::FlushTlb => "flush_tlb",
            KFn::FreePages => "free_pages",
            KFn::Syscall => "syscall",
            KFn::Fork => "copy_process",
            KFn::Schedule => "schedule",
            KFn::Interrupt => "irq",
            KFn::ShrinkFolioList => "shrink_folio_list",
            KFn::RmapWalk => "rmap_walk",
            KFn::FolioReferenced => "folio_referenced",
            KFn::IsolateLru => "isolate_lru_folios",
            KFn::PutbackLru => "move_folios_to_lru",
            KFn::ShrinkActiveList => "shrink_active_list",
            KFn::RemoveMapping => "__remove_mapping",
            KFn::FilemapAddFolio => "filemap_add_folio",
            KFn::LruCacheAdd => "lru_cache_add",
            KFn::TaskNumaWork => "task_numa_work",
            KFn::MigratePages => "migrate_pages",
            KFn::TryToUnmap => "try_to_unmap",
            KFn::Tick => "tick",
            KFn::SpinLock => "spin_lock",
        }
    }
}

/// A unit of work queued on a CPU by the kernel: hardware work the engine
/// executes (fixed costs, clears, copies, the return to user mode), or a
/// step of a kernel path that must run after the work before it, which
/// the engine hands back to the kernel (`Kernel::resume`, kernel/resume.rs)
/// without looking into it.
#[derive(Clone, Debug)]
pub enum Work {
    /// Fixed software cost of a kernel path.
    Cycles {
        cycles: u64,
        instructions: u64,
        what: KFn,
    },
    /// An `sfence` (one instruction): waits as the preset says for the
    /// thread's earlier unread lines (`string.sfence_drain_ns`).
    Sfence { what: KFn },
    /// Clear `nlines` lines starting at line address `line`.
    Clear {
        line: u64,
        nlines: u64,
        how: StoreHow,
    },
    /// Copy `nlines` lines from line address `src_line` to `dst_line`: per line
    /// a load of the source and a store of the destination.
    Copy {
        src_line: u64,
        dst_line: u64,
        nlines: u64,
        how: StoreHow,
    },
    /// Return to user mode (exception or system-call exit).
    ReturnToUser,
    /// A kernel path's continuation.
    Kernel(KStep),
}

/// A step of a kernel path queued behind hardware work, resumed by the
/// kernel when the CPU reaches it (kernel/resume.rs).
#[derive(Clone, Debug)]
pub enum KStep {
    /// Map a cleared or copied huge folio (`set_pmd_at`) once its clear or copy
    /// is done, if the entry is still what the fault saw: `pmd_none` (`orig`
    /// None) or the read-only PMD a copy-on-write fault replaces (`pmd_same`).
    /// Otherwise another thread won: the folio is freed and a `PutPage` that
    /// follows is dropped.
    InstallPmd {
        mm: usize,
        haddr: u64,
        pfn: u64,
        orig: Option<mm::Pte>,
    },
    /// Map a cleared 1 GiB hugetlb folio (`set_huge_pte_at` on a PUD).
    InstallPud {
        mm: usize,
        haddr: u64,
        pfn: u64,
    },
    /// Map a 4 KiB page once it is ready, if the entry is still `orig`
    /// (`pte_none` or, on copy-on-write, `pte_same`); as `InstallPmd` otherwise.
    InstallPte {
        mm: usize,
        addr: u64,
        pfn: u64,
        writable: bool,
        orig: Option<mm::Pte>,
    },
    /// Map page `index` of file `ino` (frame `pfn`) read-only at `addr` once
    /// it is ready (`finish_fault`), if the PTE is still none and the folio
    /// is still the cache's page there (kernel/filemap.rs).
    InstallFilePte {
        mm: usize,
        addr: u64,
        ino: usize,
        index: u64,
        pfn: u64,
    },
    /// `flush_tlb_mm_range(mm, start, end, stride_shift)` from the working CPU,
    /// after a present entry was replaced or split.
    FlushTlbRange {
        mm: usize,
        start: u64,
        end: u64,
        stride_shift: u32,
    },
    /// Drop the mapping of the folio holding `pfn` that a copy-on-write fault
    /// just replaced (`page_remove_rmap` + `put_page`); frees it on the last one.
    PutPage {
        pfn: u64,
    },
    /// One round of `shrink_node` on `node` (kernel/vmscan.rs), by kswapd or
    /// in direct reclaim: unmapping, flushing and freeing happen together
    /// when the item executes.
    ShrinkNode {
        node: usize,
        kswapd: bool,
    },
    /// `try_to_unmap` of a page being migrated (kernel/migrate.rs): its PTE
    /// becomes a migration entry, flushed from other TLBs if it was accessible.
    MigrateUnmap {
        mm: usize,
        addr: u64,
        old: u64,
        new: u64,
    },
    /// `dec_tlb_flush_pending(mm)`: the flush of a protection change is done.
    DecTlbFlushPending {
        mm: usize,
    },
    /// `remove_migration_ptes`: the new page is mapped, the old one freed.
    MigrateRemap {
        mm: usize,
        addr: u64,
        old: u64,
        new: u64,
    },
    /// `migration_entry_wait`: if the PTE at `addr` is still a migration
    /// entry of `pfn`, the current task sleeps until the migration ends,
    /// then retries its access.
    WaitMigration {
        mm: usize,
        addr: u64,
        pfn: u64,
    },
    /// `do_huge_pmd_wp_page` from `trylock_page` on (`kernel.struct_pages`,
    /// kernel/huge_memory_wp.rs): the page lock of the shared huge page at
    /// `pfn`, `reuse_swap_page` under it, then the reuse or the copy. If
    /// the lock is held, the task sleeps with this item still first in its
    /// kernel work and tries again when woken.
    WpHugePageLocked {
        mm: usize,
        addr: u64,
        pfn: u64,
        node: usize,
    },
    /// `reuse_swap_page()`'s scan of the 512 sub-pages' `struct page` under
    /// the page lock of the huge page at `pfn` (resumable at a quantum boundary).
    ReuseSwapPage {
        pfn: u64,
    },
    /// `unlock_page()` and the rest of `do_huge_pmd_wp_page` (the reuse or the copy).
    WpHugePageUnlock {
        mm: usize,
        addr: u64,
        pfn: u64,
        node: usize,
    },
    /// A critical section of `instr` instructions under a spinning lock
    /// (`kernel.spinlocks`, kernel/locking/sections.rs), taken when the CPU
    /// reaches it.
    SpinSection {
        lock: locking::spinlocks::SpinRef,
        instr: u64,
        what: KFn,
    },
    /// Locked read-modify-writes of page-table entries of `mm`
    /// (`kernel.page_tables`, kernel/pgtable.rs), each given as its address
    /// and its line when queued: `change_prot_numa`'s
    /// `ptep_modify_prot_start` on each entry it changes, a hint fault's
    /// restore of its entry.
    EntryRmw {
        mm: usize,
        entries: Vec<(u64, u64)>,
        what: KFn,
    },
    /// `wakeup_kswapd()` of `node` made by this CPU with `kernel.wakeups`:
    /// if the node's kswapd still sleeps, the CPU pays
    /// `try_to_wake_up_cycles` and kswapd runs from its clock after that
    /// (kernel/gfp.rs).
    WakeupKswapd {
        node: usize,
        what: KFn,
    },
    /// Fixed cycles of a path under the split lock of the table holding
    /// `va`'s leaf entry in `mm` (`kernel.pte_locks`): fault-around's window.
    PtlCycles {
        mm: usize,
        va: u64,
        cycles: u64,
        what: KFn,
    },
    /// A fault's `mmap_read_lock` / `mmap_read_unlock` of its mm
    /// (`kernel.rwsems`, kernel/locking/rwsem.rs).
    MmapReadLock {
        mm: usize,
    },
    MmapReadUnlock {
        mm: usize,
    },
}

impl Work {
    /// The kernel path whose system time executing this item is.
    pub fn kfn(&self) -> KFn {
        match self {
            Work::Kernel(s) => s.kfn(),
            Work::Cycles { what, .. } => *what,
            Work::Clear { .. } => KFn::ClearPage,
            Work::Copy { .. } => KFn::CopyPage,
            Work::ReturnToUser => KFn::ExcPageFault,
            Work::Sfence { what } => *what,
        }
    }
}

impl KStep {
    /// The kernel path whose system time resuming this step is.
    pub fn kfn(&self) -> KFn {
        match self {
            KStep::FlushTlbRange { .. } => KFn::FlushTlb,
            KStep::PutPage { .. } => KFn::FreePages,
            KStep::ShrinkNode { .. } => KFn::ShrinkFolioList,
            KStep::MigrateUnmap { .. } => KFn::TryToUnmap,
            KStep::MigrateRemap { .. } => KFn::MigratePages,
            KStep::DecTlbFlushPending { .. } => KFn::TaskNumaWork,
            KStep::SpinSection { what, .. } => *what,
            KStep::EntryRmw { what, .. } => *what,
            KStep::PtlCycles { what, .. } => *what,
            KStep::WakeupKswapd { what, .. } => *what,
            _ => KFn::HandleMmFault,
        }
    }
}

/// Instruction counts of kernel code paths, read off the code's structure.
/// They affect only the IPC reported for system time, never timing.
pub mod instr {
    /// `clear_page_erms`: mov $4096,%ecx; xor %eax,%eax; rep stosb; ret.
    pub const CLEAR_PAGE_ERMS: u64 = 4;
    /// `clear_page_orig`: 64 iterations of 8 movq + lea + dec + jnz, plus entry/exit.
    pub const CLEAR_PAGE_ORIG_PER_LINE: u64 = 11;
    /// The 8 B `movq` stores that write one line in `clear_page_orig` and
    /// `copy_page_regs`: each takes its own store-queue entry.
    pub const MOVQ_STORES_PER_LINE: u64 = 8;
    /// Cycles a line of `clear_page_orig` takes to issue: its store ports'
    /// rate for eight 8 B stores or the loop's instructions over the issue
    /// width, whichever is slower.
    pub fn mov_clear_line_issue(issue_width: u64, scalar_stores_per_cycle: u64) -> u64 {
        CLEAR_PAGE_ORIG_PER_LINE.div_ceil(issue_width).max(
            crate::machine::params::scalar_store_line_cycles(scalar_stores_per_cycle),
        )
    }
    /// One `process_huge_page` step: cond_resched(), the callback call, kmap/kunmap, loop.
    pub const SUBPAGE_STEP: u64 = 20;
    /// `clear_pages_erms(addr, len)`: mov len,%ecx; xor %eax,%eax; rep stosb; ret — for any length.
    pub const CLEAR_PAGES_ERMS: u64 = 4;
    /// One region or chunk step of a multi-page clear: cond_resched(), the
    /// clear_user_highpages()/clear_pages() call, kmsan hook, loop.
    pub const REGION_STEP: u64 = 20;
    /// A `movnti` clearing loop: 8 movnti + lea + dec + jnz per 64 B.
    pub const CLEAR_NT_PER_LINE: u64 = 11;
    /// Cycles a line of the `movnti` loop takes to issue: the core's
    /// non-temporal store issue (`cpu.movnti_line_cycles`) or the loop's
    /// instructions over the issue width, whichever is slower.
    pub fn movnti_line_issue(issue_width: u64, movnti_line_cycles: u64) -> u64 {
        CLEAR_NT_PER_LINE
            .div_ceil(issue_width)
            .max(movnti_line_cycles)
    }
    /// A `clzero` clearing loop: clzero + add + cmp + jb per 64 B.
    pub const CLEAR_CLZERO_PER_LINE: u64 = 4;
    /// `copy_page` with X86_FEATURE_REP_GOOD: movl $512,%ecx; rep movsq; ret
    /// (arch/x86/lib/copy_page_64.S).
    pub const COPY_PAGE_REP: u64 = 3;
    /// `copy_page_regs`, per 64 B: prefetcht0, dec, 8 movq loads, lea, 8 movq
    /// stores, lea, jnz (arch/x86/lib/copy_page_64.S).
    pub const COPY_PAGE_REGS_PER_LINE: u64 = 21;
}

pub struct Kernel {
    pub cfg: KernelConfig,
    pub costs: KernelCosts,
    /// The address spaces (mm.rs).
    pub mms: Vec<Mm>,
    /// Physical memory: the allocator, the nodes, the hugetlb pools, the
    /// memory map (mmzone.rs).
    pub mem: mmzone::Memory,
    /// Files and their page caches (pagemap.rs).
    pub pagecache: pagemap::PageCache,
    /// The LRU lists, kswapd's per-node state and the reclaim counters (reclaim.rs).
    pub reclaim: reclaim::Reclaim,
    /// NUMA balancing's per-task, per-frame and counter state (numa_balancing.rs).
    pub numa: numa_balancing::NumaBalancing,
    /// Wait queues and the current task (sched/state.rs).
    pub sched: sched::state::SchedState,
    /// The kernel's locks and their statistics (locking/).
    pub locks: locking::Locks,
    /// What the kernel knows of its CPUs (cpuinfo.rs).
    pub cpus: cpuinfo::CpuInfo,
    pub vmstat: VmStat,
    /// Page-table pages in simulated memory (`kernel.page_tables`; kernel/pgtable.rs).
    pub pgtable: vmstat::PgtableStat,
    /// When each task's huge-page faults installed their PMDs (`sim.timeline`).
    pub thp_timeline: timeline::ThpTimeline,
    /// Remaining sub-page clear to skip (fault injection), counted in huge-page clears.
    pub skip_clear_subpage: Option<u64>,
    /// Remaining sub-page copy to skip (fault injection), in the next huge-page copy.
    pub skip_copy_subpage: Option<u64>,
    /// The first failure of a policy the run uses (kernel/policy): the run
    /// stops with it at the end of the quantum.
    pub policy_error: Option<crate::error::Error>,
    /// A user's unmap-flush policy beside the built-ins, reclaim's `[0]`
    /// and migration's `[1]` (kernel/policy/agreement.rs).
    pub flush_agreement: [policy::agreement::FlushAgreement; 2],
}

impl Kernel {
    pub fn new(cfg: KernelConfig, costs: KernelCosts, nr_nodes: usize, node_bytes: u64) -> Kernel {
        let mut waitq = sched::wait::WaitQueues::default();
        let node_pages = node_bytes >> page_alloc::PAGE_SHIFT;
        let pgdat = (0..nr_nodes)
            .map(|_| {
                mmzone::PgData::new(
                    node_pages,
                    node_pages * nr_nodes as u64,
                    cfg.tunables.watermark_scale_factor,
                    &mut waitq,
                )
            })
            .collect();
        let page_wait_table = (0..sched::state::PAGE_WAIT_TABLE_SIZE)
            .map(|_| waitq.add_queue())
            .collect();
        let mut alloc = PageAlloc::new(nr_nodes, node_bytes);
        // A windowed run's stand-ins have no memory, and so no memory map.
        let vmemmap = (cfg.struct_pages && node_bytes > 0)
            .then(|| vmemmap::Vmemmap::boot(&mut alloc, node_bytes));
        let spinlocks = match cfg.spinlocks {
            Some(imp) if node_bytes > 0 => {
                let skip = vmemmap.as_ref().map_or(0, |v| v.blocks_per_node);
                let kd = kdata::KernelData::boot(&mut alloc, skip);
                Some(locking::spinlocks::Spinlocks::new(
                    imp,
                    kd,
                    nr_nodes,
                    &cfg.tunables,
                ))
            }
            _ => None,
        };
        let rwsems = (cfg.rwsems && node_bytes > 0).then(|| {
            locking::rwsem::Rwsems::new(spinlocks.is_none().then(|| {
                let skip = vmemmap.as_ref().map_or(0, |v| v.blocks_per_node);
                kdata::KernelData::boot(&mut alloc, skip)
            }))
        });
        let nr_frames = node_pages * nr_nodes as u64;
        Kernel {
            cfg,
            costs,
            mms: Vec::new(),
            mem: mmzone::Memory {
                alloc,
                pgdat,
                hugetlb: mmzone::HugetlbPool::new(nr_nodes),
                vmemmap,
            },
            pagecache: pagemap::PageCache::default(),
            reclaim: reclaim::Reclaim::new(nr_nodes, nr_frames),
            numa: numa_balancing::NumaBalancing::new(nr_frames),
            sched: sched::state::SchedState {
                waitq,
                page_wait_table,
                current: Default::default(),
            },
            locks: locking::Locks {
                spin: spinlocks,
                rwsem: rwsems,
                ..Default::default()
            },
            cpus: cpuinfo::CpuInfo::default(),
            vmstat: VmStat::default(),
            pgtable: Default::default(),
            skip_clear_subpage: None,
            skip_copy_subpage: None,
            thp_timeline: Default::default(),
            policy_error: None,
            flush_agreement: Default::default(),
        }
    }

    /// One line for each user policy of an unmap-flush hook that was never
    /// asked, or answered as a built-in in every decision of the run (so
    /// the run is that built-in's); none for built-ins.
    pub fn policy_notes(&self) -> Vec<String> {
        let hooks = [
            (false, "tlb_flush_on_unmap", &self.cfg.tlb_flush_on_unmap),
            (true, "migrate_tlb_flush", &self.cfg.migrate_tlb_flush),
        ];
        let mut notes = Vec::new();
        for (migration, key, hook) in hooks {
            if hook.is_builtin() {
                continue;
            }
            let a = &self.flush_agreement[migration as usize];
            let what = if migration { "migration" } else { "reclaim" };
            if a.decisions == 0 {
                notes.push(format!(
                    "kernel.{key}: {:?} was never asked (no {what} TLB flush in this run)",
                    hook.name()
                ));
                continue;
            }
            let same = a.agreeing(migration);
            if !same.is_empty() {
                notes.push(format!(
                    "kernel.{key}: {:?} answered as the built-in {} in all {} of its decisions, so this run is that built-in's",
                    hook.name(),
                    same.iter()
                        .map(|n| format!("{n:?}"))
                        .collect::<Vec<_>>()
                        .join(" and "),
                    a.decisions
                ));
            }
        }
        notes
    }

    /// Records that the policy `name`, chosen by `kernel.{key}`, failed; the
    /// first failure is the one the run reports.
    pub(crate) fn policy_failed(&mut self, key: &str, name: &str, message: String) {
        if self.policy_error.is_none() {
            self.policy_error = Some(crate::error::Error::Policy {
                key: format!("kernel.{key}"),
                policy: name.to_string(),
                message,
            });
        }
    }

    pub fn new_mm(&mut self) -> usize {
        let id = self.mms.len();
        self.mms.push(Mm::new(id));
        id
    }

    /// `mmget`: one more task uses the mm (a `CLONE_VM` thread).
    pub fn mmget(&mut self, mm: usize) {
        self.mms[mm].mm_users += 1;
    }

    /// `mmput`: a task stops using the mm; true if it was the last user (the
    /// caller then tears the address space down with `exit_mmap`).
    pub fn mmput(&mut self, mm: usize) -> bool {
        let u = &mut self.mms[mm].mm_users;
        debug_assert!(*u > 0, "mmput of an mm with no users");
        *u -= 1;
        *u == 0
    }
}
