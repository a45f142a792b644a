//! Each kernel path's system time splits into what its memory accesses took
//! (`sys_mem_cycles_by_function`) and its own instructions; the parts add
//! up to the CPUs' counters.

mod common;

#[test]
fn each_paths_memory_time_is_part_of_its_time_and_they_add_up() {
    let v = common::run_json(
        "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\n\
         [workload]\nkind = \"usemem\"\nnr_task = 8\nsize_per_task_mib = 2\n",
    );
    let m = &v["metrics"];
    let all = m["sys_cycles_by_function"].as_object().unwrap();
    let mem = m["sys_mem_cycles_by_function"].as_object().unwrap();
    assert_eq!(all.len(), mem.len());
    let mut sum = 0;
    for (k, c) in all {
        let x = mem[k].as_u64().unwrap();
        assert!(x <= c.as_u64().unwrap(), "{k}");
        sum += x;
    }
    assert_eq!(
        sum,
        m["counters"]["cpu"]["sys_mem_cycles"].as_u64().unwrap()
    );
    // Clearing huge pages waits on memory most of its time; the fault's own
    // path (a fixed cost, no access) not at all.
    let clear =
        mem["clear_page"].as_u64().unwrap() as f64 / all["clear_page"].as_u64().unwrap() as f64;
    assert!(clear > 0.5, "{clear}");
    assert_eq!(mem["handle_mm_fault"].as_u64(), Some(0));
}
