//! Golden runs: each configuration in `tests/golden/*.toml` gives exactly
//! the JSON stored beside it. The Python tests check the extension module
//! against the same files, so the two builds (a plain release build here,
//! the extension as `make setup` built it, profile-guided with
//! `VMSIM_PGO=1`) are held to the same bytes.
//!
//! A change of the model changes them on purpose: `VMSIM_BLESS=1 cargo
//! test --release --test golden` rewrites them, and the diff shows what
//! moved.

use std::path::{Path, PathBuf};
use vmsim_core::api::{run_config_on, Format};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden")
}

/// The first key whose value differs between two JSON texts (for the
/// failure message: the whole texts are long).
fn first_difference(a: &str, b: &str) -> String {
    let (Ok(a), Ok(b)) = (
        serde_json::from_str::<serde_json::Value>(a),
        serde_json::from_str::<serde_json::Value>(b),
    ) else {
        return "one of them is not JSON".into();
    };
    let (Some(ma), Some(mb)) = (a["metrics"].as_object(), b["metrics"].as_object()) else {
        return "no metrics".into();
    };
    for (k, va) in ma {
        if mb.get(k) != Some(va) {
            return format!(
                "metrics.{k}: {va} now, {} stored",
                mb.get(k).unwrap_or(&serde_json::Value::Null)
            );
        }
    }
    "the metrics agree; something else differs".into()
}

#[test]
fn golden_runs_give_the_stored_bytes() {
    let bless = std::env::var("VMSIM_BLESS").is_ok_and(|v| v == "1");
    let mut configs: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    configs.sort();
    assert!(configs.len() >= 3, "golden configurations missing");
    let mut failed = Vec::new();
    for cfg in &configs {
        let text = std::fs::read_to_string(cfg).unwrap();
        let out = run_config_on(&text, Format::Toml, cfg.parent(), 1, &mut |_, _| {}).unwrap();
        let stored = cfg.with_extension("json");
        if bless {
            std::fs::write(&stored, format!("{out}\n")).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&stored).unwrap_or_default();
        if want.trim_end() != out {
            failed.push(format!(
                "{}: {}",
                cfg.file_name().unwrap().to_string_lossy(),
                first_difference(&out, want.trim_end())
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "golden runs differ (VMSIM_BLESS=1 to store a change of the model):\n{}",
        failed.join("\n")
    );
}
