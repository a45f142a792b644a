//! Task exit (kernel/exit.c `do_exit`): the task drops its mm (`mmput`;
//! the last user's drop tears the address space down with `exit_mmap`) and
//! a parent waiting for its last child is woken.

use crate::machine::Mode;
use crate::sim::Sim;

impl Sim {
    /// exit(): `exit_mm()` → `mmput()`: the last user of the mm releases
    /// every mapping (`exit_mmap()`); the CPU keeps the mm loaded lazily. A
    /// parent waiting for its last child is woken on the CPU it last ran on.
    pub(crate) fn exit(&mut self, cpu: usize, t: usize) {
        self.m.set_mode(cpu, Mode::Kernel);
        let mm_id = self.tasks[t].user_mm();
        if self.k.mmput(mm_id) {
            for (start, end, zapped) in self.k.exit_mmap_ranges(mm_id) {
                self.zap(cpu, mm_id, start, end, &zapped);
            }
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
}
