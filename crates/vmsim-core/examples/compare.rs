//! Runs an experiment and prints the headline metrics (a development aid;
//! `vmsim compare` is the user-facing command).
use serde_json::Value;

const KEYS: &[&str] = &[
    "throughput_bytes_per_s",
    "fault_bytes_per_s",
    "elapsed_s",
    "user_s",
    "sys_s",
    "instructions",
    "ipc",
    "llc_miss_rate",
    "llc_misses",
    "l1d_misses",
    "l2_misses",
    "dram_bytes_read",
    "dram_bytes_written",
    "stall_cycles",
    "llc_demand_misses",
    "prefetch_l2_requests",
    "prefetch_llc_misses",
    "l2_writebacks",
    "dram_node0_bytes_read",
    "dram_node0_bytes_written",
    "dram_node0_queue_cycles",
    "dram_node1_bytes_read",
    "dram_node1_bytes_written",
    "dram_node1_queue_cycles",
    "sys_s_copy_page",
    "pgfault",
    "pgfault_thp",
    "pgfault_cow_thp",
    "pgfault_cow_4k",
    "hugetlb_faults",
    "thp_cow_copies",
    "thp_split_pmd",
    "cow_reuse",
    "pmbench_throughput_aps",
    "tlb_shootdown_interrupts",
    "numa_pte_updates",
    "numa_hint_faults",
    "numa_hint_faults_local",
    "numa_pages_migrated",
    "pgmigrate_fail",
    "numa_isolate_fail",
    "numa_migrate_node_full",
    "elapsed_s",
    "migration_entry_waits",
    "migrate_unmap_flushes",
    "task_numa_work_runs",
    "try_to_unmap_cycles_share",
    "lru_file_mmap_read_elapsed_s",
    "lru_file_mmap_read_time_range_s",
    "lru_file_mmap_read_time_stddev_s",
    "ipis_per_s",
    "nr_tlb_remote_flush",
    "data_verified",
];

fn table(v: &Value) {
    let b = &v["baseline"];
    // Variants in the experiment's order (the JSON object is sorted by name).
    let order: Vec<&str> = v["variant_order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    print!("{:28} {:>16}", "", v["baseline_name"].as_str().unwrap());
    for n in &order {
        print!(" {n:>26}");
    }
    println!();
    for k in KEYS.iter().filter(|k| !b[**k].is_null()) {
        print!("{k:28} {:>16}", b[*k].to_string());
        for n in &order {
            let r = &v["variants"][*n];
            let (x, y) = (b[*k].as_f64().unwrap_or(0.0), r[*k].as_f64().unwrap_or(0.0));
            print!(
                " {:>16} ({:+.1}%)",
                r[*k].to_string(),
                if x != 0.0 { (y - x) / x * 100.0 } else { 0.0 }
            );
        }
        println!();
    }
}

fn main() {
    let name = std::env::args()
        .nth(1)
        .expect("usage: [VMSIM_SEED=N] [VMSIM_THREADS=N] compare NAME [SCALE]");
    let scale = std::env::args().nth(2).map(|s| s.parse().unwrap());
    let seed = std::env::var("VMSIM_SEED").map_or(0, |s| s.parse().unwrap());
    let threads = std::env::var("VMSIM_THREADS").map_or_else(
        |_| vmsim_core::experiment::default_threads(),
        |s| s.parse().unwrap(),
    );
    let t = std::time::Instant::now();
    let out = vmsim_core::api::compare_with(&name, scale, seed, None, threads, &mut |_, _| {})
        .unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(2)
        });
    let v: Value = serde_json::from_str(&out).unwrap();
    if let Ok(path) = std::env::var("VMSIM_COMPARE_JSON") {
        std::fs::write(path, &out).unwrap();
    }
    match v.get("cases") {
        None => table(&v),
        Some(cases) => {
            for c in v["case_order"].as_array().unwrap() {
                let c = c.as_str().unwrap();
                println!("== {c} ({})", cases[c]["scale"].as_str().unwrap_or(""));
                table(&cases[c]);
            }
        }
    }
    eprintln!("host time {:.1} s", t.elapsed().as_secs_f64());
}
