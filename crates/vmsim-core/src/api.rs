//! The library's public entry points, used by the Python binding and the
//! benches: run a config, compare an experiment, list what is built in.

use crate::config::experiment::Experiment;
use crate::config::{embedded_experiments, embedded_machines, RunConfig};
use serde_json::json;
use std::path::Path;

pub use crate::error::Error;
pub use crate::kernel::policy::Policies;

#[derive(Clone, Copy, Debug)]
pub enum Format {
    Toml,
    Json,
}

/// A JSON value in which no object has a key twice. serde_json keeps the
/// last of a repeated key, which would drop a setting without a word, where
/// TOML refuses the document.
fn strict_json(text: &str) -> Result<serde_json::Value, serde_json::Error> {
    use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
    use serde_json::Value as J;
    struct Strict(J);
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = J;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_bool<E>(self, b: bool) -> Result<J, E> {
            Ok(J::Bool(b))
        }
        fn visit_i64<E>(self, i: i64) -> Result<J, E> {
            Ok(J::from(i))
        }
        fn visit_u64<E>(self, u: u64) -> Result<J, E> {
            Ok(J::from(u))
        }
        fn visit_f64<E>(self, x: f64) -> Result<J, E> {
            Ok(serde_json::Number::from_f64(x).map_or(J::Null, J::Number))
        }
        fn visit_str<E>(self, s: &str) -> Result<J, E> {
            Ok(J::String(s.to_owned()))
        }
        fn visit_string<E>(self, s: String) -> Result<J, E> {
            Ok(J::String(s))
        }
        fn visit_unit<E>(self) -> Result<J, E> {
            Ok(J::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<J, A::Error> {
            let mut out = Vec::new();
            while let Some(Strict(v)) = seq.next_element()? {
                out.push(v);
            }
            Ok(J::Array(out))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<J, A::Error> {
            let mut out = serde_json::Map::new();
            while let Some(k) = map.next_key::<String>()? {
                if out.contains_key(&k) {
                    return Err(A::Error::custom(format!(
                        "the key {k:?} is given twice in one object"
                    )));
                }
                let Strict(v) = map.next_value()?;
                out.insert(k, v);
            }
            Ok(J::Object(out))
        }
    }
    impl<'de> Deserialize<'de> for Strict {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
            d.deserialize_any(V).map(Strict)
        }
    }
    serde_json::from_str::<Strict>(text).map(|s| s.0)
}

fn parse_table(text: &str, format: Format) -> Result<toml::Table, Error> {
    match format {
        Format::Toml => text
            .parse()
            .map_err(|e: toml::de::Error| crate::config::fields::toml_error(text, &e, "config")),
        Format::Json => {
            let v: serde_json::Value = strict_json(text).map_err(|e| Error::Config {
                key: "config".into(),
                message: format!("not valid JSON: {e}"),
            })?;
            match json_to_toml("", v)? {
                toml::Value::Table(t) => Ok(t),
                _ => Err(Error::Config {
                    key: "config".into(),
                    message: "expected a JSON object".into(),
                }),
            }
        }
    }
}

/// A JSON value as TOML, refusing what TOML cannot hold (null, integers of
/// 2^63 and above) with an error that names the value's dotted key.
fn json_to_toml(key: &str, v: serde_json::Value) -> Result<toml::Value, Error> {
    use serde_json::Value as J;
    let name = |k: &str| {
        if k.is_empty() {
            "config".to_string()
        } else {
            crate::config::fields::cut(k, 200)
        }
    };
    Ok(match v {
        J::Null => {
            return Err(Error::Config {
                key: name(key),
                message: "null is not accepted: give a value or leave the key out".into(),
            })
        }
        J::Bool(b) => toml::Value::Boolean(b),
        J::String(s) => toml::Value::String(s),
        J::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => toml::Value::Integer(i),
            (None, Some(_)) if n.is_u64() => {
                return Err(Error::Config {
                    key: name(key),
                    message: format!("{n} is out of range; integers are at most 2^63-1"),
                })
            }
            (None, Some(f)) => toml::Value::Float(f),
            (None, None) => {
                return Err(Error::Config {
                    key: name(key),
                    message: format!("{n} is not a number vmsim accepts"),
                })
            }
        },
        J::Array(items) => toml::Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, x)| json_to_toml(&format!("{}[{i}]", name(key)), x))
                .collect::<Result<_, _>>()?,
        ),
        J::Object(map) => {
            let mut t = toml::Table::new();
            for (k, x) in map {
                let sub = if key.is_empty() {
                    k.clone()
                } else {
                    format!("{key}.{k}")
                };
                t.insert(k, json_to_toml(&sub, x)?);
            }
            toml::Value::Table(t)
        }
    })
}

