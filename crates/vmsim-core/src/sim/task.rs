//! The task table's side of fork, clone, exit and munmap: the child task
//! made and placed, the caller's return value, the exited task and its
//! waiting parent. What these calls do to address spaces is the kernel's
//! (kernel/fork.rs `fork_mm`, kernel/exit.rs `exit_mm`, kernel/mmap.rs
//! `munmap`), run through `kernel_hw`.

use super::{Body, Cur, Sim};
use crate::error::Error;
use crate::kernel::fork::COPY_PROCESS_CYCLES;
use crate::kernel::memory::fault_error;
use crate::kernel::uapi::Program;
use crate::kernel::{KFn, Work};
use crate::machine::Mode;

impl Sim {
    /// fork(): `copy_process()` with `dup_mmap()`, then `wake_up_new_task()`
    /// on the next CPU round-robin. The parent's `ret` is the child's pid,
    /// the child's 0.
    pub(crate) fn fork(&mut self, cpu: usize, t: usize) {
        let Some(prog) = self.copy_process(cpu, t, "fork") else {
            return;
        };
        let parent_mm = self.tasks[t].user_mm();
        let (k, mut hw) = self.kernel_hw(cpu);
        let child_mm = k.fork_mm(&mut hw, parent_mm);
        self.wake_up_new_child(cpu, t, prog, child_mm);
    }

    /// clone(CLONE_VM | CLONE_THREAD): `copy_process()` without `dup_mmap()`;
    /// the thread shares the caller's mm (`mmget`), so no TLB flush is
    /// needed. Placed like a forked child; the caller's `ret` is the thread's
    /// pid, the thread's 0.
    pub(crate) fn clone_thread(&mut self, cpu: usize, t: usize) {
        let Some(prog) = self.copy_process(cpu, t, "clone") else {
            return;
        };
        self.settle(cpu, KFn::Fork);
        let mm = self.tasks[t].user_mm();
        self.kernel.mmget(mm);
        self.wake_up_new_child(cpu, t, prog, mm);
    }

    /// The start of `copy_process()` shared by fork and clone: enter the
    /// kernel and pay the system call and the task copy. None (and the run's
    /// error set) when the caller's program cannot make a child.
    fn copy_process(&mut self, cpu: usize, t: usize, call: &str) -> Option<Box<dyn Program>> {
        let Some(prog) = self.tasks[t].prog().fork() else {
            self.error = Some(Error::Internal(format!(
                "task {t}: its program cannot {call}"
            )));
            return None;
        };
        let (k, mut hw) = self.kernel_hw(cpu);
        k.syscall(&mut hw, COPY_PROCESS_CYCLES);
        Some(prog)
    }

    /// The end of fork and clone: the child (on `mm`) placed on the next CPU
    /// round-robin and woken (`wake_up_new_task()`); the caller gets its pid.
    fn wake_up_new_child(&mut self, cpu: usize, t: usize, prog: Box<dyn Program>, mm: usize) {
        let n = self.cpus.len();
        let first = cpu + 1 + self.tasks[t].nr_forked as usize;
        // The next CPU round-robin that the parent's affinity allows (inherited).
        let allowed = self.tasks[t].cpus_allowed;
        let target = (0..n)
            .map(|i| (first + i) % n)
            .find(|&c| allowed.is_none_or(|m| m.test(c)))
            .unwrap_or(first % n);
        let pid = self.add_task(Body::User(prog), Some(mm), Some(t));
        self.tasks[pid].cpus_allowed = allowed;
        // The child's memory is a copy (or shared): a start time the parent took
        // (usemem's global start_time, taken in main() before --prealloc) is inherited.
        self.tasks[pid].start = self.tasks[t].start;
        self.tasks[t].nr_forked += 1;
        self.tasks[t].live_children += 1;
        self.tasks[t].ret = pid as u64;
        let mut now = self.machine.cpus[cpu].clock;
        if self.kernel.cfg.wakeups {
            // wake_up_new_task(): an idle target CPU leaves its idle state first.
            now = self.idle_exit_on(target, now, false);
        }
        self.sched.wake_up_new_task(pid, target, now);
        self.machine.set_mode(cpu, Mode::User);
    }

