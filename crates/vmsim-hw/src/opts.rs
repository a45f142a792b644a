//! Option parsing with errors that name the key, and summary statistics.

use crate::{config_err, HwError};
use serde_json::{json, Map, Value};

/// A command's options, checked against the keys it accepts.
pub struct Opts {
    map: Map<String, Value>,
}

impl Opts {
    pub fn parse(text: &str, accepted: &[&str]) -> Result<Opts, HwError> {
        let text = if text.trim().is_empty() { "{}" } else { text };
        let value: Value = serde_json::from_str(text)
            .map_err(|e| config_err("<options>", format!("not valid JSON: {e}")))?;
        let Value::Object(map) = value else {
            return Err(config_err("<options>", "options must be a JSON object"));
        };
        if let Some(bad) = map.keys().find(|k| !accepted.contains(&k.as_str())) {
            return Err(config_err(
                bad,
                format!("unknown option; accepted keys: {}", accepted.join(", ")),
            ));
        }
        Ok(Opts { map })
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub fn u64(&self, key: &str, default: u64, min: u64, max: u64) -> Result<u64, HwError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => match v.as_u64() {
                Some(x) if (min..=max).contains(&x) => Ok(x),
                _ => Err(config_err(
                    key,
                    format!("expected an integer in {min}..={max}, got {v}"),
                )),
            },
        }
    }

    pub fn bool(&self, key: &str) -> Result<Option<bool>, HwError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(config_err(key, format!("expected true or false, got {v}"))),
        }
    }

    pub fn string(&self, key: &str) -> Result<Option<String>, HwError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(config_err(key, format!("expected a string, got {v}"))),
        }
    }

    /// A list of names, each checked against `accepted`.
    pub fn names(&self, key: &str, accepted: &[&str]) -> Result<Option<Vec<String>>, HwError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let list = match v {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .map(|x| x.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| config_err(key, "expected a list of strings"))?,
            _ => {
                return Err(config_err(
                    key,
                    format!("expected a list of strings, got {v}"),
                ))
            }
        };
        if list.is_empty() {
            return Err(config_err(
                key,
                format!("empty list; accepted: {}", accepted.join(", ")),
            ));
        }
        if let Some(bad) = list.iter().find(|s| !accepted.contains(&s.as_str())) {
            return Err(config_err(
                key,
                format!("unknown value '{bad}'; accepted: {}", accepted.join(", ")),
            ));
        }
        Ok(Some(list))
    }

    pub fn echo(&self) -> Value {
        Value::Object(self.map.clone())
    }
}

/// Median, min, max and sample standard deviation.
pub fn stats(xs: &[f64]) -> Value {
    if xs.is_empty() {
        return json!(null);
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = median(&v);
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    json!({"median": round3(median), "min": round3(v[0]), "max": round3(v[n - 1]),
           "stdev": round3(var.sqrt()), "n": n})
}

pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
