//! fork's copy of the address space (kernel/fork.c `dup_mmap()`, mm/memory.c
//! `copy_page_range()`, mm/huge_memory.c `copy_huge_pmd()`): the child gets
//! the parent's VMAs and a copy of its page tables. Private writable
//! anonymous pages, 4 KiB and PMD-mapped THP alike, become read-only in both
//! and shared, each mapping counted on the folio; the first write on either
//! side then takes a copy-on-write fault.

use super::hw::Hw;
use super::locking::rwsem::SemRef;
use super::mm::{pmd_keys, Pmd, VmaKind, PMD_SHIFT};
use super::mmap::ZapRange;
use super::page_alloc::PageAlloc;
use super::tlbflush::flush_tlb_mm_range;
use super::KFn;
use super::Kernel;

/// Cycles to copy one present PTE or PMD entry: `copy_present_pte()` /
/// `copy_huge_pmd()` do about three locked read-modify-writes (`get_page`,
/// the rmap duplication, `ptep_set_wrprotect` on the parent's entry) plus the
/// store of the child's entry. Estimate from that structure (a locked RMW
/// costs some 20 cycles on Haswell-class cores), not a measurement; it is
/// charged to the parent before the children start, so it does not enter
/// the children's timed intervals.
pub const COPY_ENTRY_CYCLES: u64 = 60;

/// Cycles of `copy_process()` beyond the page tables (task_struct, mm_struct,
/// files, signal handlers, scheduler set-up). Estimate (some tens of
/// microseconds are commonly quoted for fork of a small process, most of it
/// page-table copying); no measurement on the modeled machines was found. It
/// is charged to the parent outside any timed interval.
pub const COPY_PROCESS_CYCLES: u64 = 30_000;

/// What `dup_mmap()` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForkCopy {
    pub child_mm: usize,
    pub cycles: u64,
    /// Huge PMD entries and PTEs write-protected and shared.
    pub pmds_shared: u64,
    pub ptes_shared: u64,
}

impl Kernel {
    /// `dup_mmap(mm, oldmm)`: creates the child's mm from `parent`'s. Private
    /// writable entries are write-protected in both (`is_cow_mapping()`).
    /// The caller flushes the parent's TLB afterwards (`flush_tlb_mm(oldmm)`
    /// at the end of `dup_mmap()`), since its writable entries are gone.
    pub fn dup_mmap(&mut self, parent: usize) -> ForkCopy {
        let child_id = self.mms.len();
        let mut child = self.mms[parent].dup(child_id);
        let mut out = ForkCopy {
            child_mm: child_id,
            ..ForkCopy::default()
        };
        let vmas = self.mms[parent].vmas.clone();
        let (alloc, costs) = (&mut self.mem.alloc, &self.costs);
        let pmds = &mut self.mms[parent].pmds;
        for vma in &vmas {
            if let VmaKind::FileShared { ino, .. } = vma.kind {
                // vma_needs_copy(): a shared file mapping's PTEs are not
                // copied; the child faults them from the page cache.
                self.pagecache.inodes[ino]
                    .i_mmap
                    .insert((child_id, vma.start));
                continue;
            }
            let cow = vma.kind == VmaKind::AnonPrivate && vma.writable;
            for (&key, pmd) in pmds.range_mut(pmd_keys(vma.start, vma.end)) {
                match pmd {
                    Pmd::Huge(p) => {
                        // copy_huge_pmd(): deposits a page table for a later split.
                        if cow {
                            p.writable = false;
                        }
                        share(alloc, p.pfn);
                        out.pmds_shared += 1;
                        out.cycles += COPY_ENTRY_CYCLES + costs.page_alloc_cycles;
                        child.pmds.insert(key, Pmd::Huge(*p));
                        child.rss_pages += 512;
                    }
                    Pmd::Table(t) => {
                        // copy_pte_range(): a new PTE page for the child.
                        out.cycles += costs.page_alloc_cycles;
                        let mut ct = Box::new([None; 512]);
                        for (i, e) in t.iter_mut().enumerate() {
                            if let Some(p) = e {
                                if cow {
                                    p.writable = false;
                                }
                                share(alloc, p.pfn);
                                out.ptes_shared += 1;
                                out.cycles += COPY_ENTRY_CYCLES;
                                ct[i] = Some(*p);
                                child.rss_pages += 1;
                            }
                        }
                        child.pmds.insert(key, Pmd::Table(ct));
                    }
                }
            }
        }
        // The parent's cached writable translations are stale now.
        self.mms[parent].generation += 1;
        self.mms.push(child);
        out
    }

