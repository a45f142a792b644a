//! NUMA balancing's scanner and its per-task accounting
//! (kernel/sched/fair.c, docs/mechanisms.md#the-scanner): `task_tick_numa` on a user
//! task's tick queues `task_numa_work` once the task has run a scan period
//! since its last one; `task_numa_work` (one thread of an mm per period)
//! marks the next `scan_size_mb` of the address space PROT_NONE with
//! `change_prot_numa` (kernel/mempolicy.rs); `task_numa_fault` counts each
//! hinting fault as local or remote, private or shared, and once per scan
//! pass of the mm `update_task_scan_period` adapts the task's period
//! between `task_scan_min` and `task_scan_max`.
//!
//! Time scale: the tunables are the kernel's (ms, MB), and the run's scale
//! factor multiplies both the scan size and every period, as it multiplies
//! the workload's memory and durations: the scanner then covers the same
//! share of memory per unit of the workload's work as at full size.
//!
//! Not modelled: `task_numa_placement`'s choice of a preferred node and
//! task migration between nodes, NUMA groups, the VMA PID filter (6.4+),
//! `numa_scan_period` resets on node change.
//!
//! Invariants: a task scans at most once per `node_stamp` step of its own
//! run time; an mm is scanned by at most one of its threads per period
//! (`numa_next_scan`); the period stays within [`task_scan_min`, `task_scan_max`].

use crate::kernel::hw::Hw;
pub use crate::kernel::mm::MmNuma;
use crate::kernel::mm::PMD_SIZE;
use crate::kernel::numa_balancing::{cpupid_to_pid, TaskNuma, CPUPID_UNSET};
use crate::kernel::{KFn, Kernel, Work};
use std::collections::VecDeque;

/// `MAX_SCAN_WINDOW`: the scanner's rate limit, MB per second.
pub const MAX_SCAN_WINDOW_MB: u64 = 2560;
/// `NUMA_PERIOD_SLOTS` and `NUMA_PERIOD_THRESHOLD` of `update_task_scan_period`.
pub const NUMA_PERIOD_SLOTS: u64 = 10;
pub const NUMA_PERIOD_THRESHOLD: u64 = 7;

/// The scanner tunables as a run uses them (debugfs `sched/numa_balancing/`,
/// before 5.13 the `kernel.numa_balancing_*` sysctls).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct ScanKnobs {
    pub scan_delay_ms: u64,
    pub scan_period_min_ms: u64,
    pub scan_period_max_ms: u64,
    pub scan_size_mb: u64,
    /// The run's scale factor: multiplies the scan size and every period.
    pub scale: f64,
}

impl Default for ScanKnobs {
    fn default() -> ScanKnobs {
        let t = crate::kernel::tunables::KernelTunables::default();
        ScanKnobs {
            scan_delay_ms: t.numa_balancing_scan_delay_ms,
            scan_period_min_ms: t.numa_balancing_scan_period_min_ms,
            scan_period_max_ms: t.numa_balancing_scan_period_max_ms,
            scan_size_mb: t.numa_balancing_scan_size_mb,
            scale: 1.0,
        }
    }
}

impl ScanKnobs {
    /// Scan size in 4 KiB pages, scaled.
    pub fn scan_pages(&self) -> u64 {
        (((self.scan_size_mb << 8) as f64 * self.scale) as u64).max(1)
    }
    /// `task_nr_scan_windows`: how many scans cover the mm's resident pages.
    pub fn nr_scan_windows(&self, rss_pages: u64) -> u64 {
        let sp = self.scan_pages();
        rss_pages.max(sp).div_ceil(sp)
    }
    /// `task_scan_min` (ms): at most `MAX_SCAN_WINDOW` MB/s of scanning.
    pub fn task_scan_min(&self, rss_pages: u64) -> u64 {
        let windows = if self.scan_size_mb < MAX_SCAN_WINDOW_MB {
            MAX_SCAN_WINDOW_MB / self.scan_size_mb.max(1)
        } else {
            1
        };
        let floor = 1000 / windows;
        floor.max(self.scan_period_min_ms / self.nr_scan_windows(rss_pages))
    }
    /// `task_scan_max` (ms).
    pub fn task_scan_max(&self, rss_pages: u64) -> u64 {
        let smin = self.task_scan_min(rss_pages);
        smin.max(self.scan_period_max_ms / self.nr_scan_windows(rss_pages))
    }
    /// `task_scan_start` (ms): the minimum, with no NUMA group.
    pub fn task_scan_start(&self, rss_pages: u64) -> u64 {
        self.task_scan_min(rss_pages)
    }
}

