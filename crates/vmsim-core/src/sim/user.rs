//! What a user task does: the operations of its program, dispatched to the
//! process calls (kernel/fork.rs, exit.rs, mmap.rs, gup.rs), the user-level
//! access loop and the untimed data check. A write that finds no writable
//! mapping enters the fault handler, whose work the CPU then executes
//! (exec.rs) before the write resumes.

use super::translate::Xlate;
use super::*;
use crate::kernel::memory::fault_error;

/// The 8 B words of a line, each one store of a write loop (`Op::WriteSeq`).
const WORDS_PER_LINE: u64 = 8;

impl Sim {
    pub(crate) fn fault(&mut self, cpu: usize, t: usize, addr: u64, write: bool) -> bool {
        let mm = self.tasks[t].user_mm();
        let node = self.machine.topo.node_of(cpu);
        self.machine.set_mode(cpu, Mode::Kernel);
        let mut work = std::mem::take(&mut self.cpus[cpu].work);
        let (k, mut hw) = self.kernel_hw(cpu);
        let r = k.do_user_addr_fault(&mut hw, t, mm, addr, write, node, &mut work);
        self.cpus[cpu].work = work;
        match r {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(fault_error(t, e));
                false
            }
        }
    }

    pub(crate) fn syscall(&mut self, cpu: usize, cycles: u64) {
        let (k, mut hw) = self.kernel_hw(cpu);
        k.syscall(&mut hw, cycles);
        hw.set_mode(Mode::User);
    }

    /// usemem's `ready()` in child `t`: its ready byte (waking a parent that
    /// reads the last one), then a poll of the wake pipe that sleeps until "go".
    fn ready_poll(&mut self, cpu: usize, t: usize) {
        let Some(p) = self.tasks[t].parent else {
            self.error = Some(Error::Internal(format!(
                "task {t} waits for its parent's go without a parent"
            )));
            return;
        };
        self.syscall(cpu, 0);
        let now = self.machine.cpus[cpu].clock;
        let pipes = &mut self.tasks[p].pipes;
        pipes.ready += 1;
        if pipes.reading.is_some_and(|n| pipes.ready >= n) {
            pipes.reading = None;
            self.try_to_wake_up(Some(cpu), p, now, false);
        }
        self.syscall(cpu, 0);
        if !self.tasks[p].pipes.go {
            self.tasks[p].pipes.pollers.push(t);
            self.sched.sleep_current(cpu);
        }
    }

    /// One step of user task `t`: its current loop runs on until `deadline`,
    /// or, with none, the program's next operation starts.
    pub(super) fn exec_user(&mut self, cpu: usize, t: usize, deadline: u64) {
        if self.tasks[t].cur.is_none() {
            self.start_op(cpu, t);
            return;
        }
        self.run_write(cpu, t, deadline);
    }

    /// The program's next operation, dispatched. Kept out of line: the
    /// quantum's hot path is the loop already running.
    #[inline(never)]
    fn start_op(&mut self, cpu: usize, t: usize) {
        {
            let ret = self.tasks[t].ret;
            let op = self.tasks[t].prog().next(ret);
            self.tasks[t].ret = 0;
            match op {
                Op::MarkStart => {
                    let task = &mut self.tasks[t];
                    task.start = Some(self.machine.cpus[cpu].clock);
                    task.bytes_at_start = task.bytes;
                }
                Op::RoiBegin => self.roi = Some((self.counters(), None)),
                Op::RoiEnd => {
                    let end = self.counters();
                    if let Some((_, e)) = &mut self.roi {
                        *e = Some(end);
                    }
                }
                Op::RoiJoin { tasks } => {
                    self.roi_joined += 1;
                    if self.roi_joined == tasks && !self.roi_left {
                        self.roi = Some((self.counters(), None));
                    }
                }
                Op::RoiLeave => {
                    if !std::mem::replace(&mut self.roi_left, true) {
                        let end = self.counters();
                        if let Some((_, e)) = &mut self.roi {
                            *e = Some(end);
                        }
                    }
                }
                Op::MarkEnd => {
                    let task = &mut self.tasks[t];
                    task.end = Some(self.machine.cpus[cpu].clock);
                    task.bytes_at_end = Some(task.bytes);
                }
                Op::Mmap { len, populate } => {
                    self.syscall(cpu, 0);
                    let mm = self.tasks[t].user_mm();
                    let start = self.kernel.mms[mm].mmap(
                        len,
                        crate::kernel::mm::VmaKind::AnonPrivate,
                        true,
                    );
                    self.tasks[t].ret = start;
                    if populate {
                        self.tasks[t].cur = Some(Cur::Populate { start, len, pos: 0 });
                    }
                }
                Op::MmapFile { ino, len } => {
                    self.syscall(cpu, 0);
                    let mm = self.tasks[t].user_mm();
                    self.tasks[t].ret = self.kernel.mmap_file(mm, ino, len);
                }
                Op::Fork => self.fork(cpu, t),
                Op::Clone => self.clone_thread(cpu, t),
                Op::ClockNanosleepAbs { ns } => {
                    self.syscall(cpu, 0);
                    let until = ns * self.machine.freq_mhz / 1000;
                    if until > self.machine.cpus[cpu].clock {
                        self.sleep_until(cpu, until);
                    }
                }
                Op::Wait => {
                    if self.tasks[t].live_children > 0 {
                        self.tasks[t].waiting = true;
                        self.sched.sleep_current(cpu);
                    }
                }
                Op::ReadyPoll => self.ready_poll(cpu, t),
                Op::ReadyRead { n } => {
                    self.syscall(cpu, 0);
                    if self.tasks[t].pipes.ready < n {
                        self.tasks[t].pipes.reading = Some(n);
                        self.sched.sleep_current(cpu);
                    }
                }
                Op::Go => {
                    self.syscall(cpu, 0);
                    let now = self.machine.cpus[cpu].clock;
                    let p = &mut self.tasks[t].pipes;
                    p.go = true;
                    for c in std::mem::take(&mut p.pollers) {
                        self.try_to_wake_up(Some(cpu), c, now, false);
                    }
                }
                Op::MmapHugetlb { len, page_shift } => {
                    self.syscall(cpu, 0);
                    let mm = self.tasks[t].user_mm();
                    self.tasks[t].ret = self.kernel.mms[mm].mmap_hugetlb(len, page_shift);
                }
                Op::Munmap { start } => self.munmap(cpu, t, start),
                Op::Access(a) => {
                    self.tasks[t].cur = Some(Cur::Access(access_run::AccessRun::new(a)))
                }
                Op::Nanosleep { ns } => {
                    self.syscall(cpu, 0);
                    // hrtimer_start(): expiry relative to the time of the call.
                    let until = self.machine.cpus[cpu].clock + ns * self.machine.freq_mhz / 1000;
                    self.sleep_until(cpu, until);
                }
                Op::WriteSeq {
                    start,
                    len,
                    seed,
                    instr_per_word,
                } => self.write_seq(t, start, len, seed, instr_per_word, false),
                Op::WriteSeqTracked {
                    start,
                    len,
                    seed,
                    instr_per_word,
                } => self.write_seq(t, start, len, seed, instr_per_word, true),
                Op::Barrier { id, tasks } => self.barrier(cpu, t, id, tasks),
                Op::ClockGettime => {
                    // The vDSO reads the TSC in user mode: no system call, and
                    // its few tens of instructions are not charged.
                    self.tasks[t].ret = self.machine.cpus[cpu].clock * 1000 / self.machine.freq_mhz;
                }
                Op::PhaseBegin { id } => self.phase_begin(cpu, t, id),
                Op::PhaseEnd { id, iterations } => self.phase_end(cpu, t, id, iterations),
                Op::MadviseDontneed { start, len } => self.madvise_dontneed(cpu, t, start, len),
                Op::Mprotect { start, write } => self.mprotect(cpu, t, start, write),
                Op::MadviseHugepage { start, huge } => {
                    self.syscall(cpu, 0);
                    let mm = self.tasks[t].user_mm();
                    if !self.kernel.mms[mm].madvise_hugepage(start, huge) {
                        self.error = Some(Error::Config {
                            key: "workload".into(),
                            message: format!(
                                "task {t}: madvise of {start:#x}, which is not a mapping start"
                            ),
                        });
                    }
                }
                Op::Check { start, len, expect } => self.check(t, start, len, expect),
                Op::Exit => self.exit(cpu, t),
                Op::MmapFixed { addr, len } => {
                    self.syscall(cpu, 0);
                    let mm = self.tasks[t].user_mm();
                    let r = self.kernel.mms[mm].mmap_fixed(
                        addr,
                        len,
                        crate::kernel::mm::VmaKind::AnonPrivate,
                        true,
                    );
                    self.tasks[t].ret = r.unwrap_or_else(|errno| errno.wrapping_neg() as u64);
                }
                Op::Replay(b) => {
                    self.tasks[t].cur = Some(Cur::Replay(super::replay_run::ReplayRun::new(b)))
                }
                Op::Fail(e) => self.error = Some(e),
            }
        }
    }

    /// Starts a sequential write loop (`Op::WriteSeq`, `Op::WriteSeqTracked`).
    fn write_seq(
        &mut self,
        t: usize,
        start: u64,
        len: u64,
        seed: u64,
        instr_per_word: u64,
        shadow: bool,
    ) {
        {
            // The loop's instructions or the store ports, whichever is slower.
            let issue = (WORDS_PER_LINE * instr_per_word)
                .div_ceil(self.machine.issue_width)
                .max(self.scalar_line);
            self.tasks[t].cur = Some(Cur::Write {
                start,
                len,
                seed,
                issue,
                instr: WORDS_PER_LINE * instr_per_word,
                pos: 0,
                pfn: 0,
                page: u64::MAX,
                gen: u64::MAX,
                shadow,
            });
        }
    }

    /// Runs the task's current write loop, population or access run.
    #[inline]
    fn run_write(&mut self, cpu: usize, t: usize, deadline: u64) {
        let (start, len, seed, issue, instr, mut pos, mut pfn, mut page, mut gen, shadow) =
            match self.tasks[t].cur.take() {
                Some(Cur::Write {
                    start,
                    len,
                    seed,
                    issue,
                    instr,
                    pos,
                    pfn,
                    page,
                    gen,
                    shadow,
                }) => (start, len, seed, issue, instr, pos, pfn, page, gen, shadow),
                Some(Cur::Populate { start, len, pos }) => {
                    return self.populate(cpu, t, start, len, pos)
                }
                Some(Cur::Access(r)) => return self.exec_access(cpu, t, deadline, r),
                Some(Cur::Replay(r)) => return self.exec_replay(cpu, t, deadline, r),
                None => unreachable!(),
            };
        let mm = self.tasks[t].user_mm();
        let asid = self.kernel.mms[mm].asid;
        while pos < len && self.machine.cpus[cpu].clock < deadline {
            let va = start + pos;
            let vpage = va >> 12;
            if vpage != page || gen != self.kernel.mms[mm].generation {
                match self.translate(cpu, t, mm, asid, va, true) {
                    Xlate::Stale => return,
                    Xlate::Mapped(tr) => {
                        pfn = tr.pfn;
                        page = vpage;
                        gen = self.kernel.mms[mm].generation;
                    }
                    Xlate::Fault => {
                        self.tasks[t].cur = Some(Cur::Write {
                            start,
                            len,
                            seed,
                            issue,
                            instr,
                            pos,
                            pfn,
                            page: u64::MAX,
                            gen,
                            shadow,
                        });
                        if self.win_part.is_some() {
                            self.parked = Some(window_stats::Park::Fault);
                            return;
                        }
                        self.fault(cpu, t, va, true);
                        return;
                    }
                }
            }
            let lip = (va >> 6) & 63;
            if self.win_part.is_some() && !self.machine.is_local(cpu, (pfn << 6) | lip) {
                // Parked before the line: the loop's state is kept below.
                self.parked = Some(window_stats::Park::RemoteLine);
                break;
            }
            // The line's word stores, each a store-queue entry.
            self.machine.set_line_stores(cpu, WORDS_PER_LINE);
            self.machine
                .access(cpu, (pfn << 6) | lip, AccessKind::Store, true, issue);
            self.machine.set_line_stores(cpu, 1);
            self.machine.advance(cpu, 0, instr);
            let v = store_value(seed, vpage);
            self.kernel.mem.alloc.store_line(pfn, lip, v);
            if shadow {
                self.kernel.mms[mm].shadow_store(va, lip, v);
                // The line's word stores, as the access engine counts them.
                self.tasks[t].access.writes += WORDS_PER_LINE;
            }
            pos += 64;
            self.tasks[t].bytes += 64;
        }
        if pos < len {
            self.tasks[t].cur = Some(Cur::Write {
                start,
                len,
                seed,
                issue,
                instr,
                pos,
                pfn,
                page,
                gen,
                shadow,
            });
        }
    }

    /// Untimed data check: every 4 KiB page of the range must carry the expected tag.
    fn check(&mut self, t: usize, start: u64, len: u64, expect: Expect) {
        let mm = &self.kernel.mms[self.tasks[t].user_mm()];
        let mut bad = 0;
        let mut first = None;
        // The VMA last found for an untouched page: a range lies in one
        // (looking each page up among thousands of VMAs was quadratic).
        let mut vma: Option<(u64, u64)> = None;
        let mut va = start;
        while va < start + len {
            let vpn = va >> 12;
            let want = match expect {
                Expect::Zero => TAG_ZERO,
                Expect::Written { seed } => {
                    let v = store_value(seed, vpn);
                    (0..64).fold(TAG_ZERO, |acc, l| tag_store(acc, l, v))
                }
                Expect::FirstLineWritten { seed, stride }
                    if (va - start).is_multiple_of(stride) =>
                {
                    tag_store(TAG_ZERO, 0, store_value(seed, vpn))
                }
                Expect::FirstLineWritten { .. } => TAG_ZERO,
                Expect::AccessWrites => mm.shadow_tag(va).unwrap_or(TAG_ZERO),
                Expect::Overwritten { first, then } => {
                    let (v, w) = (store_value(first, vpn), store_value(then, vpn));
                    let t = (0..64).fold(TAG_ZERO, |acc, l| tag_store(acc, l, v));
                    (0..64).fold(t, |acc, l| tag_store(acc, l, w))
                }
            };
            let got = match mm.lookup(va) {
                Some(tr) => Some(self.kernel.mem.alloc.tag(tr.pfn)),
                // A private anonymous page never touched reads as zeros.
                None if want == TAG_ZERO
                    && matches!(expect, Expect::Zero | Expect::AccessWrites)
                    && (vma.is_some_and(|(s, e)| s <= va && va < e) || {
                        vma = mm.find_vma(va).map(|v| (v.start, v.end));
                        vma.is_some()
                    }) =>
                {
                    Some(TAG_ZERO)
                }
                None => None,
            };
            if got != Some(want) {
                bad += 1;
                if first.is_none() {
                    first = Some(match got {
                        None => format!("page {va:#x} is not mapped"),
                        Some(g) => {
                            format!("page {va:#x} holds tag {g:#018x}, expected {want:#018x}")
                        }
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
