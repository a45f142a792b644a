//! Experiments: a base run config plus a baseline and named variants, each
//! given as dotted-key overrides (`set = { "kernel.clear_huge_page" = "…" }`).
//! Optional `[[cases]]` (each a name and overrides of the same form, e.g. a
//! machine and a page size) cross the arms: every case runs the baseline and
//! every variant. A variant may name the cases it runs in (`cases = [...]`),
//! for a setting only some cases' machines accept.

use super::fields::{cfg_err, cut, Fields};
use super::{embedded_experiments, resolve_path, set_dotted, RunConfig};
use crate::error::Error;
use std::path::{Path, PathBuf};

/// The most characters of a name an error shows.
const NAME_SHOWN: usize = 60;

#[derive(Clone, Debug)]
pub struct Arm {
    pub name: String,
    pub set: Vec<(String, toml::Value)>,
    /// A variant's `cases`: the only cases it runs in (None: every case).
    pub only_cases: Option<Vec<String>>,
}

impl Arm {
    /// Whether this arm runs in `case` (None: the experiment has no cases).
    pub fn runs_in(&self, case: Option<&Arm>) -> bool {
        match (&self.only_cases, case) {
            (Some(only), Some(c)) => only.contains(&c.name),
            _ => true,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct MinScale {
    pub value: f64,
    pub why: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct QuickScale {
    pub value: f64,
    /// Percentage points between the headline change at this scale and at scale 1.
    pub tolerance: f64,
    /// What was measured: the headline change at both scales, seed, date.
    pub measured: String,
}

/// A published measurement of the change an experiment reproduces: a
/// variant's change of one metric against the baseline, in percent, and
/// where it was published. For comparison only (plots draw it beside the
/// prediction); nothing is fitted to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Published {
    /// The case it was measured in (required when the experiment has cases).
    pub case: Option<String>,
    /// The variant whose change it is.
    pub arm: String,
    /// The vmsim metric that counts what was measured.
    pub metric: String,
    pub change_percent: f64,
    pub source: String,
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
    /// The smallest scale at which the arms' comparison means what it does
    /// at full size (`min_scale`), and why (`min_scale_why`): below it the
    /// workload loses what the change acts on (e.g. a whole huge page per
    /// task). `compare` refuses a smaller scale unless forced.
    pub min_scale: Option<MinScale>,
    /// A scale measured to give the headline change within `tolerance`
    /// percentage points of the experiment's own `scale`'s (`quick_scale`,
    /// `quick_scale_tolerance`, and the figures in `quick_scale_measured`).
    pub quick_scale: Option<QuickScale>,
    pub config: toml::Table,
    pub baseline: Arm,
    pub variants: Vec<Arm>,
    /// Settings the arms are crossed with; empty: one implicit case.
    pub cases: Vec<Arm>,
    /// Published measurements of the change (`[[published]]`).
    pub published: Vec<Published>,
    pub base_dir: Option<PathBuf>,
    /// The policies the arms' `kernel.*` keys are resolved in (the built-in
    /// ones unless the caller gives its own).
    pub policies: crate::kernel::policy::Policies,
}

/// A name from the file, quoted and cut to a readable length.
fn q(name: &str) -> String {
    super::fields::cut(&format!("{name:?}"), 60)
}

/// The names of `arms`, each cut, the list cut too.
fn names(arms: &[Arm]) -> String {
    let all: Vec<String> = arms.iter().map(|a| q(&a.name)).collect();
    super::fields::cut(&all.join(", "), 400)
}

fn published(
    i: usize,
    v: toml::Value,
    variants: &[Arm],
    cases: &[Arm],
) -> Result<Published, Error> {
    let mut f = Fields::from_value(&format!("published[{i}]"), v)?;
    let arm = f.string("arm")?;
    let Some(variant) = variants.iter().find(|a| a.name == arm) else {
        return Err(cfg_err(
            f.key("arm"),
            format!(
                "{} is not a variant; variants: {} (a published change is a variant's against the baseline)",
                q(&arm),
                names(variants)
            ),
        ));
    };
    let case = f.str_opt("case")?;
    match (&case, cases.is_empty()) {
        (Some(c), true) => {
            return Err(cfg_err(
                f.key("case"),
                format!("names the case {c:?}, but the experiment has no [[cases]]"),
            ))
        }
        (None, false) => {
            let known: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
            return Err(cfg_err(
                f.key("case"),
                format!(
                    "required: the case it was measured in; cases: {}",
                    known.join(", ")
                ),
            ));
        }
        (Some(c), false) => {
            let Some(found) = cases.iter().find(|x| &x.name == c) else {
                let known: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
                return Err(cfg_err(
                    f.key("case"),
                    format!("{c:?} is not defined; cases: {}", known.join(", ")),
                ));
            };
            if !variant.runs_in(Some(found)) {
                return Err(cfg_err(
                    f.key("case"),
                    format!("the variant {arm:?} does not run in the case {c:?}"),
                ));
            }
        }
        (None, true) => {}
    }
    let metric = f.string("metric")?;
    if metric.trim().is_empty() {
        return Err(cfg_err(
            f.key("metric"),
            "must not be empty: the metric it corresponds to",
        ));
    }
    let key = f.key("change_percent");
    let change_percent = f
        .f64_opt("change_percent")?
        .ok_or_else(|| cfg_err(&key, "missing required key"))?;
    if !(change_percent.is_finite() && change_percent > -100.0) {
        return Err(cfg_err(
            key,
            format!("must be a finite change in percent, above -100, got {change_percent}"),
        ));
    }
    let source = f.string("source")?;
    if source.trim().is_empty() {
        return Err(cfg_err(
            f.key("source"),
            "must not be empty: where it was published",
        ));
    }
    f.finish()?;
    Ok(Published {
        case,
        arm,
        metric,
        change_percent,
        source,
    })
}

/// The dotted keys a value set at `key` fills in (a table fills its own).
fn leaves(key: &str, value: &toml::Value) -> Vec<String> {
    match value {
        toml::Value::Table(t) => t
            .iter()
            .flat_map(|(k, v)| {
                leaves(
                    &if key.is_empty() {
                        k.clone()
                    } else {
                        format!("{key}.{k}")
                    },
                    v,
                )
            })
            .collect(),
        _ => vec![key.to_string()],
    }
}

fn arm(mut f: Fields, may_name_cases: bool) -> Result<Arm, Error> {
    let name = f.string("name")?;
    if name.is_empty() {
        return Err(cfg_err(f.key("name"), "must not be empty"));
    }
    // Saved results name an arm of a case "case/arm": a '/' in a name
    // would split it wrongly when the result is compared again.
    if name.contains('/') {
        return Err(cfg_err(
            f.key("name"),
            format!("{name:?}: must not contain '/' (saved results write case/arm)"),
        ));
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
    let mut only_cases = None;
    if may_name_cases {
        if let Some(v) = f.take_value("cases") {
            let names = match v {
                toml::Value::Array(a) if !a.is_empty() => a
                    .into_iter()
                    .map(|x| match x {
                        toml::Value::String(s) => Ok(s),
                        _ => Err(()),
                    })
                    .collect::<Result<Vec<String>, ()>>()
                    .ok(),
                _ => None,
            };
            only_cases = Some(names.ok_or_else(|| {
                cfg_err(f.key("cases"), "expected a non-empty array of case names")
            })?);
        }
    }
    f.finish()?;
    Ok(Arm {
        name,
        set,
        only_cases,
    })
}

/// `min_scale` with `min_scale_why`: both or neither, the scale within
/// the experiment's own `scale`.
fn min_scale(top: &mut Fields, scale: f64) -> Result<Option<MinScale>, Error> {
    Ok(
        match (top.f64_opt("min_scale")?, top.str_opt("min_scale_why")?) {
            (None, None) => None,
            (Some(value), Some(why)) => {
                if !(value.is_finite() && value > 0.0 && value <= 1.0) {
                    return Err(cfg_err(
                        "min_scale",
                        format!("must be above 0 and at most 1, got {value}"),
                    ));
                }
                if value > scale {
                    return Err(cfg_err(
                        "min_scale",
                        format!(
                            "{value} is above the experiment's own scale {scale}, which would then be refused; \
                             accepted: at most `scale`"
                        ),
                    ));
                }
                if why.trim().is_empty() {
                    return Err(cfg_err(
                        "min_scale_why",
                        "must not be empty: say what the workload needs at the smallest scale",
                    ));
                }
                Some(MinScale { value, why })
            }
            (Some(_), None) => {
                return Err(cfg_err(
                    "min_scale_why",
                    "required with min_scale: why smaller scales mislead (e.g. less than a huge page per task)",
                ))
            }
            (None, Some(_)) => {
                return Err(cfg_err(
                    "min_scale",
                    "required with min_scale_why: the smallest valid scale, above 0 and at most 1",
                ))
            }
        },
    )
}

/// `quick_scale`, `quick_scale_tolerance` and `quick_scale_measured`: all
/// three or none, the scale no smaller than `min_scale`.
fn quick_scale(
    top: &mut Fields,
    min_scale: Option<&MinScale>,
) -> Result<Option<QuickScale>, Error> {
    let quick = (
        top.f64_opt("quick_scale")?,
        top.f64_opt("quick_scale_tolerance")?,
        top.str_opt("quick_scale_measured")?,
    );
    Ok(match quick {
        (None, None, None) => None,
        (Some(value), Some(tolerance), Some(measured)) => {
            let least = min_scale.map_or(0.0, |m| m.value);
            if !(value.is_finite() && value > 0.0 && value <= 1.0 && value >= least) {
                return Err(cfg_err(
                    "quick_scale",
                    format!(
                        "must be above 0, at most 1 and at least min_scale ({least}), got {value}"
                    ),
                ));
            }
            if !(tolerance.is_finite() && tolerance >= 0.0) {
                return Err(cfg_err(
                    "quick_scale_tolerance",
                    format!(
                        "must be a finite number of percentage points, at least 0, got {tolerance}"
                    ),
                ));
            }
            if measured.trim().is_empty() {
                return Err(cfg_err(
                    "quick_scale_measured",
                    "must not be empty: the headline change measured at quick_scale and at scale 1",
                ));
            }
            Some(QuickScale {
                value,
                tolerance,
                measured,
            })
        }
        _ => {
            let missing = [
                ("quick_scale", quick.0.is_none()),
                ("quick_scale_tolerance", quick.1.is_none()),
                ("quick_scale_measured", quick.2.is_none()),
            ]
            .into_iter()
            .find(|(_, m)| *m)
            .map(|(k, _)| k)
            .unwrap_or("quick_scale");
            return Err(cfg_err(
                missing,
                "quick_scale, quick_scale_tolerance and quick_scale_measured go together: give all three",
            ));
        }
    })
}

/// `[[variants]]`, at least one, no two of them (nor one and the baseline)
/// named alike.
fn variants(top: &mut Fields, baseline: &Arm) -> Result<Vec<Arm>, Error> {
    let mut variants = Vec::new();
    match top.req("variants")? {
        toml::Value::Array(a) if !a.is_empty() => {
            for (i, v) in a.into_iter().enumerate() {
                variants.push(arm(
                    Fields::from_value(&format!("variants[{i}]"), v)?,
                    true,
                )?);
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
    Ok(variants)
}

/// `[[cases]]`, if any, no two named alike.
fn cases(top: &mut Fields) -> Result<Vec<Arm>, Error> {
    let mut cases = Vec::new();
    match top.take_value("cases") {
        None => {}
        Some(toml::Value::Array(a)) if !a.is_empty() => {
            for (i, v) in a.into_iter().enumerate() {
                let c = arm(Fields::from_value(&format!("cases[{i}]"), v)?, false)?;
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
    Ok(cases)
}

/// Every case a variant names is one of `cases`.
fn check_variant_cases(variants: &[Arm], cases: &[Arm]) -> Result<(), Error> {
    for (i, v) in variants.iter().enumerate() {
        for n in v.only_cases.iter().flatten() {
            if !cases.iter().any(|c| &c.name == n) {
                let known: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
                return Err(cfg_err(
                    format!("variants[{i}].cases"),
                    if known.is_empty() {
                        format!("names the case {n:?}, but the experiment has no [[cases]]")
                    } else {
                        format!(
                            "names the case {n:?}, which is not defined; cases: {}",
                            known.join(", ")
                        )
                    },
                ));
            }
        }
    }
    Ok(())
}

/// `[[published]]`, if any: each a variant's published change.
fn published_list(
    top: &mut Fields,
    variants: &[Arm],
    cases: &[Arm],
) -> Result<Vec<Published>, Error> {
    let mut published_ = Vec::new();
    match top.take_value("published") {
        None => {}
        Some(toml::Value::Array(a)) => {
            for (i, v) in a.into_iter().enumerate() {
                published_.push(published(i, v, variants, cases)?);
            }
        }
        Some(_) => {
            return Err(cfg_err(
                "published",
                "expected an array of tables ([[published]])",
            ))
        }
    }
    Ok(published_)
}

impl Experiment {
    pub fn parse(text: &str, origin: &str, base_dir: Option<&Path>) -> Result<Experiment, Error> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| super::fields::toml_error(text, &e, origin))?;
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
        let min_scale = min_scale(&mut top, scale)?;
        let quick_scale = quick_scale(&mut top, min_scale.as_ref())?;
        let config = match top.req("config")? {
            toml::Value::Table(t) => t,
            _ => return Err(cfg_err("config", "expected a table (the base run config)")),
        };
        let baseline = arm(top.sub("baseline")?, false)?;
        let variants = variants(&mut top, &baseline)?;
        let cases = cases(&mut top)?;
        check_variant_cases(&variants, &cases)?;
        let published = published_list(&mut top, &variants, &cases)?;
        top.finish()?;
        Ok(Experiment {
            name,
            description,
            reference,
            scale,
            min_scale,
            quick_scale,
            config,
            baseline,
            variants,
            cases,
            published,
            base_dir: base_dir.map(|p| p.to_path_buf()),
            policies: crate::kernel::policy::registry::builtin().clone(),
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

    /// Applies settings given for every arm (`compare --set`) to the base
    /// config, as `set.KEY`. A key that a case or an arm sets itself is
    /// refused: those are applied after, so the value given would be lost.
    /// `reference` is how the caller named the experiment.
    pub fn apply_set(
        &mut self,
        reference: &str,
        set: Vec<(String, toml::Value)>,
    ) -> Result<(), Error> {
        let arms = self
            .cases
            .iter()
            .map(|c| ("case", c))
            .chain(std::iter::once(("baseline arm", &self.baseline)))
            .chain(self.variants.iter().map(|v| ("arm", v)));
        let arms: Vec<(&str, &Arm)> = arms.collect();
        for (key, value) in &set {
            for (what, arm) in &arms {
                let theirs: Vec<String> = arm.set.iter().flat_map(|(k, v)| leaves(k, v)).collect();
                for mine in leaves(key, value) {
                    // The same key, one inside a table the arm sets, or a
                    // value in place of a table the arm sets keys of.
                    let clash = theirs.iter().find(|k| {
                        mine == **k
                            || mine.starts_with(&format!("{k}."))
                            || k.starts_with(&format!("{mine}."))
                    });
                    if let Some(clash) = clash {
                        let place = if self.base_dir.is_none() {
                            format!(
                                "a copy of the experiment (vmsim experiments --show {reference})"
                            )
                        } else {
                            reference.to_string()
                        };
                        return Err(cfg_err(
                            super::fields::cut(&format!("set.{key}"), 60),
                            format!(
                                "the experiment's {what} '{}' sets {clash} itself, which would win over this value; change the {} in {place} instead",
                                arm.name,
                                what.rsplit(' ').next().unwrap_or(what)
                            ),
                        ));
                    }
                }
            }
        }
        for (key, value) in set {
            set_dotted(&mut self.config, &key, value, "set")?;
        }
        Ok(())
    }

    /// Every (case, arm) the experiment runs, cases in order, the baseline
    /// first in each: what `compare` simulates.
    pub fn runs(&self) -> Vec<(Option<&Arm>, &Arm)> {
        let cases: Vec<Option<&Arm>> = if self.cases.is_empty() {
            vec![None]
        } else {
            self.cases.iter().map(Some).collect()
        };
        let mut out = Vec::new();
        for c in cases {
            for a in std::iter::once(&self.baseline)
                .chain(&self.variants)
                .filter(|a| a.runs_in(c))
            {
                out.push((c, a));
            }
        }
        out
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
        RunConfig::from_table_with(t, self.base_dir.as_deref(), scale, &self.policies).map_err(
            |e| match e {
                Error::Config { key, message } => match case {
                    // Names as long as a user wrote them would make the
                    // line unreadable: each is cut.
                    None => cfg_err(
                        key,
                        format!(
                            "{message} (experiment {}, arm {})",
                            cut(&self.name, NAME_SHOWN),
                            cut(&arm.name, NAME_SHOWN)
                        ),
                    ),
                    Some(c) => cfg_err(
                        key,
                        format!(
                            "{message} (experiment {}, case {}, arm {})",
                            cut(&self.name, NAME_SHOWN),
                            cut(&c.name, NAME_SHOWN),
                            cut(&arm.name, NAME_SHOWN)
                        ),
                    ),
                },
                e => e,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
name = "x"
description = "d"
[config]
machine = "xeon-e5-2699v3-2s"
[config.workload]
kind = "lru-file-mmap-read"
ram_mib = 64
[baseline]
name = "per-page"
set = { "kernel.tlb_flush_on_unmap" = "per-page" }
[[variants]]
name = "batched"
set = { "kernel.tlb_flush_on_unmap" = "batched" }
[[cases]]
name = "e5"
set = { "machine" = "xeon-e5-2699v3-2s" }
[[cases]]
name = "milan"
set = { "machine" = "epyc-7j13-milan" }
"#;

    #[test]
    fn a_variant_may_run_in_named_cases_only() {
        let text =
            format!("{BASE}[[variants]]\nname = \"only-milan\"\ncases = [\"milan\"]\nset = {{}}\n");
        let e = Experiment::parse(&text, "x", None).unwrap();
        let v = &e.variants[1];
        assert!(v.runs_in(Some(&e.cases[1])) && !v.runs_in(Some(&e.cases[0])));
        assert!(e.variants[0].runs_in(Some(&e.cases[0])));
    }

    #[test]
    fn a_variant_naming_an_unknown_case_is_an_error_naming_the_field() {
        let text = format!("{BASE}[[variants]]\nname = \"v\"\ncases = [\"icx\"]\nset = {{}}\n");
        match Experiment::parse(&text, "x", None) {
            Err(Error::Config { key, message }) => {
                assert_eq!(key, "variants[1].cases");
                assert!(message.contains("\"icx\"") && message.contains("e5, milan"));
            }
            other => panic!("{other:?}"),
        }
        // The baseline runs everywhere: `cases` is not one of its keys.
        let bad = BASE.replace(
            "[baseline]\nname = \"per-page\"",
            "[baseline]\nname = \"per-page\"\ncases = [\"e5\"]",
        );
        assert!(Experiment::parse(&bad, "x", None).is_err());
    }

    #[test]
    fn published_measurements_are_parsed_and_checked() {
        let entry = |body: &str| {
            format!(
                "{BASE}[[variants]]\nname = \"only-milan\"\ncases = [\"milan\"]\nset = {{}}\n[[published]]\n{body}\n"
            )
        };
        let good = "case = \"e5\"\narm = \"batched\"\nmetric = \"elapsed_s\"\nchange_percent = -25.8\nsource = \"s\"";
        let e = Experiment::parse(&entry(good), "x", None).unwrap();
        assert_eq!(
            e.published,
            vec![Published {
                case: Some("e5".into()),
                arm: "batched".into(),
                metric: "elapsed_s".into(),
                change_percent: -25.8,
                source: "s".into(),
            }]
        );
        assert!(Experiment::parse(BASE, "x", None)
            .unwrap()
            .published
            .is_empty());
        for (from, to, key, says) in [
            (
                "arm = \"batched\"",
                "arm = \"per-page\"",
                "published[0].arm",
                "not a variant",
            ),
            ("case = \"e5\"\n", "", "published[0].case", "required"),
            (
                "case = \"e5\"",
                "case = \"icx\"",
                "published[0].case",
                "not defined",
            ),
            (
                "arm = \"batched\"",
                "arm = \"only-milan\"",
                "published[0].case",
                "does not run in",
            ),
            (
                "change_percent = -25.8",
                "change_percent = -100.0",
                "published[0].change_percent",
                "above -100",
            ),
            (
                "change_percent = -25.8\n",
                "",
                "published[0].change_percent",
                "missing",
            ),
            (
                "source = \"s\"",
                "source = \" \"",
                "published[0].source",
                "must not be empty",
            ),
            (
                "source = \"s\"",
                "source = \"s\"\nvalue = 1",
                "published[0].value",
                "unknown key",
            ),
        ] {
            let text = entry(&good.replace(from, to));
            match Experiment::parse(&text, "x", None) {
                Err(Error::Config { key: k, message }) => {
                    assert_eq!(k, key, "{to}: {message}");
                    assert!(message.contains(says), "{to}: {message}");
                }
                other => panic!("{to}: {other:?}"),
            }
        }
    }

    #[test]
    fn min_scale_is_parsed_and_checked() {
        let with = |extra: &str| format!("scale = 0.5\n{extra}\n{BASE}");
        let e = Experiment::parse(
            &with("min_scale = 0.25\nmin_scale_why = \"one huge page per task\""),
            "x",
            None,
        )
        .unwrap();
        assert_eq!(
            e.min_scale,
            Some(MinScale {
                value: 0.25,
                why: "one huge page per task".into()
            })
        );
        assert_eq!(Experiment::parse(BASE, "x", None).unwrap().min_scale, None);
        let quick = "min_scale = 0.25\nmin_scale_why = \"w\"\nquick_scale = 0.5\nquick_scale_tolerance = 0.6\nquick_scale_measured = \"m\"";
        let e = Experiment::parse(&with(quick), "x", None).unwrap();
        assert_eq!(
            e.quick_scale,
            Some(QuickScale {
                value: 0.5,
                tolerance: 0.6,
                measured: "m".into()
            })
        );
        for (from, to, key) in [
            ("quick_scale = 0.5", "quick_scale = 0.125", "quick_scale"),
            (
                "quick_scale_tolerance = 0.6",
                "quick_scale_tolerance = -1.0",
                "quick_scale_tolerance",
            ),
            (
                "quick_scale_measured = \"m\"",
                "quick_scale_measured = \"\"",
                "quick_scale_measured",
            ),
            ("quick_scale_tolerance = 0.6", "", "quick_scale_tolerance"),
        ] {
            match Experiment::parse(&with(&quick.replace(from, to)), "x", None) {
                Err(Error::Config { key: k, .. }) => assert_eq!(k, key, "{to}"),
                other => panic!("{to}: {other:?}"),
            }
        }
        for (extra, key, says) in [
            (
                "min_scale = 0.0\nmin_scale_why = \"w\"",
                "min_scale",
                "above 0",
            ),
            (
                "min_scale = 2.0\nmin_scale_why = \"w\"",
                "min_scale",
                "at most 1",
            ),
            (
                "min_scale = 0.75\nmin_scale_why = \"w\"",
                "min_scale",
                "own scale",
            ),
            (
                "min_scale = \"1/16\"\nmin_scale_why = \"w\"",
                "min_scale",
                "",
            ),
            ("min_scale = 0.25", "min_scale_why", "required"),
            ("min_scale_why = \"w\"", "min_scale", "required"),
            (
                "min_scale = 0.25\nmin_scale_why = \" \"",
                "min_scale_why",
                "empty",
            ),
        ] {
            match Experiment::parse(&with(extra), "x", None) {
                Err(Error::Config { key: k, message }) => {
                    assert_eq!(k, key, "{extra}: {message}");
                    assert!(message.contains(says), "{extra}: {message}");
                }
                other => panic!("{extra}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_slash_in_an_arm_or_case_name_is_refused() {
        for (from, to, key) in [
            ("name = \"batched\"", "name = \"a/b\"", "variants[0].name"),
            (
                "name = \"per-page\"",
                "name = \"per/page\"",
                "baseline.name",
            ),
            ("name = \"milan\"", "name = \"zen/3\"", "cases[1].name"),
        ] {
            match Experiment::parse(&BASE.replace(from, to), "x", None) {
                Err(Error::Config { key: k, message }) => {
                    assert_eq!(k, key);
                    assert!(message.contains('/'), "{message}");
                }
                other => panic!("{to}: {other:?}"),
            }
        }
    }
}
