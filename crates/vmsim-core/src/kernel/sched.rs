//! Tasks, per-CPU run queues and the deterministic interleaving of CPUs.
//!
//! The loop always advances the CPU with the lowest clock (ties: lowest CPU
//! id) for at most one quantum. A CPU first executes the kernel work queued
//! on it, then its current task's user operation. More tasks than CPUs are
//! time-sliced round-robin at user level (CFS's 3 ms minimum granularity on
//! ≥ 8 CPUs).
//!
//! fork places the child on the next CPU after the parent's, round-robin
//! (child k of a parent on CPU c goes to CPU (c + 1 + k) mod nr_cpus): on an
//! otherwise idle machine that spreads the children as Linux's fork balancing
//! (`select_task_rq` with SD_BALANCE_FORK) does, over idle CPUs, though not
//! necessarily onto the same ones. A CPU that gets a task while idle resumes
//! at the waker's clock. A task that waits for its children sleeps off the
//! CPU until the last one exits.
//!
//! Invariants: a task is on at most one CPU; every CPU's clock only grows;
//! the order of events depends only on the config and seed.

use crate::api::Error;
use super::fork::COPY_PROCESS_CYCLES;
use super::memory::{FaultError, Mapped};
use super::mm::PMD_SIZE;
use super::page_alloc::{tag_store, TAG_ZERO};
use super::tlbflush::{flush_tlb_mm_range, flush_tlb_mm_range_stride};
use super::{KFn, Kernel, StoreHow, Work};
use crate::machine::hierarchy::AccessKind;
use crate::machine::{Machine, Mode};
use crate::workload::{store_value, Expect, Op, Program};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Instructions per 8-byte word of usemem's `do_rw_once()` write path: 24, counted
/// on the x86-64 code gcc 12.2 -O2 emits for a loop of the same structure (the
/// per-iteration tests of `opt_randomise`, `rep`/`*rep`, `opt_delay`, the 64 Ki
/// runtime check and the reload of `step`, around one store), on the project's
/// development host. Macro-fusion of compare-and-branch pairs is not modelled.
pub const USEMEM_INSTR_PER_WORD: u64 = 24;

enum Cur {
    Write { start: u64, len: u64, seed: u64, pos: u64, pfn: u64, page: u64, gen: u64 },
    /// MAP_POPULATE of a new mapping: `populate_vma_page_range()` faulting in
    /// one page (or huge page) at a time, in kernel mode.
    Populate { start: u64, len: u64, pos: u64 },
}

pub struct Task {
    pub pid: usize,
    pub mm: usize,
    prog: Box<dyn Program>,
    cur: Option<Cur>,
    ret: u64,
    pub exited: bool,
    /// The task that forked this one.
    pub parent: Option<usize>,
    /// Children forked and not yet exited.
    pub live_children: u64,
    pub nr_forked: u64,
    /// Sleeping in `Op::Wait`, off every run queue.
    pub waiting: bool,
    /// The CPU the task last ran on (where a wake-up puts it back).
    pub cpu: usize,
    pub start: Option<u64>,
    pub end: Option<u64>,
    /// When the task exited.
    pub exit: Option<u64>,
    pub bytes: u64,
    pub pages_checked: u64,
    pub bad_pages: u64,
    pub first_bad: Option<String>,
}

#[derive(Default)]
pub struct CpuCtx {
    pub rq: VecDeque<usize>,
    pub current: Option<usize>,
    work: VecDeque<Work>,
    /// Progress in the front work item: lines done, and whether its start-up was paid.
    pos: u64,
    started: bool,
    /// System cycles of this CPU already attributed to a kernel path.
    sys_settled: u64,
    slice_end: u64,
}

pub struct Sim {
    pub m: Machine,
    pub k: Kernel,
    pub tasks: Vec<Task>,
    pub cpus: Vec<CpuCtx>,
    /// The mm each CPU has loaded and is running (None: idle / lazy TLB).
    pub loaded_mm: Vec<Option<usize>>,
    quantum: u64,
    slice: u64,
    user_store_issue: u64,
    string_issue: u64,
    movq_issue: u64,
    total_bytes: u64,
    pub nr_context_switches: u64,
    /// System cycles by kernel path, indexed like `KFn::ALL`.
    pub kfn_cycles: [u64; KFn::ALL.len()],
    copy_issue: u64,
    /// CPUs given a task by the last quantum, with the giver's clock.
    wakeups: Vec<(usize, u64)>,
    pub error: Option<Error>,
}

mod exec;
mod user;

impl Sim {
    pub fn new(m: Machine, k: Kernel, quantum: u64) -> Sim {
        let n = m.topo.nr_cpus();
        // Scalar stores retire at one per cycle per 32 B of store width.
        let stores_per_cycle = (m.store_bytes_per_cycle / 32).max(1);
        let user_store_issue = (8 * USEMEM_INSTR_PER_WORD).div_ceil(m.issue_width).max(8 / stores_per_cycle);
        let string_issue = (64 / m.store_bytes_per_cycle).max(1);
        let movq_issue = (super::instr::CLEAR_PAGE_ORIG_PER_LINE.div_ceil(m.issue_width)).max(8 / stores_per_cycle);
        let copy_issue = (super::instr::COPY_PAGE_REGS_PER_LINE.div_ceil(m.issue_width)).max(8 / stores_per_cycle);
        let slice = 3 * m.freq_mhz * 1000; // 3 ms
        Sim {
            cpus: (0..n).map(|_| CpuCtx::default()).collect(),
            loaded_mm: vec![None; n],
            m,
            k,
            tasks: Vec::new(),
            quantum,
            slice,
            user_store_issue,
            string_issue,
            movq_issue,
            total_bytes: 0,
            nr_context_switches: 0,
            kfn_cycles: [0; KFn::ALL.len()],
            copy_issue,
            wakeups: Vec::new(),
            error: None,
        }
    }

