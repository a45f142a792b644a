//! Simulator speed: simulated cache-line accesses per host second for each
//! built-in experiment's workload (the baseline arm), with one task and with
//! many tasks, on one host thread; then whole experiments (every arm) on one
//! host thread and on all of the host's, with the speed-up; then single
//! many-task runs with the windowed loop (`sim.window_cycles`) on one host
//! thread and on all of the host's. Run with `make bench` (or `cargo bench
//! -p vmsim-core --bench sim_speed`).
//!
//! Sizes are smaller than the experiments' so the whole table takes a few
//! minutes; the cost per access does not depend on the size (it is linear in
//! accesses), so the rate carries over. `VMSIM_BENCH_REPS` (default 2) sets
//! how many runs of each case are timed; the best is reported, which is the
//! figure least disturbed by other work on the host.

use std::time::Instant;
use vmsim_core::api::{compare_with, run_config_on, Format};

struct Case {
    experiment: &'static str,
    tasks: &'static str,
    config: String,
}

fn usemem(kernel: &str, tasks: u64, mib: u64, extra: &str) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\n{kernel}\n[workload]\nkind = \"usemem\"\nnr_task = {tasks}\nsize_per_task_mib = {mib}\n{extra}"
    )
}

fn pf_test(machine: &str, page: &str, mib: u64) -> String {
    format!(
        "machine = \"{machine}\"\n[kernel]\npreempt = \"voluntary\"\n[workload]\nkind = \"pf-test\"\npage_size = \"{page}\"\nsize_mib = {mib}\ncpu = 0\n"
    )
}

fn cases() -> Vec<Case> {
    let clear = "clear_huge_page = \"sequential\"";
    let copy = "thp_cow = \"copy\"\ncopy_huge_page = \"sequential\"";
    let cow = "prealloc = true\nprefault = true\n";
    vec![
        Case {
            experiment: "clear-target-last",
            tasks: "1 x 256 MiB",
            config: usemem(clear, 1, 256, ""),
        },
        Case {
            experiment: "clear-target-last",
            tasks: "72 x 4 MiB",
            config: usemem(clear, 72, 4, ""),
        },
        Case {
            experiment: "copy-target-last",
            tasks: "1 x 128 MiB",
            config: usemem(copy, 1, 128, cow),
        },
        Case {
            experiment: "copy-target-last",
            tasks: "36 x 4 MiB",
            config: usemem(copy, 36, 4, cow),
        },
        // pf-test is one task on one CPU by definition (as in the published runs).
        Case {
            experiment: "multipage-clear (icx 2m)",
            tasks: "1 x 256 MiB",
            config: pf_test("xeon-8358-icx", "2m", 256),
        },
        Case {
            experiment: "multipage-clear (milan 2m)",
            tasks: "1 x 256 MiB",
            config: pf_test("epyc-7j13-milan", "2m", 256),
        },
        Case {
            experiment: "batched-tlb-flush",
            tasks: "72 readers, files 10 x 32 MiB",
            config: "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\ntlb_flush_on_unmap = \"per-page\"\n[workload]\nkind = \"lru-file-mmap-read\"\nram_mib = 32\n".into(),
        },
        Case {
            experiment: "numa-delay-map",
            tasks: "8 x 8 pmbench threads, 1/512 scale",
            // The experiment's baseline arm at 1/512 of full size, 20 s of pmbench (scaled).
            config: "machine = \"xeon-6238m-clx\"\n[kernel]\nthp = \"never\"\nnuma_balancing = true\nnuma_hint_fault = \"map-then-migrate\"\nmigrate_tlb_flush = \"per-page\"\nnuma_balancing_scan_delay_ms = 2\nnuma_balancing_scan_period_min_ms = 2\nnuma_balancing_scan_period_max_ms = 117\nnuma_balancing_scan_size_mb = 1\n[workload]\nkind = \"pmbench\"\nnr_processes = 8\nnr_threads = 8\nmapsize_mib = 17.5\nduration_s = 0.04\nbind_node = 1\nnode_memory_mib = 128\neater_mib = 80\neater_node = 1\neater_exit_s = 0.02\n".into(),
        },
    ]
}

