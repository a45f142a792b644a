//! Page tables in simulated memory (`kernel.page_tables`,
//! kernel/pgtable.rs): every level of every address space is a frame taken
//! from the allocator when a fault first needs it and given back when its
//! range is unmapped; every TLB-miss walk reads its leaf entry through the
//! caches; the reclaim, migration and NUMA-scan paths touch the entries;
//! data is still verified, runs are deterministic, and without the option
//! nothing changes.

mod common;

use common::{run_json as run, strip_volatile as strip, windowed_same_on_two_threads};
use serde_json::Value;
use vmsim_core::api::{self, Format};

fn usemem(thp: &str, pt: &str) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\nseed = 1\n[kernel]\nthp = \"{thp}\"\n{pt}[workload]\nkind = \"usemem\"\nnr_task = 4\nsize_per_task_mib = 8\n"
    )
}

fn u(v: &Value, path: &[&str]) -> u64 {
    let mut x = &v["metrics"];
    for p in path {
        x = &x[*p];
    }
    x.as_u64().unwrap_or_else(|| panic!("{}", path.join(".")))
}

fn walker_loads(v: &Value) -> u64 {
    ["l1", "l2", "llc", "remote_cache", "dram"]
        .iter()
        .map(|k| u(v, &["page_walker_loads", k]))
        .sum()
}

#[test]
fn each_level_is_a_frame_from_first_fault_to_exit() {
    // Four processes, 8 MiB each in one VMA below one 1 GiB boundary: a
    // PGD, a PUD page, a PMD page and, with 4 KiB pages, four PTE pages each.
    for (thp, per_process) in [("never", 1 + 1 + 1 + 4), ("always", 1 + 1 + 1)] {
        let v = run(&usemem(thp, "page_tables = true\n"));
        assert_eq!(v["metrics"]["data_verified"], true, "{thp}");
        assert_eq!(u(&v, &["pgtable_alloc"]), 4 * per_process, "{thp}");
        assert_eq!(
            u(&v, &["nr_page_table_pages_max"]),
            4 * per_process,
            "{thp}"
        );
        // Every process exited: every table went back.
        assert_eq!(u(&v, &["pgtable_free"]), 4 * per_process, "{thp}");
        assert_eq!(u(&v, &["nr_page_table_pages"]), 0, "{thp}");
        assert_eq!(u(&v, &["pgtable_alloc_failed"]), 0, "{thp}");
        // Every walk found its table and read its leaf entry; the fault had
        // just written it, so it was in the L1.
        let walks = u(&v, &["tlb_walks"]);
        assert!(walks > 0);
        assert_eq!(walker_loads(&v), walks, "{thp}");
        assert_eq!(u(&v, &["page_walker_loads", "l1"]), walks, "{thp}");
    }
}

#[test]
fn off_is_the_model_without_page_tables_and_on_is_deterministic() {
    let none = run(&usemem("never", ""));
    let off = run(&usemem("never", "page_tables = false\n"));
    assert_eq!(strip(&none), strip(&off));
    assert_eq!(walker_loads(&off), 0);
    assert_eq!(u(&off, &["pgtable_alloc"]), 0);
    let on = run(&usemem("never", "page_tables = true\n"));
    let again = run(&usemem("never", "page_tables = true\n"));
    assert_eq!(strip(&on), strip(&again));
    // The tables take memory and their zeroing takes time.
    let sys = |v: &Value| v["metrics"]["sys_s"].as_f64().unwrap();
    assert!(sys(&on) > sys(&off));
}

#[test]
fn numa_balancing_walks_and_migrates_through_the_tables() {
    let v = run(&common::pmbench_numa("page_tables = true\n"));
    assert_eq!(v["metrics"]["data_verified"], true);
    assert!(u(&v, &["numa_pages_migrated"]) > 0);
    assert_eq!(walker_loads(&v), u(&v, &["tlb_walks"]));
    // Threads on other cores walk entries written elsewhere (faults,
    // migrations, the scanner's PROT_NONE changes): not all in their L1.
    assert!(walker_loads(&v) > u(&v, &["page_walker_loads", "l1"]));
    assert_eq!(u(&v, &["nr_page_table_pages"]), 0);
    assert_eq!(u(&v, &["pgtable_alloc"]), u(&v, &["pgtable_free"]));
    // The scanner's exchanges moved out of its fixed cost: the run differs.
    let off = run(&common::pmbench_numa(""));
    assert_ne!(v["metrics"]["sys_s"], off["metrics"]["sys_s"]);
}

