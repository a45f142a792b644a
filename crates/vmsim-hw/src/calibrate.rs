//! The `calibrate` command: measure this host's caches, memory and kernel
//! costs, and write them as a machine preset (`host-<name>.toml`) in which
//! every value says where it came from.

use crate::measure as m;
use crate::opts::{round3, Opts};
use crate::sys::{self, Backing, HPAGE, SUBPAGE};
use crate::{config_err, host, preset, HwError};
use serde_json::{json, Value};

const ACCEPTED: [&str; 3] = ["name", "out_dir", "quick"];

/// Everything measured, in host units (ns, GB/s, GHz); the preset converts.
pub(crate) struct Raw {
    pub quick: bool,
    pub core_ghz: f64,
    pub tsc_ghz: f64,
    pub chase: Vec<(usize, f64)>,
    /// Chase latency at the largest size with 4 KiB pages instead of THP.
    pub chase_4k: Option<(usize, f64)>,
    pub bw_bytes: usize,
    pub store_gbps: f64,
    pub nt_gbps: f64,
    pub movnti_gbps: f64,
    pub nt_how: &'static str,
    pub read_gbps: f64,
    pub l1_store_bpns: f64,
    pub l1_load_bpns: f64,
    pub l1_load_how: &'static str,
    pub syscall_ns: f64,
    pub fault4k_ns: f64,
    pub free4k_ns: f64,
    pub clear4k_ns: f64,
    pub thp_fault_ns: f64,
    pub thp_kib: Option<u64>,
    pub thp_bytes: usize,
    pub clear2m_ns: f64,
    pub ctxsw_ns: Option<f64>,
    pub tail_touch: Vec<(usize, f64)>,
    /// The same read of flushed memory that no store rewrote.
    pub cold_touch_ns: f64,
}

fn sanitise(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let t = t.trim_matches('-').to_string();
    if t.is_empty() {
        "host".into()
    } else {
        t
    }
}

fn measure_all(quick: bool) -> Result<Raw, HwError> {
    let llc = host::llc_bytes() as usize;
    let say = |what: &str| -> Result<(), HwError> {
        crate::ctl::check()?;
        crate::ctl::note(&format!("calibrate: {what}"));
        Ok(())
    };
    say("core clock")?;
    let core_ghz = m::core_ghz(if quick { 2_000_000 } else { 50_000_000 });
    let tsc_ghz = sys::measure_tsc_ghz();
    let sizes: Vec<usize> = if quick {
        vec![8 << 10, 32 << 10, 256 << 10]
    } else {
        (13..=29).map(|s| 1usize << s).collect() // 8 KiB .. 512 MiB
    };
    let loads = if quick { 20_000 } else { 2_000_000 };
    let mut chase = Vec::new();
    for &s in &sizes {
        say(&format!("pointer chase {} KiB", s >> 10))?;
        chase.push((s, m::chase_ns(s, Backing::Thp, loads)?));
    }
    let big = *sizes.last().unwrap();
    let chase_4k = if quick {
        None
    } else {
        Some((big, m::chase_ns(big, Backing::Small, loads)?))
    };
    // DRAM bandwidth wants a buffer well beyond the LLC in every mode: a
    // smaller one measures the cache. Quick mode makes fewer passes instead.
    let bw_bytes = (4 * llc).max(64 << 20);
    crate::ctl::guard_memory("calibrate", bw_bytes as u64)?;
    let passes = if quick { 1 } else { 4 };
    say("bandwidths")?;
    let store_gbps = m::stosb_gbps(bw_bytes, passes)?;
    let (movnti_gbps, nt_gbps, nt_how) = m::nt_gbps(bw_bytes, passes)?;
    let read_gbps = m::read_gbps(bw_bytes, passes)?;
    let (l1_store_bpns, l1_load_bpns, l1_load_how) =
        m::l1_store_load_bytes_per_ns(if quick { 200 } else { 50_000 })?;
    say("system call, faults, context switch")?;
    let syscall_ns = m::syscall_ns(if quick { 20_000 } else { 1_000_000 });
    let f4k = if quick { 4 << 20 } else { 64 << 20 };
    let (fault4k_ns, free4k_ns, _) = m::fault_ns(f4k, Backing::Small, SUBPAGE)?;
    let clear4k_ns = m::clear_ns(
        if quick {
            4 << 20
        } else {
            (4 * llc).max(64 << 20)
        },
        SUBPAGE,
    )?;
    let thp_bytes = if quick { 8 << 20 } else { 512 << 20 };
    let (thp_fault_ns, _, thp_kib) = m::fault_ns(thp_bytes, Backing::Thp, HPAGE)?;
    let clear2m_ns = m::clear_ns(if quick { 8 << 20 } else { 4 * llc }, HPAGE)?;
    let ctxsw_ns = m::context_switch_ns(if quick { 2_000 } else { 50_000 }).ok();
    say("string-store cache allocation probe")?;
    let probe: Vec<usize> = if quick {
        vec![64 << 10, 1 << 20]
    } else {
        (14..=26).step_by(1).map(|s| 1usize << s).collect() // 16 KiB .. 64 MiB
    };
    let mut tail_touch = Vec::new();
    for s in probe {
        tail_touch.push((
            s,
            m::stosb_tail_touch_ns(s, if quick { 3 } else { 7 }, tsc_ghz)?,
        ));
    }
    let cold_touch_ns = m::stosb_tail_touch_ns(0, if quick { 3 } else { 7 }, tsc_ghz)?;
    Ok(Raw {
        quick,
        core_ghz,
        tsc_ghz,
        chase,
        chase_4k,
        bw_bytes,
        store_gbps,
        nt_gbps,
        movnti_gbps,
        nt_how,
        read_gbps,
        l1_store_bpns,
        l1_load_bpns,
        l1_load_how,
        syscall_ns,
        fault4k_ns,
        free4k_ns,
        clear4k_ns,
        thp_fault_ns,
        thp_kib,
        thp_bytes,
        clear2m_ns,
        ctxsw_ns,
        tail_touch,
        cold_touch_ns,
    })
}