    /// `exit_mmap()`: unmaps every VMA of `mm`. Returns what each VMA's
    /// range held, for the caller to release and flush.
    pub fn exit_mmap_ranges(&mut self, mm: usize) -> Vec<ZapRange> {
        let starts: Vec<u64> = self.mms[mm].vmas.iter().map(|v| v.start).collect();
        starts
            .into_iter()
            .map(|s| self.unmap_vma(mm, s).expect("VMA start"))
            .collect()
    }
}

/// One more mapping of the folio holding `pfn` (`folio_get` + rmap dup).
fn share(alloc: &mut PageAlloc, pfn: u64) {
    alloc.map_folio(pfn, 1, false);
}

impl Kernel {
    /// fork's share of the mm on `hw.cpu`: `dup_mmap()` of `parent_mm`, its
    /// copying charged, then `flush_tlb_mm(oldmm)` (the parent's writable
    /// entries are gone). Returns the child's mm.
    pub fn fork_mm(&mut self, hw: &mut Hw, parent_mm: usize) -> usize {
        // dup_mmap() holds the parent's mmap_lock for write throughout.
        self.down_write(hw, SemRef::Mmap(parent_mm));
        let copy = self.dup_mmap(parent_mm);
        if self.cfg.pte_locks {
            self.copy_page_range_locked(hw, parent_mm, copy);
        } else {
            hw.charge(copy.cycles);
        }
        if self.page_tables() && !self.cfg.pte_locks {
            // copy_page_range(): the child's tables allocated and each
            // copied entry stored (kernel/pgtable.rs).
            let child = copy.child_mm;
            let mut entries = Vec::new();
            for (&key, pmd) in &self.mms[child].pmds {
                let base = key << PMD_SHIFT;
                match pmd {
                    Pmd::Huge(_) => entries.push(base),
                    Pmd::Table(t) => entries.extend(
                        t.iter()
                            .enumerate()
                            .filter(|(_, e)| e.is_some())
                            .map(|(i, _)| base + ((i as u64) << 12)),
                    ),
                }
            }
            for va in entries {
                self.set_entry_at(hw, child, va, false);
            }
        }
        self.up_write(hw, SemRef::Mmap(parent_mm));
        hw.settle(KFn::Fork);
        flush_tlb_mm_range(
            hw.machine,
            &mut self.vmstat,
            hw.cpu,
            &mut self.mms[parent_mm],
            hw.tlbstate,
            0,
            !4095u64,
            self.cfg.tlb_single_page_flush_ceiling,
        );
        hw.settle(KFn::FlushTlb);
        copy.child_mm
    }

    /// `copy_page_range()` with the split page-table locks
    /// (`kernel.pte_locks`): per PMD slot of the child, in address order,
    /// the table's allocation (the child's PTE page, or the page table
    /// `copy_huge_pmd` deposits for a huge one) before the locks, then the
    /// copy of its entries under the child's table's lock and the parent's
    /// ([`Kernel::copy_table_locked`]). The cycles are `copy`'s, spent
    /// where the path spends them; a PTE table with no entry to copy takes
    /// no lock (the child's table gets a frame with its first entry).
    fn copy_page_range_locked(&mut self, hw: &mut Hw, parent: usize, copy: ForkCopy) {
        let child = copy.child_mm;
        let alloc = self.costs.page_alloc_cycles;
        let mut tables = Vec::new();
        for (&key, pmd) in &self.mms[child].pmds {
            let base = key << PMD_SHIFT;
            tables.push(match pmd {
                Pmd::Huge(_) => vec![base],
                Pmd::Table(t) => t
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.is_some())
                    .map(|(i, _)| base + ((i as u64) << 12))
                    .collect(),
            });
        }
        let mut charged = 0;
        for vas in tables {
            hw.charge(alloc);
            let cycles = vas.len() as u64 * COPY_ENTRY_CYCLES;
            // kernel.pte_locks needs kernel.page_tables.
            self.copy_table_locked(hw, child, parent, &vas, cycles);
            charged += alloc + cycles;
        }
        debug_assert_eq!(charged, copy.cycles, "dup_mmap's cycles, table by table");
    }
}
