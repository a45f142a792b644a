//! Repetitions of a host measurement on a shared host, and what they say.
//!
//! A repetition during which the measuring thread was switched out (its
//! `getrusage(RUSAGE_THREAD)` voluntary + involuntary switch count changed)
//! is dropped and run again: a switch makes a repetition look slower by the
//! time another task ran. `microbench` reports the median of the kept
//! repetitions, `calibrate` the best of them ([`Summary`]); both report how
//! many were kept and dropped, so a noisy measurement can be told from a
//! quiet one. A hypervisor's preemption of the vCPU is not seen here.
//! [`nan`] is the JSON form of a [`Summary`]'s figures, which are NaN when
//! there were no repetitions.
//!
//! Invariants: [`Samples::xs`] holds the kept repetitions in the order they
//! ran: the clean ones, or every attempt when none was clean (`clean` false);
//! `switched` counts the attempts during which the thread was switched out.
//! At least one attempt always runs.

use crate::opts::round3;
use crate::HwError;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Context switches of the calling thread so far, voluntary and involuntary.
pub fn switches() -> i64 {
    // SAFETY: rusage is plain data; getrusage only fills it.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_THREAD, &mut ru) != 0 {
            return 0;
        }
        ru.ru_nvcsw + ru.ru_nivcsw
    }
}

/// A quantity's repetitions: the figures of the clean ones (the measuring
/// thread never switched out), and how many were dropped for a switch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Samples {
    pub xs: Vec<f64>,
    pub switched: usize,
    /// False when every repetition was switched out and `xs` holds them all.
    pub clean: bool,
}

impl Samples {
    /// From attempts in the order they ran, each `(figure, switched out)`:
    /// the first `reps` clean ones are kept (every attempt if none was clean).
    pub fn from_attempts(reps: usize, attempts: impl IntoIterator<Item = (f64, bool)>) -> Samples {
        let (mut clean, mut dirty) = (Vec::new(), Vec::new());
        for (x, switched) in attempts {
            if switched {
                dirty.push(x);
            } else if clean.len() < reps {
                clean.push(x);
            }
        }
        let switched = dirty.len();
        Samples {
            clean: !clean.is_empty(),
            xs: if clean.is_empty() { dirty } else { clean },
            switched,
        }
    }

    pub fn summary(&self) -> Summary {
        Summary::of(self)
    }

    /// The samples of two runs of one measurement: every clean repetition
    /// of both (only the switched-out ones where neither had a clean one).
    pub fn merge(self, other: Samples) -> Samples {
        let switched = self.switched + other.switched;
        let xs = match (self.clean, other.clean) {
            (true, false) => self.xs,
            (false, true) => other.xs,
            _ => [self.xs, other.xs].concat(),
        };
        Samples {
            xs,
            switched,
            clean: self.clean || other.clean,
        }
    }
}

/// Runs `rep` until `reps` of them ran without a context switch of this
/// thread, or 4 x `reps` attempts were made, or (after the first attempt)
/// `budget` has passed; see [`Samples::from_attempts`] for what is kept.
pub fn repeat(
    reps: usize,
    budget: Option<Duration>,
    rep: impl FnMut() -> f64,
) -> Result<Samples, HwError> {
    repeat_counted(reps, budget, switches, rep)
}

/// [`repeat`] with the switch counter given (tests count switches themselves).
fn repeat_counted(
    reps: usize,
    budget: Option<Duration>,
    mut count: impl FnMut() -> i64,
    mut rep: impl FnMut() -> f64,
) -> Result<Samples, HwError> {
    let start = Instant::now();
    let mut attempts = Vec::new();
    let mut clean = 0;
    while clean < reps && attempts.len() < 4 * reps.max(1) {
        if !attempts.is_empty() && budget.is_some_and(|b| start.elapsed() >= b) {
            break;
        }
        crate::ctl::check()?;
        let s0 = count();
        let x = rep();
        let switched = count() != s0;
        clean += usize::from(!switched);
        attempts.push((x, switched));
    }
    Ok(Samples::from_attempts(reps, attempts))
}

/// What the kept repetitions of a quantity say: their number, how many
/// were dropped, their range and median, and the spread `max / min - 1`
/// (0 when they agree; 0.1 when the largest is 10% above the smallest).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    pub n: usize,
    pub switched: usize,
    pub clean: bool,
    #[serde(with = "nan")]
    pub min: f64,
    #[serde(with = "nan")]
    pub median: f64,
    #[serde(with = "nan")]
    pub max: f64,
    #[serde(with = "nan")]
    pub spread: f64,
}

impl Summary {
    pub fn of(s: &Samples) -> Summary {
        let min = s.xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = s.xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let empty = s.xs.is_empty();
        Summary {
            n: s.xs.len(),
            switched: s.switched,
            clean: s.clean,
            min: if empty { f64::NAN } else { min },
            median: crate::opts::median(&s.xs),
            max: if empty { f64::NAN } else { max },
            spread: if empty || min <= 0.0 {
                f64::NAN
            } else {
                max / min - 1.0
            },
        }
    }

    /// The figure reported: the lowest repetition of a time (noise only
    /// adds time), the highest of a rate.
    pub fn best(&self, lower_is_better: bool) -> f64 {
        if lower_is_better {
            self.min
        } else {
            self.max
        }
    }

