//! usemem's warm-up pass and the start-skew diagnostic on case-anon-w-seq:
//! what is timed and reported, that both regions are checked, and that the
//! options change nothing when off.

use serde_json::Value;
use vmsim_core::api::{self, Format};

fn cfg(nr_task: u64, mib: u64, extra: &str) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\n[workload]\nkind = \"usemem\"\nnr_task = {nr_task}\nsize_per_task_mib = {mib}\n{extra}"
    )
}

fn run(text: &str) -> Value {
    let out = api::run_config(text, Format::Toml, None, &mut |_, _| {}).unwrap();
    serde_json::from_str(&out).unwrap()
}

fn f(v: &Value, k: &str) -> f64 {
    v["metrics"][k].as_f64().unwrap_or_else(|| panic!("{k}"))
}

#[test]
fn warmup_times_and_reports_only_the_second_region() {
    let mib = 8u64;
    let cold = run(&cfg(1, mib, ""));
    let warm = run(&cfg(1, mib, "warmup = true\n"));
    assert_eq!(warm["metrics"]["data_verified"], true);
    // Both regions are faulted in: twice the huge pages.
    assert_eq!(
        warm["metrics"]["thp_fault_alloc"].as_u64().unwrap(),
        2 * cold["metrics"]["thp_fault_alloc"].as_u64().unwrap()
    );
    // One task: its rate is usemem's bytes (the timed region's plus the
    // allocation credit) over its own interval, which excludes the warm-up.
    let bytes = (mib << 20) as f64 * 9.0 / 8.0;
    let interval = f(&warm, "task_interval_max_s");
    let rate = f(&warm, "throughput_bytes_per_s");
    assert!((rate - bytes / interval).abs() / rate < 1e-9, "{rate}");
    assert!(
        interval < 0.6 * f(&warm, "elapsed_s"),
        "the warm-up is not timed: {interval} of {}",
        f(&warm, "elapsed_s")
    );
}

#[test]
fn warmup_off_is_usemem_and_a_stale_warm_region_is_caught() {
    let plain = run(&cfg(2, 4, ""));
    let off = run(&cfg(2, 4, "warmup = false\n"));
    assert_eq!(plain["metrics"], off["metrics"]);
    // The first huge page handed out is the warm-up region's: a sub-page left
    // uncleared there must fail the check like one in the timed region.
    let bad = run(&cfg(
        1,
        4,
        "warmup = true\n[sim.fault_injection]\nskip_clear_subpage = 3\n",
    ));
    assert_eq!(bad["metrics"]["data_verified"], false);
}

#[test]
fn start_skew_staggers_independent_tasks_and_keeps_their_data() {
    let zero = run(&cfg(4, 4, "child_start_skew_us = 0\n"));
    let plain = run(&cfg(4, 4, ""));
    assert_eq!(zero["metrics"], plain["metrics"], "skew 0 is usemem");
    let skewed = run(&cfg(4, 4, "child_start_skew_us = 500\n"));
    assert_eq!(skewed["metrics"]["data_verified"], true);
    // Task 3 starts 1.5 ms late and times itself from then: the run grows,
    // the slowest task's own interval does not grow with it.
    assert!(f(&skewed, "elapsed_s") > f(&zero, "elapsed_s") + 1.0e-3);
    assert!(f(&skewed, "task_interval_max_s") < f(&zero, "task_interval_max_s") + 1.0e-3);
}

#[test]
fn warmup_with_prealloc_copies_both_regions_and_times_the_second() {
    let text = |extra: &str| {
        format!(
            "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\nthp_cow = \"copy\"\n[workload]\nkind = \"usemem\"\nnr_task = 2\nsize_per_task_mib = 4\nprealloc = true\nprefault = true\n{extra}"
        )
    };
    let cold = run(&text(""));
    let warm = run(&text("warmup = true\n"));
    assert_eq!(warm["metrics"]["data_verified"], true);
    // Each child copies every huge page of both regions.
    assert_eq!(
        warm["metrics"]["thp_cow_copies"].as_u64().unwrap(),
        2 * cold["metrics"]["thp_cow_copies"].as_u64().unwrap()
    );
    // A child times itself from the end of its warm-up pass.
    assert!(f(&warm, "task_interval_max_s") < 0.7 * f(&warm, "elapsed_s"));
}

