//! Typed run and experiment configurations, read from TOML or JSON with
//! every error naming its dotted key. Presets and experiments shipped with
//! the project are embedded at build time (see build.rs).

pub mod experiment;
pub mod fields;
mod kernel;
pub mod lrufile;
pub mod pftest;
pub mod pmbench;
pub mod preset;
pub mod program;
pub mod trace;
pub mod willitscale;

use crate::error::Error;
pub use crate::kernel::config::KernelConfig;
use crate::policy::{Thp, ThpCow};
pub use crate::workload::usemem::{UsememClock, UsememConfig};
pub use crate::workload::{WorkloadConfig, MIB};
pub use fields::resolve_path;
use fields::{cfg_err, Fields};
pub use preset::{NameOrNs, Preset, Provenance, CLASSES, MACHINE_SET, RANGED};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}

pub fn embedded_machines() -> &'static [(&'static str, &'static str)] {
    embedded::MACHINES
}

pub fn embedded_experiments() -> &'static [(&'static str, &'static str)] {
    embedded::EXPERIMENTS
}

/// Resolves a machine reference: a built-in preset name, or a path to a preset file.
pub fn load_machine(key: &str, reference: &str, base_dir: Option<&Path>) -> Result<Preset, Error> {
    load_machine_with(key, reference, base_dir, &[])
}

/// [`load_machine`], with the values of `sets` (dotted preset keys, a run's
/// `machine_set`) set in the preset.
pub fn load_machine_with(
    key: &str,
    reference: &str,
    base_dir: Option<&Path>,
    sets: &[(String, toml::Value)],
) -> Result<Preset, Error> {
    if let Some((_, text)) = embedded_machines().iter().find(|(n, _)| *n == reference) {
        return Preset::parse_with(text, reference, sets);
    }
    let p = resolve_path(reference, base_dir);
    if reference.ends_with(".toml") && p.exists() {
        let text = read_config_file(key, &p)?;
        let origin = p.display().to_string();
        // The error keeps the preset's own dotted key, the file going into
        // the message; one about the file as a whole (its TOML) is keyed by
        // the field that named the file.
        return Preset::parse_with(&text, &origin, sets).map_err(|e| match e {
            Error::Config { key: k, message } if k.starts_with(preset::MACHINE_SET) => {
                cfg_err(k, format!("in {reference}: {message}"))
            }
            Error::Config { key: k, message } if k == origin => {
                cfg_err(key, format!("{reference}: {message}"))
            }
            Error::Config { key: k, message } => cfg_err(k, format!("in {reference}: {message}")),
            e => e,
        });
    }
    let names: Vec<&str> = embedded_machines().iter().map(|(n, _)| *n).collect();
    Err(cfg_err(
        key,
        format!(
            "{} is neither a built-in machine nor an existing .toml file; built-in machines: {}",
            fields::cut(&format!("{reference:?}"), 60),
            names.join(", ")
        ),
    ))
}

/// Largest config or preset file read: far above any real one, and a bound on
/// what a mistaken path (a device, a log) can make the reader swallow.
pub const MAX_CONFIG_FILE_BYTES: u64 = 1 << 20;

/// Reads a config, preset or experiment file. Anything but a regular file
/// (a FIFO would block for good, `/dev/zero` would never end) is refused.
pub fn read_config_file(key: &str, p: &Path) -> Result<String, Error> {
    let meta = std::fs::metadata(p).map_err(|e| cfg_err(key, format!("{}: {e}", p.display())))?;
    if !meta.is_file() {
        return Err(cfg_err(key, format!("{}: not a regular file", p.display())));
    }
    if meta.len() > MAX_CONFIG_FILE_BYTES {
        return Err(cfg_err(
            key,
            format!(
                "{}: {} bytes; a config file is at most {} bytes",
                p.display(),
                meta.len(),
                MAX_CONFIG_FILE_BYTES
            ),
        ));
    }
    std::fs::read_to_string(p).map_err(|e| cfg_err(key, format!("{}: {e}", p.display())))
}

