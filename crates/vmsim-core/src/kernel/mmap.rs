//! `munmap` and the zap of a range (mm/mmap.c, mm/memory.c
//! `unmap_page_range`): entries are removed, each drops one mapping of its
//! folio (the last one frees it) and the range is flushed.

use super::hw::Hw;
use super::locking::rwsem::SemRef;
use super::mm::{pmd_keys, Level, Pmd, Vma, VmaKind, PMD_SHIFT, PUD_SHIFT, PUD_SIZE};
use super::{KFn, Kernel};
use crate::machine::Mode;

/// What an unmap removed from one range of an mm, for [`Kernel::zap`] to
/// release.
#[derive(Clone, Debug, Default)]
pub struct ZapRange {
    pub start: u64,
    pub end: u64,
    /// The entries removed (head pfn or sub-page pfn, huge), in address order.
    pub entries: Vec<(u64, bool)>,
    /// The tables the zap goes through, in the same order: per PTE table
    /// (`zap_pte_range` takes its lock once) and per huge entry
    /// (`zap_huge_pmd`'s `pmd_lock`, hugetlb's `huge_pte_lock`), the line
    /// of an entry of the table holding it (None when that table has no
    /// frame) and how many of `entries` it held.
    pub tables: Vec<(Option<u64>, usize)>,
}

impl Kernel {
    /// `munmap(start)` of the mapping that starts at `start` in `mm_id`, on
    /// `hw.cpu`: the system call's entry and exit, the VMA unlinked, its
    /// entries zapped and flushed. False if no mapping starts there.
    pub fn munmap(&mut self, hw: &mut Hw, mm_id: usize, start: u64) -> bool {
        let Some(zapped) = self.unmap_vma(mm_id, start) else {
            return false;
        };
        hw.machine.set_mode(hw.cpu, Mode::Kernel);
        hw.charge(self.costs.syscall_entry_exit_cycles);
        self.down_write(hw, SemRef::Mmap(mm_id));
        self.zap(hw, mm_id, &zapped);
        self.up_write(hw, SemRef::Mmap(mm_id));
        hw.machine.set_mode(hw.cpu, Mode::User);
        true
    }

    /// `madvise(start, len, MADV_DONTNEED)` in `mm_id` on `hw.cpu`: the
    /// system call, the range's entries zapped and flushed (`zap_page_range`).
    /// Err names what the model cannot do: a range outside one private
    /// anonymous mapping, or one that cuts a huge page.
    pub fn madvise_dontneed(
        &mut self,
        hw: &mut Hw,
        mm_id: usize,
        start: u64,
        len: u64,
    ) -> Result<(), String> {
        let end = start + len;
        match self.mms[mm_id].find_vma(start) {
            Some(v) if v.end >= end && v.kind == super::mm::VmaKind::AnonPrivate => {}
            _ => {
                return Err(format!(
                    "madvise(MADV_DONTNEED) of [{start:#x}, {end:#x}): not within one private anonymous mapping"
                ))
            }
        }
        let tables = self.zap_tables(mm_id, start, end, false);
        let zapped = ZapRange {
            start,
            end,
            entries: self.mms[mm_id].zap_range(start, end)?,
            tables,
        };
        hw.machine.set_mode(hw.cpu, Mode::Kernel);
        hw.charge(self.costs.syscall_entry_exit_cycles);
        self.down_read(hw, SemRef::Mmap(mm_id));
        self.zap(hw, mm_id, &zapped);
        self.up_read(hw, SemRef::Mmap(mm_id));
        hw.machine.set_mode(hw.cpu, Mode::User);
        Ok(())
    }

    /// `mprotect()` of the whole private anonymous mapping at `start` in
    /// `mm_id` on `hw.cpu`: the system call, `change_protection()` at
    /// `change_pte_cycles` an entry visited, and on a downgrade the range's
    /// TLB flush (other CPUs may hold writable translations). Err when no
    /// such mapping starts there.
    pub fn mprotect(
        &mut self,
        hw: &mut Hw,
        mm_id: usize,
        start: u64,
        write: bool,
    ) -> Result<(), String> {
        match self.mms[mm_id].find_vma(start) {
            Some(v) if v.start == start && v.kind == super::mm::VmaKind::AnonPrivate => {}
            _ => {
                return Err(format!(
                    "mprotect of {start:#x}: no private anonymous mapping starts there"
                ))
            }
        }
        hw.machine.set_mode(hw.cpu, Mode::Kernel);
        hw.charge(self.costs.syscall_entry_exit_cycles);
        self.down_write(hw, SemRef::Mmap(mm_id));
        hw.settle(KFn::Syscall);
        let (end, visited) = self.mms[mm_id]
            .change_protection(start, write)
            .expect("the VMA was found");
        hw.charge(visited * self.costs.change_pte_cycles);
        hw.settle(KFn::Syscall);
        if !write && visited > 0 {
            self.flush_tlb_batched_pending(hw, mm_id);
            self.flush_tlb_range(hw, mm_id, start, end);
            hw.settle(KFn::FlushTlb);
        }
        self.up_write(hw, SemRef::Mmap(mm_id));
        hw.machine.set_mode(hw.cpu, Mode::User);
        Ok(())
    }

