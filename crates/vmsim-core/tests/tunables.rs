//! The kernel's own numbers as run-config keys: each declared one is read
//! from `[kernel]`, checked against its declared range, recorded in the
//! result when set off its default, and moves the model where it acts;
//! docs/config.md's table is the declarations' (VMSIM_BLESS=1 rewrites it).

mod common;

use vmsim_core::api::{run_config, Format};
use vmsim_core::kernel::tunables::{doc_table, KernelTunables};

const BASE: &str = "machine = \"xeon-e5-2699v3-2s\"\nseed = 1\n[kernel]\nthp = \"never\"\nspinlocks = \"queued\"\n";
const WORKLOAD: &str = "[workload]\nkind = \"usemem\"\nnr_task = 4\nsize_per_task_mib = 4\n";

fn run(extra: &str) -> Result<serde_json::Value, String> {
    let text = format!("{BASE}{extra}{WORKLOAD}");
    run_config(&text, Format::Toml, None, &mut |_, _| {})
        .map(|s| serde_json::from_str(&s).unwrap())
        .map_err(|e| e.to_string())
}

#[test]
fn docs_config_md_has_the_declarations_table() {
    common::check_doc_table("docs/config.md", "tunables", &doc_table(), "tunables");
}

#[test]
fn a_tunable_set_off_its_default_is_recorded_and_moves_the_model() {
    let base = run("").unwrap();
    assert!(base["config"]["kernel"].get("tunables").is_none());
    let set = run("pcp_batch = 7\npcp_high = 7\n").unwrap();
    assert_eq!(set["config"]["kernel"]["tunables"]["pcp_batch"], 7);
    assert_eq!(set["config"]["kernel"]["tunables"]["pcp_high"], 7);
    assert_eq!(set["metrics"]["data_verified"], true);
    // More refills and drains of the per-CPU lists: more zone->lock sections.
    assert_ne!(base["metrics"]["elapsed_s"], set["metrics"]["elapsed_s"]);
}

#[test]
fn every_tunable_is_a_kernel_key_checked_against_its_range() {
    for t in KernelTunables::ALL {
        if t.high < u64::MAX {
            let e = run(&format!("{} = {}\n", t.key, t.high + 1)).unwrap_err();
            assert!(
                e.contains(&format!("kernel.{}", t.key)) && e.contains("out of range"),
                "{e}"
            );
        }
        run(&format!("{} = {}\n", t.key, t.default)).unwrap();
    }
    let e = run("pcp_batch = 63\npcp_high = 62\n").unwrap_err();
    assert!(
        e.contains("kernel.pcp_high") && e.contains("below kernel.pcp_batch"),
        "{e}"
    );
}
