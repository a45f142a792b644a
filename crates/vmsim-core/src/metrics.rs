//! The report of a run: the figures kernel developers quote (perf stat,
//! /proc/vmstat, usemem's own rate), with per-CPU breakdowns.
//! Names are stable snake_case keys of the JSON output.

use crate::kernel::VmStat;
use crate::machine::{CpuStats, Machine};
use crate::sim::Sim;
use serde_json::{json, Map, Value};

/// Adds a key to the report: each section below adds its own.
type Put<'a> = dyn FnMut(&str, Value) + 'a;

pub fn report(sim: &Sim) -> Value {
    let m = &sim.machine;
    let hz = m.freq_mhz as f64 * 1e6;
    let tot = totals(m);
    let v = &sim.kernel.vmstat;
    let mut o = Map::new();
    let mut put = |k: &str, v: Value| {
        o.insert(k.to_string(), v);
    };
    timing(&mut put, sim, hz);
    core_counters(&mut put, &tot, hz);
    vmstat(&mut put, v);
    if sim.kernel.cfg.numa_balancing {
        // Any workload run with NUMA balancing (pmbench reports them always).
        for (k, x) in sim.numa_balancing_counters() {
            put(k, json!(x));
        }
    }
    ipis(&mut put, m);
    memory_traffic(&mut put, m);
    put("stall_cycles", json!(tot.stall_cycles));
    put("tlb_walks", json!(tot.tlb_walks));
    page_tables(&mut put, sim);
    put("remote_cache_hits", json!(tot.cache.remote_cache_hits));
    put("back_invalidations", json!(tot.cache.back_invalidations));
    put("subpage_clears", json!(v.subpage_clears));
    put("context_switches", json!(sim.nr_context_switches()));
    put(
        "voluntary_context_switches",
        json!(sim.sched.stats.nr_voluntary_switches),
    );
    put(
        "involuntary_context_switches",
        json!(sim.sched.stats.nr_involuntary_switches),
    );
    put("lock_stat", sim.kernel.locks.stats.to_json());
    put("hugetlb_faults", json!(v.hugetlb_faults));
    put("subpage_copies", json!(v.subpage_copies));
    put(
        "simulated_line_accesses",
        json!(tot.cache.l1d_loads + tot.cache.l1d_stores + tot.cache.nt_stores),
    );
    kernel_paths(&mut put, sim, hz);
    put("by_mode", by_mode(m));
    let access = task_accesses(sim);
    if !access.is_empty() {
        put("task_accesses", Value::Array(access));
    }
    if let Some(events) = sim.kernel.thp_timeline.sorted() {
        // [µs since the start, task, event, huge page's index in its VMA].
        let rows: Vec<Value> = events
            .iter()
            .map(|e| json!([e.cycle as f64 / hz * 1e6, e.pid, e.event.name(), e.index]))
            .collect();
        put("thp_timeline", Value::Array(rows));
    }
    // Every counter of every component, and their change over the region of interest.
    let all = sim.counters();
    if let Some((begin, end)) = &sim.roi {
        put("roi", end.as_ref().unwrap_or(&all).sub(begin).0);
    }
    put("counters", all.0);
    let (verified, errors) = data_check(sim);
    put("data_verified", json!(verified));
    put("data_errors", Value::Array(errors));
    put("per_cpu", Value::Array(per_cpu(m)));
    let notes = sim.kernel.policy_notes();
    if !notes.is_empty() {
        put("policy_notes", json!(notes));
    }
    if sim.window_stats.windows > 0 {
        put("windows", json!(sim.window_stats));
    }
    Value::Object(o)
}

/// The CPUs' counters summed, of those fields the report shows.
fn totals(m: &Machine) -> CpuStats {
    let mut tot = CpuStats::default();
    for c in &m.cpus {
        let s = &c.stats;
        tot.user_cycles += s.user_cycles;
        tot.sys_cycles += s.sys_cycles;
        tot.user_instructions += s.user_instructions;
        tot.sys_instructions += s.sys_instructions;
        tot.cache.l1d_loads += s.cache.l1d_loads;
        tot.cache.l1d_stores += s.cache.l1d_stores;
        tot.cache.l1d_misses += s.cache.l1d_misses;
        tot.cache.l2_misses += s.cache.l2_misses;
        tot.cache.llc_references += s.cache.llc_references;
        tot.cache.llc_misses += s.cache.llc_misses;
        tot.cache.llc_demand_references += s.cache.llc_demand_references;
        tot.cache.llc_demand_misses += s.cache.llc_demand_misses;
        tot.cache.pf_l1_requests += s.cache.pf_l1_requests;
        tot.cache.pf_l1_l2_misses += s.cache.pf_l1_l2_misses;
        tot.cache.pf_l2_requests += s.cache.pf_l2_requests;
        tot.cache.pf_l2_misses += s.cache.pf_l2_misses;
        tot.cache.pf_llc_misses += s.cache.pf_llc_misses;
        tot.cache.l2_writebacks += s.cache.l2_writebacks;
        tot.cache.remote_cache_hits += s.cache.remote_cache_hits;
        tot.cache.dram_reads += s.cache.dram_reads;
        tot.cache.nt_stores += s.cache.nt_stores;
        tot.cache.back_invalidations += s.cache.back_invalidations;
        tot.tlb_walks += s.tlb_walks;
        tot.stall_cycles += s.stall_cycles;
    }
    tot
}