/// `sim.quantum_cycles` when the config does not set it.
pub const DEFAULT_QUANTUM_CYCLES: u64 = 50;

#[derive(Clone, Debug, Serialize)]
pub struct SimConfig {
    /// Cycles a CPU runs before the scheduler picks the lowest clock again.
    pub quantum_cycles: u64,
    /// Simulated RAM per NUMA node; 0 = sized from the workload.
    pub node_memory_mib: u64,
    pub fault_injection: FaultInjection,
    /// The windowed run loop's window (sim/window.rs); None: the
    /// ordinary loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_cycles: Option<u64>,
    /// Report when each task's huge-page faults installed their PMDs
    /// (`thp_timeline`, kernel/timeline.rs).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timeline: bool,
}

/// Deliberate defects, for tests that prove the data checks can fail.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FaultInjection {
    /// Skip the clear of this sub-page index in the first huge page cleared
    /// (an index beyond the folio's size skips nothing).
    pub skip_clear_subpage: Option<u64>,
    /// Skip the copy of this sub-page index in the first huge page copied.
    pub skip_copy_subpage: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunConfig {
    pub machine: String,
    /// `[machine_set]`: preset values the run sets, by dotted key.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub machine_set: BTreeMap<String, toml::Value>,
    #[serde(skip)]
    pub preset: Preset,
    pub seed: u64,
    pub kernel: KernelConfig,
    pub workload: WorkloadConfig,
    pub sim: SimConfig,
}

/// Simulated RAM a run may have in all (host cost: about 1.3 GB of model state).
pub const MAX_SIMULATED_MEMORY: u64 = 256 << 30;

impl RunConfig {
    /// Parses a run config document with the built-in policies. `scale`
    /// multiplies the workload's memory sizes.
    pub fn from_table(
        table: toml::Table,
        base_dir: Option<&Path>,
        scale: f64,
    ) -> Result<RunConfig, Error> {
        Self::from_table_with(
            table,
            base_dir,
            scale,
            crate::kernel::policy::registry::builtin(),
        )
    }

    /// [`RunConfig::from_table`], its `kernel.*` policy keys resolved in `policies`.
    pub fn from_table_with(
        table: toml::Table,
        base_dir: Option<&Path>,
        scale: f64,
        policies: &crate::kernel::policy::Policies,
    ) -> Result<RunConfig, Error> {
        let mut top = Fields::new("", table);
        top.declare(&[
            "machine",
            "machine_set",
            "seed",
            "kernel",
            "workload",
            "sim",
        ])?;
        let machine = top.string("machine")?;
        let machine_set = match top.take_value(preset::MACHINE_SET) {
            None => BTreeMap::new(),
            Some(v) => machine_sets(v)?,
        };
        let sets: Vec<(String, toml::Value)> = machine_set.clone().into_iter().collect();
        let preset = load_machine_with("machine", &machine, base_dir, &sets)?;
        let seed = top.u64_opt("seed")?.unwrap_or(0);

        let kernel = kernel::parse(&mut top, &preset, scale, policies, base_dir)?;
        let workload = parse_workload(&mut top, &preset, scale, base_dir)?;
        let sim = parse_sim(&mut top, &preset, &kernel, &workload)?;
        top.finish()?;
        Ok(RunConfig {
            machine,
            machine_set,
            preset,
            seed,
            kernel,
            workload,
            sim,
        })
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("config serialises")
    }
}