fn main() {
    // `cargo bench` passes `--bench`; a name filter may follow.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let reps: usize = std::env::var("VMSIM_BENCH_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2)
        .max(1);
    println!("Simulator speed, one host thread, best of {reps} (simulated line accesses per host second)\n");
    println!("| experiment | tasks | simulated line accesses | host s | M accesses / s |");
    println!("|---|---|---:|---:|---:|");
    for c in cases() {
        if let Some(f) = &filter {
            if !c.experiment.contains(f.as_str()) {
                continue;
            }
        }
        let mut best = f64::MAX;
        let mut lines = 0u64;
        for _ in 0..reps {
            let t = Instant::now();
            let out = run_config_on(&c.config, Format::Toml, None, 1, &mut |_, _| {})
                .expect("bench config runs");
            best = best.min(t.elapsed().as_secs_f64());
            let v: serde_json::Value = serde_json::from_str(&out).expect("run output is JSON");
            lines = v["metrics"]["simulated_line_accesses"]
                .as_u64()
                .expect("metric present");
        }
        println!(
            "| {} | {} | {} | {:.2} | {:.1} |",
            c.experiment,
            c.tasks,
            lines,
            best,
            lines as f64 / best / 1e6
        );
    }
    kernel_memory(filter.as_deref(), reps);
    parallel(filter.as_deref(), reps);
    windowed(filter.as_deref(), reps);
}

/// What the kernel's own memory and locks cost the simulator: the cases
/// whose experiments turn them on, run without and with
/// `kernel.struct_pages` and `kernel.spinlocks`, host time per simulated
/// line access and per page fault.
fn kernel_memory(filter: Option<&str>, reps: usize) {
    println!("\nThe kernel's memory and locks (kernel.struct_pages, kernel.spinlocks, kernel.page_tables, kernel.rwsems, kernel.pte_locks, kernel.wakeups), one host thread, best of {reps}: host cost per simulated line access and per fault, off and on\n");
    println!("| experiment | tasks | option | line accesses | faults | host s | ns / access | µs / fault |");
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    for c in cases() {
        let locks = match c.experiment {
            "batched-tlb-flush" => "struct_pages = true\nspinlocks = \"ticket\"",
            "copy-target-last" if c.tasks.starts_with("36") => {
                "struct_pages = true\nspinlocks = \"queued\""
            }
            "numa-delay-map" => "spinlocks = \"queued\"",
            _ => continue,
        };
        if filter.is_some_and(|f| !c.experiment.contains(f)) {
            continue;
        }
        let tables = format!("{locks}\npage_tables = true\nrwsems = true");
        // The split page-table locks live in the tables' struct pages.
        let ptl = if locks.contains("struct_pages") {
            format!("{tables}\npte_locks = true")
        } else {
            format!("{tables}\nstruct_pages = true\npte_locks = true")
        };
        let with = |on: &str| {
            c.config
                .replacen("[kernel]\n", &format!("[kernel]\n{on}\n"), 1)
        };
        let wakeups = format!("{ptl}\nwakeups = true");
        for (label, config) in [
            ("off".to_string(), c.config.clone()),
            (locks.to_string(), with(locks)),
            (tables.clone(), with(&tables)),
            (ptl.clone(), with(&ptl)),
            (wakeups.clone(), with(&wakeups)),
        ] {
            let mut best = f64::MAX;
            let (mut lines, mut faults) = (0u64, 0u64);
            for _ in 0..reps {
                let t = Instant::now();
                let out = run_config_on(&config, Format::Toml, None, 1, &mut |_, _| {})
                    .expect("bench config runs");
                best = best.min(t.elapsed().as_secs_f64());
                let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
                lines = v["metrics"]["simulated_line_accesses"]
                    .as_u64()
                    .expect("metric");
                faults = v["metrics"]["pgfault"].as_u64().expect("metric");
            }
            println!(
                "| {} | {} | {} | {} | {} | {:.2} | {:.1} | {:.2} |",
                c.experiment,
                c.tasks,
                label.replace('\n', ", "),
                lines,
                faults,
                best,
                best * 1e9 / lines.max(1) as f64,
                best * 1e6 / faults.max(1) as f64
            );
        }
    }
}

