//! Simulator speed: simulated cache-line accesses per host second on the
//! anon-w-seq path (THP faults, huge-page clears, sequential user stores).
//! Run with `cargo bench -p vmsim-core` (or `make bench`).

use std::time::Instant;
use vmsim_core::api::{run_config, Format};

fn main() {
    let cases = [
        ("anon-w-seq 72 tasks x 16 MiB, target-last", "target-last", 72, 16),
        ("anon-w-seq 72 tasks x 16 MiB, sequential", "sequential", 72, 16),
        ("anon-w-seq 1 task x 256 MiB, target-last", "target-last", 1, 256),
    ];
    for (name, order, tasks, mib) in cases {
        let cfg = format!(
            "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\nclear_huge_page = \"{order}\"\n[workload]\nkind = \"usemem\"\nnr_task = {tasks}\nsize_per_task_mib = {mib}\n"
        );
        let mut best = f64::MAX;
        let mut lines = 0u64;
        for _ in 0..2 {
            let t = Instant::now();
            let out = run_config(&cfg, Format::Toml, None, &mut |_, _| {}).expect("bench config runs");
            let dt = t.elapsed().as_secs_f64();
            best = best.min(dt);
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            lines = v["metrics"]["simulated_line_accesses"].as_u64().unwrap();
        }
        println!(
            "{name}: {lines} simulated line accesses, best of 2 {best:.3} s => {:.1} M line accesses per host second",
            lines as f64 / best / 1e6
        );
    }
}
