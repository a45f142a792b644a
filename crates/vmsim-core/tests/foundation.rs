//! End-to-end behaviour of the foundation: determinism, the data check
//! catching a skipped clear, config errors naming their key, presets needing
//! sources, and the effect of the clear order on cache traffic.

use vmsim_core::api::{compare, list_experiments, list_machines, run_config, Error, Format};

fn cfg(order: &str, tasks: u32, mib: u32, extra: &str) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\nseed = 3\n[kernel]\nthp = \"always\"\nclear_huge_page = \"{order}\"\n[workload]\nkind = \"usemem\"\nnr_task = {tasks}\nsize_per_task_mib = {mib}\n{extra}"
    )
}

fn run(text: &str) -> serde_json::Value {
    let out = run_config(text, Format::Toml, None, &mut |_, _| {}).expect("run succeeds");
    serde_json::from_str(&out).unwrap()
}

fn err(text: &str) -> (String, String) {
    match run_config(text, Format::Toml, None, &mut |_, _| {}) {
        Err(Error::Config { key, message }) => (key, message),
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn same_config_and_seed_give_identical_bytes() {
    let c = cfg("target-last", 4, 6, "");
    let a = run_config(&c, Format::Toml, None, &mut |_, _| {}).unwrap();
    let b = run_config(&c, Format::Toml, None, &mut |_, _| {}).unwrap();
    assert_eq!(a, b);
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    assert_eq!(v["metrics"]["data_verified"], true);
    assert_eq!(v["metrics"]["thp_fault_alloc"], 4 * 3);
}

#[test]
fn skipped_subpage_clear_is_detected() {
    for order in ["sequential", "target-last"] {
        let ok = run(&cfg(order, 1, 4, ""));
        assert_eq!(ok["metrics"]["data_verified"], true);
        // The frames handed out first still hold stale (never cleared) contents.
        let bad = run(&cfg(
            order,
            1,
            4,
            "[sim.fault_injection]\nskip_clear_subpage = 17\n",
        ));
        assert_eq!(bad["metrics"]["data_verified"], false, "{order}");
        let errs = bad["metrics"]["data_errors"].as_array().unwrap();
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].as_str().unwrap().contains("1 bad page(s)"),
            "{errs:?}"
        );
    }
}

#[test]
fn target_last_keeps_the_faulting_subpages_hot() {
    // One task per socket's worth of LLC share is too generous to show it; use
    // enough tasks that a 2 MiB page does not fit the per-thread LLC share, and
    // more than two huge pages per task: with two, all 72 tasks clear and write in
    // lockstep and target-last reads slightly more (measured, not explained).
    let seq = run(&cfg("sequential", 72, 8, ""));
    let tl = run(&cfg("target-last", 72, 8, ""));
    let (s, t) = (&seq["metrics"], &tl["metrics"]);
    assert_eq!(s["data_verified"], true);
    assert_eq!(t["data_verified"], true);
    // The user's first stores find the last-cleared sub-pages in cache: fewer RFO reads,
    // whether the demand store or the L2 streamer's prefetch asks for the line.
    let u = |m: &serde_json::Value, k: &str| m[k].as_u64().unwrap();
    assert!(u(t, "dram_bytes_read") < u(s, "dram_bytes_read"));
    let llc_reads = |m| u(m, "llc_demand_misses") + u(m, "prefetch_llc_misses");
    assert!(llc_reads(t) < llc_reads(s));
    // Same work either way.
    assert_eq!(s["subpage_clears"], t["subpage_clears"]);
    assert_eq!(s["instructions"], t["instructions"]);
}

#[test]
fn thp_never_uses_4k_faults() {
    let v = run(&cfg("target-last", 1, 2, "").replace("thp = \"always\"", "thp = \"never\""));
    assert_eq!(v["metrics"]["thp_fault_alloc"], 0);
    assert_eq!(v["metrics"]["pgfault"], 512);
    assert_eq!(v["metrics"]["data_verified"], true);
}

#[test]
fn unknown_keys_and_bad_values_name_their_key() {
    let (k, m) =
        err(&cfg("target-last", 1, 2, "").replace("nr_task = 1", "nr_task = 1\nbogus = 2"));
    assert_eq!(k, "workload.bogus");
    assert!(
        m.contains("accepted keys here") && m.matches("nr_task").count() == 1,
        "each accepted key once: {m}"
    );

    let (k, m) = err(&cfg("fastest", 1, 2, ""));
    assert_eq!(k, "kernel.clear_huge_page");
    assert!(
        m.contains("\"sequential\"") && m.contains("\"target-last\""),
        "{m}"
    );

    let (k, _) = err(&cfg("target-last", 0, 2, ""));
    assert_eq!(k, "workload.nr_task");

    let (k, m) = err(&cfg("target-last", 1, 2, "").replace("xeon-e5-2699v3-2s", "pdp-11"));
    assert_eq!(k, "machine");
    assert!(
        m.contains("xeon-e5-2699v3-2s"),
        "lists the built-in machines: {m}"
    );

    let (k, _) = err("machine = \"xeon-e5-2699v3-2s\"\n[workload]\nkind = \"usemem\"\nnr_task = \"many\"\nsize_per_task_mib = 2\n");
    assert_eq!(k, "workload.nr_task");

    let (k, _) = err("machine = \"xeon-e5-2699v3-2s\"\n[workload]\nkind = \"usemem\"\nnr_task = 1\nsize_per_task_mib = 2\n[sim]\nquantum_cycles = 5\n");
    assert_eq!(k, "sim.quantum_cycles");

    let (k, _) = err("this is not toml");
    assert_eq!(k, "config");
}

