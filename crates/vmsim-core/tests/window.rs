//! The windowed run loop (`sim.window_cycles`): its partitions can run in
//! any order (here in reverse) with byte-identical results, it is
//! deterministic, it stays close to the ordinary loop where the sockets do
//! not interact, and its setting is checked.

use vmsim_core::config::RunConfig;
use vmsim_core::experiment::{build, report};
use vmsim_core::sim::window_stats::HelpOverride;

fn config(text: &str) -> RunConfig {
    RunConfig::from_table(toml::from_str(text).unwrap(), None, 1.0).unwrap()
}

/// The run's JSON, with phase 1's partitions in their order or reversed.
fn run(text: &str, reverse: bool) -> serde_json::Value {
    run_on(text, reverse, 1)
}

/// The run's JSON, its sockets spread over `threads` host threads.
fn run_on(text: &str, reverse: bool, threads: usize) -> serde_json::Value {
    run_helped(text, reverse, threads, HelpOverride::Auto)
}

/// [`run_on`], the helper threads used as `help` says.
fn run_helped(text: &str, reverse: bool, threads: usize, help: HelpOverride) -> serde_json::Value {
    let cfg = config(text);
    let mut sim = build(&cfg).unwrap();
    sim.reverse_partitions = reverse;
    sim.help_override = help;
    sim.set_host_threads(threads);
    sim.run(&mut |_| {}).unwrap();
    report(&cfg, &sim)
}

/// The JSON text: what must be the same bytes.
fn bytes(v: &serde_json::Value) -> String {
    serde_json::to_string(v).unwrap()
}

const WINDOW: &str = "\n[sim]\nwindow_cycles = \"auto\"\n";

/// Anonymous writes, one task per CPU: the sockets never interact.
const MANY: &str = r#"
machine = "xeon-e5-2699v3-2s"
[kernel]
thp = "always"
clear_huge_page = "sequential"
[workload]
kind = "usemem"
nr_task = 72
size_per_task_mib = 2
"#;

/// Copy-on-write children on both sockets read their parent's pages.
const COW: &str = r#"
machine = "xeon-e5-2699v3-2s"
[kernel]
thp = "always"
thp_cow = "copy"
[workload]
kind = "usemem"
nr_task = 8
size_per_task_mib = 2
prealloc = true
prefault = true
"#;

/// Threads bound to node 1 whose memory starts on node 0 (node 1 is full
/// until its eater exits), NUMA balancing migrating it back (a non-inclusive LLC).
const PMBENCH: &str = r#"
machine = "xeon-6238m-clx"
[kernel]
thp = "never"
numa_balancing = true
numa_balancing_scan_delay_ms = 1
numa_balancing_scan_period_min_ms = 1
numa_balancing_scan_size_mb = 1
[workload]
kind = "pmbench"
nr_processes = 2
nr_threads = 4
mapsize_mib = 4
duration_s = 0.003
bind_node = 1
node_memory_mib = 32
eater_mib = 28
eater_node = 1
eater_exit_s = 0.001
"#;

/// Several LLC instances per socket.
const MILAN: &str = r#"
machine = "epyc-7j13-milan"
[kernel]
thp = "always"
[workload]
kind = "usemem"
nr_task = 16
size_per_task_mib = 2
"#;

fn windowed(base: &str) -> String {
    format!("{base}{WINDOW}")
}

#[test]
fn partitions_in_reverse_order_give_the_same_bytes() {
    for (name, base) in [
        ("many", MANY),
        ("cow", COW),
        ("pmbench", PMBENCH),
        ("milan", MILAN),
    ] {
        let text = windowed(base);
        let fwd = run(&text, false);
        let rev = run(&text, true);
        assert_eq!(fwd["data_verified"], true, "{name}: {}", fwd["data_errors"]);
        assert!(
            bytes(&fwd) == bytes(&rev),
            "{name}: the partitions' order changed the result"
        );
        assert!(fwd["windows"]["windows"].as_u64().unwrap() > 0, "{name}");
    }
}

#[test]
fn the_result_does_not_depend_on_the_number_of_host_threads() {
    // The helper threads run the partitions in stand-ins; the run's own
    // thread runs them in place when helpers do not pay. Both, and every
    // mix of them, give the same bytes.
    for (name, base) in [("cow", COW), ("pmbench", PMBENCH), ("milan", MILAN)] {
        let text = windowed(base);
        let one = bytes(&run_on(&text, false, 1));
        for threads in [2, 4] {
            for help in [
                HelpOverride::Auto,
                HelpOverride::Always,
                HelpOverride::Alternate,
            ] {
                assert!(
                    bytes(&run_helped(&text, false, threads, help)) == one,
                    "{name}: {threads} host threads, helpers {help:?}"
                );
            }
        }
    }
}

#[test]
fn a_windowed_run_is_deterministic() {
    let text = windowed(COW);
    assert!(bytes(&run(&text, false)) == bytes(&run(&text, false)));
}

#[test]
fn independent_sockets_run_partitioned_and_close_to_the_ordinary_loop() {
    let w = run(&windowed(MANY), false);
    let o = run(MANY, false);
    let s = &w["windows"];
    let part = s["accesses_partitioned"].as_u64().unwrap();
    let serial = s["accesses_serial"].as_u64().unwrap();
    // Only the first line of each task's memory (after its fault) runs serially.
    assert!(part > 1000 * serial, "{s}");
    for key in ["elapsed_s", "throughput_bytes_per_s", "cycles"] {
        let (a, b) = (w[key].as_f64().unwrap(), o[key].as_f64().unwrap());
        assert!(
            (a / b - 1.0).abs() < 0.01,
            "{key}: windowed {a}, ordinary {b}"
        );
    }
    assert!(o.get("windows").is_none());
}

#[test]
fn remote_work_parks() {
    let w = run(&windowed(PMBENCH), false);
    let parked = &w["windows"]["parked"];
    assert!(parked["remote_line"].as_u64().unwrap() > 0, "{parked}");
    assert!(w["numa_pages_migrated"].as_u64().unwrap() > 0);
    assert!(w["windows"]["accesses_serial"].as_u64().unwrap() > 0);
}

#[test]
fn the_window_setting_is_checked() {
    let bad = |v: &str| {
        let text = format!("{MANY}\n[sim]\nwindow_cycles = {v}\n");
        let e = RunConfig::from_table(toml::from_str(&text).unwrap(), None, 1.0).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("sim.window_cycles") && msg.contains("accepted"),
            "{v}: {msg}"
        );
        msg
    };
    // The E5-2699 v3's remote cache hit, 107 ns at 2.3 GHz, bounds it.
    let msg = bad("100000");
    assert!(msg.contains("1..=247"), "{msg}");
    bad("-1");
    bad("\"fast\"");
    bad("2.5");
    let auto = config(&windowed(MANY));
    assert_eq!(auto.sim.window_cycles, Some(247));
    let off = config(&format!("{MANY}\n[sim]\nwindow_cycles = 0\n"));
    assert_eq!(off.sim.window_cycles, None);
}

#[test]
fn a_progress_hook_that_panics_stops_the_helper_threads_too() {
    // The hook runs on the run's thread between windows; its panic must
    // unwind out of the run (the helpers stopped and joined), not hang.
    let text = windowed(MANY);
    let r = std::panic::catch_unwind(|| {
        vmsim_core::api::run_config_on(
            &text,
            vmsim_core::api::Format::Toml,
            None,
            2,
            &mut |_, f| {
                if f > 0.0 && f < 1.0 {
                    panic!("stop");
                }
            },
        )
    });
    assert!(r.is_err());
}
