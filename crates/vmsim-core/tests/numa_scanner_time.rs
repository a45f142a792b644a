//! NUMA balancing's scanner (`task_numa_work`) runs as task work in the
//! kernel on the way back to user mode: its fixed cost and its PTE changes
//! are system time under `task_numa_work`, never the task's user time.

mod common;

use vmsim_core::config::{embedded_machines, Preset};

#[test]
fn the_scanners_time_is_system_time() {
    let m = &common::file_metrics("bench/prof/pmbench.toml", "");
    let runs = m["task_numa_work_runs"].as_u64().unwrap();
    assert!(runs > 0, "the scanner ran");
    let scanner = m["sys_cycles_by_function"]["task_numa_work"]
        .as_u64()
        .unwrap();
    let (name, preset) = embedded_machines()
        .iter()
        .find(|(n, _)| *n == "xeon-6238m-clx")
        .unwrap();
    let costs = Preset::parse(preset, name).unwrap().kernel_costs();
    let ptes = m["counters"]["vmstat"]["numa_pte_updates"]
        .as_u64()
        .unwrap();
    // The scans' fixed costs and their PTE changes' at the least.
    let least = runs * costs.task_numa_work_cycles + ptes * costs.change_pte_cycles;
    assert!(
        scanner >= least,
        "{runs} scans and {ptes} PTE changes cost at least {least} cycles; {scanner} system cycles under task_numa_work"
    );
}
