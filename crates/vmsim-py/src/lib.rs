//! `vmsim._core`: thin Python bindings of the simulator core (`vmsim-core`)
//! and the host measurements (`vmsim-hw`). Results cross the boundary as JSON
//! text; the Python package `vmsim` parses them.

use std::path::PathBuf;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

mod error;
mod policies;
mod progress;

use error::{PyHwErr, PyVmsimErr};
use vmsim_core::api::{self, Format};

fn parse_format(format: &str) -> PyResult<Format> {
    match format.to_ascii_lowercase().as_str() {
        "toml" => Ok(Format::Toml),
        "json" => Ok(Format::Json),
        other => Err(PyValueError::new_err(format!(
            "format must be 'toml' or 'json', not {other:?}"
        ))),
    }
}

/// Runs one simulation of a run config (TOML or JSON text) and returns the
/// result as JSON text. Relative paths in the config resolve against
/// `base_dir`. `progress(label, fraction)` is called now and then. A
/// windowed run (`sim.window_cycles`) spreads its sockets over up to
/// `threads` host threads (default: one per host CPU).
#[pyfunction]
#[pyo3(signature = (text, format = "toml", base_dir = None, progress = None, threads = None))]
fn run_config(
    py: Python<'_>,
    text: &str,
    format: &str,
    base_dir: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
    threads: Option<usize>,
) -> PyResult<String> {
    let format = parse_format(format)?;
    let text = text.to_owned();
    let threads = threads.unwrap_or_else(vmsim_core::experiment::default_threads);
    let result = progress::run_detached(py, progress, move |hook| {
        api::Lib::new(policies::policies()).run_config(
            &text,
            format,
            base_dir.as_deref(),
            threads,
            hook,
        )
    })?;
    Ok(result.map_err(PyVmsimErr::from)?)
}

/// Runs an experiment (a built-in name or a path to an experiment TOML):
/// its baseline and variants, up to `threads` at once (default: one per
/// host CPU; the result is the same for any number). Returns the result as
/// JSON text. The runs whose places in the plan's order (`experiment_plan`'s
/// arms, case by case) are in `skip` are not simulated: their metrics are
/// null, for the caller to fill in (the result cache's arms).
#[pyfunction]
#[pyo3(signature = (experiment, scale = None, seed = 0, progress = None, set_json = None, threads = None, skip = None))]
#[allow(clippy::too_many_arguments)]
fn compare(
    py: Python<'_>,
    experiment: &str,
    scale: Option<f64>,
    seed: u64,
    progress: Option<Py<PyAny>>,
    set_json: Option<String>,
    threads: Option<usize>,
    skip: Option<Vec<usize>>,
) -> PyResult<String> {
    let experiment = experiment.to_owned();
    let threads = threads.unwrap_or_else(vmsim_core::experiment::default_threads);
    let skip = skip.unwrap_or_default();
    let result = progress::run_detached(py, progress, move |hook| {
        api::Lib::new(policies::policies()).compare_except(
            &experiment,
            scale,
            seed,
            set_json.as_deref(),
            threads,
            &skip,
            hook,
        )
    })?;
    Ok(result.map_err(PyVmsimErr::from)?)
}

/// What `compare` would simulate, as JSON: every case's arms with their
/// resolved configs and metric names; raises what `compare` would raise
/// before its first run.
#[pyfunction]
#[pyo3(signature = (experiment, scale = None, seed = 0, set_json = None, metrics = true))]
fn experiment_plan(
    experiment: &str,
    scale: Option<f64>,
    seed: u64,
    set_json: Option<String>,
    metrics: bool,
) -> PyResult<String> {
    Ok(api::Lib::new(policies::policies())
        .experiment_plan(experiment, scale, seed, set_json.as_deref(), metrics)
        .map_err(PyVmsimErr::from)?)
}

/// Checks a run config (TOML or JSON text) without running it: raises the
/// `ConfigError` that `run_config` would.
#[pyfunction]
#[pyo3(signature = (text, format = "toml", base_dir = None))]
fn check_config(text: &str, format: &str, base_dir: Option<PathBuf>) -> PyResult<()> {
    let format = parse_format(format)?;
    Ok(api::Lib::new(policies::policies())
        .check_config(text, format, base_dir.as_deref())
        .map_err(PyVmsimErr::from)?)
}

/// The scalar metric names a run of this config reports (nothing is simulated).
#[pyfunction]
#[pyo3(signature = (text, format = "toml", base_dir = None))]
fn metric_names(text: &str, format: &str, base_dir: Option<PathBuf>) -> PyResult<Vec<String>> {
    let format = parse_format(format)?;
    Ok(api::Lib::new(policies::policies())
        .metric_names(text, format, base_dir.as_deref())
        .map_err(PyVmsimErr::from)?)
}

