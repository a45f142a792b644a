//! TLB flushing after page-table changes and the per-CPU TLB state
//! (arch/x86/mm/tlb.c, docs/mechanisms.md#tlb-flushing-and-lazy-tlb): `switch_mm_irqs_off()`,
//! `enter_lazy_tlb()` and `flush_tlb_mm_range()`, which flushes locally and
//! sends IPIs to the other CPUs in `mm_cpumask` that run the mm; ranges above
//! `tlb_single_page_flush_ceiling` pages become full flushes.
//!
//! Lazy TLB: a CPU that switches to a kernel thread (or goes idle, which is
//! the idle kernel thread) keeps the previous mm loaded and stays in its
//! `mm_cpumask`, but flushes skip it (`should_flush_tlb`); each mm counts its
//! flushes (`tlb_gen`) and a lazy CPU that switches back to the same mm
//! flushes its whole TLB if it missed one. Without PCID, switching to another
//! mm writes CR3, which flushes the TLB.
//!
//! Invariants: a CPU that has an mm loaded and is not lazy is in that mm's
//! `mm_cpumask` and has seen every flush of it (`tlb_gen` equal to the mm's).

use super::mm::Mm;
use super::VmStat;
use crate::machine::ipi::CpuMask;
use crate::machine::Machine;

/// One CPU's `cpu_tlbstate`: the mm whose translations it holds, whether it
/// holds it lazily (running a kernel thread or idle), and the mm's flush
/// generation it has caught up with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlbState {
    pub loaded_mm: Option<usize>,
    pub is_lazy: bool,
    pub tlb_gen: u64,
}

/// `switch_mm_irqs_off(prev, next)` on `cpu` as it switches to a task of `next`.
pub fn switch_mm_irqs_off(m: &mut Machine, ts: &mut TlbState, next: &mut Mm, cpu: usize) {
    if ts.loaded_mm == Some(next.id) {
        if ts.is_lazy && ts.tlb_gen < next.tlb_gen {
            // A flush skipped this CPU while it was lazy.
            m.flush_tlb_local_all(cpu);
        }
    } else {
        // No PCID: the CR3 write flushes the TLB.
        m.flush_tlb_local_all(cpu);
    }
    next.cpumask.set(cpu);
    *ts = TlbState {
        loaded_mm: Some(next.id),
        is_lazy: false,
        tlb_gen: next.tlb_gen,
    };
}

/// `enter_lazy_tlb()`: switching to a kernel thread or idle keeps the mm loaded.
pub fn enter_lazy_tlb(ts: &mut TlbState) {
    if ts.loaded_mm.is_some() {
        ts.is_lazy = true;
    }
}

/// `flush_tlb_mm_range(mm, start, end, stride_shift = PAGE_SHIFT)` issued on `cpu`.
#[allow(clippy::too_many_arguments)]
pub fn flush_tlb_mm_range(
    m: &mut Machine,
    vmstat: &mut VmStat,
    cpu: usize,
    mm: &mut Mm,
    ts: &mut [TlbState],
    start: u64,
    end: u64,
    ceiling: u64,
) {
    flush_tlb_mm_range_stride(m, vmstat, cpu, mm, ts, start, end, 12, ceiling)
}

/// `flush_tlb_mm_range(mm, start, end, stride_shift)`: entries are flushed one
/// per `1 << stride_shift` bytes (PMD_SHIFT for a huge mapping, as
/// `flush_pmd_tlb_range()` passes), up to the ceiling.
#[allow(clippy::too_many_arguments)]
pub fn flush_tlb_mm_range_stride(
    m: &mut Machine,
    vmstat: &mut VmStat,
    cpu: usize,
    mm: &mut Mm,
    ts: &mut [TlbState],
    start: u64,
    end: u64,
    stride_shift: u32,
    ceiling: u64,
) {
    let nr = (end - start) >> stride_shift;
    let pages: Vec<u64> = if nr > ceiling {
        Vec::new()
    } else {
        (0..nr).map(|i| start + (i << stride_shift)).collect()
    };
    flush_tlb_mm_pages(
        m,
        vmstat,
        cpu,
        mm,
        ts,
        (nr <= ceiling).then_some(pages.as_slice()),
    );
}