#[test]
fn the_after_go_clock_leaves_populate_and_forks_out_of_the_interval() {
    let text = |extra: &str| {
        format!(
            "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\nthp_cow = \"copy\"\n[workload]\nkind = \"usemem\"\nnr_task = 2\nsize_per_task_mib = 4\nprealloc = true\nprefault = true\n{extra}"
        )
    };
    let plain = run(&text(""));
    let start = run(&text("clock = \"start\"\n"));
    assert_eq!(
        plain["metrics"], start["metrics"],
        "\"start\" is the default"
    );
    let go = run(&text("clock = \"after-go\"\n"));
    assert_eq!(go["metrics"]["data_verified"], true);
    // The same simulation: only the interval's start moves, later by the
    // parent's populate of 4 MiB and its two forks.
    assert_eq!(go["metrics"]["elapsed_s"], plain["metrics"]["elapsed_s"]);
    assert_eq!(go["metrics"]["counters"], plain["metrics"]["counters"]);
    let (a, b) = (
        f(&go, "task_interval_max_s"),
        f(&plain, "task_interval_max_s"),
    );
    assert!(a < b, "{a} against {b}");
    assert!(f(&go, "throughput_bytes_per_s") > f(&plain, "throughput_bytes_per_s"));
    // Without prealloc the clock starts once the task's region is mapped;
    // an mmap without populate is cheap, but it is no longer timed.
    let w = |extra: &str| run(&cfg(2, 4, extra));
    let (t0, t1) = (w(""), w("clock = \"after-go\"\n"));
    assert!(f(&t1, "task_interval_max_s") < f(&t0, "task_interval_max_s"));
    assert_eq!(t1["metrics"]["counters"], t0["metrics"]["counters"]);
}

fn roi_u64(v: &Value, group: &str, k: &str) -> u64 {
    v["metrics"]["roi"][group][k]
        .as_u64()
        .unwrap_or_else(|| panic!("roi.{group}.{k}"))
}

#[test]
fn the_region_of_interest_is_the_timed_write_loops_alone() {
    // One task with a warm-up: the run clears both regions' huge pages, the
    // region of interest only the timed region's (its loop faults them in).
    // 2 x 32 MiB: more than the 45 MiB LLC, so the loop writes DRAM.
    let mib = 32u64;
    let warm = run(&cfg(1, mib, "warmup = true\n"));
    let pages = mib / 2;
    assert_eq!(
        warm["metrics"]["counters"]["vmstat"]["huge_page_clears"].as_u64(),
        Some(2 * pages)
    );
    assert_eq!(roi_u64(&warm, "vmstat", "huge_page_clears"), pages);
    // Its DRAM traffic is part of the run's.
    let all = &warm["metrics"]["counters"]["dram"];
    let written = roi_u64(&warm, "dram", "bytes_written");
    assert!(written > 0 && written <= all["bytes_written"].as_u64().unwrap());
    assert!(roi_u64(&warm, "dram", "bytes_read") <= all["bytes_read"].as_u64().unwrap());
    // With prealloc, every child's copy-on-write faults of the timed region.
    let cow = run(
        "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\nthp_cow = \"copy\"\n[workload]\nkind = \"usemem\"\nnr_task = 2\nsize_per_task_mib = 4\nprealloc = true\nprefault = true\nwarmup = true\n",
    );
    assert!(roi_u64(&cow, "vmstat", "thp_cow_copies") <= 2 * 2);
    assert!(roi_u64(&cow, "vmstat", "thp_cow_copies") >= 1);
}

#[test]
fn no_region_of_interest_when_a_task_finishes_before_the_last_starts() {
    // Task 1 starts 20 ms late, after task 0's 2 MiB are long written.
    let late = run(&cfg(2, 2, "child_start_skew_us = 20000\n"));
    assert_eq!(late["metrics"]["data_verified"], true);
    assert!(late["metrics"].get("roi").is_none());
    let together = run(&cfg(2, 2, ""));
    assert!(together["metrics"].get("roi").is_some());
}

fn u(v: &Value, k: &str) -> u64 {
    v["metrics"][k].as_u64().unwrap_or_else(|| panic!("{k}"))
}

/// A VMA ends where its length does: a huge page goes only where a whole
/// aligned 2 MiB lies inside it (`transhuge_vma_suitable()`), and the rest
/// is faulted in 4 KiB pages, so a task never clears memory it did not map.
#[test]
fn a_region_short_of_a_huge_page_is_faulted_in_small_pages() {
    for (mib, huge, small) in [(1u64, 0u64, 256u64), (3, 1, 256), (4, 2, 0)] {
        let v = run(&cfg(1, mib, ""));
        assert_eq!(v["metrics"]["data_verified"], true, "{mib} MiB");
        assert_eq!(u(&v, "pgfault_thp"), huge, "{mib} MiB");
        assert_eq!(u(&v, "pgfault_anon_4k"), small, "{mib} MiB");
        assert_eq!(u(&v, "subpage_clears"), mib * 256, "{mib} MiB");
        // The output says so where no huge page fits.
        let scale = v["scale"].as_str().unwrap();
        assert_eq!(
            scale.contains("faulted in 4 KiB pages"),
            huge == 0,
            "{scale}"
        );
    }
}

/// Copy on write of such a region, after a fork: the huge page is copied
/// whole and the 4 KiB tail page by page, and the child's data checks out.
#[test]
fn copy_on_write_of_a_region_with_a_small_page_tail() {
    let v = run(&cfg(1, 3, "prealloc = true\nprefault = true\n")
        .replace("thp = \"always\"", "thp = \"always\"\nthp_cow = \"copy\""));
    assert_eq!(v["metrics"]["data_verified"], true);
    assert_eq!(u(&v, "thp_cow_copies"), 1);
    assert_eq!(u(&v, "pgfault_cow_4k"), 256);
    assert_eq!(u(&v, "subpage_copies"), 768);
}
