//! The allocator's, the LRU's and the page cache's spinlocks with
//! `kernel.spinlocks` (kernel/locking/sections.rs): every section the
//! paths take is counted, readers and reclaimers meet on the locks and
//! spin, the data is still verified, runs are deterministic, and without
//! the option nothing changes.

use serde_json::Value;
use vmsim_core::api::{self, Format};

fn cfg(spinlocks: &str, flush: &str) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\nseed = 3\n[kernel]\ntlb_flush_on_unmap = \"{flush}\"\n{spinlocks}[workload]\nkind = \"lru-file-mmap-read\"\nnr_task = 48\nram_mib = 16\n"
    )
}

fn run(text: &str) -> Value {
    let out = api::run_config(text, Format::Toml, None, &mut |_, _| {}).unwrap();
    serde_json::from_str(&out).unwrap()
}

fn at<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    let mut x = &v["metrics"];
    for p in path {
        x = &x[*p];
    }
    x
}

fn u(v: &Value, path: &[&str]) -> u64 {
    at(v, path)
        .as_u64()
        .unwrap_or_else(|| panic!("{}", path.join(".")))
}

#[test]
fn readers_and_reclaim_take_the_locks_and_spin_where_they_meet() {
    for imp in ["queued", "ticket"] {
        let v = run(&cfg(&format!("spinlocks = \"{imp}\"\n"), "batched"));
        assert_eq!(at(&v, &["data_verified"]), true, "{imp}");
        let l = |class: &str, k: &str| u(&v, &["lock_stat", class, k]);
        // The page cache's lock: one insertion per folio added, one
        // removal per folio reclaimed, nothing else.
        let added = u(&v, &["counters", "filemap", "nr_page_cache_add"]);
        let stolen = u(&v, &["pgsteal_kswapd"]) + u(&v, &["pgsteal_direct"]);
        assert_eq!(
            l("&mapping->tree_lock", "acquisitions"),
            added + stolen,
            "{imp}"
        );
        // The LRU lock: two sections per reclaim round, one per pagevec of
        // 14 added folios (per CPU, so at most 14 x CPUs folios short).
        let lru = l("&zone->lru_lock", "acquisitions");
        assert!(lru >= added / 14 - 72, "{imp}: {lru} {added}");
        // The zone lock: a refill per 31 pages allocated on a CPU's list.
        let zone = l("&zone->lock", "acquisitions");
        assert!(zone >= added / 31, "{imp}: {zone}");
        assert!(
            zone <= added / 31 + 72 * 2 + stolen / 31 + 1,
            "{imp}: {zone}"
        );
        // 48 readers and the reclaimers meet on the LRU lock.
        assert!(l("&zone->lru_lock", "contentions") > 0, "{imp}");
        let waited: u64 = ["&zone->lock", "&zone->lru_lock", "&mapping->tree_lock"]
            .iter()
            .map(|c| l(c, "wait_cycles"))
            .sum();
        assert!(waited > 0);
        // Spinning is system time of its own kernel path, which also has
        // the locks' first atomics.
        let spin = u(&v, &["sys_cycles_by_function", "spin_lock"]);
        assert!(spin >= waited, "{imp}: {spin} < {waited}");
    }
}

#[test]
fn off_is_the_model_without_locks_and_on_is_deterministic() {
    let none = run(&cfg("", "per-page"));
    let off = run(&cfg("spinlocks = \"off\"\n", "per-page"));
    let strip = |v: &Value| {
        let mut v = v.clone();
        v["provenance"] = Value::Null;
        v["metrics"]["host_seconds"] = Value::Null;
        v
    };
    assert_eq!(strip(&none), strip(&off));
    for class in ["&zone->lock", "&zone->lru_lock", "&mapping->tree_lock"] {
        assert_eq!(u(&off, &["lock_stat", class, "acquisitions"]), 0);
    }
    assert_eq!(u(&off, &["sys_cycles_by_function", "spin_lock"]), 0);
    let text = format!(
        "{}[sim]\nwindow_cycles = \"auto\"\n",
        cfg("spinlocks = \"queued\"\nstruct_pages = true\n", "per-page")
    );
    let one = api::run_config_on(&text, Format::Toml, None, 1, &mut |_, _| {}).unwrap();
    let two = api::run_config_on(&text, Format::Toml, None, 2, &mut |_, _| {}).unwrap();
    let (one, two): (Value, Value) = (
        serde_json::from_str(&one).unwrap(),
        serde_json::from_str(&two).unwrap(),
    );
    assert_eq!(strip(&one)["metrics"], strip(&two)["metrics"]);
    assert_eq!(at(&one, &["data_verified"]), true);
}

#[test]
fn a_name_not_accepted_is_refused_naming_the_key() {
    let e = api::run_config(
        &cfg("spinlocks = \"mcs\"\n", "batched"),
        Format::Toml,
        None,
        &mut |_, _| {},
    )
    .unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("kernel.spinlocks") && s.contains("ticket") && s.contains("queued"),
        "{s}"
    );
}
