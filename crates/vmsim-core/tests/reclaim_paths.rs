//! Reclaim's system time by path: `reclaim_cycles_by_function` splits the
//! cycles of `shrink_node` rounds between direct reclaim and kswapd, and
//! for the paths only reclaim runs the two add up to
//! `sys_cycles_by_function`; the flush's IPI cycles split into sending and
//! waiting within the flush's own.

mod common;

use common::file_metrics as metrics;
use serde_json::Value;

fn get(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

#[test]
fn direct_and_kswapd_add_up_to_the_reclaim_only_paths() {
    for (path, extra) in [
        ("bench/ledger/reclaim.toml", ""),
        ("tests/golden/reclaim-locks.toml", ""),
    ] {
        let m = metrics(path, extra);
        let all = &m["sys_cycles_by_function"];
        let by = &m["reclaim_cycles_by_function"];
        let (direct, kswapd) = (&by["direct"], &by["kswapd"]);
        for f in [
            "isolate_lru_folios",
            "move_folios_to_lru",
            "shrink_active_list",
            "shrink_folio_list",
            "folio_referenced",
            "rmap_walk",
            "__remove_mapping",
        ] {
            assert_eq!(
                get(direct, f) + get(kswapd, f),
                get(all, f),
                "{path}: {f} is reclaim's alone"
            );
        }
        // Each reclaimer reclaimed, and its rounds took time.
        for (who, v, stolen) in [
            ("direct", direct, "pgsteal_direct"),
            ("kswapd", kswapd, "pgsteal_kswapd"),
        ] {
            let sum: u64 = v
                .as_object()
                .unwrap()
                .values()
                .filter_map(Value::as_u64)
                .sum();
            assert_eq!(
                sum > 0,
                get(&m, stolen) > 0,
                "{path}: {who} {sum} cycles, {} pages",
                get(&m, stolen)
            );
        }
        // Reclaim's paths take time of their own: the tree deletion, the
        // LRU sections and the young-bit walk.
        for f in [
            "__remove_mapping",
            "isolate_lru_folios",
            "folio_referenced",
            "filemap_add_folio",
        ] {
            assert!(get(all, f) > 0, "{path}: {f}");
        }
    }
}

#[test]
fn the_flushes_ipi_cycles_are_inside_the_flushes() {
    let m = metrics("bench/ledger/reclaim.toml", "");
    let cpu = &m["counters"]["cpu"];
    let send = cpu["ipi_send_cycles_by_cause"][0].as_u64().unwrap();
    let wait = cpu["ipi_wait_cycles_by_cause"][0].as_u64().unwrap();
    let flush = get(&m["sys_cycles_by_function"], "flush_tlb");
    assert!(send > 0 && wait > 0, "send {send} wait {wait}");
    // A per-page flush is this run's only shootdown sender.
    assert!(
        send + wait <= flush,
        "send {send} + wait {wait} > flush {flush}"
    );
    let sent = get(&m, "ipis_tlb_shootdown");
    assert!(sent > 0);
}
