//! The calibration and the microbenchmarks' plan on recorded hosts
//! (`tests/hosts/*.json`): each record renders a preset that the model
//! accepts, every value it had to bound says so, and every microbenchmark
//! row fits the preset's benchmark machine or is skipped with its reason.
//! No host measurement runs here, so these hold on any machine.

use std::path::PathBuf;
use vmsim_core::config::Preset;
use vmsim_core::validate::{Bench, NODE_BYTES};
use vmsim_hw::micro::{self, DramCap};
use vmsim_hw::record::Record;

const STAMP: &str = "2026-12-07 00:00:00 UTC";

fn hosts() -> Vec<(String, Record)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/hosts");
    let mut out: Vec<(String, Record)> = std::fs::read_dir(&dir)
        .expect("tests/hosts")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let r = Record::load("record", p.to_str().unwrap())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, r)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn host(name: &str) -> Record {
    hosts()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no recorded host {name}"))
        .1
}

fn preset(r: &Record) -> (String, serde_json::Value, Preset) {
    let (text, derived) = vmsim_hw::calibrate::render(r, "recorded", STAMP);
    let p = Preset::parse(&text, "recorded").unwrap_or_else(|e| panic!("{e}\n{text}"));
    (text, derived, p)
}

/// The value of `section.key` in a rendered preset, and its source.
fn leaf(text: &str, section: &str, key: &str) -> (toml::Value, String) {
    let t: toml::Table = text.parse().unwrap();
    let l = &t[section][key];
    (
        l["value"].clone(),
        l["source"].as_str().unwrap().to_string(),
    )
}