/// `[machine_set]` as dotted preset keys and values: its nested tables
/// walked down to the values (a value is anything but a table).
fn machine_sets(v: toml::Value) -> Result<BTreeMap<String, toml::Value>, Error> {
    fn walk(prefix: &str, v: toml::Value, out: &mut BTreeMap<String, toml::Value>) {
        match v {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    let key = if prefix.is_empty() {
                        k
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            v => {
                out.insert(prefix.to_string(), v);
            }
        }
    }
    let toml::Value::Table(_) = v else {
        return Err(cfg_err(
            preset::MACHINE_SET,
            "expected a table of preset values by dotted key, e.g. machine_set.l2.superqueue = 64",
        ));
    };
    let mut out = BTreeMap::new();
    walk("", v, &mut out);
    Ok(out)
}

/// `[workload]`: its kind, and the kind's own keys (each parsed by its file).
fn parse_workload(
    top: &mut Fields,
    preset: &Preset,
    scale: f64,
    base_dir: Option<&Path>,
) -> Result<WorkloadConfig, Error> {
    let mut w = top.sub("workload")?;
    w.declare(
        &[
            &[
                "kind",
                "nr_task",
                "size_per_task_mib",
                "prealloc",
                "prefault",
                "child_start_skew_us",
                "warmup",
                "clock",
                "random",
            ][..],
            pftest::KEYS,
            lrufile::KEYS,
            pmbench::KEYS,
            program::KEYS,
            willitscale::KEYS,
            trace::KEYS,
        ]
        .concat(),
    )?;
    let kind = w
        .choice_opt(
            "kind",
            &[
                "usemem",
                "pf-test",
                "lru-file-mmap-read",
                "pmbench",
                "program",
                "will-it-scale",
                "trace",
            ],
        )?
        .ok_or_else(|| {
            cfg_err(
                "workload.kind",
                "missing; accepted: \"usemem\", \"pf-test\", \"lru-file-mmap-read\", \"pmbench\", \"program\", \"will-it-scale\", \"trace\"",
            )
        })?;
    let workload = match kind.as_str() {
        "usemem" => {
            let nr_task = w.u64("nr_task")?;
            if nr_task == 0 || nr_task > 4096 {
                return Err(cfg_err("workload.nr_task", "must be between 1 and 4096"));
            }
            let mib = w
                .f64_opt("size_per_task_mib")?
                .ok_or_else(|| cfg_err("workload.size_per_task_mib", "missing required key"))?;
            let bytes = (mib * scale * MIB as f64) as u64 & !4095;
            if mib.is_nan() || mib <= 0.0 || bytes < 4096 {
                return Err(cfg_err("workload.size_per_task_mib", format!("must give at least 4 KiB per task after scaling (got {mib} MiB x scale {scale})")));
            }
            if bytes > (64u64 << 30) {
                return Err(cfg_err(
                    "workload.size_per_task_mib",
                    "at most 65536 MiB per task",
                ));
            }
            let prealloc = w.bool_opt("prealloc")?.unwrap_or(false);
            let prefault = w.bool_opt("prefault")?.unwrap_or(false);
            let child_start_skew_us = w.u64_opt("child_start_skew_us")?.unwrap_or(0);
            let warmup = w.bool_opt("warmup")?.unwrap_or(false);
            let random = w.bool_opt("random")?.unwrap_or(false);
            let clock = match w.choice_opt("clock", UsememClock::NAMES)?.as_deref() {
                Some("after-go") => UsememClock::AfterGo,
                _ => UsememClock::Start,
            };
            if child_start_skew_us > 1_000_000 {
                return Err(cfg_err(
                    "workload.child_start_skew_us",
                    format!("{child_start_skew_us} is out of range; accepted: 0 to 1000000"),
                ));
            }
            WorkloadConfig::Usemem(UsememConfig {
                nr_task,
                size_per_task: bytes,
                size_per_task_mib: bytes as f64 / MIB as f64,
                prealloc,
                prefault,
                child_start_skew_us,
                warmup,
                clock,
                random,
            })
        }
        "pf-test" => WorkloadConfig::PfTest(pftest::parse(&mut w, preset, scale)?),
        "lru-file-mmap-read" => {
            WorkloadConfig::LruFileMmapRead(lrufile::parse(&mut w, preset, scale)?)
        }
        "pmbench" => WorkloadConfig::Pmbench(pmbench::parse(&mut w, preset, scale)?),
        "program" => WorkloadConfig::Program(program::parse(&mut w, scale)?),
        "will-it-scale" => WorkloadConfig::Program(willitscale::parse(&mut w, scale)?),
        "trace" => WorkloadConfig::Trace(trace::parse(&mut w, preset, scale, base_dir)?),
        _ => unreachable!(),
    };
    w.finish()?;
    Ok(workload)
}

/// `[sim]`: the quantum, the memory per node, the window and fault injection.
fn parse_sim(
    top: &mut Fields,
    preset: &Preset,
    kernel: &KernelConfig,
    workload: &WorkloadConfig,
) -> Result<SimConfig, Error> {
    let mut s = top
        .sub_opt("sim")?
        .unwrap_or_else(|| Fields::new("sim", toml::Table::new()));
    s.declare(&[
        "quantum_cycles",
        "node_memory_mib",
        "fault_injection",
        "window_cycles",
        "timeline",
    ])?;
    let quantum_cycles = s
        .u64_opt("quantum_cycles")?
        .unwrap_or(DEFAULT_QUANTUM_CYCLES);
    if !(10..=10_000_000).contains(&quantum_cycles) {
        return Err(cfg_err(
            "sim.quantum_cycles",
            "must be between 10 and 10000000",
        ));
    }
    let window_cycles = parse_window(&mut s, preset)?;
    let node_memory_mib = s.u64_opt("node_memory_mib")?.unwrap_or(0);
    let max_mib = MAX_SIMULATED_MEMORY / MIB;
    if node_memory_mib > max_mib {
        return Err(cfg_err("sim.node_memory_mib", format!("{node_memory_mib} MiB is out of range; accepted: 0 (sized from the workload) or up to {max_mib}")));
    }
    let mut fault_injection = FaultInjection::default();
    if let Some(mut fi) = s.sub_opt("fault_injection")? {
        fi.declare(&["skip_clear_subpage", "skip_copy_subpage"])?;
        fault_injection.skip_clear_subpage = fi.u64_opt("skip_clear_subpage")?;
        fault_injection.skip_copy_subpage = fi.u64_opt("skip_copy_subpage")?;
        fi.finish()?;
        check_fault_injection(&fault_injection, kernel, workload)?;
    }
    let timeline = s.bool_opt("timeline")?.unwrap_or(false);
    s.finish()?;
    Ok(SimConfig {
        quantum_cycles,
        node_memory_mib,
        fault_injection,
        window_cycles,
        timeline,
    })
}

/// `sim.window_cycles`: absent or 0 for the ordinary run loop; `"auto"`
/// or a number of cycles up to the preset's smallest cross-socket latency
/// (a remote cache hit or a remote DRAM read) for the windowed one.
fn parse_window(s: &mut Fields, preset: &Preset) -> Result<Option<u64>, Error> {
    let key = "sim.window_cycles";
    let Some(v) = s.take_value("window_cycles") else {
        return Ok(None);
    };
    let p = preset.machine_params()?;
    let max = p.remote_cache_cycles.min(p.dram_remote_cycles);
    let accepted = format!(
        "accepted: 0 (the ordinary run loop), \"auto\" ({max}) or 1..={max}, the smallest cross-socket latency of {} in cycles",
        preset.name
    );
    match v {
        toml::Value::String(a) if a == "auto" => Ok(Some(max)),
        toml::Value::Integer(0) => Ok(None),
        toml::Value::Integer(c) if c > 0 && c as u64 <= max => Ok(Some(c as u64)),
        other => Err(cfg_err(
            key,
            format!("{} is not a window; {accepted}", fields::show(&other)),
        )),
    }
}

/// Refuses an injected defect that the configured run can never reach, so a
/// test that means to make the data check fail cannot pass by doing nothing.
fn check_fault_injection(
    fi: &FaultInjection,
    kernel: &KernelConfig,
    workload: &WorkloadConfig,
) -> Result<(), Error> {
    if let Some(i) = fi.skip_clear_subpage {
        let key = "sim.fault_injection.skip_clear_subpage";
        let subpages = match workload {
            WorkloadConfig::PfTest(p) => 1u64 << (p.page_shift - 12),
            WorkloadConfig::Usemem(_) if kernel.thp == Thp::Always => 512,
            WorkloadConfig::Usemem(_) => {
                return Err(cfg_err(key, "no huge page is cleared with kernel.thp = \"never\"; needs thp = \"always\" or a pf-test workload"))
            }
            WorkloadConfig::LruFileMmapRead(_) => {
                return Err(cfg_err(key, "no huge page is cleared in a lru-file-mmap-read run (page-cache folios of holes are 4 KiB); needs a usemem or pf-test workload"))
            }
            WorkloadConfig::Pmbench(_) if kernel.thp == Thp::Always => 512,
            WorkloadConfig::Pmbench(_) => {
                return Err(cfg_err(key, "no huge page is cleared with kernel.thp = \"never\"; needs thp = \"always\""))
            }
            WorkloadConfig::Program(p) => {
                let mut biggest = 0;
                for t in &p.tasks {
                    crate::workload::program::spec::walk(&t.steps, &mut |s| {
                        use crate::workload::program::Backing;
                        if let crate::workload::program::Step::Mmap { backing, .. } = s {
                            biggest = biggest.max(match backing {
                                Backing::Hugetlb { shift } => 1u64 << (shift - 12),
                                Backing::Anon if kernel.thp == Thp::Always => 512,
                                _ => 0,
                            });
                        }
                    });
                }
                if biggest == 0 {
                    return Err(cfg_err(key, "the program maps no memory a huge page is cleared for (hugetlb, or anonymous with kernel.thp = \"always\")"));
                }
                biggest
            }
            WorkloadConfig::Trace(_) if kernel.thp == Thp::Always => 512,
            WorkloadConfig::Trace(_) => {
                return Err(cfg_err(key, "no huge page is cleared with kernel.thp = \"never\"; needs thp = \"always\""))
            }
        };
        if i >= subpages {
            return Err(cfg_err(
                key,
                format!(
                    "{i} is not a sub-page of the run's huge pages; accepted: 0..={}",
                    subpages - 1
                ),
            ));
        }
    }
    if let Some(i) = fi.skip_copy_subpage {
        let key = "sim.fault_injection.skip_copy_subpage";
        // Without prefault the parent populates nothing before the fork:
        // each child's first write faults in a page of its own, no copy.
        let copies = matches!(workload, WorkloadConfig::Usemem(u) if u.prealloc && u.prefault)
            && kernel.thp == Thp::Always
            && kernel.thp_cow == ThpCow::Copy.into();
        if !copies {
            return Err(cfg_err(
                key,
                "no huge page is copied in this run; needs a usemem workload with prealloc = true and prefault = true, kernel.thp = \"always\" and kernel.thp_cow = \"copy\"",
            ));
        }
        if i >= 512 {
            return Err(cfg_err(
                key,
                format!("{i} is not a sub-page of a 2 MiB page; accepted: 0..=511"),
            ));
        }
    }
    Ok(())
}

/// Sets `value` at the dotted `key` inside `table`, creating tables on the way.
pub fn set_dotted(
    table: &mut toml::Table,
    key: &str,
    value: toml::Value,
    ctx: &str,
) -> Result<(), Error> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(cfg_err(ctx, format!("{key:?} is not a dotted key")));
    }
    let mut t = table;
    for p in &parts[..parts.len() - 1] {
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = match entry {
            toml::Value::Table(tt) => tt,
            _ => {
                return Err(cfg_err(
                    format!("{ctx}.{key}"),
                    format!("{p:?} is not a table"),
                ))
            }
        };
    }
    t.insert(parts[parts.len() - 1].to_string(), value);
    Ok(())
}
