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
    format!("{}{}{}", &PRESET[..v0], value, &PRESET[v1..])
}
