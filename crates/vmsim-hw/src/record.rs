//! A calibration's record: the host's facts ([`HostFacts`]) and the raw
//! measurements ([`Raw`]) that `calibrate` renders its preset from, as
//! JSON. [`Raw`] lives here rather than in `calibrate` because the
//! measuring side (`calibrate`) and the rendering side (`preset`) both read
//! it, and the renderer must not depend on the command that calls it.
//!
//! `vmsim hw calibrate` puts the record in its output (`record`), and
//! `calibrate` with `record=FILE` renders a preset from a saved one without
//! measuring. The tests render the recorded hosts in `tests/hosts/` this
//! way, so the derivation is tested on hosts other than the one the tests
//! run on.
//!
//! Invariants: rendering a record depends on nothing but the record, the
//! preset's name and the time stamp. [`Raw`]'s fields are part of the
//! layout that [`VERSION`] names (both it and [`Record`] refuse unknown
//! fields).

use crate::host::HostFacts;
use crate::measure::L1Rates;
use crate::reps::Summary;
use crate::storeq::StoreQueueProbe;
use crate::HwError;
use serde::{Deserialize, Serialize};

/// The record's layout version; a record of another version is refused.
pub const VERSION: u32 = 1;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub version: u32,
    /// Where the record came from: "measured by vmsim hw calibrate", or how
    /// a hand-made one was put together.
    pub provenance: String,
    pub facts: HostFacts,
    pub raw: Raw,
}

impl Record {
    pub fn new(facts: HostFacts, raw: Raw) -> Record {
        Record {
            version: VERSION,
            provenance: format!(
                "measured by vmsim hw calibrate at {}",
                crate::sys::utc_now()
            ),
            facts,
            raw,
        }
    }

    /// A record from JSON: a record itself, or a whole `calibrate` output
    /// holding one under `record`. `key` names the option it came from.
    pub fn from_json(key: &str, text: &str) -> Result<Record, HwError> {
        let bad = |m: String| crate::config_err(key, m);
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let v = match v.get("record") {
            Some(r) if v.get("command").is_some() => r.clone(),
            _ => v,
        };
        match v.get("version").and_then(|x| x.as_u64()) {
            Some(n) if n == VERSION as u64 => {}
            Some(n) => {
                return Err(bad(format!(
                    "a record of version {n}; this vmsim reads version {VERSION}"
                )))
            }
            None => {
                return Err(bad(
                    "no record: expected a calibrate output with \"record\", or a record with \"version\", \"provenance\", \"facts\" and \"raw\"".into(),
                ))
            }
        }
        serde_json::from_value(v).map_err(|e| bad(format!("not a calibration record: {e}")))
    }

    /// Reads a record from the file at `path`.
    pub fn load(key: &str, path: &str) -> Result<Record, HwError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| crate::config_err(key, format!("cannot read '{path}': {e}")))?;
        Record::from_json(key, &text)
    }
}

/// Everything measured, in host units (ns, GB/s, GHz); the preset converts.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Raw {
    pub quick: bool,
    pub core_ghz: f64,
    pub tsc_ghz: f64,
    /// Per sweep size, the lowest ns per load of its clean repetitions.
    pub chase: Vec<(usize, f64)>,
    /// The repetitions behind each `chase` figure, in the same order.
    pub chase_reps: Vec<Summary>,
    /// At the largest size, what 4 KiB pages add to a dependent load over
    /// THP: the median of paired repetitions (`micro::walk_extra`).
    pub walk_extra: Option<(usize, f64)>,
    pub walk_extra_reps: Option<Summary>,
    pub bw_bytes: usize,
    pub store_gbps: f64,
    pub nt_gbps: f64,
    pub movnti_gbps: f64,
    /// One core's `clzero` over the same buffer (GB/s; 0 without clzero).
    pub clzero_gbps: f64,
    /// What an `sfence` after a 4 KiB call of non-temporal stores costs
    /// (ns per call, the median of paired repetitions; None in quick mode).
    pub sfence_drain_ns: Option<f64>,
    /// The store the drain was measured with ("" when not measured).
    pub sfence_drain_how: String,
    pub nt_how: String,
    pub read_gbps: f64,
    /// Load bandwidth of one core streaming over half of its L2 and over
    /// half of the LLC (GB/s; 0 when the level's size is unknown).
    pub l2_load_gbps: f64,
    pub llc_load_gbps: f64,
    /// Load bandwidth of every CPU of socket 0 at once over a DRAM-sized
    /// buffer (GB/s; 0 on a one-CPU host), and how many CPUs read.
    pub all_cpu_load_gbps: f64,
    pub all_cpus: u64,
    /// The L1's store and load rates and two short `rep stosb` calls, each
    /// figure the fastest of `l1_spells`.
    pub l1: L1Rates,
    /// The same, timed in spells apart in the calibration (before the
    /// system call, after the faults and clears, at the end): on a shared
    /// host the core's other thread can be busy for a whole spell of 20 ms,
    /// which slows every figure of it (on a Zen 3 guest one calibration's
    /// only spell read 16 B and one store a cycle where others read 32 B
    /// and two).
    pub l1_spells: Vec<L1Rates>,
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
    pub tail_touch_reps: Vec<Summary>,
    /// The same read of flushed memory that no store rewrote.
    pub cold_touch_ns: f64,
    /// A `mov` clear in 4 KiB calls of a THP-backed DRAM-sized buffer,
    /// ascending and descending page order (GB/s; none in quick mode).
    pub page_order_mov: Option<(Summary, Summary)>,
    /// `rep stosb` clearing the same buffer in calls of each size (bytes,
    /// GB/s; none in quick mode).
    pub stosb_calls: Vec<(usize, Summary)>,
    /// The store-queue probe's runs (none in quick mode).
    pub store_queue: Vec<StoreQueueProbe>,
    /// The repetitions behind each repeated scalar figure, by its key in `raw`.
    pub reps: Vec<(String, Summary)>,
}
