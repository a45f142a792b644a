//! A larger LLC never runs a sequential write stream slower where the
//! LLC's policy is a stack algorithm for it (LRU: a larger cache holds a
//! superset of a smaller one's lines, Mattson et al. 1970). The measured
//! Haswell-EP policy (`qlru-adaptive-ivb`) is not one: its set dueling
//! can pick another insertion at another size
//! (docs/notes/2026-replacement-sources.md gives the figures).

use serde_json::Value;
use vmsim_core::api::{self, Format};

fn run(text: &str) -> Value {
    let out =
        api::run_config(text, Format::Toml, None, &mut |_, _| {}).unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&out).unwrap()
}

/// anon-w-seq with THP (each huge page cleared, then written in order) by
/// 8 tasks of 4 MiB, on LLCs of 2.5 to 20 MiB a socket.
fn stream(policy: &str, llc_kib: u64) -> (f64, u64) {
    let r = run(&format!(
        "machine = \"xeon-e5-2699v3-2s\"\nseed = 0\n[machine_set]\n\"llc.replacement\" = \"{policy}\"\n\
         \"llc.size_kib\" = {llc_kib}\n[kernel]\nthp = \"always\"\nclear_huge_page = \"sequential\"\n\
         [workload]\nkind = \"usemem\"\nnr_task = 8\nsize_per_task_mib = 4\n"
    ));
    let m = &r["metrics"];
    assert_eq!(m["data_verified"], Value::Bool(true));
    (
        m["elapsed_s"].as_f64().unwrap(),
        m["dram_bytes_read"].as_u64().unwrap(),
    )
}

#[test]
fn a_larger_lru_llc_never_runs_a_write_stream_slower() {
    let sizes = [2560, 5120, 10240, 20480];
    let runs: Vec<(f64, u64)> = sizes.iter().map(|&k| stream("lru", k)).collect();
    for (w, k) in runs.windows(2).zip(sizes.windows(2)) {
        assert!(
            w[1].0 <= w[0].0,
            "{} KiB: {} s, {} KiB: {} s",
            k[0],
            w[0].0,
            k[1],
            w[1].0
        );
        assert!(
            w[1].1 <= w[0].1,
            "{} KiB: {} B, {} KiB: {} B read",
            k[0],
            w[0].1,
            k[1],
            w[1].1
        );
    }
    // The stream fits the largest: nothing is read back from DRAM.
    assert_eq!(runs[3].1, 0);
}