/// `update_task_scan_period(p, shared, private)` (v5.13): no faults or
/// failed migrations double the period; mostly private or mostly local
/// faults lengthen it by slots of a tenth; otherwise it shortens. The
/// result is clamped to [min, max]. Returns whether the mm's next scan
/// moves to now + period (the slow-down branch does that).
pub fn update_task_scan_period(tn: &mut TaskNuma, smin: u64, smax: u64) -> bool {
    let [shared, private] = tn.faults_priv;
    let [remote, local, failed] = tn.faults_locality;
    tn.nr_period_updates += 1;
    tn.faults_priv = [0, 0];
    if local + shared == 0 || failed > 0 {
        tn.scan_period = tn.scan_period_max.min(tn.scan_period << 1);
        tn.faults_locality = [0; 3];
        return true;
    }
    let slot = tn.scan_period.div_ceil(NUMA_PERIOD_SLOTS) as i64;
    let lr = ((local * NUMA_PERIOD_SLOTS) / (local + remote).max(1)) as i64;
    let ps = ((private * NUMA_PERIOD_SLOTS) / (private + shared).max(1)) as i64;
    let th = NUMA_PERIOD_THRESHOLD as i64;
    let diff = if ps >= th {
        (ps - th).max(1) * slot
    } else if lr >= th {
        (lr - th).max(1) * slot
    } else {
        -(th - lr.max(ps)) * slot
    };
    tn.scan_period =
        (tn.scan_period as i64 + diff).clamp(smin as i64, smax.max(smin) as i64) as u64;
    tn.faults_locality = [0; 3];
    false
}

impl Kernel {
    /// The NUMA state of task `pid`, created on first use.
    pub fn task_numa(&mut self, pid: usize) -> &mut TaskNuma {
        if self.numa.tasks.len() <= pid {
            self.numa.tasks.resize_with(pid + 1, TaskNuma::default);
        }
        &mut self.numa.tasks[pid]
    }

    /// `task_numa_fault(last_cpupid, mem_node, pages, flags)` for task `pid`
    /// of `mm` on node `cpu_node`: the locality and private/shared counts,
    /// and once per scan pass of the mm, the period update
    /// (`task_numa_placement` → `update_task_scan_period`).
    pub fn task_numa_fault(
        &mut self,
        pid: usize,
        mm: usize,
        last_cpupid: u32,
        mem_node: usize,
        cpu_node: usize,
        failed: bool,
    ) {
        let knobs = self.cfg.numa_scan;
        let rss = self.mms[mm].rss_pages;
        let seq = self.mms[mm].numa.scan_seq;
        let tn = self.task_numa(pid);
        let private = last_cpupid == CPUPID_UNSET || cpupid_to_pid(last_cpupid) == pid;
        if failed {
            tn.faults_locality[2] += 1;
        }
        tn.faults_locality[(mem_node == cpu_node) as usize] += 1;
        tn.faults_priv[private as usize] += 1;
        if tn.scan_seq != seq && tn.scan_period > 0 {
            tn.scan_seq = seq;
            tn.scan_period_max = knobs.task_scan_max(rss);
            let smax = tn.scan_period_max;
            if update_task_scan_period(tn, knobs.task_scan_min(rss), smax) {
                self.mms[mm].numa.next_scan_push = true;
            }
        }
    }
}

impl Kernel {
    /// Milliseconds of (unscaled) kernel time as cycles of this run.
    pub(crate) fn numa_ms_cycles(&self, hw: &Hw, ms: f64) -> u64 {
        (ms * self.cfg.numa_scan.scale * hw.machine.freq_mhz as f64 * 1000.0) as u64
    }