/// The workload's rate and how long the run and its timed intervals took.
fn timing(put: &mut Put, sim: &Sim, hz: f64) {
    let mut throughput = 0.0;
    let mut elapsed: u64 = 0;
    let mut finish = 0;
    // The timed intervals' spread: a sum of per-task rates rewards unequal intervals.
    let (mut first_start, mut last_end) = (u64::MAX, 0u64);
    let (mut shortest, mut longest) = (u64::MAX, 0u64);
    for (i, t) in sim.tasks.iter().enumerate() {
        let (s, e) = (t.start.unwrap_or(0), t.end.unwrap_or(0));
        if e > s {
            throughput += sim.reported_bytes(i) as f64 / ((e - s) as f64 / hz);
            first_start = first_start.min(s);
            last_end = last_end.max(e);
            shortest = shortest.min(e - s);
            longest = longest.max(e - s);
        }
        elapsed = elapsed.max(e);
        finish = finish.max(t.exit.unwrap_or(0));
    }
    put("throughput_bytes_per_s", json!(throughput.round()));
    put("elapsed_s", json!(finish.max(elapsed) as f64 / hz));
    let timed = last_end > 0;
    let secs = |c: u64| json!(if timed { c as f64 / hz } else { 0.0 });
    put("task_interval_min_s", secs(shortest));
    put("task_interval_max_s", secs(longest));
    put("timed_span_s", secs(last_end.saturating_sub(first_start)));
}

/// perf stat's figures for the whole machine: time, instructions and the
/// caches' events.
fn core_counters(put: &mut Put, tot: &CpuStats, hz: f64) {
    let instructions = tot.user_instructions + tot.sys_instructions;
    let cycles = tot.user_cycles + tot.sys_cycles;
    put("user_s", json!(tot.user_cycles as f64 / hz));
    put("sys_s", json!(tot.sys_cycles as f64 / hz));
    put("instructions", json!(instructions));
    put("cycles", json!(cycles));
    put(
        "ipc",
        json!(if cycles > 0 {
            instructions as f64 / cycles as f64
        } else {
            0.0
        }),
    );
    put("llc_references", json!(tot.cache.llc_references));
    put("llc_misses", json!(tot.cache.llc_misses));
    put(
        "llc_miss_rate",
        json!(if tot.cache.llc_references > 0 {
            tot.cache.llc_misses as f64 / tot.cache.llc_references as f64
        } else {
            0.0
        }),
    );
    put(
        "llc_demand_references",
        json!(tot.cache.llc_demand_references),
    );
    put("llc_demand_misses", json!(tot.cache.llc_demand_misses));
    put("prefetch_l1_requests", json!(tot.cache.pf_l1_requests));
    put("prefetch_l1_l2_misses", json!(tot.cache.pf_l1_l2_misses));
    put("prefetch_l2_requests", json!(tot.cache.pf_l2_requests));
    put("prefetch_l2_misses", json!(tot.cache.pf_l2_misses));
    put("prefetch_llc_misses", json!(tot.cache.pf_llc_misses));
    put("l1d_loads", json!(tot.cache.l1d_loads));
    put("l1d_stores", json!(tot.cache.l1d_stores));
    put("l1d_misses", json!(tot.cache.l1d_misses));
    put("l2_misses", json!(tot.cache.l2_misses));
    put("l2_writebacks", json!(tot.cache.l2_writebacks));
}

