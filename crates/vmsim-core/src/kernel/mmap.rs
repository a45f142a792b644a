//! `munmap` and the zap of a range (mm/mmap.c, mm/memory.c
//! `unmap_page_range`): entries are removed, each drops one mapping of its
//! folio (the last one frees it) and the range is flushed.

use super::hw::Hw;
use super::locking::rwsem::SemRef;
use super::{KFn, Kernel};
use crate::machine::Mode;

impl Kernel {
    /// `munmap(start)` of the mapping that starts at `start` in `mm_id`, on
    /// `hw.cpu`: the system call's entry and exit, the VMA unlinked, its
    /// entries zapped and flushed. False if no mapping starts there.
    pub fn munmap(&mut self, hw: &mut Hw, mm_id: usize, start: u64) -> bool {
        let Some((vma, zapped)) = self.mms[mm_id].munmap(start) else {
            return false;
        };
        self.unlink_file_vma(mm_id, &vma);
        let zapped = self.hugetlb_unmap(&vma, zapped);
        hw.machine.set_mode(hw.cpu, Mode::Kernel);
        hw.charge(self.costs.syscall_entry_exit_cycles);
        self.down_write(hw, SemRef::Mmap(mm_id));
        self.zap(hw, mm_id, vma.start, vma.end, &zapped);
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
        let zapped = self.mms[mm_id].zap_range(start, end)?;
        hw.machine.set_mode(hw.cpu, Mode::Kernel);
        hw.charge(self.costs.syscall_entry_exit_cycles);
        self.down_read(hw, SemRef::Mmap(mm_id));
        self.zap(hw, mm_id, start, end, &zapped);
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

    /// Releases the entries just removed from [start, end) of `mm_id` (each
    /// drops one mapping of its folio; the last one frees it) and flushes.
    pub fn zap(&mut self, hw: &mut Hw, mm_id: usize, start: u64, end: u64, zapped: &[(u64, bool)]) {
        // Whatever came before (the system call's entry) is its own.
        hw.settle(KFn::Syscall);
        // zap_pte_range() takes the PTE lock, then flush_tlb_batched_pending().
        self.flush_tlb_batched_pending(hw, mm_id);
        for &(pfn, _huge) in zapped {
            self.put_page(pfn);
            hw.charge(self.costs.page_free_cycles);
        }
        hw.settle(KFn::FreePages);
        self.flush_tlb_range(hw, mm_id, start, end);
        hw.settle(KFn::FlushTlb);
        // free_pgtables(): the tables the range no longer needs (their
        // entries are gone, and the TLBs flushed above).
        self.free_pgtables(mm_id, false);
    }
}