/// One run spread over host threads: the many-task cases above with the
/// windowed loop, against the ordinary loop (whose results differ slightly:
/// docs/model.md).
fn windowed(filter: Option<&str>, reps: usize) {
    let threads = vmsim_core::experiment::default_threads();
    println!(
        "\nOne run over host threads (sim.window_cycles = \"auto\"), best of {reps}: the ordinary loop, then the windowed one on one host thread and on {threads}\n"
    );
    println!(
        "| experiment | tasks | accesses in the per-socket phase | host s, ordinary | host s, windowed, 1 thread | host s, windowed, {threads} threads | speed-up over ordinary |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for c in cases() {
        if filter.is_some_and(|f| !c.experiment.contains(f)) || c.tasks.starts_with("1 x") {
            continue;
        }
        let win = format!("{}\n[sim]\nwindow_cycles = \"auto\"\n", c.config);
        let time = |config: &str, n: usize| {
            let mut best = f64::MAX;
            let mut out = String::new();
            for _ in 0..reps {
                let t = Instant::now();
                out = run_config_on(config, Format::Toml, None, n, &mut |_, _| {})
                    .expect("bench config runs");
                best = best.min(t.elapsed().as_secs_f64());
            }
            (best, out)
        };
        let (ordinary, _) = time(&c.config, 1);
        let (one, a) = time(&win, 1);
        let (many, b) = time(&win, threads);
        assert!(
            a == b,
            "{}: the windowed result depends on the number of host threads",
            c.experiment
        );
        let v: serde_json::Value = serde_json::from_str(&a).expect("run output is JSON");
        let w = &v["metrics"]["windows"];
        let part = w["accesses_partitioned"].as_u64().unwrap_or(0) as f64;
        let serial = w["accesses_serial"].as_u64().unwrap_or(0) as f64;
        println!(
            "| {} | {} | {:.1}% | {ordinary:.2} | {one:.2} | {many:.2} | {:.2} |",
            c.experiment,
            c.tasks,
            100.0 * part / (part + serial).max(1.0),
            ordinary / many
        );
    }
}

/// Whole experiments at a reduced scale: each arm is a simulation of its
/// own, and up to one per host thread run at once (the result is the same).
fn parallel(filter: Option<&str>, reps: usize) {
    let threads = vmsim_core::experiment::default_threads();
    println!(
        "\nWhole experiments (every arm), best of {reps}: one host thread against {threads}\n"
    );
    println!(
        "| experiment | scale | arms | host s, 1 thread | host s, {threads} threads | speed-up |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, scale) in [
        ("clear-target-last", 1.0 / 16.0),
        ("copy-target-last", 1.0 / 16.0),
    ] {
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let time = |n: usize| {
            let mut best = f64::MAX;
            let mut out = String::new();
            for _ in 0..reps {
                let t = Instant::now();
                out = compare_with(name, Some(scale), 0, None, n, &mut |_, _| {})
                    .expect("experiment runs");
                best = best.min(t.elapsed().as_secs_f64());
            }
            (best, out)
        };
        let (one, a) = time(1);
        let (many, b) = time(threads);
        assert!(
            a == b,
            "{name}: the result depends on the number of threads"
        );
        let v: serde_json::Value = serde_json::from_str(&a).expect("compare output is JSON");
        let arms = 1 + v["variant_order"].as_array().map_or(0, Vec::len);
        println!(
            "| {name} | {scale} | {arms} | {one:.2} | {many:.2} | {:.2} |",
            one / many
        );
    }
}
