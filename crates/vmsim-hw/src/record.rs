//! A calibration's record: the host's facts and the raw measurements that
//! `calibrate` renders its preset from, as JSON.
//!
//! `vmsim hw calibrate` puts the record in its output (`record`), and
//! `calibrate` with `record=FILE` renders a preset from a saved one without
//! measuring. The tests render the recorded hosts in `tests/hosts/` this
//! way, so the derivation is tested on hosts other than the one the tests
//! run on.
//!
//! Invariant: rendering a record depends on nothing but the record, the
//! preset's name and the time stamp.

use crate::calibrate::Raw;
use crate::host::HostFacts;
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
                crate::preset::utc_now()
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

/// An `f64` that may be NaN (an empty set of repetitions), as JSON: NaN
/// is written as null and null read back as NaN.
pub mod nan {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        if x.is_finite() {
            s.serialize_f64(*x)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}
