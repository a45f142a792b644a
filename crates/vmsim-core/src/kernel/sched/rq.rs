//! The scheduler proper (kernel/sched/core.c): per-CPU run queues, task
//! states, time slices, `schedule()`'s choice of the next task and
//! `wake_up_process`. It knows tasks only by pid and CPUs by number; what a
//! switch does to address spaces (`switch_mm`, lazy TLB) is the caller's.
//!
//! Policy: round-robin within a CPU with CFS's minimum granularity as the
//! slice (3 ms on >= 8 CPUs) — with equal weights and tasks that never sleep
//! mid-slice, CFS's pick is round-robin. A woken task goes back to the CPU it
//! last ran on (no wake-up balancing).
//!
//! Invariants: a task is on at most one run queue or CPU; a sleeping task is
//! on none; CPUs given a task while idle are reported once in `wakeups`.

use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    /// Running on a CPU or waiting on its run queue (`TASK_RUNNING`).
    Runnable,
    /// Off every run queue until woken (`TASK_INTERRUPTIBLE` / `TASK_UNINTERRUPTIBLE`).
    Sleeping,
    /// Exited (`EXIT_DEAD`).
    Dead,
}

crate::counters! {
    /// The scheduler's counters (/proc/schedstat and /proc/stat names).
    pub struct SchedStats {
        /// Context switches (`ctxt` of /proc/stat).
        pub nr_switches: u64,
        /// Switches away from a task that went to sleep (the sum of the
        /// tasks' `voluntary_ctxt_switches` of /proc/PID/status, `nvcsw`).
        pub nr_voluntary_switches: u64,
        /// Switches away from a task still runnable, its slice over
        /// (`nonvoluntary_ctxt_switches`, `nivcsw`).
        pub nr_involuntary_switches: u64,
        /// Sleeping tasks woken (`ttwu_count` of schedstat).
        pub nr_wakeups: u64,
        /// Scheduler ticks taken, all CPUs (`LOC` of /proc/interrupts, the
        /// local timer interrupts; idle CPUs take none).
        pub nr_ticks: u64,
    }
}

pub struct Scheduler {
    rq: Vec<VecDeque<usize>>,
    curr: Vec<Option<usize>>,
    slice_end: Vec<u64>,
    /// The slice length in cycles.
    pub slice: u64,
    state: Vec<TaskState>,
    /// The CPU each task last ran on or is queued on.
    task_cpu: Vec<usize>,
    /// Simulated time of each task's last wake-up.
    last_wakeup: Vec<Option<u64>>,
    pub stats: SchedStats,
    /// CPUs given a task since last taken, with the waker's time.
    wakeups: Vec<(usize, u64)>,
}

impl Scheduler {
    pub fn new(nr_cpus: usize, slice: u64) -> Scheduler {
        Scheduler {
            rq: vec![VecDeque::new(); nr_cpus],
            curr: vec![None; nr_cpus],
            slice_end: vec![0; nr_cpus],
            slice,
            state: Vec::new(),
            task_cpu: Vec::new(),
            last_wakeup: Vec::new(),
            stats: SchedStats::default(),
            wakeups: Vec::new(),
        }
    }

    /// Registers task `pid` (the next pid) on `cpu`'s run queue (`sched_fork` + enqueue).
    pub fn add_task(&mut self, pid: usize, cpu: usize) {
        debug_assert_eq!(pid, self.state.len());
        self.state.push(TaskState::Runnable);
        self.task_cpu.push(cpu);
        self.last_wakeup.push(None);
        self.rq[cpu].push_back(pid);
    }

    /// `wake_up_new_task`: a new task made runnable by a running one at `now`.
    pub fn wake_up_new_task(&mut self, pid: usize, cpu: usize, now: u64) {
        self.add_task(pid, cpu);
        self.wakeups.push((cpu, now));
    }