/// Checks a run config as `run_config` would, without simulating.
pub fn check_config(text: &str, format: Format, base_dir: Option<&Path>) -> Result<(), Error> {
    Lib::builtin().check_config(text, format, base_dir)
}

/// The scalar metrics a run of this config reports, sorted: the report of
/// the built simulation before it runs, so nothing is simulated (the model
/// state is allocated and dropped). A sweep checks `--metrics` with it before
/// its first point runs.
pub fn metric_names(
    text: &str,
    format: Format,
    base_dir: Option<&Path>,
) -> Result<Vec<String>, Error> {
    Lib::builtin().metric_names(text, format, base_dir)
}

/// The scalar metrics a run of `cfg` reports, sorted (from the report of the
/// built simulation before it runs).
fn report_names(cfg: &RunConfig) -> Result<Vec<String>, Error> {
    let sim = crate::experiment::build(cfg)?;
    let serde_json::Value::Object(map) = crate::experiment::report(cfg, &sim) else {
        return Err(Error::Internal("a report is a JSON object".into()));
    };
    let mut names: Vec<String> = map
        .into_iter()
        .filter(|(_, v)| v.is_number() || v.is_boolean() || v.is_string())
        .map(|(k, _)| k)
        .collect();
    names.sort();
    Ok(names)
}

/// A JSON object of dotted keys to values, in the object's order.
fn parse_table_flat(text: &str) -> Result<Vec<(String, toml::Value)>, Error> {
    let v: serde_json::Value = strict_json(text).map_err(|e| Error::Config {
        key: "set".into(),
        message: format!("not valid JSON: {e}"),
    })?;
    let serde_json::Value::Object(map) = v else {
        return Err(Error::Config {
            key: "set".into(),
            message: "expected a JSON object of dotted keys to values".into(),
        });
    };
    map.into_iter()
        .map(|(k, v)| Ok((k.clone(), json_to_toml(&k, v)?)))
        .collect()
}

/// A host-thread count: at least 1.
fn check_threads(threads: usize) -> Result<(), Error> {
    if threads == 0 {
        return Err(Error::Config {
            key: "threads".into(),
            message: "must be at least 1".into(),
        });
    }
    Ok(())
}

/// Runs one simulation from a run config; a windowed run
/// (`sim.window_cycles`) spreads its sockets over the host's CPUs.
pub fn run_config(
    text: &str,
    format: Format,
    base_dir: Option<&Path>,
    progress: &mut dyn FnMut(&str, f64),
) -> Result<String, Error> {
    let threads = crate::experiment::default_threads();
    run_config_on(text, format, base_dir, threads, progress)
}

/// [`run_config`] with a windowed run's sockets spread over up to
/// `threads` (at least 1) host threads; the result does not depend on it.
pub fn run_config_on(
    text: &str,
    format: Format,
    base_dir: Option<&Path>,
    threads: usize,
    progress: &mut dyn FnMut(&str, f64),
) -> Result<String, Error> {
    Lib::builtin().run_config(text, format, base_dir, threads, progress)
}

/// The library with a set of policies: the entry points above, with every
/// `kernel.*` policy key resolved in `policies` (a user's own registered
/// beside the built-ins, or a resolver's).
/// How [`Lib::compare_value`] runs an experiment: built as
/// `CompareOptions::default().scale(0.25).set("kernel.thp", "never")`.
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// The memory scale; None: the experiment's own.
    pub scale: Option<f64>,
    /// The seed of every arm.
    pub seed: u64,
    /// Dotted config keys set for every arm (`vmsim compare --set`).
    pub set: serde_json::Map<String, serde_json::Value>,
    /// Host threads (at least 1).
    pub threads: usize,
}

