//! Executing the hardware work the kernel queued on a CPU (kernel/mod.rs
//! `Work`): fixed costs, bulk clears and copies as line accesses (resumable
//! at a quantum boundary, a string instruction's start-up paid once), the
//! return to user mode; a kernel path's continuation (`Work::Kernel`) goes
//! back to the kernel (kernel/resume.rs), and the engine does what it
//! answers (a task's sleep, the run's stop).

use super::*;
use crate::kernel::resume::{ResumeCtx, Resumed};

impl Sim {
    pub(super) fn exec_work(&mut self, cpu: usize, deadline: u64) {
        let item = self.cpus[cpu].work.front().cloned().expect("non-empty");
        match item {
            Work::Cycles {
                cycles,
                instructions,
                ..
            } => {
                self.machine.advance(cpu, cycles, instructions);
            }
            Work::Sfence { .. } => self.machine.sfence(cpu),
            Work::Clear { line, nlines, how } => {
                let mut i = self.begin_bulk(cpu, how);
                let (kind, issue) = match how {
                    StoreHow::String => (AccessKind::StringStore, self.string_issue),
                    StoreHow::MovLoop => (AccessKind::Store, self.movq_issue),
                    StoreHow::NonTemporal => (AccessKind::NtStore, self.movnti_issue),
                    StoreHow::Clzero => (AccessKind::NtStore, self.clzero_issue),
                };
                let per_line = match how {
                    StoreHow::String => 0,
                    StoreHow::MovLoop => crate::kernel::instr::CLEAR_PAGE_ORIG_PER_LINE,
                    StoreHow::NonTemporal => crate::kernel::instr::CLEAR_NT_PER_LINE,
                    StoreHow::Clzero => crate::kernel::instr::CLEAR_CLZERO_PER_LINE,
                };
                let n = nlines.min(self.bulk_limit);
                self.machine.set_line_stores(cpu, how.stores_per_line());
                // A string store over more bytes than the chip's threshold elides
                // cache allocation for its first `bypass` lines.
                let bypass = match how {
                    StoreHow::String => self.machine.string_bypass_lines(nlines),
                    _ => 0,
                };
                if i < bypass {
                    let to = bypass.min(n);
                    i = self.machine.bulk_run(
                        cpu,
                        line,
                        None,
                        i,
                        to,
                        AccessKind::NtStore,
                        issue,
                        per_line,
                        deadline,
                    );
                }
                if i >= bypass {
                    i = self
                        .machine
                        .bulk_run(cpu, line, None, i, n, kind, issue, per_line, deadline);
                }
                self.machine.set_line_stores(cpu, 1);
                if !self.end_bulk(cpu, i, nlines) {
                    return;
                }
            }
            Work::Copy {
                src_line,
                dst_line,
                nlines,
                how,
            } => {
                let i = self.begin_bulk(cpu, how);
                let (kind, issue) = match how {
                    StoreHow::String => (AccessKind::StringStore, self.string_issue),
                    StoreHow::MovLoop => (AccessKind::Store, self.copy_issue),
                    // No copy plan stores with clzero (it only zeroes); taken as movnti.
                    StoreHow::NonTemporal | StoreHow::Clzero => {
                        (AccessKind::NtStore, self.copy_issue)
                    }
                };
                let per_line = match how {
                    StoreHow::MovLoop => crate::kernel::instr::COPY_PAGE_REGS_PER_LINE,
                    _ => 0,
                };
                // The load's issue slots are covered by the store's: the
                // copy is bound by one store (string width) per line.
                let n = nlines.min(self.bulk_limit);
                self.machine.set_line_stores(cpu, how.stores_per_line());
                let i = self.machine.bulk_run(
                    cpu,
                    dst_line,
                    Some(src_line),
                    i,
                    n,
                    kind,
                    issue,
                    per_line,
                    deadline,
                );
                self.machine.set_line_stores(cpu, 1);
                if !self.end_bulk(cpu, i, nlines) {
                    return;
                }
            }
            Work::ReturnToUser => self.machine.set_mode(cpu, Mode::User),
            Work::Kernel(step) => {
                let task = self.sched.current(cpu);
                let c = &mut self.cpus[cpu];
                let mut hw = Hw::new(
                    cpu,
                    &mut self.machine,
                    &mut self.tlbstate,
                    &mut c.sys_settled,
                    &mut self.kfn_cycles,
                    &mut self.kfn_mem_cycles,
                );
                let mut ctx = ResumeCtx {
                    queue: &mut c.work,
                    pos: &mut c.pos,
                    task,
                    deadline,
                };
                match self.kernel.resume(&mut hw, &step, &mut ctx) {
                    Resumed::Done => {}
                    Resumed::Left => return,
                    Resumed::SleepInFault(t) => {
                        self.account_runtime(cpu, t);
                        self.sched.sleep_current(cpu);
                        self.tasks[t].kernel_work = std::mem::take(&mut self.cpus[cpu].work);
                        return;
                    }
                    Resumed::SleepToRetry(t) => {
                        self.account_runtime(cpu, t);
                        self.sched.sleep_current(cpu);
                        self.machine.set_mode(cpu, Mode::User);
                        return;
                    }
                    Resumed::Failed(e) => {
                        self.error = Some(e);
                        return;
                    }
                }
            }
        }
        self.cpus[cpu].work.pop_front();
    }

    /// Where the front bulk work item (a clear or copy of many lines) resumes;
    /// its string instruction's start-up is paid once, however often it is resumed.
    fn begin_bulk(&mut self, cpu: usize, how: StoreHow) -> u64 {
        if !self.cpus[cpu].started {
            self.cpus[cpu].started = true;
            match how {
                StoreHow::String => self.machine.string_start(cpu),
                StoreHow::Clzero => self.machine.set_clzero(cpu, true),
                _ => {}
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
        // A string instruction's stores have all issued, a clzero loop's
        // too (no-op for other kinds).
        self.machine.string_end(cpu);
        self.machine.set_clzero(cpu, false);
        true
    }
}
