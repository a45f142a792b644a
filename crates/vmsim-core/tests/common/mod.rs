//! One way to build a simulator in the integration tests: a built-in
//! preset by name, a kernel config, the simulated memory per node and the
//! machine's seed, run with 2000-cycle quanta (the tests' own choice: their
//! checks are of counts and contents, not of timing detail).
#![allow(dead_code)]

use vmsim_core::config::{embedded_machines, KernelConfig, Preset};
use vmsim_core::kernel::Kernel;
use vmsim_core::machine::Machine;
use vmsim_core::sim::Sim;

/// The tests' quantum.
pub const QUANTUM: u64 = 2000;

/// A built-in preset, parsed.
pub fn preset(name: &str) -> Preset {
    let (name, text) = embedded_machines()
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no built-in preset {name}"));
    Preset::parse(text, name).unwrap()
}

/// A simulator of preset `name` with `node_bytes` of memory per node.
pub fn sim(name: &str, cfg: KernelConfig, node_bytes: u64, seed: u64) -> Sim {
    let p = preset(name);
    let m = Machine::new(&p.machine_params().unwrap(), node_bytes, seed).unwrap();
    let k = Kernel::new(cfg, p.kernel_costs(), m.topo.nr_nodes(), node_bytes);
    Sim::new(m, k, QUANTUM)
}

/// The built-in E5-2699 v3 preset's text.
pub const PRESET: &str = include_str!("../../../../machines/xeon-e5-2699v3-2s.toml");

/// The preset with the first `value = ` after `[section]` + `key` replaced.
pub fn with_value(section: &str, key: &str, value: &str) -> String {
    let start = PRESET.find(&format!("[{section}]")).expect("section");
    let at = start
        + PRESET[start..]
            .find(&format!("\n{key} = {{ value = "))
            .expect("key");
    let v0 = at + PRESET[at..].find("value = ").unwrap() + "value = ".len();
    let v1 = v0 + PRESET[v0..].find(',').unwrap();
    // The value becomes the test's own: its class and range go (a range
    // that does not hold the new value would be refused after its checks).
    let end = v1 + PRESET[v1..].find('\n').unwrap();
    let rest = &PRESET[v1..end];
    let rest = match rest.find(", class = ") {
        Some(c) => format!("{} }}", &rest[..c]),
        None => rest.to_string(),
    };
    format!("{}{}{}{}", &PRESET[..v0], value, rest, &PRESET[end..])
}

/// A run config's JSON result (`api::run_config`, one host thread).
pub fn run_json(text: &str) -> serde_json::Value {
    let out =
        vmsim_core::api::run_config(text, vmsim_core::api::Format::Toml, None, &mut |_, _| {})
            .unwrap();
    serde_json::from_str(&out).unwrap()
}

/// The metrics of the run config at `path` (from the repository's root)
/// with `extra` TOML appended; a failing run panics naming the file.
pub fn file_metrics(path: &str, extra: &str) -> serde_json::Value {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    let text = std::fs::read_to_string(format!("{root}{path}")).unwrap() + extra;
    let out =
        vmsim_core::api::run_config(&text, vmsim_core::api::Format::Toml, None, &mut |_, _| {})
            .unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str::<serde_json::Value>(&out).unwrap()["metrics"].clone()
}

/// A result without the fields that differ from run to run (provenance,
/// host time), for byte-for-byte comparisons of the model's output.
pub fn strip_volatile(v: &serde_json::Value) -> serde_json::Value {
    let mut v = v.clone();
    v["provenance"] = serde_json::Value::Null;
    v["metrics"]["host_seconds"] = serde_json::Value::Null;
    v
}

/// Runs `text` with the windowed loop on 1 and on 2 host threads and
/// checks that the metrics are the same; returns the one-thread result.
pub fn windowed_same_on_two_threads(text: &str) -> serde_json::Value {
    use vmsim_core::api::{run_config_on, Format};
    let text = format!("{text}[sim]\nwindow_cycles = \"auto\"\n");
    let one = run_config_on(&text, Format::Toml, None, 1, &mut |_, _| {}).unwrap();
    let two = run_config_on(&text, Format::Toml, None, 2, &mut |_, _| {}).unwrap();
    let (one, two): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&one).unwrap(),
        serde_json::from_str(&two).unwrap(),
    );
    assert_eq!(
        strip_volatile(&one)["metrics"],
        strip_volatile(&two)["metrics"]
    );
    one
}

/// numa-delay-map's pmbench in miniature (bench/prof/pmbench.toml): the
/// NUMA scanner, hinting faults and migrations within 0.002 s, with
/// `kernel` lines added to the kernel section.
pub fn pmbench_numa(kernel: &str) -> String {
    format!(
        "machine = \"xeon-6238m-clx\"\n[kernel]\nthp = \"never\"\nnuma_balancing = true\nnuma_hint_fault = \"map-then-migrate\"\nmigrate_tlb_flush = \"per-page\"\nnuma_balancing_scan_delay_ms = 2\nnuma_balancing_scan_period_min_ms = 2\nnuma_balancing_scan_period_max_ms = 117\nnuma_balancing_scan_size_mb = 1\n{kernel}[workload]\nkind = \"pmbench\"\nnr_processes = 8\nnr_threads = 8\nmapsize_mib = 17.5\nduration_s = 0.002\nbind_node = 1\nnode_memory_mib = 128\neater_mib = 80\neater_node = 1\neater_exit_s = 0.02\n"
    )
}

/// A generated table of `doc` (a path under the repository) between the
/// marks `<!-- MARK -->` and `<!-- /MARK -->` equals `want`; with
/// VMSIM_BLESS=1 it is rewritten instead (`test` names the test to rerun).
pub fn check_doc_table(doc: &str, mark: &str, want: &str, test: &str) {
    let path = format!("{}/../../{doc}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let (open, close) = (format!("<!-- {mark} -->\n"), format!("<!-- /{mark} -->"));
    let a = text.find(&open).expect("the opening mark") + open.len();
    let b = text.find(&close).expect("the closing mark");
    if std::env::var("VMSIM_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, format!("{}{want}{}", &text[..a], &text[b..])).unwrap();
        return;
    }
    assert_eq!(
        &text[a..b],
        want,
        "{doc}'s table is not the declarations' (VMSIM_BLESS=1 cargo test --test {test} rewrites it)"
    );
}
