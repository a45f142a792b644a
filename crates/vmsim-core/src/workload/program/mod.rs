//! The workload language (`workload.kind = "program"`, docs/workloads.md):
//! a user's own access program of processes and threads, mappings and
//! access phases, written in TOML (or the same structure from Python) and
//! run under the kernel model like a built-in workload.
//!
//! `spec` holds the program as configured (checked when the config is
//! read: every mapping named exists where it is used, no access leaves its
//! mapping, loops leave the mappings as they found them); `interp` compiles
//! it to a flat list of instructions and runs one task's copy of it as a
//! `Program`. Every mapping a task made, or got its own copy of through
//! fork, is checked against what was written before it is unmapped and when
//! the task exits; no key switches this off.

pub mod interp;
pub mod spec;

pub use spec::{AccessCount, Backing, Benchmark, Mark, ProgramConfig, Step, TaskSpec};

use super::base::{Workload, MIB};
use crate::error::Error;
use crate::machine::topology::Topology;
use crate::sim::Sim;
use serde_json::{json, Value};
use std::sync::Arc;

/// A program as a configured workload.
pub struct ProgramWorkload<'a>(pub &'a ProgramConfig);

impl Workload for ProgramWorkload<'_> {
    fn node_bytes(&self, topo: &Topology, _nr_cpus: usize) -> u64 {
        // Every mapping of every task instance, and a copy of each for every
        // forked child, could land on any node (first touch follows the
        // CPU, and the scheduler may move tasks): each node gets room for all.
        let need = self.0.peak_bytes();
        super::base::with_headroom(&vec![need; topo.nr_nodes()])
    }

    fn spawn(&self, sim: &mut Sim, seed: u64) -> Result<(), Error> {
        let p = self.0;
        if !p.files.is_empty() {
            // The page cache's reclaim runs in kswapd, as on any system.
            for n in 0..sim.machine.topo.nr_nodes() {
                sim.kswapd_run(n);
            }
        }
        let inos: Vec<usize> = p
            .files
            .iter()
            .map(|f| sim.kernel.create_sparse_file(f.size))
            .collect();
        let nr_cpus = sim.machine.topo.nr_cpus();
        // hugetlb pools: each instance's pages on the node of the CPU it starts on.
        let mut pools: std::collections::BTreeMap<(usize, u32), u64> = Default::default();
        let placements = p.placements(nr_cpus)?;
        for (ti, task) in p.tasks.iter().enumerate() {
            for k in 0..task.count {
                let (cpu, _) = &placements[ti][k as usize];
                for (shift, pages) in task.hugetlb_pages() {
                    *pools
                        .entry((sim.machine.topo.node_of(*cpu), shift))
                        .or_default() += pages;
                }
            }
        }
        for (&(node, shift), &want) in &pools {
            let got = sim.kernel.hugetlb_reserve(node, shift, want);
            if got < want {
                return Err(Error::Config {
                    key: "sim.node_memory_mib".into(),
                    message: format!(
                        "node {node} has room for only {got} of the {want} huge pages of {} the program's hugetlb mappings need; raise it or set 0 (sized from the workload)",
                        if shift == 30 { "1 GiB" } else { "2 MiB" }
                    ),
                });
            }
        }
        let code = Arc::new(interp::Code::compile(p, inos));
        // Progress of loops by duration: the simulated time they take (used
        // when the program's accesses are not counted ahead).
        let ns = p
            .tasks
            .iter()
            .map(|t| spec::work(&t.steps, 1).1)
            .max()
            .unwrap_or(0);
        sim.progress_horizon = ns.saturating_mul(sim.machine.freq_mhz) / 1000;
        let base = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for (ti, task) in p.tasks.iter().enumerate() {
            for k in 0..task.count {
                let (cpu, mask) = &placements[ti][k as usize];
                let s = base ^ ((ti as u64) << 32 | k).wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ 1;
                let prog = Box::new(interp::Interp::new(code.clone(), ti, s));
                match mask {
                    Some(m) => sim.spawn_bound(prog, *cpu, *m),
                    None => sim.spawn(prog, *cpu),
                };
            }
        }
        Ok(())
    }

    fn scale_text(&self) -> String {
        let p = self.0;
        if let Some(b) = &p.benchmark {
            let size = if b.map_bytes % MIB == 0 {
                format!("{} MiB", b.map_bytes / MIB)
            } else {
                format!("{} KiB", b.map_bytes / 1024)
            };
            return format!(
                "{} {}: {} {}(es), each looping over {size} (mmap, touch each 4 KiB page, munmap); sizes and duration x the scale",
                b.suite, b.test, b.nr_task, b.mode,
            );
        }
        let instances: u64 = p.tasks.iter().map(|t| t.count).sum();
        format!(
            "program: {} task(s) ({} instance(s)), {} MiB mapped at most at once, {} phase(s); sizes, counts and durations x the scale",
            p.tasks.len(),
            instances,
            p.peak_bytes() / MIB,
            p.phases.len()
        )
    }

    /// Each phase's figures as a benchmark prints them: accesses and bytes,
    /// the phase's wall time (first begin to last end over its runs), its
    /// rates, loop iterations, and access latency percentiles.
    fn report(&self, sim: &Sim, r: &mut Value) {
        let hz = sim.machine.freq_mhz as f64 * 1e6;
        let ns_per_cycle = 1000.0 / sim.machine.freq_mhz as f64;
        for (id, name) in self.0.phases.iter().enumerate() {
            let s = sim.phases.get(id).cloned().unwrap_or_default();
            let wall = s.first_begin.map_or(0, |b| s.last_end.saturating_sub(b));
            let secs = wall as f64 / hz;
            let rate = |x: u64| if wall > 0 { x as f64 / secs } else { 0.0 };
            let accesses = s.reads + s.writes;
            let lat = |p: f64| {
                if s.latency.count() > 0 {
                    s.latency.percentile(p) as f64 * ns_per_cycle
                } else {
                    0.0
                }
            };
            let k = |m: &str| format!("phase.{name}.{m}");
            r[k("runs")] = json!(s.runs);
            r[k("accesses")] = json!(accesses);
            r[k("reads")] = json!(s.reads);
            r[k("writes")] = json!(s.writes);
            r[k("bytes")] = json!(s.bytes);
            r[k("iterations")] = json!(s.iterations);
            r[k("elapsed_s")] = json!(secs);
            r[k("task_elapsed_s")] = json!(if s.runs > 0 {
                s.task_cycles as f64 / hz / s.runs as f64
            } else {
                0.0
            });
            r[k("throughput_bytes_per_s")] = json!(rate(s.bytes));
            r[k("accesses_per_s")] = json!(rate(accesses));
            r[k("iterations_per_s")] = json!(rate(s.iterations));
            r[k("latency_p50_ns")] = json!(lat(50.0));
            r[k("latency_p99_ns")] = json!(lat(99.0));
        }
        // What the tasks accessed in their timed intervals, against the
        // machine's LLCs: a few times their size or less, and the caches'
        // state at the clock's start (cold, or what a warm-up left) weighs
        // on the rates.
        let timed: u64 = (0..sim.tasks.len()).map(|t| sim.reported_bytes(t)).sum();
        r["timed_bytes"] = json!(timed);
        r["timed_bytes_per_llc"] = json!(timed as f64 / sim.machine.hier.llc_bytes() as f64);
        if let Some(b) = &self.0.benchmark {
            // will-it-scale counts one iteration per page touched, and reports
            // the rate per task and for all (LKP: per_process_ops or
            // per_thread_ops, and workload).
            let ops = r["phase.testcase.accesses"].as_u64().unwrap_or(0) as f64;
            let secs = r["phase.loop.elapsed_s"].as_f64().unwrap_or(0.0);
            let total = if secs > 0.0 { ops / secs } else { 0.0 };
            r["will_it_scale_workload"] = json!(total);
            let per_task = if b.mode == "thread" {
                "will_it_scale_per_thread_ops"
            } else {
                "will_it_scale_per_process_ops"
            };
            r[per_task] = json!(total / b.nr_task as f64);
        }
    }
}
