//! Wait queues (kernel/sched/wait.c): a task that must wait for a condition
//! puts itself on a queue and sleeps; whoever makes the condition true wakes
//! the queue. Queues live with the kernel object they belong to (a node's
//! `kswapd_wait`, say), so kernel code that holds no scheduler can wake them:
//! `wake_up` moves the waiters to a pending list that the run loop hands to
//! `wake_up_process` right after the quantum that woke them.
//!
//! Invariants: a task waits on at most one queue; waiters are woken in the
//! order they queued (FIFO), so wake-ups are deterministic.

use std::collections::VecDeque;

/// Index of a wait queue (`wait_queue_head_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WaitQueueId(pub usize);

#[derive(Default)]
pub struct WaitQueues {
    queues: Vec<VecDeque<usize>>,
    /// Tasks woken and not yet handed to the scheduler.
    woken: Vec<usize>,
    /// `wake_up` calls that found waiters.
    pub nr_wakeups: u64,
}

impl WaitQueues {
    /// `init_waitqueue_head`.
    pub fn add_queue(&mut self) -> WaitQueueId {
        self.queues.push(VecDeque::new());
        WaitQueueId(self.queues.len() - 1)
    }

    /// `prepare_to_wait` + `schedule`: `pid` sleeps on `q` (the caller takes it off its CPU).
    pub fn wait(&mut self, q: WaitQueueId, pid: usize) {
        debug_assert!(!self.queues[q.0].contains(&pid));
        self.queues[q.0].push_back(pid);
    }

    /// `waitqueue_active`.
    pub fn active(&self, q: WaitQueueId) -> bool {
        !self.queues[q.0].is_empty()
    }

    /// `wake_up_all`: every waiter becomes runnable. Returns how many were woken.
    pub fn wake_up(&mut self, q: WaitQueueId) -> usize {
        let n = self.queues[q.0].len();
        if n > 0 {
            self.nr_wakeups += 1;
            self.woken.extend(self.queues[q.0].drain(..));
        }
        n
    }

    /// The tasks woken since the last call, in wake-up order.
    pub fn take_woken(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.woken)
    }

    pub fn has_woken(&self) -> bool {
        !self.woken.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn wake_up_moves_waiters_in_order() {
        let mut w = WaitQueues::default();
        let (a, b) = (w.add_queue(), w.add_queue());
        w.wait(a, 3);
        w.wait(a, 1);
        w.wait(b, 2);
        assert_eq!(w.wake_up(a), 2);
        assert_eq!(w.wake_up(a), 0);
        assert!(w.active(b) && !w.active(a));
        assert_eq!(w.take_woken(), vec![3, 1]);
        assert!(!w.has_woken());
    }
}
