//! The windowed run loop (`sim.window_cycles` > 0): one run spread over
//! host threads, one socket (partition) per thread at most, with the same
//! result for any number of threads.
//!
//! Simulated time advances in windows of W cycles. Each window has two
//! phases:
//!
//! 1. **Per partition.** Each socket's CPUs run, lowest clock first as in
//!    the ordinary loop, until their clocks reach the window's end, doing
//!    only what touches nothing another socket owns or reads: user line
//!    accesses and the kernel's bulk clears and copies of lines that are
//!    local (homed on the socket, held by no other socket's caches:
//!    `Hierarchy::is_local`), in an address space only this socket's CPUs
//!    have run, and fixed-cost kernel work. A CPU whose next step is
//!    anything else (a fault, a system call, a tick, an interrupt, a
//!    schedule, a remote line, a file page's check) stops there: it is
//!    *parked*, its clock left where it stopped.
//! 2. **Serial,** only if a CPU parked or a timer is due in the window: the
//!    parked CPUs and the timers run as the ordinary loop runs them, lowest
//!    clock first, until they reach the window's end; this phase may touch
//!    anything.
//!
//! Effects of phase 1 on what another socket reads (remote write-backs,
//! presence counts of remote-homed lines) are queued (`Hierarchy::defer`)
//! and applied at the next phase 2 in a fixed order, so phase 1's
//! partitions share nothing and can run in any order. The run's thread
//! advances them in place, one after another (reversed in a test). With
//! helper threads, and while it pays (`HELP_MIN_QUANTA`,
//! `HELP_MAX_SERIAL_PERMILLE`), each partition's state is moved (swapped)
//! into a *stand-in*: a `Sim` of the same shape with one-set caches and no
//! memory, holding the socket's CPUs, cores, caches, DRAM calendars and
//! presence counts, the kernel state of its CPUs, and the access loops and
//! address spaces of the tasks it may run, with a copy of which cores of
//! the other sockets ever cached a line of its memory; its content-tag
//! stores are logged and replayed. The state stays in the stand-ins from
//! window to window and moves back before a phase 2. The result is the
//! same bytes whichever way a window ran.
//!
//! What it changes against the ordinary loop: a parked step runs after
//! the other CPUs' local work up to the window's end, not at its own time
//! among them; remote write-backs of phase 1 do not hold up the fill that
//! evicted them, and reach their DRAM calendar at the next phase 2; the
//! presence counts those leave out of date can only make an access park.
//! W is at most the
//! smallest cross-socket latency of the preset (a remote cache hit or DRAM
//! read), so a parked step's effect on another socket could not have
//! reached it within the window anyway.
//!
//! Invariant: phase 1 never touches scheduler, timer, wait-queue,
//! allocator or page-table state other than the accessed/dirty bits and
//! the shadow of an address space only its own CPUs ran; the stand-ins'
//! state moves back whole before anything else runs; the choice between
//! stand-ins and in place never changes a result.

use super::window_stats::{HelpOverride, Park};
use super::*;
use crate::machine::ipi::CpuMask;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Phase 1's synchronisation between the run's host thread and its helpers.
#[derive(Default)]
struct Rendezvous {
    /// Bumped by the run's thread when every partition's stand-in is ready.
    epoch: AtomicU64,
    /// Helpers done with the current epoch.
    done: AtomicUsize,
    stop: AtomicBool,
    /// A helper's panic, turned into the run's error.
    failed: Mutex<Option<String>>,
}

/// Quanta per window (all partitions, a running mean) below which phase 1
/// runs on the run's own thread: a window's round trip to the helpers
/// costs a few microseconds, a quantum about a microsecond
/// (bench/prof/many.toml runs 128 per window, the pmbench profile 12).
const HELP_MIN_QUANTA: u64 = 48;

/// Share of windows with a phase 2 (per mille, a running mean) at or above
/// which phase 1 runs on the run's own thread (bench/prof/many.toml: 3%;
/// the pmbench profile, whose remote accesses park: most windows).
const HELP_MAX_SERIAL_PERMILLE: u64 = 100;

