//! The page lock of `do_huge_pmd_wp_page` with `kernel.struct_pages`:
//! anon-cow-seq's children meet on the shared huge page, sleep on its lock
//! and are woken one at a time; the sleeps are voluntary context switches
//! and lock statistics; without the option nothing changes.

use serde_json::Value;
use vmsim_core::api::{self, Format};

fn cfg(struct_pages: bool, nr_task: u64) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\nthp_cow = \"copy\"\nstruct_pages = {struct_pages}\n[workload]\nkind = \"usemem\"\nnr_task = {nr_task}\nsize_per_task_mib = 2\nprealloc = true\nprefault = true\n"
    )
}

fn run(text: &str) -> Value {
    let out = api::run_config(text, Format::Toml, None, &mut |_, _| {}).unwrap();
    serde_json::from_str(&out).unwrap()
}

fn u(v: &Value, path: &[&str]) -> u64 {
    let mut x = &v["metrics"];
    for p in path {
        x = &x[*p];
    }
    x.as_u64().unwrap_or_else(|| panic!("{}", path.join(".")))
}

#[test]
fn children_meeting_on_a_huge_page_sleep_on_its_lock_and_wake_one_at_a_time() {
    let n = 6;
    let on = run(&cfg(true, n));
    let off = run(&cfg(false, n));
    assert_eq!(on["metrics"]["data_verified"], true);
    assert_eq!(off["metrics"]["data_verified"], true);
    let l = |k: &str| u(&on, &["lock_stat", "PG_locked", k]);
    // One copy-on-write fault per child on the one huge page, each under the lock.
    assert_eq!(u(&on, &["thp_cow_copies"]), n);
    assert_eq!(l("acquisitions"), n);
    // They arrive together: all but the first find it held.
    assert!(l("contentions") >= 1, "{}", on["metrics"]["lock_stat"]);
    assert!(l("contentions") < n);
    // Every sleep ends with a wake-up of its own (one waiter per unlock).
    assert_eq!(l("sleeps"), l("wakeups"));
    assert!(l("wait_cycles") > 0 && l("hold_cycles") > 0);
    // Each sleep is a voluntary context switch, on top of the run's others.
    assert_eq!(
        u(&on, &["voluntary_context_switches"]),
        u(&off, &["voluntary_context_switches"]) + l("sleeps")
    );
    assert_eq!(
        u(&on, &["counters", "sched", "nr_voluntary_switches"]),
        u(&on, &["voluntary_context_switches"])
    );
    // Woken CPUs that had been idle long enough paid an idle state's exit.
    let exits: u64 = ["C1", "C1E", "C3", "C6"]
        .iter()
        .map(|s| u(&on, &["counters", "idle", "exits", s]))
        .sum();
    assert!(exits <= l("wakeups"));
    // Without the option: no lock, no idle exits.
    assert_eq!(u(&off, &["lock_stat", "PG_locked", "acquisitions"]), 0);
    assert_eq!(u(&off, &["counters", "idle", "exit_cycles"]), 0);
}

#[test]
fn the_memory_map_takes_its_blocks_and_the_run_stays_deterministic() {
    let a = run(&cfg(true, 3));
    let b = run(&cfg(true, 3));
    assert_eq!(a, b);
    // The map's struct page lines are read under the lock: 512 per acquisition
    // at least, through the caches.
    let off = run(&cfg(false, 3));
    let loads = |v: &Value| u(v, &["counters", "cpu", "cache", "l1d_loads"]);
    assert!(loads(&a) >= loads(&off) + 3 * 512);
}

#[test]
fn a_windowed_run_gives_the_same_bytes_on_one_and_two_host_threads() {
    let text = format!("{}[sim]\nwindow_cycles = \"auto\"\n", cfg(true, 8));
    let one = api::run_config_on(&text, Format::Toml, None, 1, &mut |_, _| {}).unwrap();
    let two = api::run_config_on(&text, Format::Toml, None, 2, &mut |_, _| {}).unwrap();
    assert_eq!(one, two);
    let v: Value = serde_json::from_str(&one).unwrap();
    assert_eq!(v["metrics"]["data_verified"], true);
    assert_eq!(u(&v, &["lock_stat", "PG_locked", "acquisitions"]), 8);
}

#[test]
fn a_node_too_small_for_its_memory_map_is_refused_naming_the_key() {
    let text = format!("{}[sim]\nnode_memory_mib = 2\n", cfg(true, 1));
    match api::run_config(&text, Format::Toml, None, &mut |_, _| {}) {
        Err(api::Error::Config { key, message }) => {
            assert_eq!(key, "kernel.struct_pages");
            assert!(message.contains("node_memory_mib"), "{message}");
        }
        other => panic!("accepted: {:?}", other.map(|_| ())),
    }
}