impl Default for CompareOptions {
    fn default() -> CompareOptions {
        CompareOptions {
            scale: None,
            seed: 0,
            set: serde_json::Map::new(),
            threads: 1,
        }
    }
}

impl CompareOptions {
    pub fn scale(mut self, scale: f64) -> CompareOptions {
        self.scale = Some(scale);
        self
    }
    pub fn seed(mut self, seed: u64) -> CompareOptions {
        self.seed = seed;
        self
    }
    pub fn set(mut self, key: &str, value: impl Into<serde_json::Value>) -> CompareOptions {
        self.set.insert(key.to_string(), value.into());
        self
    }
    pub fn threads(mut self, threads: usize) -> CompareOptions {
        self.threads = threads;
        self
    }
}

pub struct Lib {
    policies: Policies,
}

impl Lib {
    pub fn new(policies: Policies) -> Lib {
        Lib { policies }
    }

    /// The library with the built-in policies only.
    pub fn builtin() -> Lib {
        Lib::new(crate::kernel::policy::registry::builtin().clone())
    }

    pub fn policies(&self) -> &Policies {
        &self.policies
    }

    fn parse(
        &self,
        text: &str,
        format: Format,
        base_dir: Option<&Path>,
    ) -> Result<RunConfig, Error> {
        RunConfig::from_table_with(parse_table(text, format)?, base_dir, 1.0, &self.policies)
    }

    /// [`check_config`] with these policies.
    pub fn check_config(
        &self,
        text: &str,
        format: Format,
        base_dir: Option<&Path>,
    ) -> Result<(), Error> {
        self.parse(text, format, base_dir).map(|_| ())
    }

    /// [`metric_names`] with these policies.
    pub fn metric_names(
        &self,
        text: &str,
        format: Format,
        base_dir: Option<&Path>,
    ) -> Result<Vec<String>, Error> {
        report_names(&self.parse(text, format, base_dir)?)
    }

    /// [`run_config_on`] with these policies.
    pub fn run_config(
        &self,
        text: &str,
        format: Format,
        base_dir: Option<&Path>,
        threads: usize,
        progress: &mut dyn FnMut(&str, f64),
    ) -> Result<String, Error> {
        check_threads(threads)?;
        let cfg = self.parse(text, format, base_dir)?;
        let metrics = crate::experiment::simulate_on(&cfg, threads, &mut |f| progress("run", f))?;
        let out = json!({
            "config": cfg.to_json(),
            "machine": crate::experiment::machine_json(&cfg),
            "scale": crate::experiment::scale_text(&cfg),
            "metrics": metrics,
        });
        Ok(serde_json::to_string_pretty(&out).expect("serialises"))
    }

    /// Compares the arms of `experiment` (a built-in name or a file) as
    /// `opts` says: the result as JSON (`baseline`, `variants`, ... or
    /// `cases`), the same as [`Lib::compare`] returns as text.
    pub fn compare_value(
        &self,
        experiment: &str,
        opts: &CompareOptions,
        progress: &mut dyn FnMut(&str, f64),
    ) -> Result<serde_json::Value, Error> {
        let set =
            (!opts.set.is_empty()).then(|| serde_json::Value::Object(opts.set.clone()).to_string());
        let text = self.compare(
            experiment,
            opts.scale,
            opts.seed,
            set.as_deref(),
            opts.threads,
            progress,
        )?;
        serde_json::from_str(&text).map_err(|e| Error::Internal(format!("a compare result: {e}")))
    }

    /// [`compare_with`] with these policies.
    pub fn compare(
        &self,
        experiment: &str,
        scale: Option<f64>,
        seed: u64,
        set_json: Option<&str>,
        threads: usize,
        progress: &mut dyn FnMut(&str, f64),
    ) -> Result<String, Error> {
        self.compare_except(experiment, scale, seed, set_json, threads, &[], progress)
    }

