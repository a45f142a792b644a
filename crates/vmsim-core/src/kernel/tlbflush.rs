//! TLB flushing after page-table changes (arch/x86/mm/tlb.c,
//! MECHANISMS.md §4.4): `flush_tlb_mm_range()` flushes locally and sends
//! IPIs to the other CPUs in `mm_cpumask` that have the mm loaded; ranges
//! above `tlb_single_page_flush_ceiling` pages become full flushes.

use super::mm::Mm;
use super::VmStat;
use crate::machine::ipi::CpuMask;
use crate::machine::Machine;

/// debugfs x86/tlb_single_page_flush_ceiling default.
pub const TLB_SINGLE_PAGE_FLUSH_CEILING: u64 = 33;

/// `flush_tlb_mm_range(mm, start, end, stride_shift = PAGE_SHIFT)` issued on `cpu`.
/// `loaded_mm[c]` is the mm CPU c currently runs (None: idle, in lazy TLB mode).
pub fn flush_tlb_mm_range(m: &mut Machine, vmstat: &mut VmStat, cpu: usize, mm: &Mm, loaded_mm: &[Option<usize>], start: u64, end: u64) {
    let nr = (end - start) >> 12;
    let full = nr > TLB_SINGLE_PAGE_FLUSH_CEILING;
    let pages: Vec<u64> = if full { Vec::new() } else { (0..nr).map(|i| start + (i << 12)).collect() };
    // should_flush_tlb(): skip lazy CPUs and CPUs running another mm (they flush at switch_mm).
    let mut targets = CpuMask::empty();
    for c in mm.cpumask.iter() {
        if c != cpu && loaded_mm[c] == Some(mm.id) {
            targets.set(c);
        }
    }
    if !targets.is_empty() {
        vmstat.nr_tlb_remote_flush += 1;
        vmstat.nr_tlb_remote_flush_received += targets.count() as u64;
        m.send_tlb_flush_ipis(cpu, &targets, mm.asid, if full { None } else { Some(&pages) });
    }
    if loaded_mm[cpu] == Some(mm.id) {
        if full {
            vmstat.nr_tlb_local_flush_all += 1;
            m.flush_tlb_local_all(cpu);
        } else {
            for &va in &pages {
                vmstat.nr_tlb_local_flush_one += 1;
                m.flush_tlb_local_page(cpu, mm.asid, va);
            }
        }
    }
}
