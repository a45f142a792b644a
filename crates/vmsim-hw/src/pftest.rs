//! The `pf-test` command: the kernel's own fault-time clearing on this host,
//! in the manner of `perf bench mem map -f demand` (docs/mechanisms.md#pf-test-and-perf-bench-mem-map):
//! map, touch one byte per page so each page is demand-faulted (and cleared
//! by the kernel), time it, unmap.

use crate::opts::{round3, stats, Opts};
use crate::sys::{self, read_trim, Backing, Mapping};
use crate::{host, HwError};
use serde_json::{json, Value};
use std::time::Instant;

const KINDS: [&str; 4] = ["hugetlb-2m", "hugetlb-1g", "thp", "4k"];
const ACCEPTED: [&str; 3] = ["size_mib", "kinds", "reps"];

/// Restores a hugetlb pool size when dropped, so an error or early return
/// never leaves the host's reservation changed.
pub(crate) struct PoolGuard {
    path: String,
    original: u64,
}

impl Drop for PoolGuard {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.path, self.original.to_string()) {
            // Not a progress note: the host was left changed, so always said.
            eprintln!(
                "vmsim hw: could not restore {} to {}: {e}",
                self.path, self.original
            );
        }
    }
}

fn pool_dir(kib: u64) -> String {
    format!("/sys/kernel/mm/hugepages/hugepages-{kib}kB")
}

fn read_u64(path: &str) -> Option<u64> {
    read_trim(path)?.parse().ok()
}

/// Makes `needed` free pages of `kib` KiB available; the guard undoes it
/// (`store-sweep` reserves its buffer the same way).
pub(crate) fn reserve(kib: u64, needed: u64) -> Result<PoolGuard, String> {
    if !sys::is_root() {
        return Err("not root: cannot change the hugetlb pool".into());
    }
    let dir = pool_dir(kib);
    let path = format!("{dir}/nr_hugepages");
    let original = read_u64(&path)
        .ok_or_else(|| format!("{path} not readable: no {kib} KiB hugetlb support"))?;
    // Free pages that a reservation has not already promised to a mapping.
    let free = read_u64(&format!("{dir}/free_hugepages"))
        .unwrap_or(0)
        .saturating_sub(read_u64(&format!("{dir}/resv_hugepages")).unwrap_or(0));
    let guard = PoolGuard {
        path: path.clone(),
        original,
    };
    if free < needed {
        // The pool grows by what is missing, from the host's free memory.
        let grow = needed - free;
        if let Some(avail) = crate::ctl::mem_available() {
            if grow * kib * 1024 > avail / 4 * 3 {
                return Err(format!(
                    "{grow} more {kib} KiB pages ({} MiB) would take more than three quarters of the host's {} MiB available memory",
                    (grow * kib) >> 10,
                    avail >> 20
                ));
            }
        }
        let want = original + grow;
        std::fs::write(&path, want.to_string())
            .map_err(|e| format!("writing {want} to {path}: {e}"))?;
    }
    let got = read_u64(&format!("{dir}/free_hugepages")).unwrap_or(0);
    if got < needed {
        return Err(format!(
            "reservation fell short: {got} of {needed} free {kib} KiB pages (memory fragmented?)"
        ));
    }
    Ok(guard)
}

/// Bytes touched between two looks at the stop flag: a SIGINT or SIGTERM
/// is acted on within a few milliseconds of faults, not at the end of a rep
/// (seconds for 1 GiB of 4 KiB pages on a slow host).
const CHECK_EVERY_BYTES: usize = 16 << 20;

