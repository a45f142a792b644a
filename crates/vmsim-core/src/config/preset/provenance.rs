//! Where each preset value comes from: its class (sourced, measured,
//! calibrated, judgement, copied, or a user's), and for a value no source
//! or measurement settles, the plausible range a screening varies it over.
//!
//! Invariants: a judgement, copied or calibrated value has a range with its
//! reason; a sourced or measured one has none; a numeric range is
//! `[low, high]` with low < high holding the value (integers for an integer
//! value); any other range lists at least two alternatives, the value among
//! them. Whether each end is a value the field accepts is the field's own
//! check: `Preset::parse_with` applied to the end. A value that cannot
//! move alone (Cluster-on-Die splits the LLC and the node together) names
//! the values that move with it, `range_with`, one per end of its range;
//! the values at the preset's own end are the preset's.

use super::super::fields::{cfg_err, show, Fields};
use crate::error::Error;
use serde::Serialize;
use std::collections::BTreeMap;
use toml::Value;

/// The classes a value may have; `user` is what a user's preset value
/// without a class gets.
pub const CLASSES: &[&str] = &[
    "sourced",
    "measured",
    "calibrated",
    "judgement",
    "copied",
    "user",
];

/// The classes whose values must carry a plausible range.
pub const RANGED: &[&str] = &["calibrated", "judgement", "copied"];

/// One value's provenance.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Provenance {
    pub class: String,
    /// The value as the preset writes it (what a screening varies).
    pub value: Value,
    /// `[low, high]` for a number; the alternatives otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range_reason: Option<String>,
    /// Dotted key -> its value at each end (or alternative) of `range`: the
    /// values a screening sets with this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range_with: Option<BTreeMap<String, Vec<Value>>>,
}

impl Provenance {
    /// The class, range and reason of `leaf` (a preset value's table), its
    /// `value` already taken as `value`.
    pub fn read(leaf: &mut Fields, value: &Value) -> Result<Provenance, Error> {
        let class = leaf.str_opt("class");
        let range = leaf.take_value("range");
        let reason = leaf.str_opt("range_reason");
        let with = leaf.take_value("range_with");
        let class = match class? {
            None => "user".to_string(),
            Some(c) if CLASSES.contains(&c.as_str()) => c,
            Some(c) => {
                return Err(cfg_err(
                    leaf.key("class"),
                    format!(
                        "{} is not a class; accepted: {}",
                        show(&Value::String(c)),
                        super::super::fields::quote_list(CLASSES)
                    ),
                ))
            }
        };
        let reason = reason?;
        let ranged = RANGED.contains(&class.as_str());
        match (&range, &reason) {
            (None, _) if ranged => {
                return Err(cfg_err(
                    leaf.key("range"),
                    format!("missing: a {class} value gives its plausible range, [low, high] or the alternatives, and range_reason"),
                ))
            }
            (Some(_), _) if class == "sourced" || class == "measured" => {
                return Err(cfg_err(
                    leaf.key("range"),
                    format!("given, but a {class} value has no plausible range (its source settles it); class it judgement if it is uncertain"),
                ))
            }
            (Some(_), None) => {
                return Err(cfg_err(
                    leaf.key("range_reason"),
                    "missing: a range says where it comes from",
                ))
            }
            (None, Some(_)) => {
                return Err(cfg_err(
                    leaf.key("range_reason"),
                    "given without a range",
                ))
            }
            _ => {}
        }
        if let Some(r) = &range {
            check_range(&leaf.key("range"), r, value)?;
        }
        if reason.as_deref().is_some_and(|r| r.trim().is_empty()) {
            return Err(cfg_err(leaf.key("range_reason"), "must not be empty"));
        }
        let range_with = match (with, &range) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(cfg_err(leaf.key("range_with"), "given without a range"))
            }
            (Some(w), Some(Value::Array(r))) => {
                Some(read_with(&leaf.key("range_with"), w, r.len())?)
            }
            (Some(_), Some(_)) => None,
        };
        Ok(Provenance {
            class,
            value: value.clone(),
            range: range.map(|r| match r {
                Value::Array(a) => a,
                _ => unreachable!("check_range accepts arrays only"),
            }),
            range_reason: reason,
            range_with,
        })
    }

    /// The points a screening runs the value at: the range's ends, or its
    /// alternatives, but the value itself (an end equal to it would only
    /// repeat the run at the preset's values).
    pub fn screen_points(&self) -> Vec<Value> {
        self.screen_sets("")
            .into_iter()
            .map(|mut s| s.remove(0).1)
            .collect()
    }

    /// The values a screening sets at each of its points: `key` (this
    /// value's) at the end, then each value of `range_with` at the same end.
    pub fn screen_sets(&self, key: &str) -> Vec<Vec<(String, Value)>> {
        let Some(r) = &self.range else {
            return Vec::new();
        };
        r.iter()
            .enumerate()
            .filter(|(_, v)| **v != self.value)
            .map(|(i, v)| {
                let mut sets = vec![(key.to_string(), v.clone())];
                for (k, vs) in self.range_with.iter().flatten() {
                    sets.push((k.clone(), vs[i].clone()));
                }
                sets
            })
            .collect()
    }
}

