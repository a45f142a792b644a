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
    flush_tlb_mm_range_stride(m, vmstat, cpu, mm, loaded_mm, start, end, 12)
}

/// `flush_tlb_mm_range(mm, start, end, stride_shift)`: entries are flushed one
/// per `1 << stride_shift` bytes (PMD_SHIFT for a huge mapping, as
/// `flush_pmd_tlb_range()` passes), up to the ceiling.
#[allow(clippy::too_many_arguments)]
pub fn flush_tlb_mm_range_stride(
    m: &mut Machine,
    vmstat: &mut VmStat,
    cpu: usize,
    mm: &Mm,
    loaded_mm: &[Option<usize>],
    start: u64,
    end: u64,
    stride_shift: u32,
) {
    let nr = (end - start) >> stride_shift;
    let full = nr > TLB_SINGLE_PAGE_FLUSH_CEILING;
    let pages: Vec<u64> = if full { Vec::new() } else { (0..nr).map(|i| start + (i << stride_shift)).collect() };
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
