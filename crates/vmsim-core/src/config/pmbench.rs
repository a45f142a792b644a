//! `workload.kind = "pmbench"`: pmbench processes × threads on one node,
//! with an optional memory eater (docs/mechanisms.md#pmbench). Sizes and durations
//! are given at full size and multiplied by the run's scale factor, as are
//! the NUMA-balancing scanner's size and periods (kernel/sched/numa.rs).

use super::fields::{cfg_err, Fields};
use super::preset::Preset;
use crate::error::Error;
use crate::workload::base::MIB;
pub use crate::workload::pmbench::{PmbenchConfig, PmbenchPattern};

pub const KEYS: &[&str] = &[
    "nr_processes",
    "nr_threads",
    "mapsize_mib",
    "setsize_mib",
    "pattern",
    "stdev_fraction",
    "stride_pages",
    "read_ratio",
    "duration_s",
    "cold",
    "bind_node",
    "node_memory_mib",
    "eater_mib",
    "eater_node",
    "eater_exit_s",
];

fn bytes(w: &mut Fields, key: &'static str, mib: f64, scale: f64) -> Result<u64, Error> {
    if !(mib.is_finite() && mib > 0.0) {
        return Err(cfg_err(
            w.key(key),
            format!("must be a positive size in MiB, got {mib}"),
        ));
    }
    let b = ((mib * scale * MIB as f64) as u64) & !(2 * MIB - 1);
    if b < 2 * MIB {
        return Err(cfg_err(
            w.key(key),
            format!("must give at least 2 MiB after scaling (got {mib} MiB x scale {scale})"),
        ));
    }
    if b > (256u64 << 30) {
        return Err(cfg_err(w.key(key), "at most 256 GiB after scaling"));
    }
    Ok(b)
}

fn seconds(w: &mut Fields, key: &'static str, s: f64, scale: f64) -> Result<u64, Error> {
    if !(s.is_finite() && s > 0.0 && s <= 3600.0) {
        return Err(cfg_err(
            w.key(key),
            format!("must be above 0 and at most 3600 seconds, got {s}"),
        ));
    }
    Ok((s * scale * 1e9) as u64)
}

pub fn parse(w: &mut Fields, preset: &Preset, scale: f64) -> Result<PmbenchConfig, Error> {
    let nodes = preset.cpu.sockets * preset.memory.nodes_per_socket;
    let nr_processes = w.u64_opt("nr_processes")?.unwrap_or(1);
    if !(1..=256).contains(&nr_processes) {
        return Err(cfg_err(w.key("nr_processes"), "must be between 1 and 256"));
    }
    let nr_threads = w.u64_opt("nr_threads")?.unwrap_or(1);
    if !(1..=256).contains(&nr_threads) {
        return Err(cfg_err(w.key("nr_threads"), "must be between 1 and 256"));
    }
    let map_mib = w
        .f64_opt("mapsize_mib")?
        .ok_or_else(|| cfg_err(w.key("mapsize_mib"), "missing required key"))?;
    let mapsize = bytes(w, "mapsize_mib", map_mib, scale)?;
    let setsize = match w.f64_opt("setsize_mib")? {
        Some(m) => bytes(w, "setsize_mib", m, scale)?,
        None => mapsize,
    };
    if setsize > mapsize {
        return Err(cfg_err(w.key("setsize_mib"), "must not exceed mapsize_mib"));
    }
    let pattern = match w
        .choice_opt("pattern", &["linear", "uniform", "normal"])?
        .as_deref()
    {
        Some("linear") => PmbenchPattern::Linear,
        Some("uniform") => PmbenchPattern::Uniform,
        _ => PmbenchPattern::Normal,
    };
    let stdev_given = w.f64_opt("stdev_fraction")?;
    let stdev_fraction = stdev_given.unwrap_or(0.125);
    if !(stdev_fraction.is_finite() && stdev_fraction > 0.0 && stdev_fraction <= 10.0) {
        return Err(cfg_err(
            w.key("stdev_fraction"),
            "must be above 0 and at most 10",
        ));
    }
    let stride_given = w.u64_opt("stride_pages")?;
    let stride_pages = stride_given.unwrap_or(1);
    if stride_pages == 0 || stride_pages > setsize / 4096 {
        return Err(cfg_err(
            w.key("stride_pages"),
            "must be between 1 and the set's pages",
        ));
    }
    // Each shape parameter belongs to one pattern: given with another, it
    // would be ignored, and the run would not be the one asked for.
    if stride_given.is_some() && !matches!(pattern, PmbenchPattern::Linear) {
        return Err(cfg_err(
            w.key("stride_pages"),
            "only for pattern = \"linear\" (the stride of its walk)",
        ));
    }
    if stdev_given.is_some() && !matches!(pattern, PmbenchPattern::Normal) {
        return Err(cfg_err(
            w.key("stdev_fraction"),
            "only for pattern = \"normal\" (its standard deviation)",
        ));
    }
    let read_ratio = w.u64_opt("read_ratio")?.unwrap_or(50);
    if read_ratio > 100 {
        return Err(cfg_err(w.key("read_ratio"), "a percentage: 0 to 100"));
    }
    let d = w
        .f64_opt("duration_s")?
        .ok_or_else(|| cfg_err(w.key("duration_s"), "missing required key"))?;
    let duration_ns = seconds(w, "duration_s", d, scale)?;
    let cold = w.bool_opt("cold")?.unwrap_or(false);
    let bind_node = w.u64_opt("bind_node")?.unwrap_or(0);
    if bind_node >= nodes {
        return Err(cfg_err(
            w.key("bind_node"),
            format!("{} has nodes 0 to {}", preset.name, nodes - 1),
        ));
    }
    let nm = w
        .f64_opt("node_memory_mib")?
        .ok_or_else(|| cfg_err(w.key("node_memory_mib"), "missing required key"))?;
    let node_memory = bytes(w, "node_memory_mib", nm, scale)?;
    let eater = match w.f64_opt("eater_mib")? {
        Some(0.0) => 0,
        Some(m) => bytes(w, "eater_mib", m, scale)?,
        None => 0,
    };
    let eater_node = w.u64_opt("eater_node")?.unwrap_or(bind_node);
    if eater_node >= nodes {
        return Err(cfg_err(
            w.key("eater_node"),
            format!("{} has nodes 0 to {}", preset.name, nodes - 1),
        ));
    }
    if eater >= node_memory {
        return Err(cfg_err(w.key("eater_mib"), "must be below node_memory_mib"));
    }
    let eater_exit_ns = match w.f64_opt("eater_exit_s")? {
        Some(s) => seconds(w, "eater_exit_s", s, scale)?,
        None if eater > 0 => {
            return Err(cfg_err(
                w.key("eater_exit_s"),
                "required with an eater: when it exits after pmbench starts",
            ))
        }
        None => 0,
    };
    if nr_processes * mapsize + eater > node_memory * nodes {
        return Err(cfg_err(
            w.key("mapsize_mib"),
            "the maps and the eater need more than the machine's memory (node_memory_mib x nodes)",
        ));
    }
    Ok(PmbenchConfig {
        nr_processes,
        nr_threads,
        mapsize,
        setsize,
        pattern,
        stdev_fraction,
        stride_pages,
        read_ratio,
        duration_ns,
        cold,
        bind_node,
        node_memory,
        eater,
        eater_node,
        eater_exit_ns,
        scale,
    })
}
