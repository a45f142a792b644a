//! What a task does at user level and the process calls it makes: the
//! operations of a workload's program (mmap, munmap, fork, exit, wait,
//! sequential writes, MAP_POPULATE) and the untimed data check. A write
//! that finds no writable mapping enters the fault handler, whose work the
//! CPU then executes (exec.rs) before the write resumes.

use super::*;

impl Sim {
    fn fault(&mut self, cpu: usize, t: usize, addr: u64, write: bool) -> bool {
        let mm = self.tasks[t].user_mm();
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

    pub(super) fn exec_user(&mut self, cpu: usize, t: usize, deadline: u64) {
        if self.tasks[t].cur.is_none() {
            let ret = self.tasks[t].ret;
            let op = self.tasks[t].prog().next(ret);
            self.tasks[t].ret = 0;
            match op {
                Op::MarkStart => self.tasks[t].start = Some(self.m.cpus[cpu].clock),
                Op::MarkEnd => self.tasks[t].end = Some(self.m.cpus[cpu].clock),
                Op::Mmap { len, populate } => {
                    self.syscall(cpu, 0);
                    let mm = self.tasks[t].user_mm();
                    let start = self.k.mms[mm].mmap(len, crate::kernel::mm::VmaKind::AnonPrivate, true);
                    self.tasks[t].ret = start;
                    if populate {
                        self.tasks[t].cur = Some(Cur::Populate { start, len, pos: 0 });
                    }
                }
                Op::Fork => self.fork(cpu, t),
                Op::Wait => {
                    if self.tasks[t].live_children > 0 {
                        self.tasks[t].waiting = true;
                        self.sched.sleep_current(cpu);
                    }
                }
                Op::MmapHugetlb { len, page_shift } => {
                    self.syscall(cpu, 0);
                    let mm = self.tasks[t].user_mm();
                    self.tasks[t].ret = self.k.mms[mm].mmap_hugetlb(len, page_shift);
                }
                Op::Munmap { start } => self.munmap(cpu, t, start),
                Op::Nanosleep { ns } => {
                    self.syscall(cpu, 0);
                    // hrtimer_start(): expiry relative to the time of the call.
                    let until = self.m.cpus[cpu].clock + ns * self.m.freq_mhz / 1000;
                    self.sleep_until(cpu, until);
                }
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
        let mm = self.tasks[t].user_mm();
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
        let mm = self.tasks[t].user_mm();
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
        let Some(prog) = self.tasks[t].prog().fork() else {
            self.error = Some(Error::Internal(format!("task {t}: its program cannot fork")));
            return;
        };
        self.m.set_mode(cpu, Mode::Kernel);
        let c = self.k.costs.syscall_entry_exit_cycles + COPY_PROCESS_CYCLES;
        self.m.advance(cpu, c, c);
        let parent_mm = self.tasks[t].user_mm();
        let copy = self.k.dup_mmap(parent_mm);
        self.m.advance(cpu, copy.cycles, copy.cycles);
        self.settle(cpu, KFn::Fork);
        // dup_mmap() ends with flush_tlb_mm(oldmm): the parent's writable entries are gone.
        let k = &mut self.k;
        flush_tlb_mm_range(&mut self.m, &mut k.vmstat, cpu, &mut k.mms[parent_mm], &mut self.tlbstate, 0, !4095u64);
        self.settle(cpu, KFn::FlushTlb);
        let target = (cpu + 1 + self.tasks[t].nr_forked as usize) % self.cpus.len();
        let pid = self.add_task(Body::User(prog), Some(copy.child_mm), Some(t));
        // The child's memory is a copy: a start time the parent took (usemem's
        // global start_time, taken in main() before --prealloc) is inherited.
        self.tasks[pid].start = self.tasks[t].start;
        self.tasks[t].nr_forked += 1;
        self.tasks[t].live_children += 1;
        self.tasks[t].ret = pid as u64;
        self.sched.wake_up_new_task(pid, target, self.m.cpus[cpu].clock);
        self.m.set_mode(cpu, Mode::User);
    }

    /// exit(): `exit_mmap()` releases every mapping; a parent waiting for its
    /// last child is woken on the CPU it last ran on.
    fn exit(&mut self, cpu: usize, t: usize) {
        self.m.set_mode(cpu, Mode::Kernel);
        let mm_id = self.tasks[t].user_mm();
        for (start, end, zapped) in self.k.exit_mmap_ranges(mm_id) {
            self.zap(cpu, mm_id, start, end, &zapped);
        }
        self.m.set_mode(cpu, Mode::User);
        let now = self.m.cpus[cpu].clock;
        let task = &mut self.tasks[t];
        task.exited = true;
        task.exit = Some(now);
        self.sched.exit_current(cpu);
        self.live_user_tasks -= 1;
        if let Some(p) = self.tasks[t].parent {
            let parent = &mut self.tasks[p];
            parent.live_children -= 1;
            if parent.live_children == 0 && parent.waiting {
                parent.waiting = false;
                self.sched.wake_up_process(p, now);
            }
        }
    }

    fn munmap(&mut self, cpu: usize, t: usize, start: u64) {
        let mm_id = self.tasks[t].user_mm();
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
        // Whatever came before (the system call's entry) is its own.
        self.settle(cpu, KFn::Syscall);
        for &(pfn, _huge) in zapped {
            self.k.put_page(pfn);
            let c = self.k.costs.page_free_cycles;
            self.m.advance(cpu, c, c);
        }
        self.settle(cpu, KFn::FreePages);
        let k = &mut self.k;
        flush_tlb_mm_range(&mut self.m, &mut k.vmstat, cpu, &mut k.mms[mm_id], &mut self.tlbstate, start, end);
        self.settle(cpu, KFn::FlushTlb);
    }

    /// Untimed data check: every 4 KiB page of the range must carry the expected tag.
    fn check(&mut self, t: usize, start: u64, len: u64, expect: Expect) {
        let mm = &self.k.mms[self.tasks[t].user_mm()];
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
