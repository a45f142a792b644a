//! `munmap` and the zap of a range (mm/mmap.c, mm/memory.c
//! `unmap_page_range`): entries are removed, each drops one mapping of its
//! folio (the last one frees it) and the range is flushed.

use super::tlbflush::flush_tlb_mm_range;
use super::KFn;
use crate::error::Error;
use crate::machine::Mode;
use crate::sim::Sim;

impl Sim {
    pub(crate) fn munmap(&mut self, cpu: usize, t: usize, start: u64) {
        let mm_id = self.tasks[t].user_mm();
        let Some((vma, zapped)) = self.k.mms[mm_id].munmap(start) else {
            self.error = Some(Error::Internal(format!(
                "task {t}: munmap of {start:#x}, which is not a mapping start"
            )));
            return;
        };
        self.k.unlink_file_vma(mm_id, &vma);
        let zapped = self.k.hugetlb_unmap(&vma, zapped);
        self.m.set_mode(cpu, Mode::Kernel);
        let c = self.k.costs.syscall_entry_exit_cycles;
        self.m.advance(cpu, c, c);
        self.zap(cpu, mm_id, vma.start, vma.end, &zapped);
        self.m.set_mode(cpu, Mode::User);
    }

    /// Releases the entries just removed from [start, end) of `mm_id` (each
    /// drops one mapping of its folio; the last one frees it) and flushes.
    pub(crate) fn zap(
        &mut self,
        cpu: usize,
        mm_id: usize,
        start: u64,
        end: u64,
        zapped: &[(u64, bool)],
    ) {
        // Whatever came before (the system call's entry) is its own.
        self.settle(cpu, KFn::Syscall);
        // zap_pte_range() takes the PTE lock, then flush_tlb_batched_pending().
        let (k, mut hw) = self.kernel_hw(cpu);
        k.flush_tlb_batched_pending(&mut hw, mm_id);
        for &(pfn, _huge) in zapped {
            self.k.put_page(pfn);
            let c = self.k.costs.page_free_cycles;
            self.m.advance(cpu, c, c);
        }
        self.settle(cpu, KFn::FreePages);
        let k = &mut self.k;
        flush_tlb_mm_range(
            &mut self.m,
            &mut k.vmstat,
            cpu,
            &mut k.mms[mm_id],
            &mut self.tlbstate,
            start,
            end,
        );
        self.settle(cpu, KFn::FlushTlb);
    }
}
