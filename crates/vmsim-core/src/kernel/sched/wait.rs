//! Wait queues (kernel/sched/wait.c): a task that must wait for a condition
//! puts itself on a queue and sleeps; whoever makes the condition true wakes
//! the queue. Queues live with the kernel object they belong to (a node's
//! `kswapd_wait`, say), so kernel code that holds no scheduler can wake them:
//! `wake_up` moves the waiters to a pending list that the run loop hands to
//! `wake_up_process` right after the quantum that woke them.
//!
//! A waiter may carry a key and be exclusive, as the page wait queues' are
//! (`wait_page_queue`: the page, `WQ_FLAG_EXCLUSIVE` for `lock_page`):
//! `wake_up_key` (`__wake_up_common` with `nr_exclusive` = 1) wakes, in queue
//! order, every non-exclusive waiter with the key and the first exclusive
//! one, and stops there. Such a wake-up is timed: it carries the waker's
//! time, and the run loop makes the woken task's CPU pay its exit from idle
//! (sim/, `Sim::wake_woken`).
//!
//! Invariants: a task waits on at most one queue; waiters are woken in the
//! order they queued (FIFO), so wake-ups are deterministic.

use std::collections::VecDeque;

/// Index of a wait queue (`wait_queue_head_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WaitQueueId(pub usize);

/// One entry of a queue (`wait_queue_entry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Waiter {
    pid: usize,
    /// What it waits for (the page's frame for a page wait); None: anything
    /// woken on the queue.
    key: Option<u64>,
    /// `WQ_FLAG_EXCLUSIVE`: woken one at a time.
    exclusive: bool,
}

/// A task woken: by whom it was woken, at what time (a timed wake-up pays
/// the woken CPU's exit from idle), or untimed (woken at the run loop's time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Woken {
    pub pid: usize,
    pub at: Option<u64>,
    /// It slept in `io_schedule()` (the menu governor's iowait multiplier).
    pub iowait: bool,
}

