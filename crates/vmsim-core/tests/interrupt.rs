//! A stop requested from outside (crate::interrupt, what the binding sets
//! on Ctrl-C or SIGTERM) ends a run whatever its workload does, with
//! `Error::Interrupted`, and once withdrawn leaves the next run as it would
//! have been; a run's own stop ends that run alone. In a binary of their
//! own, one test at a time: the request is process-wide.

use std::time::{Duration, Instant};
use vmsim_core::api::{run_config, Format};
use vmsim_core::error::Error;
use vmsim_core::interrupt;

/// Held by each test: a process-wide stop of one would end the other's runs.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

const TINY: &str = "machine = \"xeon-e5-2699v3-2s\"\n[workload]\nkind = \"usemem\"\nnr_task = 2\nsize_per_task_mib = 4\n";

fn program(steps: &str) -> String {
    format!("machine = \"xeon-e5-2699v3-2s\"\n[workload]\nkind = \"program\"\n[[workload.task]]\nname = \"t\"\nsteps = [ {steps} ]\n")
}

#[test]
fn a_requested_stop_ends_any_run_and_leaves_the_next_whole() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let before = run_config(TINY, Format::Toml, None, &mut |_, _| {}).unwrap();
    for steps in [
        r#"{ op = "repeat", count = 1000000000, steps = [ { op = "sleep", us = 1 } ] }"#,
        r#"{ op = "repeat", count = 1000000000, steps = [ { op = "repeat", count = 1000000000, steps = [] } ] }"#,
        r#"{ op = "mmap", map = "m", size_mib = 4 }, { op = "access", map = "m", pattern = "normal", sigma_pages = 10240, count = 1000000000000 }"#,
    ] {
        let text = program(steps);
        let run = std::thread::spawn(move || run_config(&text, Format::Toml, None, &mut |_, _| {}));
        std::thread::sleep(Duration::from_millis(300));
        assert!(!run.is_finished(), "{steps} ended by itself");
        let t0 = Instant::now();
        interrupt::request();
        let r = run.join().unwrap();
        interrupt::clear();
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "{steps}: {:?}",
            t0.elapsed()
        );
        assert!(matches!(r, Err(Error::Interrupted)), "{steps}: {r:?}");
    }
    let after = run_config(TINY, Format::Toml, None, &mut |_, _| {}).unwrap();
    assert_eq!(before, after, "a withdrawn stop leaves a run as it was");
}

#[test]
fn a_run_stop_ends_its_own_run_alone() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let sleeper =
        program(r#"{ op = "repeat", count = 1000000000, steps = [ { op = "sleep", us = 1 } ] }"#);
    let stop = interrupt::RunStop::new();
    let flag = stop.flag();
    let stopped = std::thread::spawn(move || {
        interrupt::scope(Some(flag), || {
            run_config(&sleeper, Format::Toml, None, &mut |_, _| {})
        })
    });
    let other = std::thread::spawn(|| run_config(TINY, Format::Toml, None, &mut |_, _| {}));
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    stop.stop();
    assert!(matches!(stopped.join().unwrap(), Err(Error::Interrupted)));
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    assert!(other.join().unwrap().is_ok(), "another run is not stopped");
}
