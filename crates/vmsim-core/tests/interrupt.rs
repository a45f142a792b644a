//! A stop requested from outside (crate::interrupt, what the binding sets
//! on Ctrl-C or SIGTERM) ends a run whatever its workload does, with
//! `Error::Interrupted`, and once withdrawn leaves the next run as it would
//! have been. One test in its own binary: the request is process-wide.

use std::time::{Duration, Instant};
use vmsim_core::api::{run_config, Format};
use vmsim_core::error::Error;
use vmsim_core::interrupt;

const TINY: &str = "machine = \"xeon-e5-2699v3-2s\"\n[workload]\nkind = \"usemem\"\nnr_task = 2\nsize_per_task_mib = 4\n";

fn program(steps: &str) -> String {
    format!("machine = \"xeon-e5-2699v3-2s\"\n[workload]\nkind = \"program\"\n[[workload.task]]\nname = \"t\"\nsteps = [ {steps} ]\n")
}

#[test]
fn a_requested_stop_ends_any_run_and_leaves_the_next_whole() {
    let before = run_config(TINY, Format::Toml, None, &mut |_, _| {}).unwrap();
    for steps in [
        r#"{ op = "repeat", count = 1000000000, steps = [ { op = "sleep", us = 1 } ] }"#,
        r#"{ op = "repeat", count = 1000000000, steps = [ { op = "repeat", count = 1000000000, steps = [] } ] }"#,
        r#"{ op = "mmap", map = "m", size_mib = 4 }, { op = "access", map = "m", pattern = "normal", sigma_pages = 1e15, count = 1000 }"#,
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