/// One rep: map, touch one byte per `stride`, unmap. Returns seconds spent
/// touching; `Err(Interrupted)` as soon as a stop is asked for.
fn one_rep(bytes: usize, backing: Backing, stride: usize) -> Result<(f64, Option<u64>), HwError> {
    let m = Mapping::anon(bytes, backing)?;
    let p = m.as_ptr();
    let chunk = CHECK_EVERY_BYTES.max(stride);
    let t0 = Instant::now();
    for start in (0..bytes).step_by(chunk) {
        crate::ctl::check()?;
        for off in (start..bytes.min(start + chunk)).step_by(stride) {
            // SAFETY: off < bytes, inside the mapping.
            unsafe { std::ptr::write_volatile(p.add(off), 1) };
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    let thp = if backing == Backing::Thp {
        m.anon_huge_kib()
    } else {
        None
    };
    Ok((dt, thp))
}

fn run_kind(kind: &str, size_mib: u64, reps: usize) -> Result<Value, HwError> {
    let (backing, stride, pool_kib): (Backing, usize, Option<u64>) = match kind {
        "hugetlb-2m" => (Backing::Hugetlb(21), 2 << 20, Some(2048)),
        "hugetlb-1g" => (Backing::Hugetlb(30), 1 << 30, Some(1 << 20)),
        "thp" => (Backing::Thp, 2 << 20, None),
        _ => (Backing::Small, 4096, None),
    };
    // Whole pages only: a 1 GiB kind rounds the size up to at least one page.
    let bytes = ((size_mib as usize) << 20).div_ceil(stride).max(1) * stride;
    let _guard = match pool_kib {
        Some(kib) => match reserve(kib, (bytes / stride) as u64) {
            Ok(g) => Some(g),
            Err(why) => return Ok(json!({"kind": kind, "skipped": why})),
        },
        None => None,
    };
    crate::ctl::note(&format!(
        "pf-test {kind} {} MiB x {reps} (+1 warm-up)",
        bytes >> 20
    ));
    let mut gbps = Vec::new();
    let mut cold = None;
    let mut thp_kib = None;
    for rep in 0..=reps {
        crate::ctl::check()?;
        match one_rep(bytes, backing, stride) {
            Err(e @ HwError::Interrupted(_)) => return Err(e),
            Ok((dt, thp)) => {
                let g = bytes as f64 / dt / 1e9;
                if rep == 0 {
                    cold = Some(round3(g));
                } else {
                    gbps.push(g);
                }
                thp_kib = thp_kib.or(thp);
            }
            Err(e) => return Ok(json!({"kind": kind, "skipped": e.to_string()})),
        }
    }
    let mut r = json!({"kind": kind, "bytes": bytes, "faults_per_rep": bytes / stride,
                       "warm": true, "gbps": stats(&gbps), "cold_first_rep_gbps": cold});
    if backing == Backing::Thp {
        r["anon_huge_kib"] = json!(thp_kib);
        r["thp_observed"] = json!(thp_kib.is_some_and(|k| k > 0));
        r["thp_enabled"] = json!(host::thp_mode());
    }
    Ok(r)
}

pub fn run(opts_json: &str) -> Result<Value, HwError> {
    let opts = Opts::parse(opts_json, &ACCEPTED)?;
    let size_mib = opts.u64("size_mib", 1024, 1, 1 << 20)?;
    let reps = opts.u64("reps", 3, 1, 1000)? as usize;
    let kinds = opts
        .names("kinds", &KINDS)?
        .unwrap_or(KINDS.iter().map(|s| s.to_string()).collect());
    // Hugetlb pages are not counted here: the pool check in `reserve` covers them.
    if kinds.iter().any(|k| k == "thp" || k == "4k") {
        crate::ctl::guard_memory("size_mib", (size_mib << 20) + (2 << 20))?;
    }
    let results: Vec<Value> = kinds
        .iter()
        .map(|k| run_kind(k, size_mib, reps))
        .collect::<Result<_, _>>()?;
    Ok(json!({
        "host": host::info(),
        "command": "pf-test",
        "options": {"size_mib": size_mib, "kinds": kinds, "reps": reps},
        "method": "mmap anonymous, write one byte per page (one demand fault each), time the touch loop with CLOCK_MONOTONIC, munmap; first rep untimed (warm-up, reported as cold_first_rep_gbps); hugetlb pools raised as needed and restored afterwards",
        "results": results,
    }))
}
