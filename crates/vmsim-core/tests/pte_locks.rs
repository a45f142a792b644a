//! The split page-table locks (`kernel.pte_locks`, kernel/pgtable.rs): a
//! spinlock in each page-table page's `struct page`, taken by a fault's
//! install, by every PTE an rmap walk visits, once per table by the NUMA
//! scanner, by fork's copy (the child's table's and the parent's, once per
//! table), by a zap (munmap, exit, MADV_DONTNEED: once per table or huge
//! entry) and once per fault-around window; counted in `lock_stat`;
//! refused without the options it needs; off changes nothing.

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
    // table's lock (split PMD lock) per huge page. Each process's exit
    // then zaps its 8 MiB: once per PTE table (zap_pte_range) or huge PMD
    // (zap_huge_pmd), 4 a process either way.
    for (thp, faults) in [("never", "pgfault_anon_4k"), ("always", "pgfault_thp")] {
        let v = run(&usemem(thp, &format!("{NEEDS}pte_locks = true\n")));
        assert_eq!(v["metrics"]["data_verified"], true, "{thp}");
        let n = u(&v, &[faults]);
        assert!(n > 0, "{thp}");
        assert_eq!(ptl(&v, "acquisitions"), n + 4 * 4, "{thp}");
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

fn program(thp: &str, pte_locks: Option<bool>, body: &str) -> String {
    let locks = pte_locks.map_or(String::new(), |b| format!("pte_locks = {b}\n"));
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\nseed = 1\n[kernel]\nthp = \"{thp}\"\n{NEEDS}{locks}[workload]\nkind = \"program\"\n{body}"
    )
}

/// A process that maps 6 MiB (three PTE tables, or three huge PMDs),
/// writes all of it, then does `then`.
fn touch_then(then: &str) -> String {
    format!(
        r#"
[[workload.task]]
name = "p"
steps = [
  {{ op = "mmap", map = "heap", size_mib = 6 }},
  {{ op = "access", map = "heap", pattern = "sequential", write_ratio = 1.0, phase = "touch" }},
  {then}
]
"#
    )
}

/// A child that reads one word (its entry is there: no fault) and exits.
const FORK: &str = r#"{ op = "fork", count = 1, steps = [
    { op = "access", map = "heap", pattern = "sequential", count = 1, phase = "child" },
  ] },
  { op = "wait" },"#;

#[test]
fn fork_takes_the_childs_and_the_parents_lock_once_per_table() {
    // 4 KiB pages: 1536 faults (one lock each), fork's copy_pte_range of
    // three tables (the child's table's lock and the parent's: 2 x 3), then
    // the child's exit and the parent's (zap_pte_range: 3 each).
    let v = run(&program("never", Some(true), &touch_then(FORK)));
    assert_eq!(v["metrics"]["data_verified"], true);
    assert_eq!(u(&v, &["pgfault"]), 1536);
    assert_eq!(ptl(&v, "acquisitions"), 1536 + 2 * 3 + 3 + 3);
    assert_eq!(ptl(&v, "contentions"), 0);
    // THP: three huge faults, copy_huge_pmd's two PMD locks per huge PMD,
    // zap_huge_pmd's one per huge PMD at each exit.
    let v = run(&program("always", Some(true), &touch_then(FORK)));
    assert_eq!(v["metrics"]["data_verified"], true);
    assert_eq!(u(&v, &["pgfault"]), 3);
    assert_eq!(ptl(&v, "acquisitions"), 3 + 2 * 3 + 3 + 3);
    // Without the fork: the faults and one exit's zap.
    let alone = run(&program("never", Some(true), &touch_then("")));
    assert_eq!(ptl(&alone, "acquisitions"), 1536 + 3);
}

