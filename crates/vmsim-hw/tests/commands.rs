//! run_json end to end with tiny sizes: option checking, JSON shape, the
//! calibration preset's schema, and that pf-test leaves hugetlb pools as found.

use serde_json::Value;
use vmsim_hw::{run_json, HwError};

fn json(cmd: &str, opts: &str) -> Value {
    serde_json::from_str(&run_json(cmd, opts).unwrap_or_else(|e| panic!("{cmd}: {e}"))).unwrap()
}

fn config_key(r: Result<String, HwError>) -> String {
    match r {
        Err(HwError::Config { key, message }) => {
            assert!(!message.is_empty());
            key
        }
        other => panic!("expected a Config error, got {other:?}"),
    }
}

#[test]
fn unknown_option_keys_are_named() {
    for cmd in ["clear", "copy", "pf-test", "calibrate", "store-sweep"] {
        let r = run_json(cmd, r#"{"bogus_key": 1}"#);
        let msg = r.as_ref().err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(config_key(r), "bogus_key", "{cmd}");
        assert!(msg.contains("accepted"), "{cmd}: {msg}");
    }
}

#[test]
fn bad_values_are_config_errors() {
    assert_eq!(
        config_key(run_json("clear", r#"{"target": 512}"#)),
        "target"
    );
    assert_eq!(
        config_key(run_json("clear", r#"{"strategies": ["memset"]}"#)),
        "strategies"
    );
    assert_eq!(config_key(run_json("copy", r#"{"huge": "1g"}"#)), "huge");
    assert_eq!(
        config_key(run_json("pf-test", r#"{"kinds": ["64k"]}"#)),
        "kinds"
    );
    assert_eq!(config_key(run_json("clear", r#"{"pages": -1}"#)), "pages");
    for (opts, key) in [
        (r#"{"backing": "1g"}"#, "backing"),
        (r#"{"chunks_kib": [6]}"#, "chunks_kib"),
        (r#"{"chunks_kib": []}"#, "chunks_kib"),
        (r#"{"kinds": ["memset"]}"#, "kinds"),
        (r#"{"strategies": ["memset"]}"#, "strategies"),
        (r#"{"size_mib": 0}"#, "size_mib"),
    ] {
        assert_eq!(config_key(run_json("store-sweep", opts)), key, "{opts}");
    }
    assert_eq!(config_key(run_json("clear", "[1]")), "<options>");
    assert_eq!(config_key(run_json("frobnicate", "{}")), "command");
}

#[test]
fn clear_runs_every_strategy() {
    let v = json("clear", r#"{"pages": 2, "reps": 2, "target": "random"}"#);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 12, "6 strategies x with/without co-runner");
    for r in results {
        if r.get("skipped").is_some() {
            continue;
        }
        assert_eq!(r["verified"], true, "{r}");
        assert!(r["gbps"]["median"].as_f64().unwrap() > 0.0);
        assert!(r["touch_4k_ns"]["min"].as_f64().unwrap() > 0.0);
    }
    assert!(v["host"]["flags"]["erms"].is_boolean());
}

#[test]
fn clear_on_hugetlb_restores_pools() {
    let _pools = pools();
    let before = nr_hugepages();
    match run_json(
        "clear",
        r#"{"pages": 2, "reps": 1, "corunner": false, "huge": "hugetlb", "strategies": ["seq-stosb", "contiguous-7.0"]}"#,
    ) {
        Ok(text) => {
            let v: Value = serde_json::from_str(&text).unwrap();
            let results = v["results"].as_array().unwrap();
            assert!(results.iter().all(|r| r["verified"] == true), "{v}");
        }
        // Not root, or the pool could not grow: said, naming the option.
        Err(e) => assert_eq!(config_key(Err(e)), "huge"),
    }
    assert_eq!(nr_hugepages(), before);
}

#[test]
fn copy_runs_every_strategy() {
    let v = json(
        "copy",
        r#"{"pages": 2, "reps": 1, "target": "middle", "corunner": false, "huge": "none"}"#,
    );
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 5);
    assert!(results.iter().all(|r| r["verified"] == true));
}

/// The hugetlb pools are the whole system's: tests that raise them and
/// check they are restored take this lock, so that one does not read the
/// pool while another holds it raised (the test threads run at once).
static POOLS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn pools() -> std::sync::MutexGuard<'static, ()> {
    POOLS.lock().unwrap_or_else(|e| e.into_inner())
}

fn nr_hugepages() -> Vec<Option<String>> {
    ["2048", "1048576"]
        .iter()
        .map(|k| {
            std::fs::read_to_string(format!(
                "/sys/kernel/mm/hugepages/hugepages-{k}kB/nr_hugepages"
            ))
            .ok()
        })
        .collect()
}

#[test]
fn pf_test_small_restores_pools() {
    let _pools = pools();
    let before = nr_hugepages();
    let v = json(
        "pf-test",
        r#"{"size_mib": 4, "reps": 1, "kinds": ["hugetlb-2m", "thp", "4k"]}"#,
    );
    assert_eq!(nr_hugepages(), before);
    for r in v["results"].as_array().unwrap() {
        assert!(
            r.get("skipped").is_some() || r["gbps"]["median"].as_f64().unwrap() > 0.0,
            "{r}"
        );
        if r.get("skipped").is_none() {
            assert_eq!(r["warm"], true);
        }
    }
}

#[test]
fn store_sweep_small_runs_every_case_and_restores_pools() {
    let _pools = pools();
    let before = nr_hugepages();
    for backing in ["hugetlb-2m", "thp"] {
        let opts = serde_json::json!({"size_mib": 4, "reps": 1, "backing": backing,
                                      "chunks_kib": [4, 64, 8192]})
        .to_string();
        let v = json("store-sweep", &opts);
        assert_eq!(nr_hugepages(), before, "{backing}");
        if let Some(why) = v["skipped"].as_str() {
            // Not root, or no pages to be had: said, not failed.
            assert!(!why.is_empty());
            continue;
        }
        let results = v["results"].as_array().unwrap();
        let run: Vec<&Value> = results.iter().filter(|r| r["skipped"].is_null()).collect();
        let clzero = v["clzero"] == true;
        // Per kind: 4K, 64K and 4K descending; 8M is larger than the buffer;
        // mov 4K in both orders; two L2-resident stosb cases.
        // And the five clearing strategies of `vmsim hw validate`.
        assert_eq!(run.len(), 3 * (2 + usize::from(clzero)) + 2 + 2 + 5, "{v}");
        for r in &run {
            assert_eq!(r["verified"], true, "{r}");
            assert!(r["gbps"]["median"].as_f64().unwrap() > 0.0, "{r}");
            assert!(r["ns_per_call"].as_f64().unwrap() > 0.0, "{r}");
        }
        let skipped = results.len() - run.len();
        // The three 8M calls, or two and the clzero row on a CPU without it.
        assert_eq!(skipped, 3, "{v}");
        assert!(v["table"].as_str().unwrap().contains("stosb 4K descending"));
    }
}

#[test]
fn store_sweep_on_scattered_frames_says_how_many_pages_follow_their_predecessors() {
    // 4 KiB pages faulted in order and in a shuffled order: where pagemap
    // gives frames (root), the second almost never follow each other; every
    // case still clears and verifies.
    let mut fractions = Vec::new();
    for backing in ["4k", "4k-scattered"] {
        let opts = serde_json::json!({"size_mib": 8, "reps": 1, "backing": backing,
                                      "chunks_kib": [4], "kinds": ["stosb", "mov"],
                                      "strategies": [], "l2": false})
        .to_string();
        let v = json("store-sweep", &opts);
        let run: Vec<&Value> = v["results"].as_array().unwrap().iter().collect();
        assert_eq!(run.len(), 4, "{v}");
        assert!(run.iter().all(|r| r["verified"] == true), "{v}");
        match v["frames_in_order"]["fraction"].as_f64() {
            Some(f) => fractions.push(f),
            None => assert!(v["frames_in_order"].is_null(), "{v}"),
        }
    }
    // How many in-order faults get the next frame depends on the buddy
    // allocator's state (tests running beside this one take frames between
    // them: 0.0 under `make test` once, 0.83-0.85 on an idle host), so only
    // the shuffled order's figure is checked.
    if let [in_order, scattered] = fractions[..] {
        assert!((0.0..=1.0).contains(&in_order), "{in_order}");
        assert!(scattered < 0.05, "{scattered}");
    }
}

#[test]
fn store_sweep_with_a_preset_gives_the_models_figure_for_each_chunk_and_page_order_row() {
    // A bad preset is refused by name before any measuring.
    assert_eq!(
        config_key(run_json("store-sweep", r#"{"preset": "no-such-chip"}"#)),
        "preset"
    );
    // Milan's preset has clzero; on a host without it that row is skipped.
    let opts = serde_json::json!({"size_mib": 4, "reps": 1, "backing": "thp",
                                  "chunks_kib": [4, 64], "strategies": [], "l2": false,
                                  "preset": "epyc-7j13-milan"})
    .to_string();
    let v = json("store-sweep", &opts);
    if v["skipped"].is_string() {
        return;
    }
    assert_eq!(v["options"]["preset"], "epyc-7j13-milan");
    let run: Vec<&Value> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["skipped"].is_null())
        .collect();
    assert!(!run.is_empty());
    for r in &run {
        let model = r["model_gbps"].as_f64().unwrap_or_else(|| panic!("{r}"));
        let host = r["gbps"]["median"].as_f64().unwrap();
        assert!(model > 0.0, "{r}");
        let e = r["error"].as_f64().unwrap();
        assert!((e - (model - host) / host).abs() < 0.01, "{r}");
    }
    let bench = |case: &str| {
        run.iter()
            .find(|r| r["case"] == case)
            .map(|r| r["model_bench"].clone())
            .unwrap_or_else(|| panic!("{case}"))
    };
    assert_eq!(
        bench("stosb 64K"),
        serde_json::json!({"string-chunks": {"chunk_kib": 64}})
    );
    assert_eq!(
        bench("mov 4K descending"),
        serde_json::json!({"page-order": {"kind": "mov", "descending": true}})
    );
    assert!(v["table"].as_str().unwrap().contains("model    error"));
}

#[test]
fn calibrate_quick_writes_a_preset_in_schema() {
    let dir = std::env::temp_dir().join(format!("vmsim-hw-cal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let opts = serde_json::json!({"quick": true, "out_dir": dir, "name": "Test Box"}).to_string();
    let v = json("calibrate", &opts);
    let path = v["preset_path"].as_str().unwrap();
    assert!(path.ends_with("host-test-box.toml"), "{path}");
    // Every repeated figure says how many repetitions it kept and their spread
    // (values depend on the host's load; only their presence and sense are checked).
    let raw = &v["raw"];
    let clock = &raw["repetitions"]["core_ghz_add_chain"];
    assert_eq!(clock["figure"], "max", "{clock}");
    assert!(clock["n"].as_u64().unwrap() >= 1, "{clock}");
    assert!(clock["spread"].as_f64().unwrap() >= 0.0, "{clock}");
    assert_eq!(raw["core_ghz_add_chain"], clock["max"]);
    for c in raw["chase_ns_thp"].as_array().unwrap() {
        let r = &c["reps"];
        assert!(
            r["n"].as_u64().unwrap() >= 1 && r["switched_out"].is_u64(),
            "{c}"
        );
        assert_eq!(c["ns"], r["min"], "{c}");
    }
    for key in ["store_rep_stosb_gbps", "read_gbps", "cold_4k_touch_ns"] {
        assert!(raw["repetitions"][key]["n"].as_u64().unwrap() >= 1, "{key}");
    }
    assert!(v["warnings"].is_array() && v["repetitions_method"].is_string());
    let t: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(t["name"].as_str(), Some("host-test-box"));
    assert!(t["description"].is_str());
    let schema: &[(&str, &[&str])] = &[
        (
            "cpu",
            &[
                "freq_mhz",
                "sockets",
                "cores_per_socket",
                "threads_per_core",
                "issue_width",
                "store_bytes_per_cycle",
                "scalar_stores_per_cycle",
                "movnti_line_cycles",
                "store_queue_entries",
                "load_bytes_per_cycle",
                "perf_cache_events",
            ],
        ),
        (
            "l1d",
            &[
                "size_kib",
                "ways",
                "latency_cycles",
                "replacement",
                "fill_buffers",
            ],
        ),
        (
            "l2",
            &[
                "size_kib",
                "ways",
                "latency_cycles",
                "replacement",
                "superqueue",
                "writeback_holds_superqueue",
                "sustained_bytes_per_cycle",
                "writebacks_share_sustained",
            ],
        ),
        (
            "llc",
            &[
                "size_kib",
                "ways",
                "latency_cycles",
                "replacement",
                "inclusive",
                "instances_per_socket",
                "sustained_bytes_per_cycle",
                "writebacks_share_sustained",
            ],
        ),
        (
            "tlb",
            &[
                "l1_4k_entries",
                "l1_4k_ways",
                "l1_2m_entries",
                "l1_2m_ways",
                "l1_1g_entries",
                "l1_1g_ways",
                "stlb_entries",
                "stlb_ways",
                "stlb_holds_2m",
                "stlb_holds_pde",
                "stlb_latency_cycles",
                "walk_cycles",
                "invlpgb",
            ],
        ),
        (
            "memory",
            &[
                "nodes_per_socket",
                "channels_per_node",
                "dram_mts",
                "peak_bandwidth_gbs",
                "sustained_bandwidth_gbs",
                "local_latency_ns",
                "remote_latency_ns",
                "remote_cache_latency_ns",
                "interconnect_bandwidth_gbs",
                "posted_write_ns",
            ],
        ),
        (
            "string",
            &[
                "erms",
                "fsrm",
                "startup_cycles",
                "drain_at_boundary",
                "no_rfo_full_lines",
                "no_rfo_grant",
                "nocache_threshold_kib",
                "nocache_by",
                "bypass_hold_ns",
                "clzero",
                "clzero_hold_ns",
                "sfence_drain_ns",
            ],
        ),
        (
            "prefetch",
            &[
                "enabled",
                "l1_next_line",
                "l2_streamer",
                "l2_streams",
                "l2_distance_lines",
                "l2_degree",
                "l2_cross_page",
            ],
        ),
        (
            "costs",
            &[
                "exception_entry_exit_cycles",
                "syscall_entry_exit_cycles",
                "page_fault_handler_cycles",
                "thp_fault_handler_cycles",
                "page_alloc_cycles",
                "page_free_cycles",
                "ipi_send_cycles",
                "ipi_latency_ns",
                "ipi_handle_cycles",
                "tlb_flush_full_cycles",
                "invlpg_cycles",
                "context_switch_cycles",
                "page_cache_add_cycles",
                "map_pages_per_pte_cycles",
                "shrink_folio_cycles",
                "rmap_pte_cycles",
                "migrate_folio_cycles",
                "change_pte_cycles",
                "task_numa_work_cycles",
                "tick_handler_cycles",
                "try_to_wake_up_cycles",
            ],
        ),
    ];
    assert!(t["cpu"]["model"].is_str());
    // The broadcast-invalidation costs are written only for a host with INVLPGB.
    let invlpgb = t["tlb"]["invlpgb"]["value"].as_bool() == Some(true);
    for (sec, keys) in schema {
        let s = t[*sec]
            .as_table()
            .unwrap_or_else(|| panic!("missing [{sec}]"));
        let mut keys: Vec<&str> = keys.to_vec();
        if *sec == "costs" && invlpgb {
            keys.extend(["invlpgb_cycles", "tlbsync_latency_ns"]);
        }
        let n_leaves = s.len() - usize::from(*sec == "cpu");
        assert_eq!(n_leaves, keys.len(), "[{sec}] has extra or missing keys");
        for k in &keys {
            let leaf = s
                .get(*k)
                .and_then(|x| x.as_table())
                .unwrap_or_else(|| panic!("{sec}.{k} missing"));
            assert!(leaf.contains_key("value"), "{sec}.{k}");
            let src = leaf["source"].as_str().unwrap();
            assert!(
                src.starts_with("measured by vmsim hw calibrate on ")
                    || src.starts_with("read by vmsim hw calibrate on ")
                    || src.starts_with("not measured: default, see docs"),
                "{sec}.{k}: {src}"
            );
        }
    }
    for r in ["l1d", "l2", "llc"] {
        let v = t[r]["replacement"]["value"].as_str().unwrap();
        assert!(["lru", "tree-plru", "srrip", "random"].contains(&v));
    }
    // The fill paths: one core's load rate over half the level, in bytes per
    // measured cycle (a level whose size sysfs does not give stays 0).
    for (r, gbps) in [("l2", "l2_load_gbps"), ("llc", "llc_load_gbps")] {
        let leaf = &t[r]["sustained_bytes_per_cycle"];
        let measured = raw[gbps].as_f64().unwrap();
        if measured > 0.0 {
            let bpc = leaf["value"].as_float().unwrap();
            assert_eq!(raw["repetitions"][gbps]["figure"], "max");
            let ghz = raw["core_ghz_add_chain"].as_f64().unwrap();
            let want = (measured / ghz).clamp(0.0625, 64.0);
            assert!((bpc - want).abs() < 0.01 * want, "{r}: {bpc} vs {want}");
            assert!(leaf["source"].as_str().unwrap().starts_with("measured"));
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