/// `range_with`: a table of dotted keys, each with one value per element of
/// the range (`n`).
fn read_with(key: &str, w: Value, n: usize) -> Result<BTreeMap<String, Vec<Value>>, Error> {
    let Value::Table(t) = w else {
        return Err(cfg_err(
            key,
            format!("expected a table of dotted keys, each with {n} values, one per end of the range (e.g. {{ \"llc.size_kib\" = [46080, 23040] }}), got {}", show(&w)),
        ));
    };
    let mut out = BTreeMap::new();
    for (k, v) in t {
        let at = format!("{key}.{k}");
        match v {
            Value::Array(a) if a.len() == n => {
                out.insert(k, a);
            }
            o => {
                return Err(cfg_err(
                    at,
                    format!(
                        "expected {n} values, one per end of the range, got {}",
                        show(&o)
                    ),
                ))
            }
        }
    }
    if out.is_empty() {
        return Err(cfg_err(key, "must name at least one value"));
    }
    Ok(out)
}

fn is_number(v: &Value) -> bool {
    matches!(v, Value::Integer(_) | Value::Float(_))
}

fn num(v: &Value) -> f64 {
    match v {
        Value::Integer(i) => *i as f64,
        Value::Float(f) => *f,
        _ => f64::NAN,
    }
}

fn check_range(key: &str, range: &Value, value: &Value) -> Result<(), Error> {
    let Value::Array(r) = range else {
        return Err(cfg_err(
            key,
            format!(
                "expected [low, high] or a list of alternatives, got {}",
                show(range)
            ),
        ));
    };
    if is_number(value) {
        let ints = matches!(value, Value::Integer(_));
        let ok = r.len() == 2
            && r.iter().all(|e| {
                if ints {
                    matches!(e, Value::Integer(_))
                } else {
                    is_number(e)
                }
            });
        if !ok {
            let kind = if ints { "two integers" } else { "two numbers" };
            return Err(cfg_err(
                key,
                format!("expected [low, high], {kind}, got {}", show(range)),
            ));
        }
        let (lo, hi, x) = (num(&r[0]), num(&r[1]), num(value));
        if !(lo < hi && lo <= x && x <= hi) {
            return Err(cfg_err(
                key,
                format!(
                    "{} does not hold the value {}: low < high, and low <= value <= high (a value of your own: class = \"user\", without range and range_reason)",
                    show(range),
                    show(value)
                ),
            ));
        }
        return Ok(());
    }
    if r.len() < 2 || !r.contains(value) {
        return Err(cfg_err(
            key,
            format!(
                "expected the alternatives, at least two, the value {} among them; got {}",
                show(value),
                show(range)
            ),
        ));
    }
    for (i, a) in r.iter().enumerate() {
        if r[..i].contains(a) {
            return Err(cfg_err(key, format!("{} is listed twice", show(a))));
        }
    }
    Ok(())
}
