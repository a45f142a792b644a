//! Building and running a simulation from a run config, and comparing an
//! experiment's baseline with its variants.

use crate::api::Error;
use crate::config::experiment::{Arm, Experiment};
use crate::config::{RunConfig, WorkloadConfig, MIB};
use crate::kernel::sched::Sim;
use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::workload::pftest::PfTest;
use crate::workload::usemem::Usemem;
use serde_json::{json, Value};

/// Memory per node: what the tasks placed on the node's CPUs map, with headroom.
/// Simulated RAM a run may have in all (host cost: about 1.3 GB of model state).
pub const MAX_SIMULATED_MEMORY: u64 = 256 << 30;

fn node_bytes(cfg: &RunConfig, nr_cpus: usize, nr_nodes: usize, topo: &crate::machine::topology::Topology) -> u64 {
    if cfg.sim.node_memory_mib > 0 {
        return cfg.sim.node_memory_mib * MIB;
    }
    let mut per_node = vec![0u64; nr_nodes];
    match &cfg.workload {
        WorkloadConfig::Usemem(u) => {
            let sz = u.size_per_task.div_ceil(2 * MIB) * 2 * MIB;
            if u.prealloc {
                // The parent's region on CPU 0's node; each child's copies on its own CPU's node.
                per_node[topo.node_of(0)] += sz;
                for k in 0..u.nr_task as usize {
                    per_node[topo.node_of((1 + k) % nr_cpus)] += sz;
                }
            } else {
                for i in 0..u.nr_task as usize {
                    per_node[topo.node_of(i % nr_cpus)] += sz;
                }
            }
        }
        WorkloadConfig::PfTest(p) => {
            // The hugetlb pool on the task's node; 1 GiB pages want whole, aligned GiBs.
            per_node[topo.node_of(p.cpu as usize)] += p.size;
            if p.page_shift == 30 {
                let need = per_node.into_iter().max().unwrap_or(0) + 64 * MIB;
                return need.div_ceil(1 << 30) << 30;
            }
        }
    }
    let need = per_node.into_iter().max().unwrap_or(0);
    (need + need / 4 + 64 * MIB).div_ceil(2 * MIB) * 2 * MIB
}

pub fn build(cfg: &RunConfig) -> Result<Sim, Error> {
    let p = &cfg.preset;
    let probe = crate::machine::topology::Topology {
        sockets: p.sockets as usize,
        cores_per_socket: p.cores_per_socket as usize,
        threads_per_core: p.threads_per_core as usize,
        nodes_per_socket: p.memory.nodes_per_socket as usize,
        llc_per_socket: p.llc_instances_per_socket as usize,
    };
    let nr_cpus = probe.nr_cpus();
    let nr_nodes = probe.nr_nodes();
    let nb = node_bytes(cfg, nr_cpus, nr_nodes, &probe);
    let total = nb.saturating_mul(nr_nodes as u64);
    if total > MAX_SIMULATED_MEMORY {
        // Checked before anything is allocated: the model keeps ~20 bytes of state per 4 KiB frame.
        let key = if cfg.sim.node_memory_mib > 0 { "sim.node_memory_mib" } else { "workload" };
        return Err(Error::Config {
            key: key.into(),
            message: format!(
                "the run needs {} GiB of simulated memory ({} node(s) x {} MiB); at most {} GiB is supported: lower the sizes, nr_task or sim.node_memory_mib, or use --scale",
                total >> 30,
                nr_nodes,
                nb / MIB,
                MAX_SIMULATED_MEMORY >> 30
            ),
        });
    }
    let m = Machine::new(p, nb, cfg.seed).map_err(|e| Error::Config { key: "machine".into(), message: e })?;
    let mut k = Kernel::new(cfg.kernel.clone(), p, nr_nodes, nb);
    k.skip_clear_subpage = cfg.sim.fault_injection.skip_clear_subpage;
    k.skip_copy_subpage = cfg.sim.fault_injection.skip_copy_subpage;
    if cfg.kernel.page_alloc_shuffle {
        k.alloc.shuffle_free_memory(cfg.seed);
    }
    let mut sim = Sim::new(m, k, cfg.sim.quantum_cycles);
    match &cfg.workload {
        WorkloadConfig::Usemem(u) if u.prealloc => {
            // One parent on CPU 0 that maps, populates and forks the tasks.
            let seed = cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            sim.spawn(Box::new(Usemem::with_flags(u.size_per_task, seed, true, u.prefault, u.nr_task)), 0);
        }
        WorkloadConfig::Usemem(u) => {
            for i in 0..u.nr_task as usize {
                let seed = cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64 + 1);
                sim.spawn(Box::new(Usemem::with_flags(u.size_per_task, seed, false, u.prefault, 1)), i % nr_cpus);
            }
        }
        WorkloadConfig::PfTest(p) => {
            let cpu = p.cpu as usize;
            let node = sim.m.topo.node_of(cpu);
            let want = p.size >> p.page_shift;
            let got = sim.k.hugetlb_reserve(node, p.page_shift, want);
            if got < want {
                return Err(Error::Config {
                    key: "sim.node_memory_mib".into(),
                    message: format!("node {node} has room for only {got} of the {want} {} huge pages pf-test needs; raise it or set 0 (sized from the workload)", p.page_size),
                });
            }
            let seed = cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 1;
            sim.spawn(Box::new(PfTest::new(p.size, p.page_shift, seed)), cpu);
        }
    }
    Ok(sim)
}