#[test]
fn reclaim_unmaps_through_the_tables_and_a_windowed_run_is_the_same_on_two_threads() {
    let text = "machine = \"xeon-e5-2699v3-2s\"\nseed = 3\n[kernel]\npage_tables = true\n[workload]\nkind = \"lru-file-mmap-read\"\nnr_task = 24\nram_mib = 16\n";
    let v = run(text);
    assert_eq!(v["metrics"]["data_verified"], true);
    assert!(u(&v, &["pgsteal_kswapd"]) + u(&v, &["pgsteal_direct"]) > 0);
    assert_eq!(walker_loads(&v), u(&v, &["tlb_walks"]));
    assert_eq!(u(&v, &["nr_page_table_pages"]), 0);
    let one = windowed_same_on_two_threads(text);
    assert_eq!(one["metrics"]["data_verified"], true);
}

#[test]
fn a_value_that_is_not_a_boolean_is_refused_naming_the_key() {
    let err = api::run_config(
        &usemem("never", "page_tables = \"yes\"\n"),
        Format::Toml,
        None,
        &mut |_, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("kernel.page_tables"), "{err}");
}

/// The page walk's loads, level by level, on a machine whose STLB holds
/// page-directory entries (AMD) and on one whose paging-structure caches
/// are taken to hit (Intel): the entry lines are made up, the walker asks
/// for them by the size their level maps.
#[test]
fn a_walk_loads_its_pde_only_when_the_stlb_does_not_hold_it() {
    use vmsim_core::machine::tlb::PageSize;
    use vmsim_core::machine::Machine;
    const PTE: u64 = 1000;
    const PDE: u64 = 2000;
    let line = |level: PageSize| match level {
        PageSize::Size4K => Some(PTE),
        PageSize::Size2M => Some(PDE),
        PageSize::Size1G => None,
    };
    for (preset, pde_loads, l1_hits) in [("epyc-7j13-milan", 1, 4), ("xeon-e5-2699v3-2s", 0, 2)] {
        let p = common::preset(preset);
        let mut m = Machine::new(&p.machine_params().unwrap(), 64 << 20, 0).unwrap();
        // Two 4 KiB pages of one 2 MiB region, then one of the next region.
        let loads = |m: &Machine| m.cpus[0].stats.walker_loads.iter().sum::<u64>();
        assert_eq!(
            m.tlb_translate(0, 1, 0x20_0000, PageSize::Size4K, 5, line),
            None
        );
        assert_eq!(loads(&m), 1 + pde_loads, "{preset}: the first walk");
        assert_eq!(
            m.tlb_translate(0, 1, 0x20_1000, PageSize::Size4K, 6, line),
            None
        );
        assert_eq!(loads(&m), 2 + pde_loads, "{preset}: the PDE cached");
        assert_eq!(
            m.tlb_translate(0, 1, 0x40_0000, PageSize::Size4K, 7, line),
            None
        );
        assert_eq!(loads(&m), 3 + 2 * pde_loads, "{preset}: another 2 MiB");
        // A 2 MiB page's walk reads its own entry at that level, no other.
        assert_eq!(
            m.tlb_translate(0, 1, 0x80_0000, PageSize::Size2M, 512, line),
            None
        );
        assert_eq!(loads(&m), 4 + 2 * pde_loads, "{preset}: a 2 MiB walk");
        // The loads went through the caches: the first of each line missed,
        // the later ones hit the L1 (on Milan the third walk's PDE and leaf,
        // and the 2 MiB walk's entry, the PDE's line).
        assert_eq!(m.cpus[0].stats.walker_loads[0], l1_hits, "{preset}");
        assert_eq!(m.cpus[0].stats.tlb_walks, 4);
        // INVLPG drops the PDE with the translation: the next walk loads both.
        m.flush_tlb_local_page(0, 1, 0x20_1000);
        assert_eq!(
            m.tlb_translate(0, 1, 0x20_1000, PageSize::Size4K, 6, line),
            None
        );
        assert_eq!(loads(&m), 5 + 3 * pde_loads, "{preset}: after INVLPG");
    }
}
