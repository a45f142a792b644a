//! Fuzz target over generated run configs and machine presets: whatever the
//! input, parsing never panics or aborts, and every refusal is a config
//! error that names a key and stays one readable line.
//!
//! Inputs are the shipped preset and a small run config with one to four
//! leaves replaced by generated values (extreme integers and floats, NaN,
//! infinities, wrong types, long strings), removed, or joined by unknown keys.
//! An accepted preset is sometimes also built into a machine, where cache and
//! buffer sizes are allocated. The case count comes from `VMSIM_FUZZ_CASES`
//! (default 2000, a few seconds in CI; run with 100000 or more locally).

use proptest::prelude::*;
use toml::Value;
use vmsim_core::api::Error;
use vmsim_core::config::{Preset, RunConfig};

const PRESET: &str = include_str!("../../../machines/xeon-e5-2699v3-2s.toml");
const RUN: &str = "machine = \"xeon-e5-2699v3-2s\"\nseed = 0\n[kernel]\nthp = \"always\"\n\
                   [workload]\nkind = \"usemem\"\nnr_task = 2\nsize_per_task_mib = 4\n[sim]\nquantum_cycles = 2000\n";

/// Keys a run config may hold (and a few it may not), for the mutations to aim at.
const RUN_KEYS: &[&str] = &[
    "machine",
    "seed",
    "kernel.thp",
    "kernel.clear_huge_page",
    "kernel.clear_page",
    "kernel.preempt",
    "kernel.copy_huge_page",
    "kernel.thp_cow",
    "kernel.page_alloc_shuffle",
    "workload.kind",
    "workload.nr_task",
    "workload.size_per_task_mib",
    "workload.prealloc",
    "workload.prefault",
    "workload.size_mib",
    "workload.page_size",
    "workload.cpu",
    "sim.quantum_cycles",
    "sim.node_memory_mib",
    "sim.fault_injection.skip_clear_subpage",
    "sim.fault_injection.skip_copy_subpage",
    "sim.fault_injection",
    "kernel",
    "workload",
    "sim",
    "bogus",
    "kernel.bogus",
];

fn cases() -> u32 {
    std::env::var("VMSIM_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::Integer),
        prop::sample::select(vec![
            0i64,
            1,
            2,
            -1,
            3,
            7,
            64,
            511,
            512,
            4095,
            4096,
            65536,
            262144,
            1 << 32,
            1 << 40,
            1 << 44,
            i64::MAX,
            i64::MIN
        ])
        .prop_map(Value::Integer),
        any::<f64>().prop_map(Value::Float),
        prop::sample::select(vec![
            0.0,
            -0.0,
            0.5,
            1e-300,
            1e300,
            -1e300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            4.0,
            65536.5
        ])
        .prop_map(Value::Float),
        any::<bool>().prop_map(Value::Boolean),
        "[a-z0-9 ._/-]{0,16}".prop_map(Value::String),
        prop::sample::select(vec![
            "always",
            "never",
            "target-last",
            "sequential",
            "usemem",
            "pf-test",
            "1g",
            "2m",
            "copy",
            "split",
            "lru",
            "memory"
        ])
        .prop_map(|s| Value::String(s.into())),
        (1usize..5000).prop_map(|n| Value::String("x".repeat(n))),
        Just(Value::Array(vec![])),
        Just(Value::Table(toml::Table::new())),
    ]
}

/// All dotted paths of a table, tables included.
fn paths(t: &toml::Table, prefix: &str, out: &mut Vec<String>) {
    for (k, v) in t {
        let p = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        out.push(p.clone());
        if let Value::Table(sub) = v {
            paths(sub, &p, out);
        }
    }
}

#[derive(Clone, Debug)]
enum Edit {
    Set(usize, Value),
    Remove(usize),
    AddUnknown(usize, Value),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        6 => (any::<usize>(), value()).prop_map(|(i, v)| Edit::Set(i, v)),
        1 => any::<usize>().prop_map(Edit::Remove),
        1 => (any::<usize>(), value()).prop_map(|(i, v)| Edit::AddUnknown(i, v)),
    ]
}

fn apply(table: &mut toml::Table, path: &str, op: &Edit) {
    let parts: Vec<&str> = path.split('.').collect();
    let mut t = table;
    for p in &parts[..parts.len() - 1] {
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = Value::Table(toml::Table::new());
        }
        t = entry.as_table_mut().unwrap();
    }
    let last = parts[parts.len() - 1].to_string();
    match op {
        Edit::Set(_, v) => {
            t.insert(last, v.clone());
        }
        Edit::Remove(_) => {
            t.remove(&last);
        }
        Edit::AddUnknown(_, v) => {
            t.insert(format!("{last}_unknown"), v.clone());
        }
    }
}

fn index(op: &Edit) -> usize {
    match op {
        Edit::Set(i, _) | Edit::Remove(i) | Edit::AddUnknown(i, _) => *i,
    }
}

fn check_error(e: &Error, what: &str) {
    match e {
        Error::Config { key, message } => {
            assert!(!key.is_empty(), "{what}: error without a key: {message}");
            assert!(!message.is_empty(), "{what}: {key}: empty message");
            assert!(
                !message.contains('\n'),
                "{what}: {key}: message over several lines: {message}"
            );
            assert!(
                message.len() < 600,
                "{what}: {key}: message of {} bytes",
                message.len()
            );
        }
        other => panic!("{what}: not a config error: {other}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn generated_presets_never_panic_and_errors_name_a_key(edits in prop::collection::vec(edit(), 1..4), build in prop::bool::weighted(0.01)) {
        let mut table: toml::Table = PRESET.parse().unwrap();
        for op in &edits {
            let mut all = Vec::new();
            paths(&table, "", &mut all);
            // Aim at the `value` of a leaf most of the time.
            let leaves: Vec<&String> = all.iter().filter(|p| p.ends_with(".value")).collect();
            let path = if !index(op).is_multiple_of(4) && !leaves.is_empty() { leaves[index(op) % leaves.len()].clone() } else { all[index(op) % all.len()].clone() };
            apply(&mut table, &path, op);
        }
        let text = toml::to_string(&table).unwrap();
        match Preset::parse(&text, "fuzz") {
            Err(e) => check_error(&e, "preset"),
            Ok(p) => {
                if build {
                    // Accepted presets build: sizes fit the model's types and host memory.
                    let m = p.machine_params().map_err(|e| e.to_string()).and_then(|mp| vmsim_core::machine::Machine::new(&mp, 64 << 20, 1));
                    prop_assert!(m.is_ok(), "accepted preset does not build: {:?}", m.err());
                }
            }
        }
    }

    #[test]
    fn generated_run_configs_never_panic_and_errors_name_a_key(
        edits in prop::collection::vec((0..RUN_KEYS.len(), edit()), 1..5),
        scale in prop::sample::select(vec![1.0, 0.001, 1e-9, 3.5, 1e10]),
    ) {
        let mut table: toml::Table = RUN.parse().unwrap();
        for (k, op) in &edits {
            apply(&mut table, RUN_KEYS[*k], op);
        }
        match RunConfig::from_table(table, None, scale) {
            Err(e) => check_error(&e, "run config"),
            Ok(cfg) => {
                prop_assert!(cfg.sim.node_memory_mib <= 262144);
                prop_assert!(cfg.preset.nr_cpus() >= 1);
            }
        }
    }
}