pub fn scale_text(cfg: &RunConfig) -> String {
    match &cfg.workload {
        WorkloadConfig::Usemem(u) if u.prealloc => format!(
            "usemem --prealloc{}: one {} MiB region ({} huge pages) mapped by the parent, shared copy-on-write by {} child task(s), each writing all of it",
            if u.prefault { " --prefault" } else { "" },
            u.size_per_task_mib,
            u.size_per_task / (2 * MIB),
            u.nr_task,
        ),
        WorkloadConfig::Usemem(u) => format!(
            "usemem: {} task(s) x {} MiB each ({} MiB in all, {} huge pages per task)",
            u.nr_task,
            u.size_per_task_mib,
            u.size_per_task_mib * u.nr_task as f64,
            u.size_per_task / (2 * MIB)
        ),
        WorkloadConfig::PfTest(p) => format!(
            "pf-test: 1 task on CPU {}, {} MiB of MAP_HUGETLB memory in {} page(s) of {}",
            p.cpu,
            p.size_mib,
            p.size >> p.page_shift,
            if p.page_shift == 30 { "1 GiB" } else { "2 MiB" }
        ),
    }
}

pub fn machine_json(cfg: &RunConfig) -> Value {
    json!({"name": cfg.preset.name, "description": cfg.preset.description, "summary": cfg.preset.summary()})
}

/// Runs one simulation and returns its metrics.
pub fn simulate(cfg: &RunConfig, progress: &mut dyn FnMut(f64)) -> Result<Value, Error> {
    let mut sim = build(cfg)?;
    sim.run(progress)?;
    let mut r = crate::metrics::report(&sim);
    if let WorkloadConfig::PfTest(_) = &cfg.workload {
        // pf-test's own figure: bytes made present per second of its timed interval.
        r["fault_bytes_per_s"] = r["throughput_bytes_per_s"].clone();
    }
    Ok(r)
}

/// Runs the experiment's baseline and variants. With `[[cases]]`, every case
/// runs them all and the result is `{"cases": {case: <one-case result>}, "case_order": [...]}`;
/// without, the one-case result itself.
pub fn compare(exp: &Experiment, scale: f64, seed: u64, progress: &mut dyn FnMut(&str, f64)) -> Result<Value, Error> {
    if exp.cases.is_empty() {
        return compare_case(exp, None, scale, seed, progress);
    }
    // Check every configuration before running any.
    for c in &exp.cases {
        for a in std::iter::once(&exp.baseline).chain(&exp.variants) {
            exp.case_arm_config(Some(c), a, seed, scale)?;
        }
    }
    let mut cases = serde_json::Map::new();
    for c in &exp.cases {
        cases.insert(c.name.clone(), compare_case(exp, Some(c), scale, seed, progress)?);
    }
    Ok(json!({
        "experiment": exp.name,
        "description": exp.description,
        "reference": exp.reference,
        "seed": seed,
        "cases": cases,
        "case_order": exp.cases.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
    }))
}

fn compare_case(exp: &Experiment, case: Option<&Arm>, scale: f64, seed: u64, progress: &mut dyn FnMut(&str, f64)) -> Result<Value, Error> {
    let base_cfg = exp.case_arm_config(case, &exp.baseline, seed, scale)?;
    let mut arms = vec![(exp.baseline.name.clone(), base_cfg.clone())];
    for v in &exp.variants {
        arms.push((v.name.clone(), exp.case_arm_config(case, v, seed, scale)?));
    }
    let mut results = Vec::new();
    for (name, cfg) in &arms {
        let label = match case {
            None => format!("{} {}", exp.name, name),
            Some(c) => format!("{} {} {}", exp.name, c.name, name),
        };
        let r = simulate(cfg, &mut |f| progress(&label, f))?;
        results.push((name.clone(), r));
    }
    let mut variants = serde_json::Map::new();
    for (n, r) in &results[1..] {
        variants.insert(n.clone(), r.clone());
    }
    let arm_configs: serde_json::Map<String, Value> = arms.iter().map(|(n, c)| (n.clone(), c.to_json())).collect();
    Ok(json!({
        "experiment": exp.name,
        "description": exp.description,
        "reference": exp.reference,
        "machine": machine_json(&base_cfg),
        "scale": format!("{} (scale factor {})", scale_text(&base_cfg), scale),
        "seed": seed,
        "config": base_cfg.to_json(),
        "arm_configs": arm_configs,
        "baseline_name": exp.baseline.name,
        "baseline": results[0].1,
        "variants": variants,
        "variant_order": exp.variants.iter().map(|v| v.name.clone()).collect::<Vec<_>>(),
    }))
}