/// Sets its flag and wakes the helpers when dropped.
struct StopOnDrop<'a>(&'a AtomicBool, &'a [std::thread::Thread]);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
        for h in self.1 {
            h.unpark();
        }
    }
}

/// Waits until `ready` holds, spinning briefly, then calling `idle` between looks.
fn wait_until(ready: impl Fn() -> bool, idle: impl Fn()) {
    let mut spins = 0u32;
    while !ready() {
        if spins < 4096 {
            spins += 1;
            std::hint::spin_loop();
        } else {
            idle();
        }
    }
}

/// The run's thread waiting for helpers at work: it yields.
fn wait_for(ready: impl Fn() -> bool) {
    wait_until(ready, std::thread::yield_now);
}

/// A helper waiting for the next window, which may be long in coming while
/// the run's thread works alone: it sleeps until unparked (or 1 ms).
fn wait_parked(ready: impl Fn() -> bool) {
    wait_until(ready, || {
        std::thread::park_timeout(std::time::Duration::from_millis(1))
    });
}

/// A stand-in program: a stand-in task runs only the access loops, never
/// asks its program for an operation.
struct StandIn;

impl Program for StandIn {
    fn next(&mut self, _ret: u64) -> Op {
        Op::Exit
    }
    fn total_bytes(&self) -> u64 {
        0
    }
}

impl Sim {
    /// Demand line accesses of `cpu` so far.
    fn demand_accesses(&self, cpu: usize) -> u64 {
        let c = &self.machine.cpus[cpu].stats.cache;
        c.l1d_loads + c.l1d_stores
    }

    /// A partition's stand-in: a simulation of the same shape with one-set
    /// caches, no memory and stand-in tasks, into which [`Sim::lend`] moves
    /// one socket's state for phase 1.
    fn shell(&self) -> Sim {
        let mut k = Kernel::new(
            self.kernel.cfg.clone(),
            self.kernel.costs.clone(),
            self.kernel.mem.alloc.nr_nodes,
            0,
        );
        k.mem.alloc.line_log = Some(Vec::new());
        let mut s = Sim::new(self.machine.shell(), k, self.quantum);
        s.window = self.window;
        s.win_task = vec![Err(Park::Schedule); self.cpus.len()];
        s
    }

    /// Moves partition `p`'s state into its stand-in `sh` for phase 1: the
    /// machine's part, the CPUs' kernel state, and for each CPU whose
    /// current task phase 1 may run (a user task in an access loop, in an
    /// address space only `p`'s CPUs ran) the task's loop and its address space.
    fn lend(&mut self, sh: &mut Sim, p: usize, members: &[usize], mask: &CpuMask, queued: &[bool]) {
        self.machine.lend(&mut sh.machine, p);
        sh.win_queued.clear();
        sh.win_lent.clear();
        for &cpu in members {
            std::mem::swap(&mut self.cpus[cpu], &mut sh.cpus[cpu]);
            sh.win_task[cpu] = Err(Park::Schedule);
            if !queued[cpu] {
                continue;
            }
            sh.win_queued.push(cpu);
            sh.win_task[cpu] = self.phase1_task(cpu, mask);
            let Ok(t) = sh.win_task[cpu] else {
                continue;
            };
            let mm = self.tasks[t].user_mm();
            while sh.tasks.len() <= t {
                let id = sh.tasks.len();
                sh.add_task(Body::User(Box::new(StandIn)), None, None);
                sh.tasks[id].exited = true;
            }
            while sh.kernel.mms.len() <= mm {
                sh.kernel.new_mm();
            }
            let (a, b) = (&mut self.tasks[t], &mut sh.tasks[t]);
            std::mem::swap(&mut a.cur, &mut b.cur);
            std::mem::swap(&mut a.bytes, &mut b.bytes);
            std::mem::swap(&mut a.access, &mut b.access);
            b.mm = a.mm;
            if !sh.win_lent.iter().any(|&(_, m)| m == mm) {
                std::mem::swap(&mut self.kernel.mms[mm], &mut sh.kernel.mms[mm]);
            }
            sh.win_lent.push((t, mm));
        }
    }