pub fn run(opts_json: &str) -> Result<Value, HwError> {
    let opts = Opts::parse(opts_json, &ACCEPTED)?;
    let quick = opts.bool("quick")?.unwrap_or(false);
    let name = sanitise(&opts.string("name")?.unwrap_or_else(host::hostname));
    let out_dir = std::path::PathBuf::from(opts.string("out_dir")?.unwrap_or_else(|| ".".into()));
    if !out_dir.is_dir() {
        return Err(config_err(
            "out_dir",
            format!("'{}' is not a directory", out_dir.display()),
        ));
    }
    // Measure on a pinned thread so the caller's own affinity is left alone.
    let raw = std::thread::spawn(move || {
        let pin = sys::pin_to_cpu(0).err().map(|e| e.to_string());
        measure_all(quick).map(|r| (r, pin))
    })
    .join()
    .map_err(|_| HwError::Io("calibration thread panicked".into()))??;
    let (raw, pin_note) = raw;
    let (text, derived) = preset::render(&name, &raw);
    let path = out_dir.join(format!("host-{name}.toml"));
    std::fs::write(&path, text)
        .map_err(|e| HwError::Io(format!("writing {}: {e}", path.display())))?;
    let kv = |v: &[(usize, f64)], key: &str| -> Vec<Value> {
        v.iter()
            .map(|&(s, ns)| json!({"bytes": s, key: round3(ns)}))
            .collect()
    };
    Ok(json!({
        "host": host::info(),
        "command": "calibrate",
        "options": {"name": name, "out_dir": out_dir.display().to_string(), "quick": quick},
        "preset_path": path.display().to_string(),
        "pinning": pin_note.unwrap_or_else(|| "measuring thread pinned to CPU 0".into()),
        "raw": {
            "core_ghz_add_chain": round3(raw.core_ghz),
            "tsc_ghz": round3(raw.tsc_ghz),
            "chase_ns_thp": kv(&raw.chase, "ns"),
            "chase_ns_4k_pages": raw.chase_4k.map(|(s, ns)| json!({"bytes": s, "ns": round3(ns)})),
            "bandwidth_buffer_bytes": raw.bw_bytes,
            "store_rep_stosb_gbps": round3(raw.store_gbps),
            "store_nontemporal_gbps": round3(raw.nt_gbps),
            "store_nontemporal_method": raw.nt_how,
            "store_movnti_gbps": round3(raw.movnti_gbps),
            "read_gbps": round3(raw.read_gbps),
            "l1_store_bytes_per_ns": round3(raw.l1_store_bpns),
            "l1_load_bytes_per_ns": round3(raw.l1_load_bpns),
            "l1_load_method": raw.l1_load_how,
            "syscall_getppid_ns": round3(raw.syscall_ns),
            "fault_4k_ns": round3(raw.fault4k_ns),
            "munmap_per_4k_page_ns": round3(raw.free4k_ns),
            "clear_4k_rep_stosb_ns": round3(raw.clear4k_ns),
            "fault_thp_ns": round3(raw.thp_fault_ns),
            "fault_thp_anon_huge_kib": raw.thp_kib,
            "clear_2m_target_last_ns": round3(raw.clear2m_ns),
            "context_switch_ns": raw.ctxsw_ns.map(round3),
            "stosb_tail_touch_ns": kv(&raw.tail_touch, "ns"),
            "cold_4k_touch_ns": round3(raw.cold_touch_ns),
        },
        "derived": derived,
    }))
}
