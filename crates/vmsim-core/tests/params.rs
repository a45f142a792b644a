//! Every preset parameter is declared once (config/preset/params.rs and
//! `kernel_costs!`): the built-in presets hold exactly the declared keys,
//! each value and each end of its plausible range is checked against its
//! declaration, and docs/machines.md's table is the declarations'
//! (VMSIM_BLESS=1 rewrites it).

mod common;

use vmsim_core::config::preset::params;
use vmsim_core::config::{embedded_machines, load_machine, Preset};
use vmsim_core::error::Error;

#[test]
fn docs_machines_md_has_the_declarations_table() {
    common::check_doc_table(
        "docs/machines.md",
        "accepted",
        &params::doc_table(),
        "params",
    );
}

#[test]
fn every_builtin_preset_holds_exactly_the_declared_keys() {
    let declared: Vec<_> = params::all();
    let mut keys: Vec<String> = declared.iter().map(|p| p.key()).collect();
    keys.sort();
    let n = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), n, "a key declared twice");
    for d in &declared {
        assert!(!d.doc_text().is_empty(), "{} has no doc", d.key());
    }
    for (name, _) in embedded_machines() {
        let p = load_machine("machine", name, None).unwrap();
        for key in p.provenance.keys() {
            assert!(keys.contains(key), "{name}: {key} is read but not declared");
        }
        for d in &declared {
            let optional = d.optional || d.section == "numa" || d.section == "idle";
            assert!(
                optional || p.provenance.contains_key(&d.key()),
                "{name}: the declared {} is not read",
                d.key()
            );
            // Each built-in value passes its declaration.
            if let Some(v) = p.provenance.get(&d.key()) {
                assert_eq!(d.accepts(&v.value), Ok(()), "{name}: {}", d.key());
            }
        }
    }
}

fn config_err(r: Result<Preset, Error>) -> (String, String) {
    match r {
        Err(Error::Config { key, message }) => (key, message),
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn a_range_end_the_parameter_does_not_accept_is_refused() {
    let (_, text) = embedded_machines()
        .iter()
        .find(|(n, _)| *n == "xeon-e5-2699v3-2s")
        .unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("superqueue = "))
        .unwrap();
    let at = line.find("range = [").unwrap() + "range = [".len();
    let end = line[at..].find(']').unwrap() + at;
    for (range, says) in [
        (
            "0, 32",
            "the end 0: 0 is out of range; accepted: 1..=1024 entries",
        ),
        ("16, 5000", "the end 5000: 5000 is out of range"),
        ("16, \"x\"", "two integers"),
    ] {
        let bad = text.replace(line, &format!("{}{range}{}", &line[..at], &line[end..]));
        let (k, m) = config_err(Preset::parse(&bad, "test"));
        assert_eq!(k, "l2.superqueue.range", "{m}");
        assert!(m.contains(says), "{m}");
        assert!(!m.contains('\n'), "{m}");
    }
}

#[test]
fn each_kind_accepts_its_values_and_names_the_rest() {
    let find = |k: &str| params::find(k).unwrap_or_else(|| panic!("{k} declared"));
    let v = |s: &str| -> toml::Value {
        format!("x = {s}").parse::<toml::Table>().unwrap()["x"].clone()
    };
    for (key, good, bad) in [
        (
            "cpu.freq_mhz",
            &["100", "20000"][..],
            &["99", "20001", "1.5", "\"fast\""][..],
        ),
        (
            "l2.sustained_bytes_per_cycle",
            &["0", "0.0625", "64"],
            &["0.01", "65", "-1"],
        ),
        (
            "memory.remote_latency_ns",
            &["0", "1", "10000"],
            &["0.5", "10001"],
        ),
        (
            "llc.replacement",
            &["\"lru\"", "\"drrip\""],
            &["\"fifo\"", "1"],
        ),
        (
            "string.bypass_hold_ns",
            &["\"posted\"", "41.9"],
            &["\"none\"", "0", "-3"],
        ),
        (
            "l2.writeback_holds_superqueue",
            &["true", "false"],
            &["1", "\"yes\""],
        ),
        ("costs.rmap_pte_cycles", &["0", "100000"], &["100001"]),
        ("costs.context_switch_cycles", &["10000000"], &["10000001"]),
    ] {
        let d = find(key);
        for g in good {
            assert_eq!(d.accepts(&v(g)), Ok(()), "{key} = {g}");
        }
        for b in bad {
            let m = d.accepts(&v(b)).expect_err(&format!("{key} = {b}"));
            assert!(
                m.contains("accepted") || m.contains("expected"),
                "{key}: {m}"
            );
        }
    }
}
