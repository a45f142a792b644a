//! Running independent simulations on several host threads: the arms and
//! cases of one experiment.
//!
//! Invariants: results come back in the order of the runs given, whatever
//! the number of threads; each simulation is deterministic and shares no
//! state with the others, so the results do not depend on how many run at
//! once or in which order they finish. The error returned is the one the
//! same runs one after another would return (that of the first failing run):
//! a failure stops only the runs after it. A panic in a run, or in the
//! caller's progress hook, stops every run and resumes on the calling thread.

use crate::config::RunConfig;
use crate::error::Error;
use serde_json::Value;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Unwind payload that stops a run whose result is no longer wanted.
struct Cancelled;

/// Longest host time between two progress reports.
const REPORT_EVERY: Duration = Duration::from_millis(200);

type Outcome = Option<Result<Value, Error>>;

/// One simulation: a config, the host threads it may use, its progress hook.
pub type Simulate = fn(&RunConfig, usize, &mut dyn FnMut(f64)) -> Result<Value, Error>;

/// Simulates (with `simulate`) every `(label, config)` of `runs`, up to `threads` at once, and
/// returns their metrics in the order given. With one thread the progress
/// hook gets each run's own label; with more, `label` and the mean fraction
/// done over all runs.
pub fn run_all(
    simulate: Simulate,
    runs: &[(String, RunConfig)],
    threads: usize,
    label: &str,
    progress: &mut dyn FnMut(&str, f64),
) -> Result<Vec<Value>, Error> {
    // Threads left over once every run has one go to the runs' own
    // sockets (windowed runs, sim/window.rs).
    let per_run = (threads / runs.len().max(1)).max(1);
    let threads = threads.clamp(1, runs.len().max(1));
    if threads == 1 {
        return runs
            .iter()
            .map(|(l, cfg)| simulate(cfg, per_run, &mut |f| progress(l, f)))
            .collect();
    }
    let next = AtomicUsize::new(0);
    // Runs after this index are not wanted: an earlier one failed.
    let stop_after = AtomicUsize::new(usize::MAX);
    let abort = AtomicBool::new(false);
    let fraction: Vec<AtomicU64> = runs.iter().map(|_| AtomicU64::new(0)).collect();
    let outcomes: Vec<Mutex<Outcome>> = runs.iter().map(|_| Mutex::new(None)).collect();
    let panicked: Mutex<Option<Box<dyn std::any::Any + Send>>> = Mutex::new(None);
    let caller = std::thread::current();
    // The workers work for the caller's run: they stop with it.
    let run = crate::interrupt::current();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let run = run.clone();
                s.spawn(|| {
                    crate::interrupt::scope(run, || {
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            if i >= runs.len()
                                || i > stop_after.load(Ordering::Relaxed)
                                || abort.load(Ordering::Relaxed)
                            {
                                break;
                            }
                            let wanted = || {
                                !abort.load(Ordering::Relaxed)
                                    && i <= stop_after.load(Ordering::Relaxed)
                            };
                            let r = panic::catch_unwind(AssertUnwindSafe(|| {
                                simulate(&runs[i].1, per_run, &mut |f| {
                                    fraction[i].store(f.to_bits(), Ordering::Relaxed);
                                    if !wanted() {
                                        panic::resume_unwind(Box::new(Cancelled));
                                    }
                                })
                            }));
                            match r {
                                Ok(r) => {
                                    if r.is_err() {
                                        stop_after.fetch_min(i, Ordering::Relaxed);
                                    }
                                    fraction[i].store(1f64.to_bits(), Ordering::Relaxed);
                                    *outcomes[i].lock().expect("not poisoned") = Some(r);
                                }
                                Err(p) if p.is::<Cancelled>() => {}
                                Err(p) => {
                                    abort.store(true, Ordering::Relaxed);
                                    panicked.lock().expect("not poisoned").get_or_insert(p);
                                }
                            }
                            caller.unpark();
                        }
                        caller.unpark();
                    })
                })
            })
            .collect();
        while !workers.iter().all(|w| w.is_finished()) {
            std::thread::park_timeout(REPORT_EVERY);
            if abort.load(Ordering::Relaxed) {
                continue;
            }
            let done: f64 = fraction
                .iter()
                .map(|f| f64::from_bits(f.load(Ordering::Relaxed)))
                .sum();
            let reported = panic::catch_unwind(AssertUnwindSafe(|| {
                progress(label, done / runs.len() as f64)
            }));
            if let Err(p) = reported {
                abort.store(true, Ordering::Relaxed);
                panicked.lock().expect("not poisoned").get_or_insert(p);
            }
        }
    });
    if let Some(p) = panicked.into_inner().expect("not poisoned") {
        panic::resume_unwind(p);
    }
    let mut out = Vec::with_capacity(runs.len());
    for o in outcomes {
        match o.into_inner().expect("not poisoned") {
            Some(r) => out.push(r?),
            None => {
                return Err(Error::Internal(
                    "a run was stopped although no earlier run failed".into(),
                ))
            }
        }
    }
    progress(label, 1.0);
    Ok(out)
}
