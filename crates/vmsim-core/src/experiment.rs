//! Building and running a simulation from a run config, and comparing an
//! experiment's baseline with its variants.

use crate::config::experiment::Experiment;
use crate::config::{RunConfig, MIB};
use crate::error::Error;
use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::sim::Sim;
use serde_json::{json, Value};

pub use crate::config::MAX_SIMULATED_MEMORY;

fn node_bytes(cfg: &RunConfig, nr_cpus: usize, topo: &crate::machine::topology::Topology) -> u64 {
    if cfg.sim.node_memory_mib > 0 {
        return cfg.sim.node_memory_mib * MIB;
    }
    crate::workload::registry(&cfg.workload).node_bytes(topo, nr_cpus)
}

pub fn build(cfg: &RunConfig) -> Result<Sim, Error> {
    let p = &cfg.preset;
    let probe = crate::machine::topology::Topology {
        sockets: p.cpu.sockets as usize,
        cores_per_socket: p.cpu.cores_per_socket as usize,
        threads_per_core: p.cpu.threads_per_core as usize,
        nodes_per_socket: p.memory.nodes_per_socket as usize,
        llc_per_socket: p.llc.instances_per_socket as usize,
    };
    let nr_cpus = probe.nr_cpus();
    let nr_nodes = probe.nr_nodes();
    let nb = node_bytes(cfg, nr_cpus, &probe);
    let total = nb.saturating_mul(nr_nodes as u64);
    if total > MAX_SIMULATED_MEMORY {
        // Checked before anything is allocated: the model keeps ~20 bytes of state per 4 KiB frame.
        let key = if cfg.sim.node_memory_mib > 0 {
            "sim.node_memory_mib"
        } else {
            "workload"
        };
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
    if cfg.kernel.struct_pages && !crate::kernel::vmemmap::Vmemmap::fits(nb) {
        return Err(Error::Config {
            key: "kernel.struct_pages".into(),
            message: format!(
                "the memory map needs {} MiB of each node and leaves nothing of its {} MiB: give sim.node_memory_mib at least 4",
                crate::kernel::vmemmap::Vmemmap::blocks_for(nb) * 2,
                nb / MIB
            ),
        });
    }
    let map_blocks = if cfg.kernel.struct_pages {
        crate::kernel::vmemmap::Vmemmap::blocks_for(nb)
    } else {
        0
    };
    let kdata_key = if cfg.kernel.spinlocks.is_some() {
        Some("kernel.spinlocks")
    } else if cfg.kernel.rwsems {
        Some("kernel.rwsems")
    } else {
        None
    };
    if let Some(key) = kdata_key.filter(|_| !crate::kernel::kdata::KernelData::fits(nb, map_blocks))
    {
        return Err(Error::Config {
            key: key.into(),
            message: format!(
                "the kernel's data (a 2 MiB block a node, 256 KiB of it kept) and the memory map leave nothing of each node's {} MiB: give sim.node_memory_mib at least 6",
                nb / MIB
            ),
        });
    }
    let m = Machine::new(&p.machine_params()?, nb, cfg.seed).map_err(|e| Error::Config {
        key: "machine".into(),
        message: e,
    })?;
    let mut k = Kernel::new(cfg.kernel.clone(), p.kernel_costs(), nr_nodes, nb);
    k.skip_clear_subpage = cfg.sim.fault_injection.skip_clear_subpage;
    k.skip_copy_subpage = cfg.sim.fault_injection.skip_copy_subpage;
    if cfg.sim.timeline {
        k.thp_timeline.enable();
    }
    if cfg.kernel.page_alloc_shuffle {
        k.mem.alloc.shuffle_free_memory(cfg.seed);
    }
    let mut sim = Sim::new(m, k, cfg.sim.quantum_cycles);
    sim.set_window(cfg.sim.window_cycles.unwrap_or(0));
    sim.seed_tick(cfg.seed);
    crate::workload::registry(&cfg.workload).spawn(&mut sim, cfg.seed)?;
    Ok(sim)
}

pub fn scale_text(cfg: &RunConfig) -> String {
    crate::workload::registry(&cfg.workload).scale_text()
}

pub fn machine_json(cfg: &RunConfig) -> Value {
    json!({"name": cfg.preset.name, "description": cfg.preset.description, "summary": cfg.preset.summary()})
}

/// Runs one simulation and returns its metrics.
pub fn simulate(cfg: &RunConfig, progress: &mut dyn FnMut(f64)) -> Result<Value, Error> {
    simulate_on(cfg, 1, progress)
}

/// [`simulate`] with a windowed run's sockets spread over up to `threads`
/// host threads (the metrics are the same for any number).
pub fn simulate_on(
    cfg: &RunConfig,
    threads: usize,
    progress: &mut dyn FnMut(f64),
) -> Result<Value, Error> {
    let mut sim = build(cfg)?;
    sim.set_host_threads(threads);
    sim.run(progress)?;
    Ok(report(cfg, &sim))
}

/// The metrics of `sim`, built from `cfg`: the model's report and the
/// workload's own figures.
pub fn report(cfg: &RunConfig, sim: &Sim) -> Value {
    let mut r = crate::metrics::report(sim);
    crate::workload::registry(&cfg.workload).report(sim, &mut r);
    r
}

/// How many simulations `compare` runs at once by default: one per host CPU.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs the experiment's baseline and variants. With `[[cases]]`, every case
/// runs them all and the result is `{"cases": {case: <one-case result>}, "case_order": [...]}`;
/// without, the one-case result itself.
///
/// Every arm of every case is a simulation of its own; up to `threads` of them
/// run at once, each on a host thread. The result does not depend on
/// `threads`: each simulation is deterministic and they share nothing.
pub fn compare(
    exp: &Experiment,
    scale: f64,
    seed: u64,
    threads: usize,
    progress: &mut dyn FnMut(&str, f64),
) -> Result<Value, Error> {
    compare_except(exp, scale, seed, threads, &[], progress)
}

/// [`compare`] without simulating the runs whose places are in `skip`
/// (places in the order of [`Experiment::runs`], the plan's order: case by
/// case, the baseline first): their metrics are `null` in the result, for
/// the caller to put in the metrics it already has of the same run (a result
/// cache's). Everything else is what `compare` gives: no field of the result
/// is computed from more than one run, so a run's metrics are the same
/// bytes whichever of the others ran with it.
pub fn compare_except(
    exp: &Experiment,
    scale: f64,
    seed: u64,
    threads: usize,
    skip: &[usize],
    progress: &mut dyn FnMut(&str, f64),
) -> Result<Value, Error> {
    // Every configuration is checked before any runs.
    let mut jobs: Vec<(String, RunConfig)> = Vec::new();
    let mut arms_of_case: Vec<Vec<String>> = Vec::new();
    let mut current = None;
    for (c, a) in exp.runs() {
        let case_name = c.map(|c| c.name.clone());
        if current.as_ref() != Some(&case_name) {
            arms_of_case.push(Vec::new());
            current = Some(case_name);
        }
        let label = match c {
            None => format!("{} {}", exp.name, a.name),
            Some(c) => format!("{} {} {}", exp.name, c.name, a.name),
        };
        jobs.push((label, exp.case_arm_config(c, a, seed, scale)?));
        arms_of_case
            .last_mut()
            .expect("a case was pushed")
            .push(a.name.clone());
    }
    if let Some(&i) = skip.iter().find(|&&i| i >= jobs.len()) {
        return Err(Error::Config {
            key: "skip".into(),
            message: format!(
                "run {i} is not one of the experiment's {} runs (0..{})",
                jobs.len(),
                jobs.len()
            ),
        });
    }
    let wanted: Vec<(String, RunConfig)> = jobs
        .iter()
        .enumerate()
        .filter(|(i, _)| !skip.contains(i))
        .map(|(_, job)| job.clone())
        .collect();
    let label = format!(
        "{} ({} runs, up to {threads} at once)",
        exp.name,
        wanted.len()
    );
    let mut results = if wanted.is_empty() {
        Vec::new()
    } else {
        crate::parallel::run_all(simulate_on, &wanted, threads, &label, progress)?
    }
    .into_iter();
    // In the plan's order, a skipped run's metrics null.
    let metrics: Vec<Value> = (0..jobs.len())
        .map(|i| {
            if skip.contains(&i) {
                Value::Null
            } else {
                results.next().expect("one result per run")
            }
        })
        .collect();
    let mut done = jobs.into_iter().zip(metrics);
    let mut out = Vec::new();
    for (i, names) in arms_of_case.into_iter().enumerate() {
        let case_results = names
            .into_iter()
            .map(|n| {
                let ((_, cfg), r) = done.next().expect("one result per run");
                (n, cfg, r)
            })
            .collect();
        let case = exp.cases.get(i).map(|c| c.name.as_str());
        out.push(case_json(exp, case, seed, scale, case_results));
    }
    if exp.cases.is_empty() {
        return Ok(out.pop().expect("one case"));
    }
    let cases: serde_json::Map<String, Value> =
        exp.cases.iter().map(|c| c.name.clone()).zip(out).collect();
    Ok(json!({
        "experiment": exp.name,
        "description": exp.description,
        "reference": exp.reference,
        "seed": seed,
        "cases": cases,
        "case_order": exp.cases.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
        "published": published_json(exp, None),
    }))
}

/// One case's result: `arms` are (name, config, metrics), the baseline first.
/// The experiment's published measurements (`[[published]]`) as JSON: those
/// of `case`, or all of them for None.
pub(crate) fn published_json(exp: &Experiment, case: Option<&str>) -> Value {
    Value::Array(
        exp.published
            .iter()
            .filter(|p| case.is_none() || p.case.as_deref() == case)
            .map(|p| {
                json!({
                    "case": p.case,
                    "arm": p.arm,
                    "metric": p.metric,
                    "change_percent": p.change_percent,
                    "source": p.source,
                })
            })
            .collect(),
    )
}

fn case_json(
    exp: &Experiment,
    case: Option<&str>,
    seed: u64,
    scale: f64,
    arms: Vec<(String, RunConfig, Value)>,
) -> Value {
    let base_cfg = &arms[0].1;
    let mut variants = serde_json::Map::new();
    for (n, _, r) in &arms[1..] {
        variants.insert(n.clone(), r.clone());
    }
    let arm_configs: serde_json::Map<String, Value> = arms
        .iter()
        .map(|(n, c, _)| (n.clone(), c.to_json()))
        .collect();
    json!({
        "experiment": exp.name,
        "description": exp.description,
        "reference": exp.reference,
        "machine": machine_json(base_cfg),
        "scale": format!("{} (scale factor {})", scale_text(base_cfg), scale),
        "seed": seed,
        "config": base_cfg.to_json(),
        "arm_configs": arm_configs,
        "baseline_name": exp.baseline.name,
        "baseline": arms[0].2,
        "variants": variants,
        "variant_order": arms[1..].iter().map(|(n, _, _)| n.clone()).collect::<Vec<_>>(),
        "published": published_json(exp, case),
    })
}