    /// exit(): the mm dropped (`exit_mm`, kernel/exit.rs), the task marked
    /// exited; a parent waiting for its last child is woken on the CPU it
    /// last ran on.
    pub(crate) fn exit(&mut self, cpu: usize, t: usize) {
        let mm_id = self.tasks[t].user_mm();
        let (k, mut hw) = self.kernel_hw(cpu);
        k.exit_mm(&mut hw, mm_id);
        let now = self.machine.cpus[cpu].clock;
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
                self.try_to_wake_up(Some(cpu), p, now, false);
            }
        }
    }

    /// munmap(start) for task `t`.
    pub(crate) fn munmap(&mut self, cpu: usize, t: usize, start: u64) {
        let mm_id = self.tasks[t].user_mm();
        let (k, mut hw) = self.kernel_hw(cpu);
        if !k.munmap(&mut hw, mm_id, start) {
            self.error = Some(Error::Config {
                key: "workload".into(),
                message: format!(
                    "task {t}: munmap of {start:#x}, which is not a mapping start (another thread unmapped it?)"
                ),
            });
        }
    }

    /// madvise(MADV_DONTNEED) of [start, start+len) for task `t`.
    pub(crate) fn madvise_dontneed(&mut self, cpu: usize, t: usize, start: u64, len: u64) {
        let mm_id = self.tasks[t].user_mm();
        let (k, mut hw) = self.kernel_hw(cpu);
        if let Err(e) = k.madvise_dontneed(&mut hw, mm_id, start, len) {
            self.error = Some(Error::Config {
                key: "workload".into(),
                message: format!("task {t}: {e}"),
            });
        }
    }

    /// mprotect of the mapping at `start` for task `t`.
    pub(crate) fn mprotect(&mut self, cpu: usize, t: usize, start: u64, write: bool) {
        let mm_id = self.tasks[t].user_mm();
        let (k, mut hw) = self.kernel_hw(cpu);
        if let Err(e) = k.mprotect(&mut hw, mm_id, start, write) {
            self.error = Some(Error::Config {
                key: "workload".into(),
                message: format!("task {t}: {e}"),
            });
        }
    }

    /// MAP_POPULATE of task `t`'s new mapping (kernel/gup.rs): the fault of
    /// the next missing page runs before the task continues here.
    pub(crate) fn populate(&mut self, cpu: usize, t: usize, start: u64, len: u64, pos: u64) {
        let mm = self.tasks[t].user_mm();
        let mut work = std::mem::take(&mut self.cpus[cpu].work);
        let (k, mut hw) = self.kernel_hw(cpu);
        let r = k.populate_vma_page_range(&mut hw, mm, start, len, pos, &mut work);
        self.cpus[cpu].work = work;
        match r {
            Ok(Some(pos)) => self.tasks[t].cur = Some(Cur::Populate { start, len, pos }),
            Ok(None) => {}
            Err(e) => self.error = Some(fault_error(t, e)),
        }
    }

    /// `se.sum_exec_runtime` of task `t`, current on `cpu`.
    fn runtime(&self, cpu: usize, t: usize) -> u64 {
        let base = self
            .kernel
            .numa
            .tasks
            .get(t)
            .map_or(0, |n| n.sum_exec_runtime);
        base + self.machine.cpus[cpu]
            .clock
            .saturating_sub(self.cpus[cpu].curr_since)
    }

    /// Task `t` leaves `cpu`: its run time so far is added up.
    pub(crate) fn account_runtime(&mut self, cpu: usize, t: usize) {
        let d = self.machine.cpus[cpu]
            .clock
            .saturating_sub(self.cpus[cpu].curr_since);
        self.kernel.task_numa(t).sum_exec_runtime += d;
        self.cpus[cpu].curr_since = self.machine.cpus[cpu].clock;
    }

    /// `task_tick_numa` (kernel/sched/numa.rs) for user task `t` on `cpu`.
    pub(crate) fn task_tick_numa(&mut self, cpu: usize, t: usize) {
        let Some(mm) = self.tasks[t].mm else {
            return;
        };
        let rt = self.runtime(cpu, t);
        let mut work = std::mem::take(&mut self.cpus[cpu].work);
        let queued = work.len();
        let (k, mut hw) = self.kernel_hw(cpu);
        k.task_tick_numa(&mut hw, t, mm, rt, &mut work);
        // The scan is task work (`task_numa_work` via `task_work_run`), run
        // in the kernel on the way back to user mode: system time.
        if work.len() > queued && self.machine.cpus[cpu].mode == Mode::User {
            self.machine.set_mode(cpu, Mode::Kernel);
            work.push_back(Work::ReturnToUser);
        }
        self.cpus[cpu].work = work;
    }
}