    /// `task_tick_numa(rq, curr)` for user task `t` of `mm`, current on
    /// `hw.cpu` with `rt` cycles of run time (`se.sum_exec_runtime`); a scan
    /// queues its work on `work`.
    pub fn task_tick_numa(
        &mut self,
        hw: &mut Hw,
        t: usize,
        mm: usize,
        rt: u64,
        work: &mut VecDeque<Work>,
    ) {
        let cpu = hw.cpu;
        let now = hw.machine.cpus[cpu].clock;
        let knobs = self.cfg.numa_scan;
        if self.mms[mm].numa.next_scan.is_none() {
            // init_numa_balancing(): the first scan waits scan_delay.
            let d = self.numa_ms_cycles(hw, knobs.scan_delay_ms as f64);
            self.mms[mm].numa.next_scan = Some(now + d);
        }
        if self.mms[mm].numa.next_scan_push {
            self.mms[mm].numa.next_scan_push = false;
            let p = self.task_numa(t).scan_period;
            let d = self.numa_ms_cycles(hw, p as f64);
            self.mms[mm].numa.next_scan = Some(now + d);
        }
        let (stamp, mut period_ms) = {
            let tn = self.task_numa(t);
            (tn.node_stamp, tn.scan_period)
        };
        if period_ms == 0 {
            // init_numa_balancing(): numa_scan_period starts at scan_delay.
            period_ms = knobs.scan_delay_ms;
        }
        let period = self.numa_ms_cycles(hw, period_ms as f64);
        if rt <= stamp + period {
            return;
        }
        let rss = self.mms[mm].rss_pages;
        let tn = self.task_numa(t);
        if tn.node_stamp == 0 {
            tn.scan_period = knobs.task_scan_start(rss);
        }
        tn.node_stamp += period;
        if now >= self.mms[mm].numa.next_scan.unwrap_or(u64::MAX) {
            self.task_numa_work(hw, t, mm, work);
        }
    }

    /// `task_numa_work()`: marks the next `scan_size_mb` of the mm's
    /// scannable VMAs PROT_NONE, from `numa_scan_offset`, wrapping with
    /// `numa_scan_seq++` at the end of the address space.
    fn task_numa_work(&mut self, hw: &mut Hw, t: usize, mm: usize, work: &mut VecDeque<Work>) {
        let cpu = hw.cpu;
        let now = hw.machine.cpus[cpu].clock;
        let knobs = self.cfg.numa_scan;
        let rss = self.mms[mm].rss_pages;
        {
            let tn = self.task_numa(t);
            if tn.scan_period == 0 {
                tn.scan_period_max = knobs.task_scan_max(rss);
                tn.scan_period = knobs.task_scan_start(rss);
            }
        }
        let period = self.task_numa(t).scan_period;
        let next = now + self.numa_ms_cycles(hw, period as f64);
        self.mms[mm].numa.next_scan = Some(next);
        // TICK_NSEC = 1 s / CONFIG_HZ (`kernel.hz`).
        let two_ticks = self.numa_ms_cycles(hw, 2.0 * 1000.0 / self.cfg.hz as f64);
        self.task_numa(t).node_stamp += two_ticks;

        // change_pte_range() calls flush_tlb_batched_pending() per PTE table:
        // a batched unmap of this mm not yet flushed is flushed first.
        self.flush_tlb_batched_pending(hw, mm);
        let node = hw.machine.topo.node_of(cpu);
        let before = work.len();
        let c = self.costs.task_numa_work_cycles;
        work.push_back(Work::Cycles {
            cycles: c,
            instructions: c,
            what: KFn::TaskNumaWork,
        });
        let mut pages = knobs.scan_pages() as i64;
        let mut virtpages = pages * 8;
        let mut vmas: Vec<(u64, u64)> = self.mms[mm]
            .vmas
            .iter()
            .filter(|v| Kernel::vma_numa_scannable(v.kind))
            .map(|v| (v.start, v.end))
            .collect();
        vmas.sort_unstable();
        let mut start = self.mms[mm].numa.scan_offset;
        if !vmas.iter().any(|&(_, e)| e > start) {
            // reset_ptenuma_scan()
            self.mms[mm].numa.scan_seq += 1;
            start = 0;
        }
        let mut out = false;
        let first = start;
        'vmas: for &(vs, ve) in vmas.iter().filter(|&&(_, e)| e > first) {
            loop {
                start = start.max(vs);
                let end = ((start + (pages as u64) * 4096).div_ceil(PMD_SIZE) * PMD_SIZE).min(ve);
                let nr = self.change_prot_numa(mm, start, end, node, work);
                let n = ((end - start) >> 12) as i64;
                if nr > 0 {
                    pages -= n;
                }
                virtpages -= n;
                start = end;
                if pages <= 0 || virtpages <= 0 {
                    out = true;
                    break 'vmas;
                }
                if end == ve {
                    break;
                }
            }
        }
        if out {
            self.mms[mm].numa.scan_offset = start;
        } else {
            // The whole address space was scanned: reset_ptenuma_scan().
            self.mms[mm].numa.scan_seq += 1;
            self.mms[mm].numa.scan_offset = 0;
        }
        // node_stamp += 32 * diff: the scan's own run time, to keep it near 3%.
        let spent: u64 = work
            .iter()
            .skip(before)
            .map(|w| match w {
                Work::Cycles { cycles, .. } => *cycles,
                _ => 0,
            })
            .sum();
        self.task_numa(t).node_stamp += 32 * spent;
        self.numa.stat.task_numa_work_runs += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(period: u64) -> TaskNuma {
        TaskNuma {
            scan_period: period,
            scan_period_max: 1714,
            ..TaskNuma::default()
        }
    }

