//! `pgfault_by_kind` splits every fault the handler took: its kinds add up
//! to `pgfault` on runs that take each kind (anonymous 4 KiB and THP,
//! copy-on-write, hugetlb, file, NUMA hinting and migration waits).

use serde_json::Value;
use vmsim_core::api::{self, Format};

fn metrics(path: &str, extra: &str) -> Value {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    let text = std::fs::read_to_string(format!("{root}{path}")).unwrap() + extra;
    let out = api::run_config(&text, Format::Toml, None, &mut |_, _| {})
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str::<Value>(&out).unwrap()["metrics"].clone()
}

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
