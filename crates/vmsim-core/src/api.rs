//! The library's public entry points, used by the Python binding and the
//! benches: run a config, compare an experiment, list what is built in.

use crate::config::experiment::Experiment;
use crate::config::{embedded_experiments, embedded_machines, RunConfig};
use serde_json::json;
use std::path::Path;

pub use crate::error::Error;

#[derive(Clone, Copy, Debug)]
pub enum Format {
    Toml,
    Json,
}

fn parse_table(text: &str, format: Format) -> Result<toml::Table, Error> {
    match format {
        Format::Toml => text.parse().map_err(|e: toml::de::Error| Error::Config { key: "config".into(), message: format!("not valid TOML: {}", e.message()) }),
        Format::Json => {
            let v: serde_json::Value =
                serde_json::from_str(text).map_err(|e| Error::Config { key: "config".into(), message: format!("not valid JSON: {e}") })?;
            match toml::Value::try_from(v) {
                Ok(toml::Value::Table(t)) => Ok(t),
                Ok(_) => Err(Error::Config { key: "config".into(), message: "expected a JSON object".into() }),
                Err(e) => Err(Error::Config { key: "config".into(), message: format!("cannot be represented (null values are not accepted): {e}") }),
            }
        }
    }
}

/// Runs one simulation from a run config.
pub fn run_config(text: &str, format: Format, base_dir: Option<&Path>, progress: &mut dyn FnMut(&str, f64)) -> Result<String, Error> {
    let table = parse_table(text, format)?;
    let cfg = RunConfig::from_table(table, base_dir, 1.0)?;
    let metrics = crate::experiment::simulate(&cfg, &mut |f| progress("run", f))?;
    let out = json!({
        "config": cfg.to_json(),
        "machine": crate::experiment::machine_json(&cfg),
        "scale": crate::experiment::scale_text(&cfg),
        "metrics": metrics,
    });
    Ok(serde_json::to_string_pretty(&out).expect("serialises"))
}

/// Runs an experiment's baseline and variants.
pub fn compare(experiment: &str, scale: Option<f64>, seed: u64, progress: &mut dyn FnMut(&str, f64)) -> Result<String, Error> {
    let scale = scale.unwrap_or(1.0);
    if !(scale > 0.0 && scale.is_finite()) {
        return Err(Error::Config { key: "scale".into(), message: format!("must be a positive number, got {scale}") });
    }
    let exp = Experiment::load(experiment)?;
    let out = crate::experiment::compare(&exp, scale, seed, progress)?;
    Ok(serde_json::to_string_pretty(&out).expect("serialises"))
}

pub fn list_machines() -> Vec<(String, String)> {
    embedded_machines()
        .iter()
        .map(|(n, text)| {
            let d = crate::config::Preset::parse(text, n).map(|p| p.description).unwrap_or_else(|e| format!("(invalid preset: {e})"));
            (n.to_string(), d)
        })
        .collect()
}

pub fn list_experiments() -> Vec<(String, String)> {
    embedded_experiments()
        .iter()
        .map(|(n, text)| {
            let d = Experiment::parse(text, n, None).map(|e| e.description).unwrap_or_else(|e| format!("(invalid experiment: {e})"));
            (n.to_string(), d)
        })
        .collect()
}