    /// The task phase 1 may run on `cpu` (of the partition of `mask`):
    /// its current task if it is a user task in an access loop, in an
    /// address space only the partition's CPUs ran; else why not.
    fn phase1_task(&self, cpu: usize, mask: &CpuMask) -> Result<usize, Park> {
        let Some(t) = self.sched.current(cpu) else {
            return Err(Park::Schedule);
        };
        if self.tasks[t].is_kthread()
            || !matches!(self.tasks[t].cur, Some(Cur::Write { .. } | Cur::Access(_)))
        {
            return Err(Park::Schedule);
        }
        if !self.kernel.mms[self.tasks[t].user_mm()]
            .cpumask
            .is_subset_of(mask)
        {
            return Err(Park::SharedMm);
        }
        Ok(t)
    }

    /// Phase 1 of partition `p` on the run itself (no stand-in): the same
    /// steps, with the same deferrals, as on a stand-in.
    fn phase1_here(&mut self, p: usize, members: &[usize], mask: &CpuMask, queued: &[bool]) {
        self.win_queued.clear();
        for &cpu in members {
            if queued[cpu] {
                self.win_queued.push(cpu);
                self.win_task[cpu] = self.phase1_task(cpu, mask);
            }
        }
        self.machine.hier.set_defer(true);
        self.phase1(p);
        self.machine.hier.set_defer(false);
    }

    /// Moves partition `p`'s state back from `sh` after phase 1, with what
    /// it counted and logged; the CPUs that parked are added to `parked`.
    fn take_back(&mut self, sh: &mut Sim, p: usize, members: &[usize], parked: &mut Vec<usize>) {
        self.machine.take_back(&mut sh.machine, p);
        for &cpu in members {
            std::mem::swap(&mut self.cpus[cpu], &mut sh.cpus[cpu]);
        }
        let mut mms_back = Vec::new();
        for &(t, mm) in &sh.win_lent {
            let (a, b) = (&mut self.tasks[t], &mut sh.tasks[t]);
            std::mem::swap(&mut a.cur, &mut b.cur);
            std::mem::swap(&mut a.bytes, &mut b.bytes);
            std::mem::swap(&mut a.access, &mut b.access);
            if !mms_back.contains(&mm) {
                std::mem::swap(&mut self.kernel.mms[mm], &mut sh.kernel.mms[mm]);
                mms_back.push(mm);
            }
        }
        if let Some(log) = &mut sh.kernel.mem.alloc.line_log {
            for (pfn, line, v) in log.drain(..) {
                self.kernel.mem.alloc.store_line(pfn, line, v);
            }
        }
        for (a, b) in self.kfn_cycles.iter_mut().zip(sh.kfn_cycles.iter_mut()) {
            *a += std::mem::take(b);
        }
        for (a, b) in self
            .kfn_mem_cycles
            .iter_mut()
            .zip(sh.kfn_mem_cycles.iter_mut())
        {
            *a += std::mem::take(b);
        }
        let (w, d) = (&mut self.window_stats, &mut sh.window_stats);
        w.quanta_partitioned += std::mem::take(&mut d.quanta_partitioned);
        for (a, b) in w.parked.iter_mut().zip(d.parked.iter_mut()) {
            *a += std::mem::take(b);
        }
        if self.error.is_none() {
            self.error = sh.error.take();
        }
        parked.append(&mut sh.win_parked);
    }