#[test]
fn the_recorded_hosts_are_the_ones_named() {
    let names: Vec<String> = hosts().into_iter().map(|(n, _)| n).collect();
    for want in [
        "intel-480m-llc-guest",
        "synthetic-512m-llc-1cpu",
        "zen3-guest",
        "zen4-guest",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
}

#[test]
fn every_recorded_host_renders_a_preset_the_model_accepts_and_the_same_twice() {
    for (name, r) in hosts() {
        let (a, _, p) = preset(&r);
        let (b, _, _) = preset(&r);
        assert_eq!(a, b, "{name}: rendering is not deterministic");
        assert!(p.cpu.freq_mhz > 0, "{name}");
        // Every measured value's source says it was measured on the recorded host.
        assert!(
            a.contains(&format!("on {} at {STAMP}", r.facts.hostname)),
            "{name}"
        );
        // Measured values are classed measured, values read from sysfs
        // sourced, and defaults have no class: the user's own.
        for (key, prov) in &p.provenance {
            let source = &p.sources[key];
            let want = if source.starts_with("measured by vmsim hw calibrate") {
                "measured"
            } else if source.starts_with("read by vmsim hw calibrate") {
                "sourced"
            } else {
                "user"
            };
            assert_eq!(prov.class, want, "{name}: {key}: {source}");
        }
        assert!(
            p.provenance.values().any(|v| v.class == "measured"),
            "{name}"
        );
    }
}

#[test]
fn a_drain_above_the_latency_the_preset_holds_is_bounded_and_says_so() {
    // The Intel guest: its chase sweep (to 512 MiB) never left a 480 MiB LLC,
    // so no DRAM latency was measured, and its fence took 186.4 ns.
    let r = host("intel-480m-llc-guest");
    assert_eq!(r.raw.sfence_drain_ns, Some(186.4));
    let (text, derived, p) = preset(&r);
    let (local, why_local) = leaf(&text, "memory", "local_latency_ns");
    assert_eq!(local.as_float(), Some(90.0));
    assert!(
        why_local.contains(
            "no chase size reached 8x the LLC (3840 MiB; the largest chased was 512 MiB)"
        ),
        "{why_local}"
    );
    let (drain, why) = leaf(&text, "string", "sfence_drain_ns");
    assert_eq!(drain.as_float(), Some(90.0));
    assert!(why.contains("took 186.4 ns more per call"), "{why}");
    assert!(
        why.contains("written as 90.0 ns: the preset accepts at most memory.local_latency_ns (90.0 ns, a default: no DRAM latency was measured)"),
        "{why}"
    );
    let clamped = derived["clamped"].as_array().unwrap();
    assert_eq!(clamped.len(), 1, "{clamped:?}");
    assert_eq!(clamped[0]["key"], "string.sfence_drain_ns");
    assert_eq!(clamped[0]["found"], 186.4);
    assert_eq!(clamped[0]["written"], 90.0);
    assert!(p.memory.local_latency_ns >= 90.0);
}

#[test]
fn a_host_that_moves_more_than_the_default_peak_raises_the_peak() {
    let mut r = host("zen4-guest");
    r.raw.all_cpu_load_gbps = 400.0;
    let (text, derived, p) = preset(&r);
    assert_eq!(p.memory.sustained_bandwidth_gbs, 400.0);
    assert_eq!(p.memory.peak_bandwidth_gbs, 400.0);
    let (_, why) = leaf(&text, "memory", "peak_bandwidth_gbs");
    assert!(why.contains("raised to the sustained rate"), "{why}");
    assert!(derived["clamped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["key"] == "memory.peak_bandwidth_gbs"));
}

#[test]
fn a_host_without_an_l3_in_sysfs_gets_a_default_llc_that_says_so() {
    let mut r = host("zen4-guest");
    r.facts.caches.retain(|c| c.level < 3);
    let (text, _, p) = preset(&r);
    assert_eq!(p.llc.size_kib, 32 << 10);
    let (_, why) = leaf(&text, "llc", "size_kib");
    assert!(why.contains("sysfs reports no level-3 data cache"), "{why}");
}

#[test]
fn every_microbenchmark_row_fits_the_recorded_hosts_preset() {
    for (name, r) in hosts() {
        let (_, _, p) = preset(&r);
        let (sizes, rows) =
            micro::plan(&r.facts, Some(&p)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(sizes.dram <= NODE_BYTES, "{name}");
        assert!(!rows.is_empty());
        for (b, skip) in &rows {
            assert_eq!(skip, &None, "{name}: {b:?}");
        }
        // The kinds of `vmsim hw validate`'s microbenchmark table, on every host.
        let has = |f: &dyn Fn(&Bench) -> bool| rows.iter().any(|(b, _)| f(b));
        assert!(has(&|b| matches!(b, Bench::Chase { .. })), "{name}");
        assert!(has(&|b| matches!(b, Bench::IdleLatency { .. })), "{name}");
        assert!(has(&|b| matches!(b, Bench::SocketLoad { .. })), "{name}");
        assert!(has(&|b| matches!(b, Bench::NtCopy { .. })), "{name}");
    }
}

#[test]
fn a_large_llc_caps_the_dram_rows_at_the_benchmark_node_and_says_so() {
    for (name, llc_mib) in [
        ("intel-480m-llc-guest", 480u64),
        ("synthetic-512m-llc-1cpu", 512),
    ] {
        let r = host(name);
        let sizes = micro::Sizes::of(&r.facts);
        assert_eq!(sizes.llc, llc_mib << 20, "{name}");
        assert_eq!(sizes.dram_wanted, 4 * (llc_mib << 20), "{name}");
        assert_eq!(sizes.dram, NODE_BYTES, "{name}");
        assert_eq!(sizes.dram_cap, Some(DramCap::Node), "{name}");
        let note = sizes.dram_note().unwrap();
        assert!(
            note.contains(&format!(
                "capped at 1024 MiB, {:.1} x the LLC: 4 x the LLC would be {} MiB and the model's benchmark node holds 1024 MiB",
                1024.0 / llc_mib as f64,
                4 * llc_mib
            )),
            "{note}"
        );
        let dram_kib = sizes.dram / 1024;
        assert_eq!(sizes.note(Bench::NtFill { kib: dram_kib }), Some(note));
        assert_eq!(sizes.note(Bench::Chase { kib: 16 }), None);
    }
    // A host whose LLC's four times fit the node is not capped.
    let sizes = micro::Sizes::of(&host("zen4-guest").facts);
    assert_eq!((sizes.dram, sizes.dram_cap), (128 << 20, None));
    assert_eq!(sizes.dram_note(), None);
}

#[test]
fn little_memory_caps_the_dram_rows_at_what_the_host_can_hold() {
    let mut r = host("zen4-guest");
    r.facts.mem_available_bytes = Some(160 << 20);
    let sizes = micro::Sizes::of(&r.facts);
    // 3/4 of 160 MiB less 64 MiB: 56 MiB.
    assert_eq!(sizes.dram, 56 << 20);
    assert_eq!(sizes.dram_cap, Some(DramCap::HostMemory));
    assert!(sizes
        .dram_note()
        .unwrap()
        .contains("three quarters of the host's available memory allows no more"));
}

#[test]
fn a_row_the_preset_cannot_run_is_skipped_with_its_reason() {
    // The all-CPU row of a host with more CPUs than the preset has.
    let r = host("zen4-guest");
    let (_, _, p) = preset(&r);
    let mut big = r.facts.clone();
    big.online_cpus = 64;
    let (_, rows) = micro::plan(&big, Some(&p)).unwrap();
    let skipped: Vec<_> = rows.iter().filter(|(_, s)| s.is_some()).collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(matches!(skipped[0].0, Bench::SocketLoad { cores: 64 }));
    assert!(
        skipped[0]
            .1
            .as_deref()
            .unwrap()
            .contains("64 cores: the preset has 2"),
        "{skipped:?}"
    );
}

#[test]
fn a_bad_record_is_refused_with_the_reason() {
    for (text, want) in [
        ("{", "not JSON"),
        ("{}", "no record"),
        (r#"{"version": 9}"#, "version 9"),
        (
            r#"{"version": 1, "provenance": "", "facts": {}, "raw": {}}"#,
            "not a calibration record",
        ),
    ] {
        match Record::from_json("record", text) {
            Err(vmsim_hw::HwError::Config { key, message }) => {
                assert_eq!(key, "record");
                assert!(message.contains(want), "{text}: {message}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn a_rendered_preset_holds_every_declared_key_in_the_declarations_order() {
    for (name, r) in hosts() {
        let (text, _, p) = preset(&r);
        let declared: Vec<String> = vmsim_core::config::preset::params::all()
            .iter()
            .map(|d| d.key())
            .filter(|k| p.provenance.contains_key(k))
            .collect();
        let written: Vec<String> = p.provenance.keys().cloned().collect();
        let mut sorted = declared.clone();
        sorted.sort();
        assert_eq!(sorted, written, "{name}: written keys beyond the declared");
        for d in vmsim_core::config::preset::params::all() {
            assert!(
                d.optional
                    || d.section == "numa"
                    || d.section == "idle"
                    || p.provenance.contains_key(&d.key()),
                "{name}: calibrate writes no value for the declared {}",
                d.key()
            );
        }
        // Each key after the one before it in the file.
        let mut at = 0;
        for k in &declared {
            let (section, key) = k.split_once('.').unwrap();
            let s = text.find(&format!("\n[{section}]\n")).unwrap();
            let pos = s + text[s..].find(&format!("\n{key} = ")).unwrap();
            assert!(pos > at, "{name}: {k} out of the declarations' order");
            at = pos;
        }
    }
}