/// The flush part of `flush_tlb_mm_range()` once the ceiling has chosen:
/// `pages` flushed one by one (`Some`, the addresses of 4 KiB or huge
/// entries) or the whole TLB (`None`), locally and by shootdown on the
/// mm's other CPUs that run it.
pub fn flush_tlb_mm_pages(
    m: &mut Machine,
    vmstat: &mut VmStat,
    cpu: usize,
    mm: &mut Mm,
    ts: &mut [TlbState],
    pages: Option<&[u64]>,
) {
    // inc_mm_tlb_gen()
    mm.tlb_gen += 1;
    let gen = mm.tlb_gen;
    let full = pages.is_none();
    let pages = pages.unwrap_or(&[]);
    // should_flush_tlb(): skip lazy CPUs and CPUs running another mm (they flush at switch_mm).
    let mut targets = CpuMask::empty();
    for c in mm.cpumask.iter() {
        if c != cpu && ts[c].loaded_mm == Some(mm.id) && !ts[c].is_lazy && !mm.inject_no_shootdown {
            targets.set(c);
            ts[c].tlb_gen = gen;
        }
    }
    if !targets.is_empty() {
        vmstat.nr_tlb_remote_flush += 1;
        vmstat.nr_tlb_remote_flush_received += targets.count() as u64;
        m.send_tlb_flush_ipis(
            cpu,
            &targets,
            mm.asid,
            if full { None } else { Some(pages) },
        );
    }
    if ts[cpu].loaded_mm == Some(mm.id) {
        if ts[cpu].is_lazy {
            // flush_tlb_func() on a lazy CPU switches it to init_mm (the CR3 write flushes).
            mm.cpumask.clear(cpu);
            ts[cpu] = TlbState::default();
            m.flush_tlb_local_all(cpu);
        } else if full {
            vmstat.nr_tlb_local_flush_all += 1;
            m.flush_tlb_local_all(cpu);
        } else {
            for &va in pages {
                vmstat.nr_tlb_local_flush_one += 1;
                m.flush_tlb_local_page(cpu, mm.asid, va);
            }
        }
        if ts[cpu].loaded_mm.is_some() {
            ts[cpu].tlb_gen = gen;
        }
    }
}

/// `invlpgb_flush_all_nonglobals()` issued on `cpu` (AMD INVLPGB + TLBSYNC):
/// every CPU's TLB loses every user translation at once, without an IPI, so
/// every CPU that has an mm loaded is caught up with it, lazy or not. False,
/// with nothing done, when the machine has no INVLPGB.
pub fn invlpgb_flush_all_nonglobals(
    m: &mut Machine,
    cpu: usize,
    ts: &mut [TlbState],
    mms: &[Mm],
) -> bool {
    if !m.invlpgb_flush_all_nonglobals(cpu) {
        return false;
    }
    for t in ts.iter_mut() {
        if let Some(mm) = t.loaded_mm {
            t.tlb_gen = mms[mm].tlb_gen;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{embedded_machines, Preset};

    #[test]
    fn lazy_cpus_stay_in_the_cpumask_skip_flushes_and_catch_up_at_switch() {
        let text = embedded_machines()
            .iter()
            .find(|(n, _)| *n == "xeon-e5-2699v3-2s")
            .unwrap()
            .1;
        let mut m = Machine::new(
            &Preset::parse(text, "e5").unwrap().machine_params().unwrap(),
            1 << 30,
            0,
        )
        .unwrap();
        let mut mm = Mm::new(7);
        let mut ts = vec![TlbState::default(); m.cpus.len()];
        for cpu in [0, 1, 2] {
            switch_mm_irqs_off(&mut m, &mut ts[cpu], &mut mm, cpu);
        }
        // CPU 2 switches to a kernel thread: lazy, still in mm_cpumask.
        enter_lazy_tlb(&mut ts[2]);
        assert!(mm.cpumask.test(2) && ts[2].is_lazy);
        let mut vs = VmStat::default();
        flush_tlb_mm_range(
            &mut m,
            &mut vs,
            0,
            &mut mm,
            &mut ts,
            0x1000,
            0x3000,
            crate::kernel::tunables::KernelTunables::default().tlb_single_page_flush_ceiling,
        );
        // Only CPU 1 gets an IPI; the lazy CPU is skipped and falls behind.
        assert_eq!(
            (vs.nr_tlb_remote_flush, vs.nr_tlb_remote_flush_received),
            (1, 1)
        );
        assert_eq!(
            (m.cpus[1].stats.ipis_received, m.cpus[2].stats.ipis_received),
            (1, 0)
        );
        assert_eq!(vs.nr_tlb_local_flush_one, 2);
        assert!(ts[2].tlb_gen < mm.tlb_gen && ts[1].tlb_gen == mm.tlb_gen);
        // Back to the mm: the missed flush becomes a full one.
        let before = m.cpus[2].stats.tlb_flush_full;
        switch_mm_irqs_off(&mut m, &mut ts[2], &mut mm, 2);
        assert_eq!(m.cpus[2].stats.tlb_flush_full, before + 1);
        // A lazy CPU that missed nothing switches back without a flush.
        enter_lazy_tlb(&mut ts[1]);
        switch_mm_irqs_off(&mut m, &mut ts[1], &mut mm, 1);
        assert_eq!(
            m.cpus[1].stats.tlb_flush_full, 1,
            "only the first switch's CR3 write"
        );
    }
}
