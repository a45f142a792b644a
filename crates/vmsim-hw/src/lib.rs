//! vmsim-hw: the host side of vmsim.
//!
//! It owns the real huge-page clearing and copying routines, in the same
//! sub-page orders and region splits that the simulator models (`order`,
//! `clear`, `copy`), the benchmark that times them on this machine (`bench`),
//! a measurement of the kernel's own fault-time clearing (`pftest`), and the
//! calibration that measures the host and writes a machine preset for it
//! (`calibrate`), and the microbenchmarks of `vmsim validate` run for real
//! beside the model's figure on a preset (`micro`), and the store sweep by
//! call size, page order and store kind (`sweep`). Everything is reached
//! through [`run_json`], which takes and returns JSON so that the Python
//! front end can drive it.
//!
//! x86-64 Linux only: the routines are `rep stosb`/`rep movsb`, `mov` loops
//! and `movnti`, as in arch/x86/lib (and `clzero`, where the CPU has it).

pub mod bench;
pub mod calibrate;
pub mod clear;
pub mod copy;
pub mod ctl;
pub mod host;
mod measure;
pub mod micro;
pub mod opts;
pub mod order;
pub mod pftest;
mod preset;
pub mod prim;
pub mod record;
pub mod reps;
pub mod storeq;
pub mod sweep;
pub mod sys;
mod user;

use std::fmt;

/// Why a command could not run.
#[derive(Debug)]
pub enum HwError {
    /// A bad option: `key` names it, `message` says what is accepted.
    Config { key: String, message: String },
    /// The host cannot run this (wrong architecture, missing feature).
    Unsupported(String),
    /// A system call or file operation failed.
    Io(String),
    /// Stopped by this signal (SIGINT or SIGTERM) after restoring the host's state.
    Interrupted(i32),
}

impl fmt::Display for HwError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HwError::Config { key, message } => write!(f, "option '{key}': {message}"),
            HwError::Unsupported(m) => write!(f, "unsupported on this host: {m}"),
            HwError::Io(m) => write!(f, "I/O error: {m}"),
            HwError::Interrupted(sig) => write!(f, "stopped by signal {sig}"),
        }
    }
}

impl std::error::Error for HwError {}

pub(crate) fn config_err(key: &str, message: impl Into<String>) -> HwError {
    HwError::Config {
        key: key.to_string(),
        message: message.into(),
    }
}

pub const COMMANDS: [&str; 6] = [
    "clear",
    "copy",
    "pf-test",
    "calibrate",
    "microbench",
    "store-sweep",
];

/// Runs one host command. `command` is one of "clear", "copy", "pf-test",
/// "calibrate", "microbench", "store-sweep"; `opts_json` is a JSON object of options (unknown keys are an
/// error naming the key and the accepted ones). Returns the results as JSON.
pub fn run_json(command: &str, opts_json: &str) -> Result<String, HwError> {
    run_json_with(command, opts_json, false)
}

/// As [`run_json`]; `quiet` silences the progress notes on stderr. SIGINT
/// and SIGTERM stop the command between measurement steps (see [`ctl`]).
/// [`run_json_with`], the clear (copy) strategies also taking any clear
/// (copy) plan `policies` names (a user's registered plan, or one its resolver finds,
/// such as a Python policy "FILE.py:NAME"), run with the real routines.
pub fn run_json_with_policies(
    command: &str,
    opts_json: &str,
    quiet: bool,
    policies: &vmsim_core::kernel::policy::Policies,
) -> Result<String, HwError> {
    if command == "clear" || command == "copy" {
        let v: serde_json::Value = serde_json::from_str(opts_json).unwrap_or_default();
        let names: Vec<String> = match v.get("strategies") {
            Some(serde_json::Value::String(s)) => vec![s.clone()],
            Some(serde_json::Value::Array(a)) => a
                .iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect(),
            _ => Vec::new(),
        };
        for n in names {
            // Not a policy name: the option check names what is accepted.
            let found = if command == "clear" {
                if clear::ClearStrategy::ALL.iter().any(|s| s.name() == n) {
                    continue;
                }
                match policies.clear.get(&n) {
                    Some(h) => Some(Ok(h.shared())),
                    None => policies.resolver().and_then(|r| r.clear(&n, None)),
                }
                .map(|p| {
                    p.map(|p| {
                        clear::register_user(&n, p);
                    })
                })
            } else {
                if copy::CopyStrategy::ALL.iter().any(|s| s.name() == n) {
                    continue;
                }
                match policies.copy.get(&n) {
                    Some(h) => Some(Ok(h.shared())),
                    None => policies.resolver().and_then(|r| r.copy(&n, None)),
                }
                .map(|p| {
                    p.map(|p| {
                        copy::register_user(&n, p);
                    })
                })
            };
            if let Some(Err(e)) = found {
                return Err(config_err("strategies", format!("{n:?}: {e}")));
            }
        }
    }
    run_json_with(command, opts_json, quiet)
}

pub fn run_json_with(command: &str, opts_json: &str, quiet: bool) -> Result<String, HwError> {
    let _session = ctl::Session::start(quiet);
    let value = match command {
        "clear" => bench::run(bench::Kind::Clear, opts_json)?,
        "copy" => bench::run(bench::Kind::Copy, opts_json)?,
        "pf-test" => pftest::run(opts_json)?,
        "calibrate" => calibrate::run(opts_json)?,
        "microbench" => micro::run(opts_json)?,
        "store-sweep" => sweep::run(opts_json)?,
        other => {
            return Err(config_err(
                "command",
                format!(
                    "unknown command '{other}'; accepted: {}",
                    COMMANDS.join(", ")
                ),
            ))
        }
    };
    serde_json::to_string_pretty(&value).map_err(|e| HwError::Io(e.to_string()))
}