/// Built-in machine presets as (name, one-line description).
#[pyfunction]
fn list_machines() -> Vec<(String, String)> {
    api::list_machines()
}

/// The resolved machine preset (every parameter with its source) of a
/// built-in name or a preset file (relative to `base_dir`), as JSON text.
#[pyfunction]
#[pyo3(signature = (reference, base_dir = None))]
fn preset_json(reference: &str, base_dir: Option<PathBuf>) -> PyResult<String> {
    let preset = vmsim_core::config::load_machine("machine", reference, base_dir.as_deref())
        .map_err(PyVmsimErr::from)?;
    serde_json::to_string(&preset).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The TOML text of a built-in machine preset or experiment (`kind` is
/// "machine" or "experiment"), or None when there is no such built-in.
#[pyfunction]
fn builtin_toml(kind: &str, name: &str) -> PyResult<Option<String>> {
    let table = match kind {
        "machine" => vmsim_core::config::embedded_machines(),
        "experiment" => vmsim_core::config::embedded_experiments(),
        other => {
            return Err(PyValueError::new_err(format!(
                "kind must be 'machine' or 'experiment', not {other:?}"
            )))
        }
    };
    Ok(table
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| text.to_string()))
}

/// Every policy hook as (config key, the built-in names in registration
/// order); each key also takes a Python policy "FILE.py:NAME".
#[pyfunction]
fn policy_names() -> Vec<(String, Vec<String>)> {
    let p = vmsim_core::kernel::policy::Policies::builtin();
    let own = |names: Vec<&str>| names.into_iter().map(String::from).collect();
    vec![
        ("kernel.clear_huge_page".into(), own(p.clear.names())),
        ("kernel.copy_huge_page".into(), own(p.copy.names())),
        ("kernel.thp_cow".into(), own(p.thp_cow.names())),
        (
            "kernel.tlb_flush_on_unmap".into(),
            own(p.reclaim_flush.names()),
        ),
        (
            "kernel.migrate_tlb_flush".into(),
            own(p.migrate_flush.names()),
        ),
        ("kernel.numa_hint_fault".into(), own(p.numa_hint.names())),
    ]
}

/// Built-in experiments as (name, one-line description).
#[pyfunction]
fn list_experiments() -> Vec<(String, String)> {
    api::list_experiments()
}

/// Runs a host measurement (`clear`, `copy`, `pf-test`, `calibrate`,
/// `microbench`, `store-sweep`) with options given as a JSON object; returns the result as
/// JSON text.
/// `quiet` silences the progress notes on stderr. SIGINT and SIGTERM stop
/// the measurement (after the host's state is restored) and raise
/// `KeyboardInterrupt` (its argument names the signal).
#[pyfunction]
#[pyo3(signature = (command, opts_json = "{}", quiet = false))]
fn hw_run(py: Python<'_>, command: &str, opts_json: &str, quiet: bool) -> PyResult<String> {
    let command = command.to_owned();
    let opts = opts_json.to_owned();
    let result = py
        .detach(move || {
            std::panic::catch_unwind(|| {
                vmsim_hw::run_json_with_policies(&command, &opts, quiet, &policies::policies())
            })
        })
        .map_err(|_| {
            error::VmsimError::new_err("internal error (please report): vmsim hw panicked")
        })?;
    Ok(result.map_err(PyHwErr::from)?)
}

/// Runs the microbenchmarks of `vmsim validate` on the model of one preset
/// (or every preset with references); returns JSON text with rows and a table.
#[pyfunction]
#[pyo3(signature = (machine = None))]
fn validate_model(py: Python<'_>, machine: Option<String>) -> PyResult<String> {
    let result = py.detach(move || vmsim_core::validate::run_json(machine.as_deref()));
    Ok(result.map_err(PyVmsimErr::from)?)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("__git_revision__", env!("VMSIM_GIT_REVISION"))?;
    m.add_function(wrap_pyfunction!(preset_json, m)?)?;
    m.add_function(wrap_pyfunction!(check_config, m)?)?;
    m.add_function(wrap_pyfunction!(metric_names, m)?)?;
    m.add_function(wrap_pyfunction!(builtin_toml, m)?)?;
    m.add_function(wrap_pyfunction!(run_config, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(experiment_plan, m)?)?;
    m.add("RESULT_SCHEMA_VERSION", api::RESULT_SCHEMA_VERSION)?;
    m.add_function(wrap_pyfunction!(list_machines, m)?)?;
    m.add_function(wrap_pyfunction!(list_experiments, m)?)?;
    m.add_function(wrap_pyfunction!(policy_names, m)?)?;
    m.add_function(wrap_pyfunction!(hw_run, m)?)?;
    m.add_function(wrap_pyfunction!(validate_model, m)?)?;
    error::register(m)?;
    Ok(())
}
