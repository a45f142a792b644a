//! Every built-in machine preset runs: it parses with a source for each
//! value, builds its machine, and a small workload on it ends with its data
//! verified and the same bytes for the same seed. A preset added to
//! `machines/` is covered without being named here.

use vmsim_core::api::{list_machines, run_config, Format};

fn cfg(machine: &str) -> String {
    format!(
        "machine = \"{machine}\"\nseed = 1\n[kernel]\nthp = \"always\"\n[workload]\nkind = \"usemem\"\nnr_task = 2\nsize_per_task_mib = 4\n"
    )
}

#[test]
fn every_builtin_preset_runs_a_small_workload_deterministically() {
    let machines = list_machines();
    assert!(machines.len() >= 4, "{machines:?}");
    for (name, description) in &machines {
        assert!(!description.is_empty(), "{name} has no description");
        let c = cfg(name);
        let a = run_config(&c, Format::Toml, None, &mut |_, _| {})
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let b = run_config(&c, Format::Toml, None, &mut |_, _| {}).unwrap();
        assert_eq!(a, b, "{name}: same seed, different bytes");
        let v: serde_json::Value = serde_json::from_str(&a).unwrap();
        assert_eq!(v["machine"]["name"], name.as_str());
        assert_eq!(v["metrics"]["data_verified"], true, "{name}");
        assert!(v["metrics"]["elapsed_s"].as_f64().unwrap() > 0.0, "{name}");
    }
}