    /// [`Lib::compare`] without simulating the runs whose places in the
    /// plan's order ([`experiment_plan`]'s arms, case by case) are in
    /// `skip`: their metrics are `null` in the result, for the caller to
    /// fill in with the metrics it has of them (a cache's). A run's metrics
    /// are the same bytes whether it ran alone or with the others.
    #[allow(clippy::too_many_arguments)]
    pub fn compare_except(
        &self,
        experiment: &str,
        scale: Option<f64>,
        seed: u64,
        set_json: Option<&str>,
        threads: usize,
        skip: &[usize],
        progress: &mut dyn FnMut(&str, f64),
    ) -> Result<String, Error> {
        check_threads(threads)?;
        let (exp, scale) = self.prepare(experiment, scale, seed, set_json)?;
        let out = crate::experiment::compare_except(&exp, scale, seed, threads, skip, progress)?;
        Ok(serde_json::to_string_pretty(&out).expect("serialises"))
    }

    /// The experiment `compare` and `experiment_plan` work on, with these
    /// policies and its settings applied, and the scale it runs at.
    fn prepare(
        &self,
        experiment: &str,
        scale: Option<f64>,
        seed: u64,
        set_json: Option<&str>,
    ) -> Result<(Experiment, f64), Error> {
        let (mut exp, scale) = prepare(experiment, scale, seed, None)?;
        exp.policies = self.policies.clone();
        if let Some(text) = set_json {
            exp.apply_set(experiment, parse_table_flat(text)?)?;
        }
        Ok((exp, scale))
    }
}

/// Runs an experiment's baseline and variants, as many at once as the host
/// has CPUs (the result is the same for any number).
pub fn compare(
    experiment: &str,
    scale: Option<f64>,
    seed: u64,
    progress: &mut dyn FnMut(&str, f64),
) -> Result<String, Error> {
    let threads = crate::experiment::default_threads();
    compare_with(experiment, scale, seed, None, threads, progress)
}

/// Runs an experiment's baseline and variants with settings applied to every
/// arm: `set_json` is a JSON object of dotted config keys to values
/// (`{"kernel.page_alloc_shuffle": true}`), applied to the experiment's
/// `[config]` before the arms' own settings, and checked as the config is.
/// Up to `threads` (at least 1) arms run at once, each on a host thread.
pub fn compare_with(
    experiment: &str,
    scale: Option<f64>,
    seed: u64,
    set_json: Option<&str>,
    threads: usize,
    progress: &mut dyn FnMut(&str, f64),
) -> Result<String, Error> {
    Lib::builtin().compare(experiment, scale, seed, set_json, threads, progress)
}

/// The experiment `compare_with` and `experiment_plan` work on, its
/// settings applied, and the scale it runs at; the checks both make first.
fn prepare(
    experiment: &str,
    scale: Option<f64>,
    seed: u64,
    set_json: Option<&str>,
) -> Result<(Experiment, f64), Error> {
    if seed > i64::MAX as u64 {
        // A run config's seed is a TOML integer: the arms could not hold it.
        return Err(Error::Config {
            key: "seed".into(),
            message: format!("{seed} is out of range; accepted: 0..={}", i64::MAX),
        });
    }
    let mut exp = Experiment::load(experiment)?;
    let scale = scale.unwrap_or(exp.scale);
    if !(scale > 0.0 && scale.is_finite()) {
        return Err(Error::Config {
            key: "scale".into(),
            message: format!("must be a positive number, got {scale}"),
        });
    }
    if let Some(text) = set_json {
        exp.apply_set(experiment, parse_table_flat(text)?)?;
    }
    Ok((exp, scale))
}

/// Layout version of the result JSON the front ends write (in each result's
/// `provenance.schema_version`); a reader refuses a newer one. 2: the
/// provenance block, sweep output as an object with `rows`.
pub const RESULT_SCHEMA_VERSION: u64 = 2;

