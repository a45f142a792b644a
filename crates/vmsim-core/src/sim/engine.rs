//! The engine's event queue: timers and timed wake-ups of simulated time.
//!
//! CPU clocks belong to the machine; the run loop (sim/mod.rs) advances
//! the CPU with the lowest clock. Events that must happen at a given time
//! (an hrtimer ending a `nanosleep`, a kernel timer waking a wait queue) are
//! kept here, keyed by (time, sequence): two events armed for one time fire
//! in the order they were armed, so a run never depends on anything but its
//! config and seed. An event fires before any CPU runs a quantum that starts
//! after its time; an idle CPU it wakes resumes at exactly that time.
//!
//! Invariants: sequence numbers are never reused; a cancelled timer never fires.

use crate::kernel::sched::wait::WaitQueueId;
use std::collections::BTreeMap;

/// What happens when an event's time comes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `wake_up_process(pid)` from the hrtimer of a sleeping task (`hrtimer_wakeup`).
    WakeTask(usize),
    /// A kernel timer whose function wakes every task on a wait queue.
    WakeQueue(WaitQueueId),
}

/// A handle of an armed event (`struct hrtimer` / `timer_list` in Linux).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimerId(u64, u64);

impl TimerId {
    /// The simulated time (cycles) the event fires at.
    pub fn expires(&self) -> u64 {
        self.0
    }
}

#[derive(Default)]
pub struct Engine {
    events: BTreeMap<(u64, u64), Event>,
    seq: u64,
    /// Events fired so far.
    pub nr_fired: u64,
}

impl Engine {
    /// Arms `ev` to fire at simulated time `at` (`hrtimer_start` with an absolute expiry).
    pub fn arm(&mut self, at: u64, ev: Event) -> TimerId {
        let key = (at, self.seq);
        self.seq += 1;
        self.events.insert(key, ev);
        TimerId(key.0, key.1)
    }

    /// `hrtimer_cancel`: true if the event was still pending.
    pub fn cancel(&mut self, id: TimerId) -> bool {
        self.events.remove(&(id.0, id.1)).is_some()
    }

    /// The time of the earliest pending event.
    pub fn next_time(&self) -> Option<u64> {
        self.events.keys().next().map(|k| k.0)
    }

    /// Removes and returns the earliest event due at or before `now`, with its time.
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, Event)> {
        let (&(t, s), _) = self.events.iter().next()?;
        if t > now {
            return None;
        }
        self.nr_fired += 1;
        self.events.remove(&(t, s)).map(|e| (t, e))
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_fire_in_time_then_arming_order() {
        let mut e = Engine::default();
        e.arm(50, Event::WakeTask(1));
        let b = e.arm(20, Event::WakeTask(2));
        e.arm(20, Event::WakeTask(3));
        e.arm(20, Event::WakeTask(4));
        assert!(e.cancel(b));
        assert!(!e.cancel(b));
        assert_eq!(e.next_time(), Some(20));
        assert_eq!(e.pop_due(19), None);
        assert_eq!(e.pop_due(20), Some((20, Event::WakeTask(3))));
        assert_eq!(e.pop_due(100), Some((20, Event::WakeTask(4))));
        assert_eq!(e.pop_due(49), None);
        assert_eq!(e.pop_due(50), Some((50, Event::WakeTask(1))));
        assert!(e.is_empty());
        assert_eq!(e.nr_fired, 3);
    }
}