    /// Removes the VMA that starts at `start` in `mm_id` and every entry
    /// in it (`unmap_vmas`' share of `munmap` and `exit_mmap`), the VMA
    /// taken out of its file's `i_mmap`, hugetlb pages back to their pool.
    /// None if no VMA starts there.
    pub fn unmap_vma(&mut self, mm_id: usize, start: u64) -> Option<ZapRange> {
        let end = self.mms[mm_id].vmas.iter().find(|v| v.start == start)?.end;
        let mut tables = self.zap_tables(mm_id, start, end, true);
        let (vma, entries) = self.mms[mm_id].munmap(start)?;
        self.unlink_file_vma(mm_id, &vma);
        let entries = self.hugetlb_unmap(&vma, entries);
        if let VmaKind::Hugetlb(_) = vma.kind {
            // The pool takes the pages back; each entry's lock is still taken.
            for t in &mut tables {
                t.1 = 0;
            }
        }
        let Vma { start, end, .. } = vma;
        Some(ZapRange {
            start,
            end,
            entries,
            tables,
        })
    }

    /// The tables an unmap of [start, end) in `mm_id` goes through, before
    /// it removes anything, in the order `Mm::munmap` and `Mm::zap_range`
    /// return their entries (see [`ZapRange::tables`]): each PMD slot's PTE
    /// table with its entries (all of them with `whole`, as `Mm::munmap`
    /// takes them; else those in the range), each huge PMD entry, then each
    /// 1 GiB PUD entry.
    fn zap_tables(
        &self,
        mm_id: usize,
        start: u64,
        end: u64,
        whole: bool,
    ) -> Vec<(Option<u64>, usize)> {
        let mm = &self.mms[mm_id];
        let mut out = Vec::new();
        for (&key, pmd) in mm.pmds.range(pmd_keys(start, end)) {
            let base = key << PMD_SHIFT;
            out.push(match pmd {
                Pmd::Huge(_) => (mm.pt.line(base, Level::Pmd), 1),
                Pmd::Table(t) => {
                    let n = (0..512u64)
                        .filter(|&i| {
                            let va = base | (i << 12);
                            t[i as usize].is_some() && (whole || (va >= start && va < end))
                        })
                        .count();
                    (mm.pt.line(base.max(start), Level::Pte), n)
                }
            });
        }
        if whole {
            for (&key, _) in mm.puds.range(start >> PUD_SHIFT..end.div_ceil(PUD_SIZE)) {
                out.push((mm.pt.line(key << PUD_SHIFT, Level::Pud), 1));
            }
        }
        out
    }

    /// Releases the entries just removed from a range of `mm_id` (each
    /// drops one mapping of its folio; the last one frees it) and flushes.
    /// With `kernel.pte_locks`, each table's entries are released under its
    /// lock, taken once per table (`zap_pte_range`) or huge entry
    /// (`zap_huge_pmd`): the model's per-entry cost, `page_free_cycles`,
    /// stands there for the entry's clear and rmap removal under the lock
    /// (the kernel frees the gathered pages after the flush, outside it).
    pub fn zap(&mut self, hw: &mut Hw, mm_id: usize, zapped: &ZapRange) {
        // Whatever came before (the system call's entry) is its own.
        hw.settle(KFn::Syscall);
        let mut entries = &zapped.entries[..];
        let mut checked = false;
        for &(line, n) in &zapped.tables {
            let ptl = self.ptl_lock_at(hw, line, KFn::FreePages);
            if !checked {
                // zap_pte_range() takes the PTE lock, then
                // flush_tlb_batched_pending() (the later tables' calls find
                // nothing pending: nothing runs between them).
                self.flush_tlb_batched_pending(hw, mm_id);
                checked = true;
            }
            let (these, rest) = entries.split_at(n.min(entries.len()));
            for &(pfn, _huge) in these {
                self.put_page(pfn);
                hw.charge(self.costs.page_free_cycles);
            }
            entries = rest;
            self.ptl_unlock(hw, ptl);
        }
        if !checked {
            self.flush_tlb_batched_pending(hw, mm_id);
        }
        debug_assert!(entries.is_empty(), "every entry is in one of the tables");
        for &(pfn, _huge) in entries {
            self.put_page(pfn);
            hw.charge(self.costs.page_free_cycles);
        }
        hw.settle(KFn::FreePages);
        self.flush_tlb_range(hw, mm_id, zapped.start, zapped.end);
        hw.settle(KFn::FlushTlb);
        // free_pgtables(): the tables the range no longer needs (their
        // entries are gone, and the TLBs flushed above).
        self.free_pgtables(mm_id, false);
    }
}