    /// `n`, `switched_out`, `all_switched_out`, `min`, `median`, `max`, `spread`
    /// (NaN becomes null).
    pub fn json(&self) -> Value {
        json!({
            "n": self.n,
            "switched_out": self.switched,
            "all_switched_out": !self.clean,
            "min": round3(self.min),
            "median": round3(self.median),
            "max": round3(self.max),
            "spread": (self.spread * 1e4).round() / 1e4,
        })
    }
}

/// An `f64` that may be NaN (an empty set of repetitions), as JSON: NaN
/// is written as null and null read back as NaN.
pub mod nan {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        if x.is_finite() {
            s.serialize_f64(*x)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn merged_samples_keep_the_clean_repetitions_of_both_runs() {
        let a = Samples::from_attempts(2, [(1.0, false), (9.0, true), (2.0, false)]);
        let b = Samples::from_attempts(2, [(3.0, false)]);
        let m = a.merge(b);
        assert_eq!(
            (m.xs.clone(), m.switched, m.clean),
            (vec![1.0, 2.0, 3.0], 1, true)
        );
        // A run with no clean repetition adds only its count of switched ones.
        let dirty = Samples::from_attempts(2, [(7.0, true)]);
        let m = m.merge(dirty);
        assert_eq!((m.xs.len(), m.switched, m.clean), (3, 2, true));
        let both = Samples::from_attempts(1, [(7.0, true)])
            .merge(Samples::from_attempts(1, [(8.0, true)]));
        assert_eq!((both.xs, both.clean), (vec![7.0, 8.0], false));
    }

    #[test]
    fn switched_out_attempts_are_dropped_and_counted() {
        let a = [
            (4.0, false),
            (9.0, true),
            (2.0, false),
            (30.0, true),
            (3.0, false),
        ];
        let s = Samples::from_attempts(5, a);
        assert_eq!(s.xs, vec![4.0, 2.0, 3.0]);
        assert_eq!((s.switched, s.clean), (2, true));
        let m = s.summary();
        assert_eq!((m.n, m.switched, m.clean), (3, 2, true));
        assert_eq!((m.min, m.median, m.max), (2.0, 3.0, 4.0));
        assert_eq!(m.spread, 1.0);
        assert_eq!((m.best(true), m.best(false)), (2.0, 4.0));
        // Only the first `reps` clean attempts are kept; later switched ones still count.
        let s = Samples::from_attempts(
            2,
            [
                (4.0, false),
                (1.0, true),
                (5.0, false),
                (7.0, false),
                (8.0, true),
            ],
        );
        assert_eq!(s.xs, vec![4.0, 5.0]);
        assert_eq!(s.switched, 2);
        let m = s.summary();
        assert_eq!((m.min, m.median, m.max, m.spread), (4.0, 4.5, 5.0, 0.25));
    }

    #[test]
    fn when_every_attempt_was_switched_out_all_are_kept_and_marked() {
        let s = Samples::from_attempts(3, [(8.0, true), (2.0, true)]);
        assert_eq!(s.xs, vec![8.0, 2.0]);
        assert_eq!((s.switched, s.clean), (2, false));
        let m = s.summary();
        assert_eq!(
            (m.n, m.min, m.median, m.max, m.spread),
            (2, 2.0, 5.0, 8.0, 3.0)
        );
        let j = m.json();
        assert_eq!(j["all_switched_out"], true);
        assert_eq!(j["spread"], 3.0);
        assert_eq!(j["n"], 2);
    }

    #[test]
    fn a_single_or_empty_set_has_no_range() {
        let m = Samples::from_attempts(1, [(2.5, false)]).summary();
        assert_eq!((m.min, m.median, m.max, m.spread), (2.5, 2.5, 2.5, 0.0));
        let e = Samples::from_attempts(1, []).summary();
        assert!(e.n == 0 && e.min.is_nan() && e.spread.is_nan() && !e.clean);
        assert_eq!(e.json()["spread"], Value::Null);
        let z = Samples::from_attempts(2, [(0.0, false), (1.0, false)]).summary();
        assert!(z.spread.is_nan());
    }

    #[test]
    fn repeat_reruns_switched_out_attempts_up_to_four_times_reps() {
        // The counter moves during every second attempt (odd ones).
        let switches = Cell::new(0i64);
        let n = Cell::new(0usize);
        let rep = || {
            let i = n.get();
            n.set(i + 1);
            if i % 2 == 1 {
                switches.set(switches.get() + 1);
            }
            i as f64
        };
        let s = repeat_counted(3, None, || switches.get(), rep).unwrap();
        assert_eq!(s.xs, vec![0.0, 2.0, 4.0]);
        assert_eq!((s.switched, n.get()), (2, 5));
        // Always switched: 4 x reps attempts, all kept and marked.
        let k = Cell::new(0i64);
        let s = repeat_counted(
            2,
            None,
            || k.get(),
            || {
                k.set(k.get() + 1);
                1.0
            },
        )
        .unwrap();
        assert_eq!((s.xs.len(), s.switched, s.clean), (8, 8, false));
    }

    #[test]
    fn an_exhausted_budget_still_runs_one_attempt() {
        let n = Cell::new(0);
        let s = repeat_counted(
            5,
            Some(Duration::ZERO),
            || 0,
            || {
                n.set(n.get() + 1);
                7.0
            },
        )
        .unwrap();
        assert_eq!((n.get(), s.xs.clone()), (1, vec![7.0]));
        assert_eq!(s.summary().spread, 0.0);
    }
}
