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
use super::{Kernel, StoreHow, Work};
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
    copy_issue: u64,
    /// CPUs given a task by the last quantum, with the giver's clock.
    wakeups: Vec<(usize, u64)>,
    pub error: Option<Error>,
}

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
        while self.m.cpus[cpu].clock < deadline {
            if !self.cpus[cpu].work.is_empty() {
                self.exec_work(cpu, deadline);
                continue;
            }
            let t = match self.cpus[cpu].current {
                Some(t) => t,
                None => match self.cpus[cpu].rq.pop_front() {
                    Some(t) => {
                        self.switch_to(cpu, t);
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
            if self.error.is_some() {
                return;
            }
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

    fn exec_work(&mut self, cpu: usize, deadline: u64) {
        let item = self.cpus[cpu].work.front().cloned().expect("non-empty");
        match item {
            Work::Cycles { cycles, instructions } => {
                self.m.advance(cpu, cycles, instructions);
            }
            Work::Clear { line, nlines, how } => {
                let mut i = self.begin_bulk(cpu, how);
                let (kind, issue) = match how {
                    // One string store over more bytes than the chip's threshold elides cache allocation.
                    StoreHow::String if self.m.nocache_threshold > 0 && nlines * 64 > self.m.nocache_threshold => {
                        (AccessKind::NtStore, self.string_issue)
                    }
                    StoreHow::String => (AccessKind::StringStore, self.string_issue),
                    StoreHow::MovLoop => (AccessKind::Store, self.movq_issue),
                    StoreHow::NonTemporal => (AccessKind::NtStore, self.movq_issue),
                };
                let per_line = match how {
                    StoreHow::String => 0,
                    StoreHow::MovLoop => super::instr::CLEAR_PAGE_ORIG_PER_LINE,
                    StoreHow::NonTemporal => super::instr::CLEAR_NT_PER_LINE,
                };
                while i < nlines && self.m.cpus[cpu].clock < deadline {
                    self.m.access(cpu, line + i, kind, true, issue);
                    if per_line > 0 {
                        self.m.advance(cpu, 0, per_line);
                    }
                    i += 1;
                }
                if !self.end_bulk(cpu, i, nlines) {
                    return;
                }
            }
            Work::Copy { src_line, dst_line, nlines, how } => {
                let mut i = self.begin_bulk(cpu, how);
                let (kind, issue) = match how {
                    StoreHow::String => (AccessKind::StringStore, self.string_issue),
                    StoreHow::MovLoop => (AccessKind::Store, self.copy_issue),
                    StoreHow::NonTemporal => (AccessKind::NtStore, self.copy_issue),
                };
                while i < nlines && self.m.cpus[cpu].clock < deadline {
                    // The load's issue slots are covered by the store's: the
                    // copy is bound by one store (string width) per line.
                    self.m.access(cpu, src_line + i, AccessKind::Load, true, 0);
                    self.m.access(cpu, dst_line + i, kind, true, issue);
                    if how == StoreHow::MovLoop {
                        self.m.advance(cpu, 0, super::instr::COPY_PAGE_REGS_PER_LINE);
                    }
                    i += 1;
                }
                if !self.end_bulk(cpu, i, nlines) {
                    return;
                }
            }
            Work::FlushTlbRange { mm, start, end, stride_shift } => {
                let k = &mut self.k;
                flush_tlb_mm_range_stride(&mut self.m, &mut k.vmstat, cpu, &k.mms[mm], &self.loaded_mm, start, end, stride_shift);
            }
            Work::PutPage { pfn } => {
                if self.k.put_page(pfn) > 0 {
                    let c = self.k.costs.page_free_cycles;
                    self.m.advance(cpu, c, c);
                }
            }
            Work::InstallPmd { mm, haddr, pfn } => self.k.install_pmd(mm, haddr, pfn),
            Work::InstallPte { mm, addr, pfn, writable } => self.k.install_pte(mm, addr, pfn, writable),
            Work::InstallPud { mm, haddr, pfn } => self.k.install_pud(mm, haddr, pfn),
            Work::ReturnToUser => self.m.set_mode(cpu, Mode::User),
        }
        self.cpus[cpu].work.pop_front();
    }

    /// Where the front bulk work item (a clear or copy of many lines) resumes;
    /// its string instruction's start-up is paid once, however often it is resumed.
    fn begin_bulk(&mut self, cpu: usize, how: StoreHow) -> u64 {
        if !self.cpus[cpu].started {
            self.cpus[cpu].started = true;
            if how == StoreHow::String {
                self.m.string_start(cpu);
            }
        }
        self.cpus[cpu].pos
    }

    /// Records progress `i` of `nlines`; true when the item is done.
    fn end_bulk(&mut self, cpu: usize, i: u64, nlines: u64) -> bool {
        if i < nlines {
            self.cpus[cpu].pos = i;
            return false;
        }
        self.cpus[cpu].pos = 0;
        self.cpus[cpu].started = false;
        true
    }

    fn fault(&mut self, cpu: usize, t: usize, addr: u64, write: bool) -> bool {
        let mm = self.tasks[t].mm;
        let node = self.m.topo.node_of(cpu);
        self.m.set_mode(cpu, Mode::Kernel);
        let mut work = std::mem::take(&mut self.cpus[cpu].work);
        let r = self.k.handle_mm_fault(mm, addr, write, node, &mut work);
        self.cpus[cpu].work = work;
        match r {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(fault_error(t, e));
                false
            }
        }
    }

    fn syscall(&mut self, cpu: usize, cycles: u64) {
        self.m.set_mode(cpu, Mode::Kernel);
        let c = self.k.costs.syscall_entry_exit_cycles + cycles;
        self.m.advance(cpu, c, c);
        self.m.set_mode(cpu, Mode::User);
    }

    fn exec_user(&mut self, cpu: usize, t: usize, deadline: u64) {
        if self.tasks[t].cur.is_none() {
            let ret = self.tasks[t].ret;
            let op = self.tasks[t].prog.next(ret);
            self.tasks[t].ret = 0;
            match op {
                Op::MarkStart => self.tasks[t].start = Some(self.m.cpus[cpu].clock),
                Op::MarkEnd => self.tasks[t].end = Some(self.m.cpus[cpu].clock),
                Op::Mmap { len, populate } => {
                    self.syscall(cpu, 0);
                    let mm = self.tasks[t].mm;
                    let start = self.k.mms[mm].mmap(len, super::mm::VmaKind::AnonPrivate, true);
                    self.tasks[t].ret = start;
                    if populate {
                        self.tasks[t].cur = Some(Cur::Populate { start, len, pos: 0 });
                    }
                }
                Op::Fork => self.fork(cpu, t),
                Op::Wait => {
                    if self.tasks[t].live_children > 0 {
                        self.tasks[t].waiting = true;
                        self.cpus[cpu].current = None;
                    }
                }
                Op::MmapHugetlb { len, page_shift } => {
                    self.syscall(cpu, 0);
                    let mm = self.tasks[t].mm;
                    self.tasks[t].ret = self.k.mms[mm].mmap_hugetlb(len, page_shift);
                }
                Op::Munmap { start } => self.munmap(cpu, t, start),
                Op::WriteSeq { start, len, seed } => {
                    self.tasks[t].cur = Some(Cur::Write { start, len, seed, pos: 0, pfn: 0, page: u64::MAX, gen: u64::MAX });
                }
                Op::Check { start, len, expect } => self.check(t, start, len, expect),
                Op::Exit => self.exit(cpu, t),
            }
            return;
        }
        let (start, len, seed, mut pos, mut pfn, mut page, mut gen) = match self.tasks[t].cur.take() {
            Some(Cur::Write { start, len, seed, pos, pfn, page, gen }) => (start, len, seed, pos, pfn, page, gen),
            Some(Cur::Populate { start, len, pos }) => return self.populate(cpu, t, start, len, pos),
            None => unreachable!(),
        };
        let mm = self.tasks[t].mm;
        let asid = self.k.mms[mm].asid;
        while pos < len && self.m.cpus[cpu].clock < deadline {
            let va = start + pos;
            let vpage = va >> 12;
            if vpage != page || gen != self.k.mms[mm].generation {
                match self.k.mms[mm].lookup(va) {
                    Some(tr) if tr.writable => {
                        let size = tr.page_size();
                        self.m.tlb_translate(cpu, asid, va, size);
                        pfn = tr.pfn;
                        page = vpage;
                        gen = self.k.mms[mm].generation;
                    }
                    _ => {
                        self.tasks[t].cur = Some(Cur::Write { start, len, seed, pos, pfn, page: u64::MAX, gen });
                        self.fault(cpu, t, va, true);
                        return;
                    }
                }
            }
            let lip = (va >> 6) & 63;
            self.m.access(cpu, (pfn << 6) | lip, AccessKind::Store, true, self.user_store_issue);
            self.m.advance(cpu, 0, 8 * USEMEM_INSTR_PER_WORD);
            let tag = &mut self.k.alloc.tags[pfn as usize];
            *tag = tag_store(*tag, lip, store_value(seed, vpage));
            pos += 64;
            self.tasks[t].bytes += 64;
        }
        if pos < len {
            self.tasks[t].cur = Some(Cur::Write { start, len, seed, pos, pfn, page, gen });
        }
    }

    /// MAP_POPULATE: faults in the next missing page of [start, start+len)
    /// (the fault's work runs before the task continues), or returns to user
    /// mode when every page is present.
    fn populate(&mut self, cpu: usize, t: usize, start: u64, len: u64, mut pos: u64) {
        let mm = self.tasks[t].mm;
        self.m.set_mode(cpu, Mode::Kernel);
        while pos < len {
            let va = start + pos;
            let mapped = match self.k.mms[mm].lookup(va) {
                Some(tr) => {
                    if tr.huge {
                        Mapped::Huge
                    } else {
                        Mapped::Small
                    }
                }
                None => {
                    let node = self.m.topo.node_of(cpu);
                    let mut work = std::mem::take(&mut self.cpus[cpu].work);
                    let r = self.k.faultin_page(mm, va, true, node, &mut work);
                    self.cpus[cpu].work = work;
                    match r {
                        Ok(m) => {
                            pos = next_page(start, pos, m);
                            self.tasks[t].cur = Some(Cur::Populate { start, len, pos });
                        }
                        Err(e) => self.error = Some(fault_error(t, e)),
                    }
                    return;
                }
            };
            pos = next_page(start, pos, mapped);
        }
        self.m.set_mode(cpu, Mode::User);
    }

    /// fork(): `copy_process()` with `dup_mmap()`, then `wake_up_new_task()`
    /// on the next CPU round-robin. The parent's `ret` is the child's pid,
    /// the child's 0.
    fn fork(&mut self, cpu: usize, t: usize) {
        let Some(prog) = self.tasks[t].prog.fork() else {
            self.error = Some(Error::Internal(format!("task {t}: its program cannot fork")));
            return;
        };
        self.m.set_mode(cpu, Mode::Kernel);
        let c = self.k.costs.syscall_entry_exit_cycles + COPY_PROCESS_CYCLES;
        self.m.advance(cpu, c, c);
        let parent_mm = self.tasks[t].mm;
        let copy = self.k.dup_mmap(parent_mm);
        self.m.advance(cpu, copy.cycles, copy.cycles);
        // dup_mmap() ends with flush_tlb_mm(oldmm): the parent's writable entries are gone.
        let k = &mut self.k;
        flush_tlb_mm_range(&mut self.m, &mut k.vmstat, cpu, &k.mms[parent_mm], &self.loaded_mm, 0, u64::MAX & !4095);
        let target = (cpu + 1 + self.tasks[t].nr_forked as usize) % self.cpus.len();
        let pid = self.new_task(prog, copy.child_mm, target, Some(t));
        // The child's memory is a copy: a start time the parent took (usemem's
        // global start_time, taken in main() before --prealloc) is inherited.
        self.tasks[pid].start = self.tasks[t].start;
        self.tasks[t].nr_forked += 1;
        self.tasks[t].live_children += 1;
        self.tasks[t].ret = pid as u64;
        self.wakeups.push((target, self.m.cpus[cpu].clock));
        self.m.set_mode(cpu, Mode::User);
    }

    /// exit(): `exit_mmap()` releases every mapping; a parent waiting for its
    /// last child is woken on the CPU it last ran on.
    fn exit(&mut self, cpu: usize, t: usize) {
        self.m.set_mode(cpu, Mode::Kernel);
        let mm_id = self.tasks[t].mm;
        for (start, end, zapped) in self.k.exit_mmap_ranges(mm_id) {
            self.zap(cpu, mm_id, start, end, &zapped);
        }
        self.m.set_mode(cpu, Mode::User);
        let now = self.m.cpus[cpu].clock;
        let task = &mut self.tasks[t];
        task.exited = true;
        task.exit = Some(now);
        self.cpus[cpu].current = None;
        if let Some(p) = self.tasks[t].parent {
            let parent = &mut self.tasks[p];
            parent.live_children -= 1;
            if parent.live_children == 0 && parent.waiting {
                parent.waiting = false;
                let pc = parent.cpu;
                self.cpus[pc].rq.push_back(p);
                self.wakeups.push((pc, now));
            }
        }
    }

    fn munmap(&mut self, cpu: usize, t: usize, start: u64) {
        let mm_id = self.tasks[t].mm;
        let Some((vma, zapped)) = self.k.mms[mm_id].munmap(start) else {
            self.error = Some(Error::Internal(format!("task {t}: munmap of {start:#x}, which is not a mapping start")));
            return;
        };
        let zapped = self.k.hugetlb_unmap(&vma, zapped);
        self.m.set_mode(cpu, Mode::Kernel);
        let c = self.k.costs.syscall_entry_exit_cycles;
        self.m.advance(cpu, c, c);
        self.zap(cpu, mm_id, vma.start, vma.end, &zapped);
        self.m.set_mode(cpu, Mode::User);
    }

    /// Releases the entries just removed from [start, end) of `mm_id` (each
    /// drops one mapping of its folio; the last one frees it) and flushes.
    fn zap(&mut self, cpu: usize, mm_id: usize, start: u64, end: u64, zapped: &[(u64, bool)]) {
        for &(pfn, _huge) in zapped {
            self.k.put_page(pfn);
            let c = self.k.costs.page_free_cycles;
            self.m.advance(cpu, c, c);
        }
        let k = &mut self.k;
        flush_tlb_mm_range(&mut self.m, &mut k.vmstat, cpu, &k.mms[mm_id], &self.loaded_mm, start, end);
    }

    /// Untimed data check: every 4 KiB page of the range must carry the expected tag.
    fn check(&mut self, t: usize, start: u64, len: u64, expect: Expect) {
        let mm = &self.k.mms[self.tasks[t].mm];
        let mut bad = 0;
        let mut first = None;
        let mut va = start;
        while va < start + len {
            let vpn = va >> 12;
            let want = match expect {
                Expect::Zero => TAG_ZERO,
                Expect::Written { seed } => {
                    let v = store_value(seed, vpn);
                    (0..64).fold(TAG_ZERO, |acc, l| tag_store(acc, l, v))
                }
                Expect::FirstLineWritten { seed, stride } if (va - start) % stride == 0 => tag_store(TAG_ZERO, 0, store_value(seed, vpn)),
                Expect::FirstLineWritten { .. } => TAG_ZERO,
                Expect::Overwritten { first, then } => {
                    let (v, w) = (store_value(first, vpn), store_value(then, vpn));
                    let t = (0..64).fold(TAG_ZERO, |acc, l| tag_store(acc, l, v));
                    (0..64).fold(t, |acc, l| tag_store(acc, l, w))
                }
            };
            let got = match mm.lookup(va) {
                Some(tr) => Some(self.k.alloc.tag(tr.pfn)),
                // A private anonymous page never touched reads as zeros.
                None if matches!(expect, Expect::Zero) && mm.find_vma(va).is_some() => Some(TAG_ZERO),
                None => None,
            };
            if got != Some(want) {
                bad += 1;
                if first.is_none() {
                    first = Some(match got {
                        None => format!("page {va:#x} is not mapped"),
                        Some(g) => format!("page {va:#x} holds tag {g:#018x}, expected {want:#018x}"),
                    });
                }
            }
            va += 4096;
        }
        let task = &mut self.tasks[t];
        task.pages_checked += len.div_ceil(4096);
        task.bad_pages += bad;
        if task.first_bad.is_none() {
            task.first_bad = first;
        }
    }
}

/// The offset after the page (or huge page) a fault at `start + pos` mapped.
fn next_page(start: u64, pos: u64, m: Mapped) -> u64 {
    let va = start + pos;
    match m {
        Mapped::Huge => (va & !(PMD_SIZE - 1)) + PMD_SIZE - start,
        Mapped::Small => (va & !4095) + 4096 - start,
    }
}

fn fault_error(t: usize, e: FaultError) -> Error {
    match e {
        FaultError::Segv(a) => Error::Internal(format!("task {t}: segmentation fault at {a:#x}")),
        FaultError::Protection(a) => Error::Internal(format!("task {t}: write to read-only mapping at {a:#x}")),
        // The configuration gave the workload too little memory: the user's to fix.
        FaultError::Oom => Error::Config {
            key: "sim.node_memory_mib".into(),
            message: format!("task {t} ran out of simulated memory; raise it, or set 0 to size memory from the workload"),
        },
    }
}