/// /proc/vmstat's fault, allocation, THP and TLB-flush counters.
fn vmstat(put: &mut Put, v: &VmStat) {
    put("pgfault", json!(v.pgfault));
    put("pgfault_anon_4k", json!(v.pgfault_anon_4k));
    put("pgfault_thp", json!(v.pgfault_thp));
    put("pgfault_cow_4k", json!(v.pgfault_cow_4k));
    put("pgfault_cow_thp", json!(v.pgfault_cow_thp));
    put(
        "pgfault_by_kind",
        json!({"anon_4k": v.pgfault_anon_4k, "thp": v.pgfault_thp, "cow_4k": v.pgfault_cow_4k, "cow_thp": v.pgfault_cow_thp,
            "hugetlb": v.hugetlb_faults, "file": v.pgfault_file_vma, "numa_hint": v.numa_hint_faults,
            "migration_wait": v.pgfault_migration_wait, "spurious": v.pgfault_spurious, "failed": v.pgfault_failed}),
    );
    put("pgalloc", json!(v.pgalloc));
    put("pgfree", json!(v.pgfree));
    put("thp_cow_copies", json!(v.thp_cow_copies));
    put("cow_reuse", json!(v.cow_reuse));
    put("thp_split_pmd", json!(v.thp_split_pmd));
    put("thp_fault_alloc", json!(v.thp_fault_alloc));
    put("thp_fault_fallback", json!(v.thp_fault_fallback));
    put("nr_tlb_remote_flush", json!(v.nr_tlb_remote_flush));
    put(
        "nr_tlb_remote_flush_received",
        json!(v.nr_tlb_remote_flush_received),
    );
    put("nr_tlb_local_flush_all", json!(v.nr_tlb_local_flush_all));
}

fn ipis(put: &mut Put, m: &Machine) {
    // IPIs by cause, as /proc/interrupts' TLB, RES and CAL lines count them on the targets.
    for c in crate::machine::ipi::IpiCause::ALL {
        let n: u64 = m
            .cpus
            .iter()
            .map(|x| x.stats.ipis_received_by_cause[c as usize])
            .sum();
        put(&format!("ipis_{}", c.name()), json!(n));
    }
    put(
        "ipis_sent",
        json!(m.cpus.iter().map(|c| c.stats.ipis_sent).sum::<u64>()),
    );
}

/// Memory's reads, writes and queueing, the cores' fill paths and the SMT
/// siblings' wait for issue slots.
fn memory_traffic(put: &mut Put, m: &Machine) {
    let (mut rd, mut wr, mut queue) = (0, 0, 0);
    for d in &m.hier.dram {
        rd += d.stats.bytes_read;
        wr += d.stats.bytes_written;
        queue += d.stats.queue_cycles;
    }
    put(
        "dram_remote_reads",
        json!(m
            .cpus
            .iter()
            .map(|c| c.stats.cache.dram_remote_reads)
            .sum::<u64>()),
    );
    put("dram_bytes_read", json!(rd));
    put("dram_bytes_written", json!(wr));
    put("dram_queue_cycles", json!(queue));
    // The cores' fill paths: where a stream of L2 or LLC hits was bound by them.
    let (f1, f2) = m
        .cores
        .iter()
        .map(|c| c.fill_queue_cycles())
        .fold((0u64, 0u64), |(a, b), (x, y)| (a + x, b + y));
    put("fill_l1_queue_cycles", json!(f1));
    put("fill_l2_queue_cycles", json!(f2));
    // Per NUMA node, so that traffic and queueing can be placed (flat keys for compare tables).
    for (n, d) in m.hier.dram.iter().enumerate() {
        put(
            &format!("dram_node{n}_bytes_read"),
            json!(d.stats.bytes_read),
        );
        put(
            &format!("dram_node{n}_bytes_written"),
            json!(d.stats.bytes_written),
        );
        put(
            &format!("dram_node{n}_queue_cycles"),
            json!(d.stats.queue_cycles),
        );
    }
    put(
        "smt_issue_wait_cycles",
        json!(m
            .cpus
            .iter()
            .map(|c| c.stats.smt_issue_wait_cycles)
            .sum::<u64>()),
    );
}

/// kernel.page_tables: where the walker's entry loads were served, and the tables' memory.
fn page_tables(put: &mut Put, sim: &Sim) {
    let mut wl = [0u64; 5];
    for c in &sim.machine.cpus {
        for (t, x) in wl.iter_mut().zip(c.stats.walker_loads) {
            *t += x;
        }
    }
    put(
        "page_walker_loads",
        json!({"l1": wl[0], "l2": wl[1], "llc": wl[2], "remote_cache": wl[3], "dram": wl[4]}),
    );
    let pt = &sim.kernel.pgtable;
    put("nr_page_table_pages", json!(pt.nr_page_table_pages));
    put("nr_page_table_pages_max", json!(pt.nr_page_table_pages_max));
    put("pgtable_alloc", json!(pt.pgtable_alloc));
    put("pgtable_free", json!(pt.pgtable_free));
    put("pgtable_alloc_failed", json!(pt.pgtable_alloc_failed));
}