    /// Creates a task with a new mm on `cpu`'s run queue.
    /// Bytes a task reports, as the workload counts them.
    pub fn reported_bytes(&self, t: usize) -> u64 {
        self.tasks[t].prog.reported_bytes(self.tasks[t].bytes)
    }

    pub fn spawn(&mut self, prog: Box<dyn Program>, cpu: usize) -> usize {
        let mm = self.k.new_mm();
        self.total_bytes += prog.total_bytes();
        self.new_task(prog, mm, cpu, None)
    }

    fn new_task(&mut self, prog: Box<dyn Program>, mm: usize, cpu: usize, parent: Option<usize>) -> usize {
        let pid = self.tasks.len();
        self.tasks.push(Task {
            pid,
            mm,
            prog,
            cur: None,
            ret: 0,
            exited: false,
            parent,
            live_children: 0,
            nr_forked: 0,
            waiting: false,
            cpu,
            start: None,
            end: None,
            exit: None,
            bytes: 0,
            pages_checked: 0,
            bad_pages: 0,
            first_bad: None,
        });
        self.cpus[cpu].rq.push_back(pid);
        pid
    }

    fn busy(&self, cpu: usize) -> bool {
        let c = &self.cpus[cpu];
        c.current.is_some() || !c.rq.is_empty() || !c.work.is_empty()
    }

    /// Runs until every task has exited (or an error stops the run).
    pub fn run(&mut self, progress: &mut dyn FnMut(f64)) -> Result<(), Error> {
        let mut heap = BinaryHeap::new();
        let mut queued = vec![false; self.cpus.len()];
        for cpu in 0..self.cpus.len() {
            if self.busy(cpu) {
                heap.push(Reverse((self.m.cpus[cpu].clock, cpu)));
                queued[cpu] = true;
            }
        }
        let mut quanta: u64 = 0;
        while let Some(Reverse((_, cpu))) = heap.pop() {
            queued[cpu] = false;
            self.run_quantum(cpu);
            if let Some(e) = &self.error {
                return Err(e.clone());
            }
            if self.busy(cpu) {
                heap.push(Reverse((self.m.cpus[cpu].clock, cpu)));
                queued[cpu] = true;
            }
            for (w, now) in std::mem::take(&mut self.wakeups) {
                if !queued[w] {
                    // An idle CPU wakes at the waker's time.
                    let c = &mut self.m.cpus[w].clock;
                    *c = (*c).max(now);
                    heap.push(Reverse((*c, w)));
                    queued[w] = true;
                }
            }
            quanta += 1;
            if quanta % 8192 == 0 {
                let done: u64 = self.tasks.iter().map(|t| t.bytes).sum();
                progress(done as f64 / self.total_bytes.max(1) as f64);
            }
        }
        progress(1.0);
        Ok(())
    }

    fn run_quantum(&mut self, cpu: usize) {
        let deadline = self.m.cpus[cpu].clock + self.quantum;
        self.m.take_interrupts(cpu);
        self.settle(cpu, KFn::Interrupt);
        while self.m.cpus[cpu].clock < deadline {
            if let Some(what) = self.cpus[cpu].work.front().map(Work::kfn) {
                self.exec_work(cpu, deadline);
                self.settle(cpu, what);
                continue;
            }
            let t = match self.cpus[cpu].current {
                Some(t) => t,
                None => match self.cpus[cpu].rq.pop_front() {
                    Some(t) => {
                        self.switch_to(cpu, t);
                        self.settle(cpu, KFn::Schedule);
                        t
                    }
                    None => {
                        self.loaded_mm[cpu] = None;
                        return;
                    }
                },
            };
            if self.m.cpus[cpu].clock >= self.cpus[cpu].slice_end && !self.cpus[cpu].rq.is_empty() {
                // Time slice over: round-robin to the next task.
                self.cpus[cpu].current = None;
                self.cpus[cpu].rq.push_back(t);
                continue;
            }
            self.exec_user(cpu, t, deadline);
            // Kernel time a user operation caused and did not attribute itself: its system call.
            self.settle(cpu, KFn::Syscall);
            if self.error.is_some() {
                return;
            }
        }
    }

    /// Attributes the system cycles `cpu` spent since the last settle to `what`.
    fn settle(&mut self, cpu: usize, what: KFn) {
        let sys = self.m.cpus[cpu].stats.sys_cycles;
        let c = &mut self.cpus[cpu];
        if sys > c.sys_settled {
            self.kfn_cycles[what as usize] += sys - c.sys_settled;
            c.sys_settled = sys;
        }
    }

    fn switch_to(&mut self, cpu: usize, t: usize) {
        let mm = self.tasks[t].mm;
        self.nr_context_switches += 1;
        self.m.set_mode(cpu, Mode::Kernel);
        self.m.advance(cpu, self.k.costs.context_switch_cycles, self.k.costs.context_switch_cycles);
        if self.loaded_mm[cpu] != Some(mm) {
            // switch_mm without PCID: the CR3 write flushes the TLB.
            self.m.flush_tlb_local_all(cpu);
        }
        self.m.set_mode(cpu, Mode::User);
        self.k.mms[mm].cpumask.set(cpu);
        self.loaded_mm[cpu] = Some(mm);
        self.cpus[cpu].current = Some(t);
        self.tasks[t].cpu = cpu;
        self.cpus[cpu].slice_end = self.m.cpus[cpu].clock + self.slice;
    }

}
