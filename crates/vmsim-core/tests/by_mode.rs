//! The caches' and TLBs' events split by the CPU's mode (`by_mode`, perf's
//! `:u` and `:k`): usemem's write loop is the user's, the huge-page clears
//! of its faults the kernel's, and the two add up to the totals.

use serde_json::Value;
use vmsim_core::api::{self, Format};

#[test]
fn usemem_stores_are_the_users_and_its_clears_the_kernels() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    let text = std::fs::read_to_string(format!("{root}tests/golden/usemem-clear.toml")).unwrap();
    let out = api::run_config(&text, Format::Toml, None, &mut |_, _| {}).unwrap();
    let m = serde_json::from_str::<Value>(&out).unwrap()["metrics"].clone();
    let get = |mode: &str, group: &str, k: &str| m["by_mode"][mode][group][k].as_u64().unwrap();
    // 8 tasks write 2 MiB each, one huge page: 32 768 lines a task.
    let lines = 8 * 32_768;
    assert_eq!(get("user", "cache", "l1d_stores"), lines);
    assert_eq!(get("kernel", "cache", "l1d_stores"), lines, "the clears");
    // The user's TLB walks one huge page a task; the kernel clears by
    // physical address and looks up no TLB.
    assert_eq!(get("user", "tlb", "misses"), 8);
    assert_eq!(get("kernel", "tlb", "lookups"), 0);
    for k in ["l1d_misses", "l2_misses", "llc_misses"] {
        let total = m[k].as_u64().unwrap();
        assert_eq!(
            get("user", "cache", k) + get("kernel", "cache", k),
            total,
            "{k}"
        );
        assert!(
            get("user", "cache", k) < total,
            "{k}: the kernel's share is not the user's"
        );
    }
}
