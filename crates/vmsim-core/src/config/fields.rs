//! A consuming reader over a TOML table that knows the dotted path of every
//! value, so each configuration error names the exact key and what it accepts.
//!
//! Invariant: every key of a table is either taken by the caller or reported
//! by `finish()` as unknown — nothing is silently ignored.

use crate::error::Error;
use std::path::{Path, PathBuf};
use toml::Value;

pub struct Fields {
    path: String,
    table: toml::Table,
    accepted: Vec<&'static str>,
}

pub fn cfg_err(key: impl Into<String>, message: impl Into<String>) -> Error {
    Error::Config {
        key: key.into(),
        message: message.into(),
    }
}

impl Fields {
    pub fn new(path: &str, table: toml::Table) -> Fields {
        Fields {
            path: path.to_string(),
            table,
            accepted: Vec::new(),
        }
    }

    pub fn from_value(path: &str, v: Value) -> Result<Fields, Error> {
        match v {
            Value::Table(t) => Ok(Fields::new(path, t)),
            other => Err(cfg_err(
                path,
                format!("expected a table, got {}", other.type_str()),
            )),
        }
    }

    /// Declares every key this table may hold and rejects any other at once,
    /// so a misspelt key is reported as unknown rather than as a missing one.
    pub fn declare(&mut self, keys: &[&'static str]) -> Result<(), Error> {
        if let Some(k) = self.table.keys().find(|k| !keys.contains(&k.as_str())) {
            let mut acc = keys.to_vec();
            acc.sort();
            acc.dedup();
            return Err(cfg_err(
                self.key(&shown_key(k)),
                format!("unknown key; accepted keys here: {}", acc.join(", ")),
            ));
        }
        Ok(())
    }

    pub fn key(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{}", self.path, name)
        }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn has(&self, name: &str) -> bool {
        self.table.contains_key(name)
    }

    fn take(&mut self, name: &'static str) -> Option<Value> {
        self.accepted.push(name);
        self.table.remove(name)
    }

    pub fn take_value(&mut self, name: &'static str) -> Option<Value> {
        self.take(name)
    }

    pub fn req(&mut self, name: &'static str) -> Result<Value, Error> {
        let key = self.key(name);
        self.take(name)
            .ok_or_else(|| cfg_err(key, "missing required key"))
    }

    pub fn u64_opt(&mut self, name: &'static str) -> Result<Option<u64>, Error> {
        let key = self.key(name);
        match self.take(name) {
            None => Ok(None),
            Some(v) => as_u64(&key, &v).map(Some),
        }
    }

    pub fn u64(&mut self, name: &'static str) -> Result<u64, Error> {
        let key = self.key(name);
        let v = self.req(name)?;
        as_u64(&key, &v)
    }

    pub fn f64_opt(&mut self, name: &'static str) -> Result<Option<f64>, Error> {
        let key = self.key(name);
        match self.take(name) {
            None => Ok(None),
            Some(v) => as_f64(&key, &v).map(Some),
        }
    }

    pub fn bool_opt(&mut self, name: &'static str) -> Result<Option<bool>, Error> {
        let key = self.key(name);
        match self.take(name) {
            None => Ok(None),
            Some(Value::Boolean(b)) => Ok(Some(b)),
            Some(o) => Err(cfg_err(
                key,
                format!("expected true or false, got {}", show(&o)),
            )),
        }
    }

    pub fn str_opt(&mut self, name: &'static str) -> Result<Option<String>, Error> {
        let key = self.key(name);
        match self.take(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(o) => Err(cfg_err(key, format!("expected a string, got {}", show(&o)))),
        }
    }

    pub fn string(&mut self, name: &'static str) -> Result<String, Error> {
        let key = self.key(name);
        self.str_opt(name)?
            .ok_or_else(|| cfg_err(key, "missing required key"))
    }

    /// A string that must be one of `choices`.
    pub fn choice_opt(
        &mut self,
        name: &'static str,
        choices: &[&str],
    ) -> Result<Option<String>, Error> {
        let key = self.key(name);
        match self.str_opt(name)? {
            None => Ok(None),
            Some(s) if choices.contains(&s.as_str()) => Ok(Some(s)),
            Some(s) => Err(cfg_err(
                key,
                format!(
                    "{} is not accepted; accepted: {}",
                    cut(&format!("{s:?}"), 60),
                    quote_list(choices)
                ),
            )),
        }
    }

    pub fn sub(&mut self, name: &'static str) -> Result<Fields, Error> {
        let key = self.key(name);
        match self.take(name) {
            None => Err(cfg_err(key, "missing required table")),
            Some(v) => Fields::from_value(&key, v),
        }
    }

    pub fn sub_opt(&mut self, name: &'static str) -> Result<Option<Fields>, Error> {
        let key = self.key(name);
        match self.take(name) {
            None => Ok(None),
            Some(v) => Fields::from_value(&key, v).map(Some),
        }
    }

    /// Rejects keys nobody took.
    pub fn finish(self) -> Result<(), Error> {
        if let Some((k, _)) = self.table.iter().next() {
            let mut acc = self.accepted.clone();
            acc.sort();
            acc.dedup();
            return Err(cfg_err(
                self.key(&shown_key(k)),
                format!("unknown key; accepted keys here: {}", acc.join(", ")),
            ));
        }
        Ok(())
    }
}

/// A key as an error names it: cut as values are, and `""` for the empty one
/// (an error keyed by nothing would name no key).
fn shown_key(k: &str) -> String {
    if k.is_empty() {
        "\"\"".to_string()
    } else {
        cut(k, 60)
    }
}

/// A value as the error message quotes it, cut to a readable length so one
/// pasted megabyte does not become a megabyte-long error line.
pub fn show(v: &Value) -> String {
    let text = match v {
        Value::String(s) => format!("{:?}", s),
        other => other.to_string(),
    };
    cut(&text, 60)
}

/// A float as an error message shows it: plain when short, else in e-notation.
pub fn show_f64(x: f64) -> String {
    if x != 0.0 && (x.abs() >= 1e9 || x.abs() < 1e-6) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// `text` cut to at most `max` characters, marked with an ellipsis when cut.
pub fn cut(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let head: String = one_line.chars().take(max).collect();
    format!("{head}… ({} characters)", text.chars().count())
}

pub fn quote_list(choices: &[&str]) -> String {
    choices
        .iter()
        .map(|c| format!("\"{}\"", c))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn as_u64(key: &str, v: &Value) -> Result<u64, Error> {
    match v {
        Value::Integer(i) if *i >= 0 => Ok(*i as u64),
        Value::Float(f) if *f >= 0.0 && f.fract() == 0.0 && *f < 9.0e15 => Ok(*f as u64),
        o => Err(cfg_err(
            key,
            format!("expected a non-negative integer, got {}", show(o)),
        )),
    }
}

pub fn as_f64(key: &str, v: &Value) -> Result<f64, Error> {
    match v {
        Value::Integer(i) => Ok(*i as f64),
        Value::Float(f) if f.is_finite() => Ok(*f),
        o => Err(cfg_err(key, format!("expected a number, got {}", show(o)))),
    }
}

/// A document that is not TOML, as a config error with the line (and the
/// column) of the fault. A value the parser cannot hold (an integer of 2^63
/// or more) is keyed by the dotted key it is given to, where the line is a
/// plain `key = value` one; anything else by `origin`.
pub fn toml_error(text: &str, e: &toml::de::Error, origin: &str) -> Error {
    // The parser's message runs over lines ("invalid array\nexpected `]`"):
    // an error is one line.
    let message = e
        .message()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let Some(start) = e
        .span()
        .map(|s| s.start)
        .filter(|&s| text.is_char_boundary(s))
    else {
        return cfg_err(origin, format!("not valid TOML: {message}"));
    };
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    let at = format!("not valid TOML (line {line}, column {column}): {message}");
    match key_on_line(&text[..line_start], &before[line_start..]) {
        Some(key) if message.contains("too large") => cfg_err(cut(&key, 200), at),
        _ => cfg_err(origin, at),
    }
}

/// The dotted key a `key = ` line (`head`, up to the fault) sets, under
/// the last `[table]` header of `above`; None when the line is not one.
fn key_on_line(above: &str, head: &str) -> Option<String> {
    let (name, _) = head.split_once('=')?;
    let name = name.trim();
    let bare = |k: &str| {
        !k.is_empty()
            && k.split('.').all(|p| {
                let p = p.trim();
                !p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            })
    };
    if !bare(name) {
        return None;
    }
    let name: Vec<&str> = name.split('.').map(str::trim).collect();
    let table = above.lines().rev().find_map(|l| {
        let l = l.trim();
        let inner = l
            .strip_prefix("[[")
            .and_then(|r| r.split_once("]]"))
            .or_else(|| l.strip_prefix('[').and_then(|r| r.split_once(']')))?;
        Some(inner.0.trim().to_string())
    });
    Some(match table {
        Some(t) if bare(&t) => format!(
            "{}.{}",
            t.split('.').map(str::trim).collect::<Vec<_>>().join("."),
            name.join(".")
        ),
        _ => name.join("."),
    })
}

/// `p` as written in a config, relative paths taken from `base_dir` (the
/// config file's folder) when there is one.
pub fn resolve_path(p: &str, base_dir: Option<&Path>) -> PathBuf {
    let path = PathBuf::from(p);
    match base_dir {
        Some(b) if path.is_relative() => b.join(path),
        _ => path,
    }
}
