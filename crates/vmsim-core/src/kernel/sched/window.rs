//! The windowed run loop (`sim.window_cycles` > 0): the order a run would
//! need to spread over host cores, run on one host thread for now.
//!
//! Simulated time advances in windows of W cycles. Each window has two
//! phases:
//!
//! 1. **Per partition (socket).** Each socket's CPUs run, lowest clock first
//!    as in the ordinary loop, until their clocks reach the window's end,
//!    doing only what touches nothing another socket owns or reads: user
//!    line accesses and the kernel's bulk clears and copies of lines that
//!    are local (homed on the socket, held by no other socket's caches:
//!    `Hierarchy::is_local`), in an address space only this socket's CPUs
//!    have run, and fixed-cost kernel work. A CPU whose next step is
//!    anything else (a fault, a system call, a tick, an interrupt, a
//!    schedule, a remote line) stops there: it is *parked*, its clock left
//!    where it stopped.
//! 2. **Serial.** The parked CPUs, and the timers due in the window, run as
//!    the ordinary loop runs them, lowest clock first, until they reach the
//!    window's end; this phase may touch anything.
//!
//! Effects of phase 1 on state another socket reads are deferred to its end
//! (`Hierarchy::set_defer`), so phase 1's partitions could run in any order
//! (a test runs them in reverse and compares the bytes), or at once on
//! separate host threads. The next window starts at the lowest clock of a
//! CPU with something to run, or the next timer.
//!
//! What it changes against the ordinary loop: a parked step runs after the
//! other CPUs' local work up to the window's end, not at its own time among
//! them; remote write-backs of phase 1 do not hold up the fill that evicted
//! them. W is at most the smallest cross-socket latency of the preset (a
//! remote cache hit or DRAM read), so a parked step's effect on another
//! socket could not have reached it within the window anyway.
//!
//! Invariant: phase 1 never touches scheduler, timer, wait-queue, allocator
//! or page-table state other than the accessed/dirty bits and the shadow of
//! an address space only its own CPUs ran.

use super::*;
use crate::machine::ipi::CpuMask;
use serde::Serialize;

/// Why a CPU stopped in phase 1 (indexes `WindowStats::parked`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Park {
    /// An interrupt is pending, or a tick is due (or restarts).
    Interrupt = 0,
    /// Kernel work other than fixed costs and local bulk lines.
    KernelWork,
    /// No current task, a kernel thread, a tick to look at, or a user
    /// operation to start (system calls, exits, faults' entries).
    Schedule,
    /// A page fault (or a page that must be walked in another socket's
    /// address space).
    Fault,
    /// The address space has run on another socket's CPUs.
    SharedMm,
    /// A line homed on another socket, or held in another socket's caches.
    RemoteLine,
}

/// What the windowed loop did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WindowStats {
    pub window_cycles: u64,
    pub windows: u64,
    /// Quanta run in phase 1 (to the end or up to a park) and in phase 2.
    pub quanta_partitioned: u64,
    pub quanta_serial: u64,
    /// Demand line accesses made in each phase.
    pub accesses_partitioned: u64,
    pub accesses_serial: u64,
    /// Parks by reason: interrupt, kernel_work, schedule, fault, shared_mm, remote_line.
    pub parked: [u64; 6],
}

impl Sim {
    /// Demand line accesses of every CPU so far.
    fn demand_accesses(&self) -> u64 {
        self.m
            .cpus
            .iter()
            .map(|c| c.stats.cache.l1d_loads + c.stats.cache.l1d_stores)
            .sum()
    }

