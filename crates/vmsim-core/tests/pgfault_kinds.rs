//! `pgfault_by_kind` splits every fault the handler took: its kinds add up
//! to `pgfault` on runs that take each kind (anonymous 4 KiB and THP,
//! copy-on-write, hugetlb, file, NUMA hinting and migration waits).

mod common;

use common::file_metrics as metrics;

#[test]
fn the_kinds_add_up_to_pgfault() {
    let mut seen = std::collections::BTreeMap::new();
    for (path, extra) in [
        ("tests/golden/usemem-clear.toml", ""),
        ("tests/golden/string-milan.toml", ""),
        ("tests/golden/pmbench-numa.toml", ""),
        ("tests/golden/pmbench-numa-locks.toml", ""),
        ("tests/golden/reclaim-locks.toml", ""),
        ("bench/prof/copy.toml", ""),
    ] {
        let m = metrics(path, extra);
        let kinds = m["pgfault_by_kind"].as_object().unwrap();
        let sum: u64 = kinds.values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(sum, m["pgfault"].as_u64().unwrap(), "{path}: {kinds:?}");
        for (k, v) in kinds {
            *seen.entry(k.clone()).or_insert(0) += v.as_u64().unwrap();
        }
    }
    // Each kind these runs should take was taken.
    for k in ["anon_4k", "thp", "cow_thp", "hugetlb", "file", "numa_hint"] {
        assert!(seen[k] > 0, "{k}: {seen:?}");
    }
}