/// System time by kernel path; the parts add up to sys_s.
fn kernel_paths(put: &mut Put, sim: &Sim, hz: f64) {
    let by_fn: Map<String, Value> = crate::kernel::KFn::ALL
        .iter()
        .map(|f| (f.name().to_string(), json!(sim.kfn_cycles[*f as usize])))
        .collect();
    for f in crate::kernel::KFn::ALL {
        put(
            &format!("sys_s_{}", f.name()),
            json!(sim.kfn_cycles[f as usize] as f64 / hz),
        );
    }
    put("sys_cycles_by_function", Value::Object(by_fn));
    // Of each path's system cycles, those its memory accesses took beyond
    // their issue: the rest is its own instructions (spinning on a lock is
    // a path of its own, spin_lock).
    let mem_by_fn: Map<String, Value> = crate::kernel::KFn::ALL
        .iter()
        .map(|f| (f.name().to_string(), json!(sim.kfn_mem_cycles[*f as usize])))
        .collect();
    put("sys_mem_cycles_by_function", Value::Object(mem_by_fn));
    if let Some(by) = sim.kernel.reclaim_cycles_by_function() {
        put("reclaim_cycles_by_function", by);
    }
}

/// The caches' and TLBs' events split by the mode the CPU was in (perf's
/// `:u` and `:k`), summed over CPUs.
fn by_mode(m: &Machine) -> Value {
    use crate::machine::mode_stats::ModeCounters;
    let (mut kernel, mut user) = (ModeCounters::default(), ModeCounters::default());
    let zero = ModeCounters::default();
    for c in &m.cpus {
        let (k, u) = c.by_mode();
        kernel.add_since(&k, &zero);
        user.add_since(&u, &zero);
    }
    json!({"user": user, "kernel": kernel})
}

/// The access engine's per-task counts and latency histograms (tasks that made `Access` runs).
fn task_accesses(sim: &Sim) -> Vec<Value> {
    sim.tasks
        .iter()
        .filter(|t| t.access.reads + t.access.writes > 0)
        .map(|t| {
            let h = &t.access.latency;
            let last = h.buckets.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
            json!({"task": t.pid, "reads": t.access.reads, "writes": t.access.writes,
                   "latency_p50_cycles": h.percentile(50.0), "latency_p99_cycles": h.percentile(99.0),
                   "latency_log2_hist": &h.buckets[..last]})
        })
        .collect()
}

/// Whether the user tasks' data checked out, and each task's first bad page.
fn data_check(sim: &Sim) -> (bool, Vec<Value>) {
    // A task that made no access (a parent that only forks and waits) has
    // no data of its own to check; every other one must have checked some.
    // A run in which no task accessed memory (a program that only sleeps)
    // has nothing to lose.
    let accessed = |t: &crate::sim::Task| t.bytes > 0 || t.access.reads + t.access.writes > 0;
    let users = || sim.tasks.iter().filter(|t| !t.is_kthread());
    let verified = (users().any(|t| t.pages_checked > 0) || !users().any(accessed))
        && users().all(|t| (t.pages_checked > 0 || !accessed(t)) && t.bad_pages == 0);
    let errors: Vec<Value> = sim
        .tasks
        .iter()
        .filter_map(|t| {
            t.first_bad.as_ref().map(|e| {
                json!(format!(
                    "task {}: {} bad page(s); first: {}",
                    t.pid, t.bad_pages, e
                ))
            })
        })
        .collect();
    (verified, errors)
}

/// Each CPU that ran anything, on its own.
fn per_cpu(m: &Machine) -> Vec<Value> {
    let mut per_cpu = Vec::new();
    for (i, c) in m.cpus.iter().enumerate() {
        let s = &c.stats;
        let cycles = s.user_cycles + s.sys_cycles;
        if cycles == 0 {
            continue;
        }
        per_cpu.push(json!({
            "cpu": i,
            "cycles": cycles,
            "user_cycles": s.user_cycles,
            "sys_cycles": s.sys_cycles,
            "instructions": s.user_instructions + s.sys_instructions,
            "l1d_misses": s.cache.l1d_misses,
            "l2_misses": s.cache.l2_misses,
            "llc_references": s.cache.llc_references,
            "llc_misses": s.cache.llc_misses,
            "dram_reads": s.cache.dram_reads,
            "tlb_walks": s.tlb_walks,
            "stall_cycles": s.stall_cycles,
            "ipis_received": s.ipis_received,
        }));
    }
    per_cpu
}
