//! The huge-page fault timeline (`sim.timeline`): when each task's huge
//! page faults installed their PMDs, so that a report can say which huge
//! page each task filled or copied when, and whether tasks ran in step.
//!
//! Invariants: recording is off unless the run asked for it (no cost then
//! but a branch); events are reported sorted, so their order does not
//! depend on the order the engine recorded them in.

/// How a huge page came to be mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ThpEvent {
    /// An anonymous fault's new, cleared huge page.
    Fault = 0,
    /// A copy-on-write fault's copy.
    Cow = 1,
}

impl ThpEvent {
    pub fn name(self) -> &'static str {
        match self {
            ThpEvent::Fault => "thp_fault",
            ThpEvent::Cow => "thp_cow",
        }
    }
}

/// One PMD installed: the cycle it was installed at on its CPU, the task,
/// the event, and the huge page's index within its VMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ThpMapped {
    pub cycle: u64,
    pub pid: usize,
    pub event: ThpEvent,
    pub index: u64,
}

/// The timeline: None unless `sim.timeline` is on.
#[derive(Clone, Debug, Default)]
pub struct ThpTimeline {
    events: Option<Vec<ThpMapped>>,
}

impl ThpTimeline {
    pub fn enable(&mut self) {
        self.events.get_or_insert_with(Vec::new);
    }

    pub fn is_on(&self) -> bool {
        self.events.is_some()
    }

    pub fn record(&mut self, e: ThpMapped) {
        if let Some(v) = self.events.as_mut() {
            v.push(e);
        }
    }

    /// The events in time order (ties by task, event and index).
    pub fn sorted(&self) -> Option<Vec<ThpMapped>> {
        self.events.as_ref().map(|v| {
            let mut v = v.clone();
            v.sort_unstable();
            v
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_records_nothing_and_on_reports_in_time_order() {
        let mut t = ThpTimeline::default();
        let e = |cycle, pid| ThpMapped {
            cycle,
            pid,
            event: ThpEvent::Cow,
            index: 0,
        };
        t.record(e(5, 1));
        assert!(t.sorted().is_none());
        t.enable();
        t.record(e(9, 2));
        t.record(e(3, 7));
        t.record(e(9, 1));
        let got: Vec<(u64, usize)> = t
            .sorted()
            .unwrap()
            .iter()
            .map(|m| (m.cycle, m.pid))
            .collect();
        assert_eq!(got, vec![(3, 7), (9, 1), (9, 2)]);
    }
}