#[derive(Default)]
pub struct WaitQueues {
    queues: Vec<VecDeque<Waiter>>,
    /// Tasks woken and not yet handed to the scheduler.
    woken: Vec<Woken>,
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
        debug_assert!(!self.queues[q.0].iter().any(|w| w.pid == pid));
        self.queues[q.0].push_back(Waiter {
            pid,
            key: None,
            exclusive: false,
        });
    }

    /// `prepare_to_wait_exclusive` with a key: `pid` sleeps on `q` at its
    /// tail, to be woken alone by a `wake_up_key` of `key`.
    pub fn wait_exclusive(&mut self, q: WaitQueueId, pid: usize, key: u64) {
        debug_assert!(!self.queues[q.0].iter().any(|w| w.pid == pid));
        self.queues[q.0].push_back(Waiter {
            pid,
            key: Some(key),
            exclusive: true,
        });
    }

    /// `waitqueue_active`.
    pub fn active(&self, q: WaitQueueId) -> bool {
        !self.queues[q.0].is_empty()
    }

    /// Whether a waiter of `key` is on `q` (`PageWaiters`).
    pub fn has_key(&self, q: WaitQueueId, key: u64) -> bool {
        self.queues[q.0].iter().any(|w| w.key == Some(key))
    }

    /// The tasks waiting for `key` on `q`, in queue order.
    pub fn waiters_of(&self, q: WaitQueueId, key: u64) -> Vec<usize> {
        self.queues[q.0]
            .iter()
            .filter(|w| w.key == Some(key))
            .map(|w| w.pid)
            .collect()
    }

    /// `wake_up_all`: every waiter becomes runnable (`iowait`: they slept
    /// in `io_schedule()`). Returns how many were woken.
    pub fn wake_up(&mut self, q: WaitQueueId, iowait: bool) -> usize {
        let n = self.queues[q.0].len();
        if n > 0 {
            self.nr_wakeups += 1;
            self.woken.extend(self.queues[q.0].drain(..).map(|w| Woken {
                pid: w.pid,
                at: None,
                iowait,
            }));
        }
        n
    }

    /// `__wake_up` of every waiter on `q`, one `try_to_wake_up` after
    /// another: `at` is called once per waiter, in queue order, and gives
    /// the time it is woken (the waker's clock after paying for it).
    /// Returns how many were woken.
    pub fn wake_up_each(
        &mut self,
        q: WaitQueueId,
        iowait: bool,
        mut at: impl FnMut() -> u64,
    ) -> usize {
        let n = self.queues[q.0].len();
        if n > 0 {
            self.nr_wakeups += 1;
            for w in std::mem::take(&mut self.queues[q.0]) {
                self.woken.push(Woken {
                    pid: w.pid,
                    at: Some(at()),
                    iowait,
                });
            }
        }
        n
    }

    /// `__wake_up_locked_key` with `nr_exclusive` = 1 at time `now`: in queue
    /// order, every non-exclusive waiter of `key` and the first exclusive one
    /// are woken (and leave the queue: `autoremove_wake_function`); the walk
    /// stops at that exclusive waiter. Returns the tasks woken, in order.
    pub fn wake_up_key(&mut self, q: WaitQueueId, key: u64, now: u64) -> Vec<usize> {
        let queue = &mut self.queues[q.0];
        let mut woken = Vec::new();
        let mut i = 0;
        while i < queue.len() {
            if queue[i].key != Some(key) {
                i += 1;
                continue;
            }
            let w = queue.remove(i).expect("in range");
            woken.push(w.pid);
            if w.exclusive {
                break;
            }
        }
        if !woken.is_empty() {
            self.nr_wakeups += 1;
            self.woken.extend(woken.iter().map(|&pid| Woken {
                pid,
                at: Some(now),
                iowait: true,
            }));
        }
        woken
    }

    /// The tasks woken since the last call, in wake-up order.
    pub fn take_woken(&mut self) -> Vec<Woken> {
        std::mem::take(&mut self.woken)
    }

    pub fn has_woken(&self) -> bool {
        !self.woken.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pids(w: Vec<Woken>) -> Vec<usize> {
        w.into_iter().map(|w| w.pid).collect()
    }

    #[test]
    fn wake_up_moves_waiters_in_order() {
        let mut w = WaitQueues::default();
        let (a, b) = (w.add_queue(), w.add_queue());
        w.wait(a, 3);
        w.wait(a, 1);
        w.wait(b, 2);
        assert_eq!(w.wake_up(a, false), 2);
        assert_eq!(w.wake_up(a, false), 0);
        assert!(w.active(b) && !w.active(a));
        assert_eq!(pids(w.take_woken()), vec![3, 1]);
        assert!(!w.has_woken());
    }

    #[test]
    fn wake_up_each_times_every_waiter_in_order() {
        let mut w = WaitQueues::default();
        let q = w.add_queue();
        w.wait(q, 3);
        w.wait(q, 1);
        let mut clock = 100;
        let n = w.wake_up_each(q, true, || {
            clock += 10;
            clock
        });
        assert_eq!(n, 2);
        assert_eq!(w.wake_up_each(q, true, || unreachable!()), 0);
        assert_eq!(w.nr_wakeups, 1);
        assert_eq!(
            w.take_woken(),
            vec![
                Woken {
                    pid: 3,
                    at: Some(110),
                    iowait: true
                },
                Woken {
                    pid: 1,
                    at: Some(120),
                    iowait: true
                }
            ]
        );
    }

    #[test]
    fn a_keyed_wake_up_wakes_one_exclusive_waiter_of_its_key_in_fifo_order() {
        let mut w = WaitQueues::default();
        let q = w.add_queue();
        // Two pages hash to the same queue: 100's waiters and one of 200.
        w.wait_exclusive(q, 5, 100);
        w.wait_exclusive(q, 7, 200);
        w.wait_exclusive(q, 6, 100);
        w.wait_exclusive(q, 4, 100);
        assert!(w.has_key(q, 100) && w.has_key(q, 200) && !w.has_key(q, 300));
        assert_eq!(w.waiters_of(q, 100), vec![5, 6, 4]);
        assert_eq!(w.wake_up_key(q, 100, 1000), vec![5]);
        assert_eq!(w.wake_up_key(q, 100, 2000), vec![6]);
        assert_eq!(
            w.take_woken(),
            vec![
                Woken {
                    pid: 5,
                    at: Some(1000),
                    iowait: true
                },
                Woken {
                    pid: 6,
                    at: Some(2000),
                    iowait: true
                }
            ]
        );
        assert_eq!(w.wake_up_key(q, 300, 3000), Vec::<usize>::new());
        assert_eq!(w.wake_up_key(q, 100, 3000), vec![4]);
        assert_eq!(w.waiters_of(q, 200), vec![7]);
        assert_eq!(w.nr_wakeups, 3);
    }

    #[test]
    fn non_exclusive_waiters_of_the_key_before_the_first_exclusive_one_wake_too() {
        let mut w = WaitQueues::default();
        let q = w.add_queue();
        w.queues[q.0].push_back(Waiter {
            pid: 1,
            key: Some(9),
            exclusive: false,
        });
        w.wait_exclusive(q, 2, 9);
        w.wait_exclusive(q, 3, 9);
        assert_eq!(w.wake_up_key(q, 9, 10), vec![1, 2]);
    }
}