    pub(super) fn run_windowed(&mut self, progress: &mut dyn FnMut(f64)) -> Result<(), Error> {
        let n = self.cpus.len();
        let sockets = self.m.topo.sockets;
        let mut masks = vec![CpuMask::empty(); sockets];
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); sockets];
        for cpu in 0..n {
            let s = self.m.socket_of_cpu(cpu);
            masks[s].set(cpu);
            members[s].push(cpu);
        }
        self.part_masks = masks;
        self.window_stats.window_cycles = self.window;
        let mut queued: Vec<bool> = (0..n).map(|c| self.busy(c)).collect();
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
        let mut parked: Vec<usize> = Vec::new();
        let mut windows: u64 = 0;
        while self.live_user_tasks > 0 {
            let first_cpu = (0..n)
                .filter(|&c| queued[c])
                .map(|c| self.m.cpus[c].clock)
                .min();
            let start = match (first_cpu, self.engine.next_time()) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => break,
            };
            let end = start + self.window;
            self.window_stats.windows += 1;

            // Phase 1: each partition on its own.
            let before = self.demand_accesses();
            self.m.hier.set_defer(true);
            let order: Vec<usize> = if self.reverse_partitions {
                (0..sockets).rev().collect()
            } else {
                (0..sockets).collect()
            };
            for p in order {
                self.win_part = Some(p);
                heap.clear();
                for &c in &members[p] {
                    if queued[c] && self.m.cpus[c].clock < end {
                        heap.push(Reverse((self.m.cpus[c].clock, c)));
                    }
                }
                while let Some(&Reverse((_, cpu))) = heap.peek() {
                    let ran = self.run_quantum_local(cpu);
                    if let Some(e) = &self.error {
                        self.win_part = None;
                        return Err(e.clone());
                    }
                    self.window_stats.quanta_partitioned += 1;
                    let clock = self.m.cpus[cpu].clock;
                    if !ran {
                        parked.push(cpu);
                        heap.pop();
                    } else if clock >= end {
                        heap.pop();
                    } else {
                        *heap.peek_mut().expect("the CPU just run") = Reverse((clock, cpu));
                    }
                }
            }
            self.win_part = None;
            self.m.hier.set_defer(false);
            self.m.hier.apply_deferred();
            let mid = self.demand_accesses();
            self.window_stats.accesses_partitioned += mid - before;

            // Phase 2: the parked CPUs and the window's timers, in order.
            heap.clear();
            for cpu in parked.drain(..) {
                heap.push(Reverse((self.m.cpus[cpu].clock, cpu)));
            }
            loop {
                if let Some(te) = self.engine.next_time().filter(|&te| te < end) {
                    if heap.peek().is_none_or(|Reverse((c, _))| te <= *c) {
                        let (t, ev) = self.engine.pop_due(te).expect("due");
                        self.fire(t, ev);
                        self.kick_window(&mut heap, &mut queued, end);
                        continue;
                    }
                }
                let Some(&Reverse((_, cpu))) = heap.peek() else {
                    break;
                };
                self.run_quantum(cpu);
                if let Some(e) = &self.error {
                    return Err(e.clone());
                }
                self.window_stats.quanta_serial += 1;
                let clock = self.m.cpus[cpu].clock;
                if !self.busy(cpu) {
                    heap.pop();
                    queued[cpu] = false;
                } else if clock >= end {
                    heap.pop();
                } else {
                    *heap.peek_mut().expect("the CPU just run") = Reverse((clock, cpu));
                }
                if self.k.waitq.has_woken() {
                    self.wake_woken(clock);
                }
                self.kick_window(&mut heap, &mut queued, end);
                if self.live_user_tasks == 0 {
                    break;
                }
            }
            self.window_stats.accesses_serial += self.demand_accesses() - mid;
            windows += 1;
            if windows.is_multiple_of(2048) {
                if self.total_bytes > 0 {
                    let done: u64 = self.tasks.iter().map(|t| t.bytes).sum();
                    progress(done as f64 / self.total_bytes as f64);
                } else if self.progress_horizon > 0 {
                    progress((end as f64 / self.progress_horizon as f64).min(0.99));
                }
            }
        }
        progress(1.0);
        Ok(())
    }

    /// `kick` for the windowed loop: a CPU given a task while idle joins
    /// phase 2 if its clock is still inside the window, the next window otherwise.
    fn kick_window(
        &mut self,
        heap: &mut BinaryHeap<Reverse<(u64, usize)>>,
        queued: &mut [bool],
        end: u64,
    ) {
        for (w, now) in self.sched.take_wakeups() {
            if !queued[w] {
                let c = &mut self.m.cpus[w].clock;
                *c = (*c).max(now);
                queued[w] = true;
                if *c < end {
                    heap.push(Reverse((*c, w)));
                }
            }
        }
    }

    fn park(&mut self, why: Park) -> bool {
        self.window_stats.parked[why as usize] += 1;
        false
    }

    /// One quantum of `cpu` in phase 1, as `run_quantum` runs it, up to the
    /// first step phase 1 may not take. False if the CPU parked there.
    fn run_quantum_local(&mut self, cpu: usize) -> bool {
        if self.m.cpus[cpu].irq_pending > 0 {
            return self.park(Park::Interrupt);
        }
        let deadline = self.m.cpus[cpu].clock + self.quantum;
        self.settle(cpu, KFn::Interrupt);
        while self.m.cpus[cpu].clock < deadline {
            if self.cpus[cpu].tick_stopped || self.m.cpus[cpu].clock >= self.cpus[cpu].next_tick {
                return self.park(Park::Interrupt);
            }
            if let Some(w) = self.cpus[cpu].work.front() {
                let what = w.kfn();
                let went_on = self.exec_work_local(cpu, deadline);
                self.settle(cpu, what);
                if !went_on {
                    return self.park(Park::KernelWork);
                }
                continue;
            }
            let Some(t) = self.sched.current(cpu) else {
                return self.park(Park::Schedule);
            };
            if self.cpus[cpu].ticked
                || self.tasks[t].is_kthread()
                || !matches!(self.tasks[t].cur, Some(Cur::Write { .. } | Cur::Access(_)))
            {
                return self.park(Park::Schedule);
            }
            let mm = self.tasks[t].user_mm();
            let p = self.win_part.expect("phase 1");
            if !self.k.mms[mm].cpumask.is_subset_of(&self.part_masks[p]) {
                return self.park(Park::SharedMm);
            }
            self.exec_user(cpu, t, deadline);
            self.settle(cpu, KFn::Syscall);
            if let Some(why) = self.parked.take() {
                return self.park(why);
            }
            if self.error.is_some() {
                return true;
            }
        }
        true
    }

    /// The front work item of `cpu` in phase 1: fixed costs, the return to
    /// user mode, and bulk lines up to the first that is not local. False
    /// if it could not (or could no longer) go on.
    fn exec_work_local(&mut self, cpu: usize, deadline: u64) -> bool {
        let (dst, src, nlines) = match self.cpus[cpu].work.front() {
            Some(Work::Cycles { .. } | Work::ReturnToUser) => {
                self.exec_work(cpu, deadline);
                return true;
            }
            Some(&Work::Clear { line, nlines, .. }) => (line, None, nlines),
            Some(&Work::Copy {
                src_line,
                dst_line,
                nlines,
                ..
            }) => (dst_line, Some(src_line), nlines),
            _ => return false,
        };
        let from = self.cpus[cpu].pos;
        // Locality holds per 4 KiB region through phase 1: check the first
        // line of each, and skip to where the destination's or the source's
        // region ends.
        let mut upto = from;
        while upto < nlines {
            let ok = self.m.is_local(cpu, dst + upto)
                && src.is_none_or(|s| self.m.is_local(cpu, s + upto));
            if !ok {
                break;
            }
            let next = ((dst + upto) | 63) + 1 - dst;
            upto = match src {
                Some(s) => next.min(((s + upto) | 63) + 1 - s),
                None => next,
            };
        }
        let upto = upto.min(nlines);
        if upto == from {
            return false;
        }
        self.bulk_limit = upto;
        self.exec_work(cpu, deadline);
        self.bulk_limit = u64::MAX;
        // Stopped at the limit with time left: the next line is not local.
        !(upto < nlines && self.cpus[cpu].pos == upto && self.m.cpus[cpu].clock < deadline)
    }
}
