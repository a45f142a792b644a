//! `workload.kind = "trace"`: a valgrind lackey trace replayed
//! (workload/trace.rs, docs/workloads.md#trace-replay). The file is named
//! relative to the config that names it and read once here, streaming: the
//! pre-pass checks every line (a malformed one is an error naming the file
//! and line, before anything is simulated), counts what the replay will do
//! and, with `regions = "auto"`, finds the mappings. Given regions are
//! checked to be page-aligned, inside the user address range and apart.

use super::fields::resolve_path;
use super::fields::{as_u64, cfg_err, show, Fields};
use super::preset::Preset;
use crate::error::Error;
use crate::kernel::mm::{MMAP_MIN_ADDR, PAGE_SIZE, TASK_SIZE};
use crate::workload::trace::{scan, MAX_REGION_BYTES};
pub use crate::workload::trace::{Region, TraceConfig};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;
use toml::Value;

pub const KEYS: &[&str] = &["trace", "regions", "cpus"];
/// Regions a config may give.
pub const MAX_REGIONS: usize = 1024;

/// A region's `start` or `len`: an integer, or a string of one in
/// hexadecimal (`"0x1ffefff000"`), as JSON has no hexadecimal numbers.
fn address(key: &str, v: &Value) -> Result<u64, Error> {
    if let Value::String(s) = v {
        let hex = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"));
        return hex
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .ok_or_else(|| {
                cfg_err(
                    key,
                    format!("{} is not an address; accepted: an integer or a \"0x...\" hexadecimal string", show(v)),
                )
            });
    }
    as_u64(key, v)
}

fn parse_regions(key: &str, v: Value) -> Result<Option<Vec<Region>>, Error> {
    let list = match v {
        Value::String(s) if s == "auto" => return Ok(None),
        Value::Array(a) => a,
        other => {
            return Err(cfg_err(
                key,
                format!(
                    "{} is not accepted; accepted: \"auto\" or a list of {{ start, len }} tables",
                    show(&other)
                ),
            ))
        }
    };
    if list.is_empty() || list.len() > MAX_REGIONS {
        return Err(cfg_err(
            key,
            format!("{} regions; accepted: 1 to {MAX_REGIONS}", list.len()),
        ));
    }
    let mut regions = Vec::new();
    for (i, item) in list.into_iter().enumerate() {
        let mut f = Fields::from_value(&format!("{key}[{i}]"), item)?;
        f.declare(&["start", "len"])?;
        let sv = f.req("start")?;
        let start = address(&f.key("start"), &sv)?;
        let lv = f.req("len")?;
        let len = address(&f.key("len"), &lv)?;
        if !start.is_multiple_of(PAGE_SIZE) || start < MMAP_MIN_ADDR {
            return Err(cfg_err(
                f.key("start"),
                format!("{start:#x} is not accepted; accepted: a multiple of 4096 at or above {MMAP_MIN_ADDR:#x} (vm.mmap_min_addr)"),
            ));
        }
        if len == 0 || !len.is_multiple_of(PAGE_SIZE) || len > TASK_SIZE - start {
            return Err(cfg_err(
                f.key("len"),
                format!("{len:#x} is not accepted; accepted: a positive multiple of 4096 ending at or below {TASK_SIZE:#x} (the 47-bit user address range)"),
            ));
        }
        f.finish()?;
        regions.push((i, Region { start, len }));
    }
    regions.sort_by_key(|(_, r)| r.start);
    for w in regions.windows(2) {
        let ((i, a), (j, b)) = (w[0], w[1]);
        if a.start + a.len > b.start {
            return Err(cfg_err(
                key,
                format!(
                    "regions {i} [{:#x}, {:#x}) and {j} [{:#x}, {:#x}) overlap",
                    a.start,
                    a.start + a.len,
                    b.start,
                    b.start + b.len
                ),
            ));
        }
    }
    Ok(Some(regions.into_iter().map(|(_, r)| r).collect()))
}