/// What `compare_with` would simulate, without simulating: for every case
/// (`null` name without cases) and arm, the resolved run config and the
/// scalar metrics its report will have, as JSON
/// `{"experiment", "scale", "seed", "min_scale", "min_scale_why",
/// "quick_scale", "published", "cases": [{"name", "arms": [{"name",
/// "baseline", "config", "metrics"}]}]}` (`min_scale` and its reason, and
/// `quick_scale` (`{"scale", "tolerance", "measured"}`), null where the
/// experiment states none; `published`, its published measurements,
/// `[{"case", "arm", "metric", "change_percent", "source"}]`). `with_metrics` false leaves each arm's `metrics` null and builds
/// no model (the names need one build per machine and workload kind); with
/// it, every error a `compare_with` of the same arguments would raise
/// before its first run is raised here.
pub fn experiment_plan(
    experiment: &str,
    scale: Option<f64>,
    seed: u64,
    set_json: Option<&str>,
    with_metrics: bool,
) -> Result<String, Error> {
    Lib::builtin().experiment_plan(experiment, scale, seed, set_json, with_metrics)
}

impl Lib {
    /// [`experiment_plan`] with these policies.
    pub fn experiment_plan(
        &self,
        experiment: &str,
        scale: Option<f64>,
        seed: u64,
        set_json: Option<&str>,
        with_metrics: bool,
    ) -> Result<String, Error> {
        let (exp, scale) = self.prepare(experiment, scale, seed, set_json)?;
        // Metric names depend on the machine, the workload (its kind, a
        // will-it-scale run's mode) and whether NUMA balancing runs: one
        // build each.
        let mut names_of: Vec<(String, Vec<String>)> = Vec::new();
        let mut cases: Vec<serde_json::Value> = Vec::new();
        let mut current: Option<Option<String>> = None;
        for (case, arm) in exp.runs() {
            let cfg = exp.case_arm_config(case, arm, seed, scale)?;
            let cfg_json = cfg.to_json();
            let kind = format!(
                "{} {} {}",
                cfg.machine, cfg_json["workload"], cfg_json["kernel"]["numa_balancing"]
            );
            let metrics = if !with_metrics {
                None
            } else if let Some((_, m)) = names_of.iter().find(|(k, _)| *k == kind) {
                Some(m.clone())
            } else {
                // Building the model for the names is the plan's one costly part.
                let m = report_names(&cfg)?;
                names_of.push((kind, m.clone()));
                Some(m)
            };
            let case_name = case.map(|c| c.name.clone());
            if current.as_ref() != Some(&case_name) {
                cases.push(json!({"name": case_name, "arms": []}));
                current = Some(case_name);
            }
            cases
                .last_mut()
                .expect("a case was pushed")
                .get_mut("arms")
                .and_then(|a| a.as_array_mut())
                .expect("arms is an array")
                .push(json!({
                    "name": arm.name,
                    "baseline": arm.name == exp.baseline.name,
                    "config": cfg_json,
                    "metrics": metrics,
                }));
        }
        let out = json!({
            "experiment": exp.name,
            "scale": scale,
            "seed": seed,
            "min_scale": exp.min_scale.as_ref().map(|m| m.value),
            "min_scale_why": exp.min_scale.as_ref().map(|m| m.why.clone()),
            "quick_scale": exp.quick_scale.as_ref().map(|q| json!({
                "scale": q.value,
                "tolerance": q.tolerance,
                "measured": q.measured,
            })),
            "published": crate::experiment::published_json(&exp, None),
            "cases": cases,
        });
        Ok(serde_json::to_string_pretty(&out).expect("serialises"))
    }
}

pub fn list_machines() -> Vec<(String, String)> {
    embedded_machines()
        .iter()
        .map(|(n, text)| {
            let d = crate::config::Preset::parse(text, n)
                .map(|p| p.description)
                .unwrap_or_else(|e| format!("(invalid preset: {e})"));
            (n.to_string(), d)
        })
        .collect()
}

pub fn list_experiments() -> Vec<(String, String)> {
    embedded_experiments()
        .iter()
        .map(|(n, text)| {
            let d = Experiment::parse(text, n, None)
                .map(|e| e.description)
                .unwrap_or_else(|e| format!("(invalid experiment: {e})"));
            (n.to_string(), d)
        })
        .collect()
}
