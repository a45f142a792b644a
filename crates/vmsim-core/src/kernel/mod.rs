//! The modeled Linux memory management. File and function names follow
//! Linux's mm/: `memory.rs` holds the fault handler, `huge_memory.rs` the
//! huge-page orders, `tlbflush.rs` the flush paths, `sched.rs` tasks and CPUs.
//!
//! The kernel changes its own state (page tables, free lists, content tags)
//! at once and hands the hardware work to the faulting CPU as a queue of
//! `Work` items, which the CPU then executes in simulated time; steps that
//! must happen after that work (installing a PMD once the clear is done) are
//! queued as work items too. The kernel touches the hardware only through
//! line accesses, TLB operations, IPIs and fixed costs.

pub mod folio_zero;
pub mod huge_memory;
pub mod hugetlb;
pub mod memory;
pub mod mm;
pub mod page_alloc;
pub mod sched;
pub mod tlbflush;

use crate::config::{KernelConfig, Preset};
use mm::Mm;
use page_alloc::PageAlloc;
use serde::Serialize;

/// How a run of line stores is issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreHow {
    /// One `rep stosb` over the run (start-up cost once, stores at the string width).
    String,
    /// `clear_page_orig`: a loop of 8 `movq` per line.
    MovLoop,
    /// A loop of 8 `movnti` per line: non-temporal, no cache allocation.
    NonTemporal,
}

/// A unit of hardware work queued on a CPU by the kernel.
#[derive(Clone, Debug)]
pub enum Work {
    /// Fixed software cost.
    Cycles { cycles: u64, instructions: u64 },
    /// Clear `nlines` lines starting at line address `line`.
    Clear { line: u64, nlines: u64, how: StoreHow },
    /// Map a cleared huge folio (`set_pmd_at`) once its clear is done.
    InstallPmd { mm: usize, haddr: u64, pfn: u64 },
    /// Map a cleared 1 GiB hugetlb folio (`set_huge_pte_at` on a PUD).
    InstallPud { mm: usize, haddr: u64, pfn: u64 },
    /// Map a 4 KiB page once it is ready.
    InstallPte { mm: usize, addr: u64, pfn: u64, writable: bool },
    /// Return to user mode (exception or system-call exit).
    ReturnToUser,
}

/// Event counters with the names of /proc/vmstat where one exists.
#[derive(Clone, Debug, Default, Serialize)]
pub struct VmStat {
    pub pgfault: u64,
    pub pgfault_anon_4k: u64,
    pub pgfault_thp: u64,
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
}

/// Instruction counts of kernel code paths, read off the code's structure.
/// They affect only the IPC reported for system time, never timing.
pub mod instr {
    /// `clear_page_erms`: mov $4096,%ecx; xor %eax,%eax; rep stosb; ret.
    pub const CLEAR_PAGE_ERMS: u64 = 4;
    /// `clear_page_orig`: 64 iterations of 8 movq + lea + dec + jnz, plus entry/exit.
    pub const CLEAR_PAGE_ORIG_PER_LINE: u64 = 11;
    /// One `process_huge_page` step: cond_resched(), the callback call, kmap/kunmap, loop.
    pub const SUBPAGE_STEP: u64 = 20;
    /// `clear_pages_erms(addr, len)`: mov len,%ecx; xor %eax,%eax; rep stosb; ret — for any length.
    pub const CLEAR_PAGES_ERMS: u64 = 4;
    /// One region or chunk step of a multi-page clear: cond_resched(), the
    /// clear_user_highpages()/clear_pages() call, kmsan hook, loop.
    pub const REGION_STEP: u64 = 20;
    /// A `movnti` clearing loop: 8 movnti + lea + dec + jnz per 64 B.
    pub const CLEAR_NT_PER_LINE: u64 = 11;
}

pub struct Kernel {
    pub cfg: KernelConfig,
    pub costs: crate::config::preset::Costs,
    pub mms: Vec<Mm>,
    pub alloc: PageAlloc,
    pub vmstat: VmStat,
    /// Remaining sub-page clear to skip (fault injection), counted in huge-page clears.
    pub skip_clear_subpage: Option<u64>,
    /// The hugetlb pools (2 MiB and 1 GiB hstates), filled at start.
    pub hugetlb: hugetlb::HugetlbPool,
}

impl Kernel {
    pub fn new(cfg: KernelConfig, preset: &Preset, nr_nodes: usize, node_bytes: u64) -> Kernel {
        Kernel {
            cfg,
            costs: preset.costs.clone(),
            mms: Vec::new(),
            alloc: PageAlloc::new(nr_nodes, node_bytes),
            vmstat: VmStat::default(),
            skip_clear_subpage: None,
            hugetlb: hugetlb::HugetlbPool::new(nr_nodes),
        }
    }

    pub fn new_mm(&mut self) -> usize {
        let id = self.mms.len();
        self.mms.push(Mm::new(id));
        id
    }
}