/// The pre-pass of a file, once per process for the same file unchanged
/// (same length and modification time): an experiment's plan, its arms
/// and the result cache's key each read the config, and a 1 GB trace takes
/// seconds to scan. The last few files are remembered. A file modified
/// less than `RACY` before its scan began is not remembered: file times
/// are coarse (a kernel tick), and a rewrite of the same length within one
/// tick would keep its time (git's "racy clean" rule).
fn scan_once(
    path: &Path,
    meta: &std::fs::Metadata,
) -> Result<(crate::workload::trace::TraceScan, Vec<Region>), Error> {
    type Scanned = (
        PathBuf,
        u64,
        Option<SystemTime>,
        crate::workload::trace::TraceScan,
        Vec<Region>,
    );
    static SCANS: Mutex<Vec<Scanned>> = Mutex::new(Vec::new());
    let (len, mtime) = (meta.len(), meta.modified().ok());
    let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let hit = |s: &Scanned| s.0 == canon && s.1 == len && s.2 == mtime && mtime.is_some();
    if let Ok(scans) = SCANS.lock() {
        if let Some(s) = scans.iter().find(|s| hit(s)) {
            return Ok((s.3.clone(), s.4.clone()));
        }
    }
    const RACY: std::time::Duration = std::time::Duration::from_secs(2);
    let began = SystemTime::now();
    let (sc, regions) = scan(path)?;
    let settled = mtime.is_some_and(|m| m + RACY <= began);
    if !settled {
        return Ok((sc, regions));
    }
    if let Ok(mut scans) = SCANS.lock() {
        scans.retain(|s| s.0 != canon);
        if scans.len() >= 8 {
            scans.remove(0);
        }
        scans.push((canon, len, mtime, sc.clone(), regions.clone()));
    }
    Ok((sc, regions))
}

pub fn parse(
    w: &mut Fields,
    preset: &Preset,
    scale: f64,
    base_dir: Option<&Path>,
) -> Result<TraceConfig, Error> {
    if scale != 1.0 {
        // A trace is what one run of the program did: nothing in it scales.
        return Err(cfg_err(
            "scale",
            format!("{scale} is not accepted for a trace workload, which has no size to scale; accepted: 1"),
        ));
    }
    let trace = w.string("trace")?;
    let path = resolve_path(&trace, base_dir);
    let tkey = w.key("trace");
    let meta =
        std::fs::metadata(&path).map_err(|e| cfg_err(&tkey, format!("{}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(cfg_err(
            &tkey,
            format!("{}: not a regular file", path.display()),
        ));
    }
    let rkey = w.key("regions");
    let given = match w.take_value("regions") {
        None => None,
        Some(v) => parse_regions(&rkey, v)?,
    };
    let nr_cpus = preset.cpu.sockets * preset.cpu.cores_per_socket * preset.cpu.threads_per_core;
    let ckey = w.key("cpus");
    let cpus = match w.take_value("cpus") {
        None => None,
        Some(Value::Array(a)) if !a.is_empty() => {
            let mut cpus = Vec::new();
            for (i, v) in a.iter().enumerate() {
                let cpu = as_u64(&format!("{ckey}[{i}]"), v)?;
                if cpu >= nr_cpus {
                    return Err(cfg_err(
                        format!("{ckey}[{i}]"),
                        format!(
                            "{cpu} is not a CPU of {}; accepted: 0..{}",
                            preset.name,
                            nr_cpus - 1
                        ),
                    ));
                }
                if cpus.contains(&cpu) {
                    return Err(cfg_err(
                        format!("{ckey}[{i}]"),
                        format!("CPU {cpu} is given twice"),
                    ));
                }
                cpus.push(cpu);
            }
            Some(cpus)
        }
        Some(other) => {
            return Err(cfg_err(
                &ckey,
                format!(
                    "{} is not accepted; accepted: a non-empty list of CPUs",
                    show(&other)
                ),
            ))
        }
    };
    let (scan, auto) = scan_once(&path, &meta)?;
    if scan.accesses == 0 {
        // Nothing would be replayed or checked: a wrong file, or a trace
        // made without --trace-mem=yes.
        return Err(cfg_err(
            &tkey,
            format!(
                "{}: no data access records (` L`, ` S`, ` M` lines) in {} lines; was it made with valgrind --tool=lackey --trace-mem=yes?",
                path.display(),
                scan.lines
            ),
        ));
    }
    let regions = given.clone().unwrap_or(auto);
    let total: u64 = regions.iter().map(|r| r.len).sum();
    if total > MAX_REGION_BYTES {
        return Err(cfg_err(
            &rkey,
            format!(
                "{} MiB of regions; at most {} MiB (the data check keeps a tag per page of each)",
                total >> 20,
                MAX_REGION_BYTES >> 20
            ),
        ));
    }
    Ok(TraceConfig {
        trace,
        path,
        regions_auto: given.is_none(),
        regions,
        cpus,
        scan,
    })
}
