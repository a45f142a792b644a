//! Measured phases and barriers of user programs (`Op::PhaseBegin`/
//! `PhaseEnd`, `Op::Barrier`): what the workload language reports per access
//! phase and loop, and how its tasks meet.
//!
//! A phase's figures are sums over the tasks that ran it: each task's
//! access counts, bytes and latency histogram at its `PhaseEnd` minus those
//! at its matching `PhaseBegin`. Phases of one task nest (a loop around
//! access phases); an end without its begin is the program's error. A
//! barrier opens when its `tasks`-th task arrives and is then empty again,
//! so a loop may meet at it once per iteration.

use super::phase_stats::{PhaseMark, PhaseStats};
use super::*;

impl Sim {
    pub(crate) fn phase_begin(&mut self, cpu: usize, t: usize, id: u32) {
        let task = &mut self.tasks[t];
        let mark = PhaseMark {
            id,
            clock: self.machine.cpus[cpu].clock,
            reads: task.access.reads,
            writes: task.access.writes,
            bytes: task.bytes,
            hist: Box::new(task.access.latency.clone()),
        };
        task.phase_marks.push(mark);
    }

    pub(crate) fn phase_end(&mut self, cpu: usize, t: usize, id: u32, iterations: u64) {
        let task = &mut self.tasks[t];
        let Some(m) = task.phase_marks.pop().filter(|m| m.id == id) else {
            self.error = Some(Error::Internal(format!(
                "task {t}: phase {id} ends without having begun"
            )));
            return;
        };
        let now = self.machine.cpus[cpu].clock;
        if self.phases.len() <= id as usize {
            self.phases.resize(id as usize + 1, PhaseStats::default());
        }
        let p = &mut self.phases[id as usize];
        p.runs += 1;
        p.reads += task.access.reads - m.reads;
        p.writes += task.access.writes - m.writes;
        p.bytes += task.bytes - m.bytes;
        p.iterations += iterations;
        p.task_cycles += now - m.clock;
        p.first_begin = Some(p.first_begin.map_or(m.clock, |b| b.min(m.clock)));
        p.last_end = p.last_end.max(now);
        p.latency.add_since(&task.access.latency, &m.hist);
    }

    /// After the run loop: a user task that has not exited sleeps with
    /// nothing left to wake it (a barrier fewer tasks reach than it waits
    /// for, a wait for children that never come): the program's error.
    pub(crate) fn check_finished(&self) -> Result<(), Error> {
        if self.live_user_tasks == 0 || self.error.is_some() {
            return Ok(());
        }
        let stuck = self
            .tasks
            .iter()
            .position(|t| !t.is_kthread() && !t.exited)
            .unwrap_or(0);
        let why = match self.barriers.iter().find(|(_, w)| w.contains(&stuck)) {
            Some((id, w)) => format!(
                "it waits at barrier {id} with {} other task(s), and no other task will reach it",
                w.len() - 1
            ),
            None if self.tasks[stuck].waiting => "it waits for children that never exit".into(),
            None => "it sleeps and nothing will wake it".into(),
        };
        Err(Error::Config {
            key: "workload".into(),
            message: format!(
                "the program cannot finish: {} task(s) never exit; task {stuck}: {why}",
                self.live_user_tasks
            ),
        })
    }

    /// `pthread_barrier_wait()`: a futex call; the last of `tasks` wakes the
    /// others in the order they arrived, the rest sleep.
    pub(crate) fn barrier(&mut self, cpu: usize, t: usize, id: u32, tasks: u64) {
        self.syscall(cpu, 0);
        let waiting = self.barriers.entry(id).or_default();
        if (waiting.len() as u64) + 1 < tasks {
            waiting.push(t);
            self.sched.sleep_current(cpu);
            return;
        }
        let now = self.machine.cpus[cpu].clock;
        for w in std::mem::take(waiting) {
            self.try_to_wake_up(Some(cpu), w, now, false);
        }
    }
}