    /// Phase 1 of partition `p` on its stand-in: its CPUs lowest clock
    /// first, each until the window's end or a park; then the lowest clock
    /// of its CPUs (`win_min`).
    fn phase1(&mut self, p: usize) {
        self.win_part = Some(p);
        let end = self.win_end;
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> = self
            .win_queued
            .iter()
            .map(|&c| (self.machine.cpus[c].clock, c))
            .filter(|&(clock, _)| clock < end)
            .map(Reverse)
            .collect();
        while let Some(&Reverse((_, cpu))) = heap.peek() {
            let ran = self.run_quantum_local(cpu);
            if self.error.is_some() {
                break;
            }
            self.window_stats.quanta_partitioned += 1;
            self.win_quanta += 1;
            let clock = self.machine.cpus[cpu].clock;
            if !ran {
                self.win_parked.push(cpu);
                heap.pop();
            } else if clock >= end {
                heap.pop();
            } else {
                *heap.peek_mut().expect("the CPU just run") = Reverse((clock, cpu));
            }
        }
        self.win_min = self
            .win_queued
            .iter()
            .map(|&c| self.machine.cpus[c].clock)
            .min();
        self.win_part = None;
    }

    pub(super) fn run_windowed(&mut self, progress: &mut dyn FnMut(f64)) -> Result<(), Error> {
        let n = self.cpus.len();
        let sockets = self.machine.topo.sockets;
        let mut masks = vec![CpuMask::empty(); sockets];
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); sockets];
        for cpu in 0..n {
            let s = self.machine.socket_of_cpu(cpu);
            masks[s].set(cpu);
            members[s].push(cpu);
        }
        self.window_stats.window_cycles = self.window;
        self.win_task = vec![Err(Park::Schedule); n];
        let threads = self.host_threads.clamp(1, sockets);
        let shells: Vec<Mutex<Sim>> = (0..sockets).map(|_| Mutex::new(self.shell())).collect();
        let rv = Rendezvous::default();
        let lock = |p: usize| shells[p].lock().unwrap_or_else(|e| e.into_inner());
        std::thread::scope(|scope| {
            let mut helpers = Vec::new();
            for h in 1..threads {
                let (rv, shells) = (&rv, &shells);
                // A helper works for the run: it stops with it.
                let run = crate::interrupt::current();
                let handle = scope.spawn(move || {
                    crate::interrupt::scope(run, || {
                        let mut seen = 0;
                        loop {
                            wait_parked(|| {
                                rv.stop.load(Ordering::Acquire)
                                    || rv.epoch.load(Ordering::Acquire) > seen
                            });
                            if rv.stop.load(Ordering::Acquire) {
                                return;
                            }
                            seen += 1;
                            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                for p in (h..sockets).step_by(threads) {
                                    shells[p]
                                        .lock()
                                        .unwrap_or_else(|e| e.into_inner())
                                        .phase1(p);
                                }
                            }));
                            if let Err(e) = r {
                                let msg = e
                                    .downcast_ref::<String>()
                                    .cloned()
                                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                                    .unwrap_or_default();
                                *rv.failed.lock().unwrap_or_else(|e| e.into_inner()) =
                                    Some(format!("a partition's host thread panicked: {msg}"));
                            }
                            rv.done.fetch_add(1, Ordering::AcqRel);
                        }
                    })
                });
                helpers.push(handle.thread().clone());
            }
            // The helpers stop however the run ends, a panic (a cancelled
            // run's progress hook) included: the scope waits for them.
            let _stop = StopOnDrop(&rv.stop, &helpers);
            self.windows(progress, &members, &masks, &helpers, &rv, &lock)
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn windows<'a>(
        &mut self,
        progress: &mut dyn FnMut(f64),
        members: &[Vec<usize>],
        masks: &[CpuMask],
        helpers: &[std::thread::Thread],
        rv: &Rendezvous,
        lock: &dyn Fn(usize) -> std::sync::MutexGuard<'a, Sim>,
    ) -> Result<(), Error> {
        let n = self.cpus.len();
        let sockets = members.len();
        let threads = helpers.len() + 1;
        let mut queued: Vec<bool> = (0..n).map(|c| self.busy(c)).collect();
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
        let mut parked: Vec<usize> = Vec::new();
        // Whether the partitions' state is in their stand-ins: it stays
        // there from window to window until one needs phase 2.
        let mut lent = false;
        let mut quanta_per_window = HELP_MIN_QUANTA;
        let mut decisions: u64 = 0;
        let mut serial_permille = 0;
        while self.live_user_tasks > 0 {
            if crate::interrupt::requested() {
                return Err(Error::Interrupted);
            }
            let first_cpu = if lent {
                (0..sockets).filter_map(|p| lock(p).win_min).min()
            } else {
                (0..n)
                    .filter(|&c| queued[c])
                    .map(|c| self.machine.cpus[c].clock)
                    .min()
            };
            let start = match (first_cpu, self.engine.next_time()) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => {
                    if lent {
                        for (p, m) in members.iter().enumerate() {
                            self.take_back(&mut lock(p), p, m, &mut parked);
                        }
                        self.machine.hier.apply_deferred();
                    }
                    break;
                }
            };
            let end = start + self.window;
            self.window_stats.windows += 1;
            if self.window_stats.windows.is_multiple_of(4096) {
                self.window_progress(progress, start, lent, sockets, lock);
            }

            // Phase 1: each partition on its own, on the helpers' host
            // threads in stand-ins or here. The helpers are used only when,
            // lately, phase 1 has been worth their round trip and phase 2
            // rare (it runs here, on state a helper then has to hand back
            // through the host's caches); the choice is made when the state
            // is here, and the result is the same either way.
            let worth =
                quanta_per_window >= HELP_MIN_QUANTA && serial_permille < HELP_MAX_SERIAL_PERMILLE;
            if !lent && threads > 1 && {
                decisions += 1;
                match self.help_override {
                    HelpOverride::Auto => worth,
                    HelpOverride::Always => true,
                    HelpOverride::Alternate => decisions.is_multiple_of(2),
                }
            } {
                for p in 0..sockets {
                    self.lend(&mut lock(p), p, &members[p], &masks[p], &queued);
                }
                lent = true;
            }
            let order: Vec<usize> = if self.reverse_partitions {
                (0..sockets).rev().collect()
            } else {
                (0..sockets).collect()
            };
            let mut serial = self.engine.next_time().is_some_and(|te| te < end);
            let mut quanta = 0;
            if lent {
                for p in 0..sockets {
                    let mut sh = lock(p);
                    sh.win_end = end;
                    sh.win_quanta = 0;
                }
                rv.epoch.fetch_add(1, Ordering::AcqRel);
                for h in helpers {
                    h.unpark();
                }
                for p in (0..sockets).step_by(threads) {
                    lock(p).phase1(p);
                }
                wait_for(|| rv.done.load(Ordering::Acquire) == threads - 1);
                rv.done.store(0, Ordering::Release);
                if let Some(msg) = rv.failed.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    return Err(Error::Internal(msg));
                }
                for p in 0..sockets {
                    let sh = lock(p);
                    serial |= !sh.win_parked.is_empty() || sh.error.is_some();
                    quanta += sh.win_quanta;
                }
            } else {
                self.win_end = end;
                self.win_quanta = 0;
                for p in order {
                    self.phase1_here(p, &members[p], &masks[p], &queued);
                    if self.error.is_some() {
                        break;
                    }
                }
                parked.append(&mut self.win_parked);
                serial |= !parked.is_empty() || self.error.is_some();
                quanta = self.win_quanta;
            }
            quanta_per_window = (quanta_per_window * 7 + quanta) / 8;
            serial_permille = (serial_permille * 15 + 1000 * u64::from(serial)) / 16;
            if !serial {
                continue;
            }
            if lent {
                for (p, m) in members.iter().enumerate() {
                    self.take_back(&mut lock(p), p, m, &mut parked);
                }
                lent = false;
            }
            if let Some(e) = &self.error {
                return Err(e.clone());
            }
            self.machine.hier.apply_deferred();

            // Phase 2: the parked CPUs and the window's timers, in order.
            heap.clear();
            for cpu in parked.drain(..) {
                heap.push(Reverse((self.machine.cpus[cpu].clock, cpu)));
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
                let a0 = self.demand_accesses(cpu);
                self.run_quantum(cpu);
                if let Some(e) = &self.error {
                    return Err(e.clone());
                }
                self.window_stats.quanta_serial += 1;
                self.window_stats.accesses_serial += self.demand_accesses(cpu) - a0;
                let clock = self.machine.cpus[cpu].clock;
                if !self.busy(cpu) {
                    heap.pop();
                    queued[cpu] = false;
                    self.cpus[cpu].idle_since = clock;
                } else if clock >= end {
                    heap.pop();
                } else {
                    *heap.peek_mut().expect("the CPU just run") = Reverse((clock, cpu));
                }
                if self.kernel.has_stray_kswapd_wakes() {
                    self.wake_stray_pending();
                }
                if self.kernel.has_woken() {
                    self.wake_woken(clock);
                }
                self.kick_window(&mut heap, &mut queued, end);
                if self.live_user_tasks == 0 {
                    break;
                }
            }
        }
        let all: u64 = (0..n).map(|c| self.demand_accesses(c)).sum();
        self.window_stats.accesses_partitioned = all - self.window_stats.accesses_serial;
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.check_finished()?;
        progress(1.0);
        Ok(())
    }

    /// Reports progress: bytes done (counting those of tasks lent to the
    /// stand-ins) or simulated time reached.
    fn window_progress<'a>(
        &self,
        progress: &mut dyn FnMut(f64),
        now: u64,
        lent: bool,
        sockets: usize,
        lock: &dyn Fn(usize) -> std::sync::MutexGuard<'a, Sim>,
    ) {
        if self.total_bytes > 0 {
            let mut done: u64 = self.tasks.iter().map(|t| t.bytes).sum();
            if lent {
                for p in 0..sockets {
                    let sh = lock(p);
                    done += sh
                        .win_lent
                        .iter()
                        .map(|&(t, _)| sh.tasks[t].bytes)
                        .sum::<u64>();
                }
            }
            progress(done as f64 / self.total_bytes as f64);
        } else if self.progress_horizon > 0 {
            progress((now as f64 / self.progress_horizon as f64).min(0.99));
        }
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
                let c = &mut self.machine.cpus[w].clock;
                let idle_from = *c;
                *c = (*c).max(now);
                self.idle_stats.idle_cycles += *c - idle_from;
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
        let ran = self.run_quantum_local_body(cpu);
        self.take_policy_error();
        ran
    }

    fn run_quantum_local_body(&mut self, cpu: usize) -> bool {
        if self.machine.cpus[cpu].irq_pending > 0 {
            return self.park(Park::Interrupt);
        }
        let deadline = self.machine.cpus[cpu].clock + self.quantum;
        self.settle(cpu, KFn::Interrupt);
        while self.machine.cpus[cpu].clock < deadline {
            if self.cpus[cpu].tick_stopped
                || self.machine.cpus[cpu].clock >= self.cpus[cpu].next_tick
            {
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
            let t = match self.win_task[cpu] {
                Ok(t) => t,
                Err(why) => return self.park(why),
            };
            if self.cpus[cpu].ticked
                || !matches!(self.tasks[t].cur, Some(Cur::Write { .. } | Cur::Access(_)))
            {
                return self.park(Park::Schedule);
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
            let ok = self.machine.is_local(cpu, dst + upto)
                && src.is_none_or(|s| self.machine.is_local(cpu, s + upto));
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
        !(upto < nlines && self.cpus[cpu].pos == upto && self.machine.cpus[cpu].clock < deadline)
    }
}

// A partition's shell moves to the host thread that advances it.
const _: fn() = || {
    fn is_send<T: Send>() {}
    is_send::<Sim>();
};
