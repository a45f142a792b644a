//! `workload.kind = "lru-file-mmap-read"`: vm-scalability's case of that
//! name, one reader per CPU of its own sparse file, the files together
//! `file_ram_ratio` times the simulated RAM.

use super::fields::{cfg_err, Fields};
use super::preset::Preset;
use crate::error::Error;
use crate::workload::base::MIB;
pub use crate::workload::lrufile::LruFileConfig;

pub const KEYS: &[&str] = &["nr_task", "ram_mib", "file_ram_ratio"];

pub fn parse(w: &mut Fields, preset: &Preset, scale: f64) -> Result<LruFileConfig, Error> {
    let nr_cpus = preset.cpu.sockets * preset.cpu.cores_per_socket * preset.cpu.threads_per_core;
    let nr_task = w.u64_opt("nr_task")?.unwrap_or(nr_cpus);
    if nr_task == 0 || nr_task > nr_cpus {
        return Err(cfg_err(
            w.key("nr_task"),
            format!(
                "must be between 1 and the {nr_cpus} CPUs of {} (one reader per CPU)",
                preset.name
            ),
        ));
    }
    let mib = w
        .f64_opt("ram_mib")?
        .ok_or_else(|| cfg_err(w.key("ram_mib"), "missing required key"))?;
    let nodes = preset.cpu.sockets * preset.memory.nodes_per_socket;
    // Whole 2 MiB blocks per node.
    let ram = (((mib * scale * MIB as f64) as u64) / nodes / (2 * MIB)) * 2 * MIB * nodes;
    if !(mib.is_finite() && mib > 0.0) || ram < 8 * MIB * nodes {
        return Err(cfg_err(w.key("ram_mib"), format!("must give at least 8 MiB per node after scaling (got {mib} MiB x scale {scale} over {nodes} node(s))")));
    }
    if ram > (64u64 << 30) {
        return Err(cfg_err(w.key("ram_mib"), "at most 65536 MiB"));
    }
    let file_ram_ratio = w.u64_opt("file_ram_ratio")?.unwrap_or(10);
    if !(1..=100).contains(&file_ram_ratio) {
        return Err(cfg_err(
            w.key("file_ram_ratio"),
            "must be between 1 and 100",
        ));
    }
    let file_size = (ram * file_ram_ratio / nr_task) & !4095;
    Ok(LruFileConfig {
        nr_task,
        ram,
        ram_mib: ram as f64 / MIB as f64,
        file_ram_ratio,
        file_size,
    })
}
