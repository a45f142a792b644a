//! Experiments: a base run config plus a baseline and named variants, each
//! given as dotted-key overrides (`set = { "kernel.clear_huge_page" = "…" }`).
//! Optional `[[cases]]` (each a name and overrides of the same form, e.g. a
//! machine and a page size) cross the arms: every case runs the baseline and
//! every variant.

use super::fields::{cfg_err, Fields};
use super::{embedded_experiments, resolve_path, set_dotted, RunConfig};
use crate::api::Error;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct Arm {
    pub name: String,
    pub set: Vec<(String, toml::Value)>,
}

#[derive(Clone, Debug)]
pub struct Experiment {
    pub name: String,
    pub description: String,
    /// What the full-size run is, so a scaled run can state its scale.
    pub reference: String,
    /// The scale factor a run uses when the caller gives none (`scale`,
    /// default 1): for experiments whose config holds full-size figures.
    pub scale: f64,
    pub config: toml::Table,
    pub baseline: Arm,
    pub variants: Vec<Arm>,
    /// Settings the arms are crossed with; empty: one implicit case.
    pub cases: Vec<Arm>,
    pub base_dir: Option<PathBuf>,
}

fn arm(mut f: Fields) -> Result<Arm, Error> {
    let name = f.string("name")?;
    if name.is_empty() {
        return Err(cfg_err(f.key("name"), "must not be empty"));
    }
    let mut set = Vec::new();
    if let Some(v) = f.take_value("set") {
        match v {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    set.push((k, v));
                }
            }
            _ => {
                return Err(cfg_err(
                    f.key("set"),
                    "expected a table of dotted keys to values",
                ))
            }
        }
    }
    f.finish()?;
    Ok(Arm { name, set })
}

impl Experiment {
    pub fn parse(text: &str, origin: &str, base_dir: Option<&Path>) -> Result<Experiment, Error> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            cfg_err(origin, format!("not valid TOML: {}", e.message()))
        })?;
        let mut top = Fields::new("", table);
        let name = top.string("name")?;
        let description = top.string("description")?;
        let reference = top.str_opt("reference")?.unwrap_or_default();
        let scale = top.f64_opt("scale")?.unwrap_or(1.0);
        if !(scale.is_finite() && scale > 0.0 && scale <= 1.0) {
            return Err(cfg_err(
                "scale",
                format!("must be above 0 and at most 1, got {scale}"),
            ));
        }
        let config = match top.req("config")? {
            toml::Value::Table(t) => t,
            _ => return Err(cfg_err("config", "expected a table (the base run config)")),
        };
        let baseline = arm(top.sub("baseline")?)?;
        let mut variants = Vec::new();
        match top.req("variants")? {
            toml::Value::Array(a) if !a.is_empty() => {
                for (i, v) in a.into_iter().enumerate() {
                    variants.push(arm(Fields::from_value(&format!("variants[{i}]"), v)?)?);
                }
            }
            _ => {
                return Err(cfg_err(
                    "variants",
                    "expected a non-empty array of tables ([[variants]])",
                ))
            }
        }
        let mut seen = vec![baseline.name.clone()];
        for v in &variants {
            if seen.contains(&v.name) {
                return Err(cfg_err(
                    "variants",
                    format!("the name {:?} is used twice", v.name),
                ));
            }
            seen.push(v.name.clone());
        }
        let mut cases = Vec::new();
        match top.take_value("cases") {
            None => {}
            Some(toml::Value::Array(a)) if !a.is_empty() => {
                for (i, v) in a.into_iter().enumerate() {
                    let c = arm(Fields::from_value(&format!("cases[{i}]"), v)?)?;
                    if cases.iter().any(|o: &Arm| o.name == c.name) {
                        return Err(cfg_err(
                            "cases",
                            format!("the name {:?} is used twice", c.name),
                        ));
                    }
                    cases.push(c);
                }
            }
            Some(_) => {
                return Err(cfg_err(
                    "cases",
                    "expected a non-empty array of tables ([[cases]])",
                ))
            }
        }
        top.finish()?;
        Ok(Experiment {
            name,
            description,
            reference,
            scale,
            config,
            baseline,
            variants,
            cases,
            base_dir: base_dir.map(|p| p.to_path_buf()),
        })
    }

    /// A built-in experiment name, or a path to an experiment TOML.
    pub fn load(reference: &str) -> Result<Experiment, Error> {
        if let Some((_, text)) = embedded_experiments().iter().find(|(n, _)| *n == reference) {
            return Experiment::parse(text, reference, None);
        }
        let p = resolve_path(reference, None);
        if p.exists() {
            let text = super::read_config_file("experiment", &p)?;
            return Experiment::parse(&text, &p.display().to_string(), p.parent());
        }
        let names: Vec<&str> = embedded_experiments().iter().map(|(n, _)| *n).collect();
        Err(cfg_err(
            "experiment",
            format!(
                "{} is neither a built-in experiment nor an existing file; built-in experiments: {}",
                super::fields::cut(&format!("{reference:?}"), 60),
                names.join(", ")
            ),
        ))
    }

    /// The run config of one arm, with its overrides applied.
    pub fn arm_config(&self, arm: &Arm, seed: u64, scale: f64) -> Result<RunConfig, Error> {
        self.case_arm_config(None, arm, seed, scale)
    }

    /// The run config of one arm within a case: the case's overrides first, then the arm's.
    pub fn case_arm_config(
        &self,
        case: Option<&Arm>,
        arm: &Arm,
        seed: u64,
        scale: f64,
    ) -> Result<RunConfig, Error> {
        let mut t = self.config.clone();
        t.insert("seed".into(), toml::Value::Integer(seed as i64));
        if let Some(c) = case {
            for (k, v) in &c.set {
                set_dotted(&mut t, k, v.clone(), &format!("cases.{}.set", c.name))?;
            }
        }
        let ctx = if arm.name == self.baseline.name {
            "baseline.set".to_string()
        } else {
            format!("variants.{}.set", arm.name)
        };
        for (k, v) in &arm.set {
            set_dotted(&mut t, k, v.clone(), &ctx)?;
        }
        RunConfig::from_table(t, self.base_dir.as_deref(), scale).map_err(|e| match e {
            Error::Config { key, message } => match case {
                None => cfg_err(
                    key,
                    format!("{message} (experiment {}, arm {})", self.name, arm.name),
                ),
                Some(c) => cfg_err(
                    key,
                    format!(
                        "{message} (experiment {}, case {}, arm {})",
                        self.name, c.name, arm.name
                    ),
                ),
            },
            e => e,
        })
    }
}