    #[test]
    fn scan_windows_and_bounds_follow_the_kernel_defaults() {
        let k = ScanKnobs::default();
        // 8960 MB resident: 35 windows of 256 MB; min = max(100, 1000/35), max = 60000/35.
        let rss = 8960 << 8;
        assert_eq!(k.nr_scan_windows(rss), 35);
        assert_eq!(k.task_scan_min(rss), 100);
        assert_eq!(k.task_scan_max(rss), 1714);
        // A small mm: one window, the sysctl minimum and maximum.
        assert_eq!(k.task_scan_min(1000), 1000);
        assert_eq!(k.task_scan_max(1000), 60000);
        // Scaled: the same windows for a scaled mm.
        let s = ScanKnobs {
            scale: 1.0 / 64.0,
            ..k
        };
        assert_eq!(s.nr_scan_windows(rss / 64), 35);
    }

    #[test]
    fn the_period_adapts_as_update_task_scan_period_does() {
        // No faults at all: the period doubles, up to the maximum.
        let mut t = task(400);
        assert!(update_task_scan_period(&mut t, 100, 1714));
        assert_eq!(t.scan_period, 800);
        t.scan_period = 1000;
        update_task_scan_period(&mut t, 100, 1714);
        assert_eq!(t.scan_period, 1714);
        // Failed migrations: slower too.
        let mut t = task(400);
        t.faults_locality = [5, 5, 1];
        t.faults_priv = [5, 5];
        assert!(update_task_scan_period(&mut t, 100, 1714));
        assert_eq!(t.scan_period, 800);
        // Private and remote faults: faster. ps = 10 >= 7 would be slower, so
        // take mostly shared, mostly remote: lr = 1, ps = 2 -> diff = -(7-2) slots.
        let mut t = task(400);
        t.faults_locality = [90, 10, 0];
        t.faults_priv = [80, 20];
        assert!(!update_task_scan_period(&mut t, 100, 1714));
        assert_eq!(t.scan_period, 400 - 5 * 40);
        // Mostly local: slower by (lr - 7) slots.
        let mut t = task(400);
        t.faults_locality = [1, 9, 0];
        t.faults_priv = [8, 2];
        update_task_scan_period(&mut t, 100, 1714);
        assert_eq!(t.scan_period, 400 + 2 * 40);
        // Clamped at the minimum.
        let mut t = task(120);
        t.faults_locality = [100, 0, 0];
        t.faults_priv = [100, 0];
        update_task_scan_period(&mut t, 100, 1714);
        assert_eq!(t.scan_period, 100);
        assert_eq!(
            t.faults_locality, [0; 3],
            "counts reset for the next window"
        );
    }
}