#[test]
fn json_configs_are_accepted_and_checked() {
    let ok = r#"{"machine":"xeon-e5-2699v3-2s","kernel":{"clear_huge_page":"sequential"},"workload":{"kind":"usemem","nr_task":1,"size_per_task_mib":2}}"#;
    let out = run_config(ok, Format::Json, None, &mut |_, _| {}).unwrap();
    assert!(out.contains("\"data_verified\": true"));
    let bad = r#"{"machine":"xeon-e5-2699v3-2s","workload":{"kind":"usemem","nr_task":1,"size_per_task_mib":2,"step":8}}"#;
    match run_config(bad, Format::Json, None, &mut |_, _| {}) {
        Err(Error::Config { key, .. }) => assert_eq!(key, "workload.step"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn presets_require_a_source_for_every_value() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../machines/xeon-e5-2699v3-2s.toml"
    ))
    .unwrap();
    let bad = text.replacen(
        "ways = { value = 8, source = ",
        "ways = { value = 8, sourc = ",
        1,
    );
    let dir = std::env::temp_dir().join(format!("vmsim-preset-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("nosource.toml");
    std::fs::write(&p, bad).unwrap();
    let c = format!(
        "machine = {:?}\n[workload]\nkind = \"usemem\"\nnr_task = 1\nsize_per_task_mib = 2\n",
        p.display().to_string()
    );
    let (k, m) = err(&c);
    assert!(k.ends_with("l1d.ways.sourc"), "{k}: {m}");
    // L1d's ways (the first `ways` line) as a bare number.
    let mut done = false;
    let no_src: String = text
        .lines()
        .map(|l| {
            if !done && l.starts_with("ways = { value = 8, source = ") {
                done = true;
                "ways = 8".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(done);
    std::fs::write(&p, no_src).unwrap();
    let (k, m) = err(&c);
    assert!(k.ends_with("l1d.ways"), "{k}");
    assert!(m.contains("names its source"), "{m}");
    // The key is the preset's own dotted key; the file is in the message.
    assert_eq!(k, "l1d.ways");
    assert!(m.contains(&p.display().to_string()), "{m}");
    // A file that is not TOML at all: keyed by the field that named it,
    // the file named once.
    std::fs::write(&p, "cpu = [").unwrap();
    let (k, m) = err(&c);
    assert_eq!(k, "machine");
    let path = p.display().to_string();
    assert!(m.starts_with(&path) && m.matches(&path).count() == 1, "{m}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn built_in_presets_and_experiments_load() {
    let ms = list_machines();
    assert!(ms.iter().any(|(n, _)| n == "xeon-e5-2699v3-2s"));
    for (n, d) in &ms {
        assert!(!d.starts_with("(invalid"), "{n}: {d}");
    }
    let es = list_experiments();
    assert!(es.iter().any(|(n, _)| n == "clear-target-last"));
    for (n, d) in &es {
        assert!(!d.starts_with("(invalid"), "{n}: {d}");
    }
}

#[test]
fn compare_runs_baseline_and_variant_and_is_deterministic() {
    let a = compare("clear-target-last", Some(1.0 / 32.0), 1, &mut |_, _| {}).unwrap();
    let b = compare("clear-target-last", Some(1.0 / 32.0), 1, &mut |_, _| {}).unwrap();
    assert_eq!(a, b);
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    assert_eq!(v["baseline_name"], "sequential");
    assert_eq!(v["variant_order"][0], "target-last");
    assert_eq!(v["baseline"]["data_verified"], true);
    assert_eq!(v["variants"]["target-last"]["data_verified"], true);
    assert_eq!(v["config"]["kernel"]["clear_huge_page"], "sequential");
    match compare("no-such-experiment", None, 0, &mut |_, _| {}) {
        Err(Error::Config { key, .. }) => assert_eq!(key, "experiment"),
        other => panic!("{other:?}"),
    }
    match compare("clear-target-last", Some(-1.0), 0, &mut |_, _| {}) {
        Err(Error::Config { key, .. }) => assert_eq!(key, "scale"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn more_tasks_than_cpus_are_time_sliced() {
    // 80 tasks on 72 CPUs: CPUs 0-7 run two tasks each, round-robin in 3 ms slices.
    let v = run(&cfg("target-last", 80, 8, ""));
    let m = &v["metrics"];
    assert_eq!(m["data_verified"], true);
    let switches = m["context_switches"].as_u64().unwrap();
    assert!(
        switches > 80,
        "tasks sharing a CPU were switched back and forth: {switches}"
    );
    let cpus = m["per_cpu"].as_array().unwrap();
    assert_eq!(cpus.len(), 72);
    // A doubled-up CPU does twice the work; it is busy longer (though its second
    // task partly runs after the others finished, with the bandwidth to itself).
    let cyc = |i: usize| cpus[i]["cycles"].as_f64().unwrap();
    let ins = |i: usize| cpus[i]["instructions"].as_f64().unwrap();
    assert!(cyc(0) > cyc(40), "{} vs {}", cyc(0), cyc(40));
    assert!(
        (ins(0) / ins(40) - 2.0).abs() < 0.01,
        "{} vs {}",
        ins(0),
        ins(40)
    );
}

#[test]
fn oversized_runs_are_refused_before_allocating() {
    let (k, m) = err(&cfg("target-last", 4096, 65536, ""));
    assert_eq!(k, "workload");
    assert!(m.contains("at most 256 GiB"), "{m}");
    let (k, _) = err(&cfg(
        "target-last",
        1,
        2,
        "[sim]\nnode_memory_mib = 1000000000\n",
    ));
    assert_eq!(k, "sim.node_memory_mib");
}

#[test]
fn bad_presets_and_too_little_memory_are_config_errors() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../machines/xeon-e5-2699v3-2s.toml"
    ))
    .unwrap();
    let dir = std::env::temp_dir().join(format!("vmsim-badpreset-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run_with = |preset: &str, name: &str| {
        let p = dir.join(name);
        std::fs::write(&p, preset).unwrap();
        err(&format!(
            "machine = {:?}\n[workload]\nkind = \"usemem\"\nnr_task = 1\nsize_per_task_mib = 2\n",
            p.display().to_string()
        ))
    };
    let (k, m) = run_with(
        &text.replacen(
            "l1_4k_entries = { value = 64",
            "l1_4k_entries = { value = 10",
            1,
        ),
        "tlb.toml",
    );
    assert!(k.ends_with("tlb.l1_4k_entries.value"), "{k}: {m}");
    let (k, m) = run_with(
        &text.replacen("ways = { value = 20", "ways = { value = 80", 1),
        "ways.toml",
    );
    assert!(k.ends_with("llc.ways.value"), "{k}: {m}");
    std::fs::remove_dir_all(&dir).ok();
    // A workload that does not fit the memory it was given.
    let (k, m) = err(&cfg("target-last", 1, 64, "[sim]\nnode_memory_mib = 8\n"));
    assert_eq!(k, "sim.node_memory_mib");
    assert!(m.contains("ran out of simulated memory"), "{m}");
}

#[test]
fn system_time_is_broken_down_by_kernel_path_completely() {
    for c in [
        cfg("target-last", 80, 4, ""),
        cfg("sequential", 2, 4, "").replace("thp = \"always\"", "thp = \"never\""),
    ] {
        let v = run(&c);
        let m = &v["metrics"];
        let by = m["sys_cycles_by_function"].as_object().unwrap();
        let sum: u64 = by.values().map(|x| x.as_u64().unwrap()).sum();
        let sys: u64 = m["per_cpu"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["sys_cycles"].as_u64().unwrap())
            .sum();
        assert_eq!(sum, sys, "every system cycle is attributed: {by:?}");
        assert!(by["clear_page"].as_u64().unwrap() > 0);
        assert!(by["exc_page_fault"].as_u64().unwrap() > 0);
        assert!(by["handle_mm_fault"].as_u64().unwrap() > 0);
        assert!(by["flush_tlb"].as_u64().unwrap() > 0 && by["free_pages"].as_u64().unwrap() > 0);
    }
}

#[test]
fn quanta_down_to_ten_cycles_run_and_verify() {
    // Fine quanta are how a user checks how far a result depends on the
    // engine's interleaving (docs/experiments/clear-target-last.md, "The engine's quantum").
    let base = "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\n[workload]\nkind = \"usemem\"\nnr_task = 2\nsize_per_task_mib = 2\n[sim]\nquantum_cycles = ";
    let out = run_config(&format!("{base}10\n"), Format::Toml, None, &mut |_, _| {})
        .expect("a 10-cycle quantum runs");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["metrics"]["data_verified"], true);
    let (k, m) = err(&format!("{base}9\n"));
    assert_eq!(k, "sim.quantum_cycles");
    assert!(m.contains("between 10 and"), "{m}");
}