#[test]
fn fork_holds_both_locks_across_its_copy() {
    // The copy's 60 cycles an entry (COPY_ENTRY_CYCLES) are spent under
    // the locks: a table of 512 entries holds the child's lock at least
    // 512 x 60 cycles, more than a fault's install ever does.
    let v = run(&program("never", Some(true), &touch_then(FORK)));
    assert!(
        ptl(&v, "hold_max_cycles") >= 512 * 60,
        "{}",
        ptl(&v, "hold_max_cycles")
    );
    let alone = run(&program(
        "never",
        Some(true),
        &touch_then(r#"{ op = "munmap", map = "heap" },"#),
    ));
    assert!(ptl(&v, "hold_cycles") > ptl(&alone, "hold_cycles"));
}

#[test]
fn a_zap_takes_each_tables_lock_once() {
    // munmap of three full PTE tables: one lock each, and nothing left for
    // the exit; with THP one per huge PMD (zap_huge_pmd).
    let munmap = touch_then(r#"{ op = "munmap", map = "heap" },"#);
    let v = run(&program("never", Some(true), &munmap));
    assert_eq!(v["metrics"]["data_verified"], true);
    assert_eq!(ptl(&v, "acquisitions"), 1536 + 3);
    let v = run(&program("always", Some(true), &munmap));
    assert_eq!(ptl(&v, "acquisitions"), 3 + 3);
    // MADV_DONTNEED of the middle 2 MiB: its table once; the exit then
    // zaps the two tables left.
    let dontneed = touch_then(
        r#"{ op = "madvise", map = "heap", advice = "dontneed", offset_mib = 2, len_mib = 2 },"#,
    );
    let v = run(&program("never", Some(true), &dontneed));
    assert_eq!(v["metrics"]["data_verified"], true);
    assert_eq!(ptl(&v, "acquisitions"), 1536 + 1 + 2);
}

/// A task reading a 64 KiB file through a mapping, then unmapping it if `unmap`.
fn read_file(unmap: bool) -> String {
    let last = if unmap {
        "\n  { op = \"munmap\", map = \"m\" },"
    } else {
        ""
    };
    format!(
        r#"
[[workload.file]]
name = "f"
size_kib = 64
[[workload.task]]
name = "p"
steps = [
  {{ op = "mmap", map = "m", backing = "file", file = "f" }},
  {{ op = "access", map = "m", phase = "read" }},{last}
]
"#
    )
}

#[test]
fn a_fault_around_window_takes_the_lock_once() {
    // A 64 KiB file read through: the first fault misses, reads the file
    // around it and installs its page (one lock); the second maps the rest
    // of the 16-page window, 15 pages, under one lock; the exit zaps the
    // one table.
    let v = run(&program("never", Some(true), &read_file(false)));
    assert_eq!(v["metrics"]["data_verified"], true);
    assert_eq!(u(&v, &["pgfault"]), 2);
    assert_eq!(u(&v, &["counters", "filemap", "fault_around_mapped"]), 14);
    assert_eq!(ptl(&v, "acquisitions"), 1 + 1 + 1);
    assert_eq!(ptl(&v, "contentions"), 0);
}

#[test]
fn off_is_identical_on_the_fork_zap_and_fault_around_paths() {
    let file = read_file(true);
    let dontneed = touch_then(
        r#"{ op = "madvise", map = "heap", advice = "dontneed", offset_mib = 2, len_mib = 2 },"#,
    );
    for (thp, body) in [
        ("never", touch_then(FORK)),
        ("always", touch_then(FORK)),
        ("never", dontneed),
        ("never", file),
    ] {
        let none = run(&program(thp, None, &body));
        let off = run(&program(thp, Some(false), &body));
        assert_eq!(strip(&none), strip(&off), "{thp} {body}");
        assert_eq!(ptl(&off, "acquisitions"), 0);
        let on = run(&program(thp, Some(true), &body));
        assert_eq!(strip(&on), strip(&run(&program(thp, Some(true), &body))));
        assert_ne!(strip(&on), strip(&off));
    }
}
