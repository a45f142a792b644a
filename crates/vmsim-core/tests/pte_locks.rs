//! The split page-table locks (`kernel.pte_locks`, kernel/pgtable.rs): a
//! spinlock in each page-table page's `struct page`, taken by a fault's
//! install, by every PTE an rmap walk visits and once per table by the NUMA
//! scanner; counted in `lock_stat`; refused without the options it needs;
//! off changes nothing.

mod common;

use common::{run_json as run, strip_volatile as strip};
use serde_json::Value;
use vmsim_core::api::{self, Format};

const PTL: &str = "&(ptlock_ptr(page))->rlock";
const NEEDS: &str = "struct_pages = true\nspinlocks = \"queued\"\npage_tables = true\n";

fn usemem(thp: &str, kernel: &str) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\nseed = 1\n[kernel]\nthp = \"{thp}\"\n{kernel}[workload]\nkind = \"usemem\"\nnr_task = 4\nsize_per_task_mib = 8\n"
    )
}

fn u(v: &Value, path: &[&str]) -> u64 {
    let mut x = &v["metrics"];
    for p in path {
        x = &x[*p];
    }
    x.as_u64().unwrap_or_else(|| panic!("{}", path.join(".")))
}

fn ptl(v: &Value, what: &str) -> u64 {
    u(v, &["lock_stat", PTL, what])
}

#[test]
fn each_fault_takes_its_leaf_tables_lock_once() {
    // 4 KiB pages: one PTE-table lock per page faulted in; THP: the PMD
    // table's lock (split PMD lock) per huge page.
    for (thp, faults) in [("never", "pgfault_anon_4k"), ("always", "pgfault_thp")] {
        let v = run(&usemem(thp, &format!("{NEEDS}pte_locks = true\n")));
        assert_eq!(v["metrics"]["data_verified"], true, "{thp}");
        let n = u(&v, &[faults]);
        assert!(n > 0, "{thp}");
        assert_eq!(ptl(&v, "acquisitions"), n, "{thp}");
        // Separate processes: their tables are their own.
        assert_eq!(ptl(&v, "contentions"), 0, "{thp}");
        assert!(ptl(&v, "hold_cycles") > 0, "{thp}");
    }
}

#[test]
fn off_is_the_model_without_the_locks_and_on_is_deterministic() {
    let none = run(&usemem("never", NEEDS));
    let off = run(&usemem("never", &format!("{NEEDS}pte_locks = false\n")));
    assert_eq!(strip(&none), strip(&off));
    assert_eq!(ptl(&off, "acquisitions"), 0);
    let on = run(&usemem("never", &format!("{NEEDS}pte_locks = true\n")));
    let again = run(&usemem("never", &format!("{NEEDS}pte_locks = true\n")));
    assert_eq!(strip(&on), strip(&again));
    // The fault's estimate does not itemise the lock: it comes on top.
    let sys = |v: &Value| v["metrics"]["sys_s"].as_f64().unwrap();
    assert!(sys(&on) > sys(&off));
}

#[test]
fn reclaim_takes_the_lock_for_every_pte_its_walks_visit() {
    let text = format!("machine = \"xeon-e5-2699v3-2s\"\nseed = 3\n[kernel]\n{NEEDS}pte_locks = true\n[workload]\nkind = \"lru-file-mmap-read\"\nnr_task = 24\nram_mib = 16\n");
    let v = run(&text);
    assert_eq!(v["metrics"]["data_verified"], true);
    assert!(u(&v, &["pgsteal_kswapd"]) + u(&v, &["pgsteal_direct"]) > 0);
    // More than the faults take: the rmap walks take it too.
    assert!(ptl(&v, "acquisitions") > u(&v, &["pgfault"]));
    let off = run(&text.replace("pte_locks = true", "pte_locks = false"));
    assert!(ptl(&v, "acquisitions") > 0 && ptl(&off, "acquisitions") == 0);
    assert_ne!(v["metrics"]["sys_s"], off["metrics"]["sys_s"]);
}

#[test]
fn threads_of_one_process_meet_on_a_shared_table() {
    // pmbench's threads share their process's tables: faults, the NUMA
    // scanner (once per table) and migrations take the same locks.
    let v = run(&common::pmbench_numa(&format!("{NEEDS}pte_locks = true\n")));
    assert_eq!(v["metrics"]["data_verified"], true);
    assert!(u(&v, &["numa_pages_migrated"]) > 0);
    // Beyond the faults' installs and the migrations' unmap and remap: the
    // hint faults' restores and the scanner's tables.
    assert!(
        ptl(&v, "acquisitions") > u(&v, &["pgfault_anon_4k"]) + 2 * u(&v, &["numa_pages_migrated"])
    );
    assert!(ptl(&v, "contentions") > 0);
    assert!(ptl(&v, "wait_cycles") > 0);
}

#[test]
fn without_the_options_it_needs_it_is_refused_naming_them() {
    for kernel in [
        "pte_locks = true\n",
        "page_tables = true\nspinlocks = \"ticket\"\npte_locks = true\n",
        "struct_pages = true\nspinlocks = \"ticket\"\npte_locks = true\n",
        "struct_pages = true\npage_tables = true\npte_locks = true\n",
    ] {
        let err = api::run_config(&usemem("never", kernel), Format::Toml, None, &mut |_, _| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("kernel.pte_locks"), "{err}");
        assert!(err.contains("kernel.struct_pages"), "{err}");
        assert!(err.contains("kernel.page_tables"), "{err}");
    }
    let err = api::run_config(
        &usemem("never", &format!("{NEEDS}pte_locks = 1\n")),
        Format::Toml,
        None,
        &mut |_, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("kernel.pte_locks"), "{err}");
}