    /// `wake_up_process`: a sleeping task back on the run queue of its CPU.
    /// False if it was not sleeping.
    pub fn wake_up_process(&mut self, pid: usize, now: u64) -> bool {
        if self.state[pid] != TaskState::Sleeping {
            return false;
        }
        self.state[pid] = TaskState::Runnable;
        self.last_wakeup[pid] = Some(now);
        self.stats.nr_wakeups += 1;
        let cpu = self.task_cpu[pid];
        self.rq[cpu].push_back(pid);
        self.wakeups.push((cpu, now));
        true
    }

    /// The current task of `cpu` goes to sleep (it leaves the CPU).
    pub fn sleep_current(&mut self, cpu: usize) -> usize {
        let t = self.curr[cpu].take().expect("a current task");
        self.state[t] = TaskState::Sleeping;
        self.stats.nr_voluntary_switches += 1;
        t
    }

    /// The current task of `cpu` has exited.
    pub fn exit_current(&mut self, cpu: usize) -> usize {
        let t = self.curr[cpu].take().expect("a current task");
        self.state[t] = TaskState::Dead;
        t
    }

    pub fn current(&self, cpu: usize) -> Option<usize> {
        self.curr[cpu]
    }

    pub fn state(&self, pid: usize) -> TaskState {
        self.state[pid]
    }

    pub fn task_cpu(&self, pid: usize) -> usize {
        self.task_cpu[pid]
    }

    pub fn last_wakeup(&self, pid: usize) -> Option<u64> {
        self.last_wakeup[pid]
    }

    /// True if `cpu` has a task running or waiting.
    pub fn has_tasks(&self, cpu: usize) -> bool {
        self.curr[cpu].is_some() || !self.rq[cpu].is_empty()
    }

    /// `pick_next_task` for an idle CPU: the head of its run queue, made current
    /// with a fresh slice starting at `now`.
    pub fn pick_next_task(&mut self, cpu: usize) -> Option<usize> {
        let t = self.rq[cpu].pop_front()?;
        self.stats.nr_switches += 1;
        self.curr[cpu] = Some(t);
        self.task_cpu[t] = cpu;
        Some(t)
    }

    /// Starts the slice of the task just switched to; `now` is after the switch.
    pub fn start_slice(&mut self, cpu: usize, now: u64) {
        self.slice_end[cpu] = now + self.slice;
    }

    /// `scheduler_tick` → `resched_curr`: at or past the end of its slice, with
    /// another task waiting, the current task goes to the back of the queue.
    /// True if it was preempted.
    pub fn tick(&mut self, cpu: usize, now: u64) -> bool {
        if now >= self.slice_end[cpu] && !self.rq[cpu].is_empty() {
            let t = self.curr[cpu].take().expect("a current task");
            self.rq[cpu].push_back(t);
            self.stats.nr_involuntary_switches += 1;
            return true;
        }
        false
    }

    /// CPUs that were given a task since the last call, with the waker's time.
    pub fn take_wakeups(&mut self) -> Vec<(usize, u64)> {
        std::mem::take(&mut self.wakeups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn round_robin_slices_and_wakeups() {
        let mut s = Scheduler::new(2, 100);
        s.add_task(0, 0);
        s.add_task(1, 0);
        assert_eq!(s.pick_next_task(0), Some(0));
        s.start_slice(0, 10);
        assert!(!s.tick(0, 109));
        assert!(s.tick(0, 110));
        assert_eq!(s.pick_next_task(0), Some(1));
        s.start_slice(0, 120);
        assert_eq!(s.sleep_current(0), 1);
        assert_eq!(s.state(1), TaskState::Sleeping);
        assert!(!s.wake_up_process(0, 5), "a runnable task is not woken");
        assert!(s.wake_up_process(1, 300));
        assert_eq!(s.last_wakeup(1), Some(300));
        assert_eq!(s.take_wakeups(), vec![(0, 300)]);
        assert_eq!(s.pick_next_task(0), Some(0));
        assert_eq!(s.pick_next_task(0), Some(1));
        assert_eq!(s.stats.nr_switches, 4);
        assert_eq!(s.stats.nr_voluntary_switches, 1);
        assert_eq!(s.stats.nr_involuntary_switches, 1);
    }
}
