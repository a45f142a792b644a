//! Every preset value's provenance: each built-in value has a class, each
//! judgement, copied or calibrated one a plausible range the field accepts
//! at both ends; a user's value without a class is `user`; a run sets a
//! preset value with `machine_set` under the field's own checks.

use toml::Value;
use vmsim_core::api::{run_config, Format};
use vmsim_core::config::{embedded_machines, load_machine_with, Preset, RANGED};
use vmsim_core::error::Error;

fn config_err(r: Result<Preset, Error>) -> (String, String) {
    match r {
        Err(Error::Config { key, message }) => (key, message),
        other => panic!("expected a config error, got {:?}", other.map(|p| p.name)),
    }
}

/// The Haswell-EP preset with one leaf's line replaced by `line`.
fn with_leaf(section: &str, key: &str, line: &str) -> String {
    let (_, text) = embedded_machines()
        .iter()
        .find(|(n, _)| *n == "xeon-e5-2699v3-2s")
        .unwrap();
    let mut out = String::new();
    let mut in_section = false;
    let mut done = false;
    for l in text.lines() {
        if l.starts_with('[') {
            in_section = l.trim() == format!("[{section}]");
        }
        if in_section && !done && l.starts_with(&format!("{key} = ")) {
            out.push_str(line);
            done = true;
        } else {
            out.push_str(l);
        }
        out.push('\n');
    }
    assert!(done, "no {section}.{key} in the preset");
    out
}

#[test]
fn every_builtin_value_has_a_class_and_every_unsettled_one_a_range() {
    for (name, text) in embedded_machines() {
        let p = Preset::parse(text, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            p.sources.keys().collect::<Vec<_>>(),
            p.provenance.keys().collect::<Vec<_>>(),
            "{name}"
        );
        for (key, prov) in &p.provenance {
            assert_ne!(
                prov.class, "user",
                "{name}: {key} has no class (a built-in value says whether it is sourced, measured, calibrated, judgement or copied)"
            );
            assert_eq!(
                prov.range.is_some(),
                RANGED.contains(&prov.class.as_str()),
                "{name}: {key} ({})",
                prov.class
            );
        }
    }
}

#[test]
fn every_range_end_of_a_builtin_value_is_accepted_by_its_field() {
    for (name, text) in embedded_machines() {
        let p = Preset::parse(text, name).unwrap();
        for (key, prov) in &p.provenance {
            for sets in prov.screen_sets(key) {
                if let Err(e) = Preset::parse_with(text, name, &sets) {
                    panic!("{name}: {key}'s range end {sets:?} is refused: {e}");
                }
            }
        }
    }
}

#[test]
fn a_bad_class_or_range_is_refused_naming_it() {
    let cases = [
        (
            "ways = { value = 8, source = \"s\", class = \"guess\" }",
            "l1d.ways.class",
            "not a class",
        ),
        (
            "ways = { value = 8, source = \"s\", class = \"judgement\" }",
            "l1d.ways.range",
            "missing",
        ),
        (
            "ways = { value = 8, source = \"s\", class = \"judgement\", range = [4, 16] }",
            "l1d.ways.range_reason",
            "missing",
        ),
        (
            "ways = { value = 8, source = \"s\", class = \"sourced\", range = [4, 16], range_reason = \"r\" }",
            "l1d.ways.range",
            "no plausible range",
        ),
        (
            "ways = { value = 8, source = \"s\", class = \"copied\", range = [10, 16], range_reason = \"r\" }",
            "l1d.ways.range",
            "does not hold the value 8",
        ),
        (
            "ways = { value = 8, source = \"s\", class = \"copied\", range = [4.5, 16], range_reason = \"r\" }",
            "l1d.ways.range",
            "two integers",
        ),
        (
            "replacement = { value = \"lru\", source = \"s\", class = \"judgement\", range = [\"drrip\", \"tree-plru\"], range_reason = \"r\" }",
            "l1d.replacement.range",
            "among them",
        ),
        (
            "ways = { value = 8, source = \"s\", clas = \"sourced\" }",
            "l1d.ways.clas",
            "unknown key",
        ),
    ];
    for (line, key, words) in cases {
        let leaf = line.split(' ').next().unwrap();
        let (k, msg) = config_err(Preset::parse(&with_leaf("l1d", leaf, line), "test"));
        assert_eq!(k, key, "{line}: {msg}");
        assert!(msg.contains(words), "{line}: {msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }
}

#[test]
fn a_users_value_without_a_class_is_theirs() {
    let text = with_leaf("l1d", "ways", "ways = { value = 8, source = \"mine\" }");
    let p = Preset::parse(&text, "mine.toml").unwrap();
    assert_eq!(p.provenance["l1d.ways"].class, "user");
    assert_eq!(p.provenance["l1d.ways"].range, None);
}

#[test]
fn machine_set_sets_a_preset_value_as_the_runs_own() {
    let sets = [("l2.superqueue".to_string(), Value::Integer(7))];
    let p = load_machine_with("machine", "xeon-e5-2699v3-2s", None, &sets).unwrap();
    assert_eq!(p.l2.superqueue, 7);
    assert_eq!(p.provenance["l2.superqueue"].class, "user");
    assert!(
        p.sources["l2.superqueue"].starts_with("set by the run (machine_set.l2.superqueue = 7)")
    );

    let bad = [
        (
            "l2.superqueu",
            Value::Integer(7),
            "not a value of the machine preset",
        ),
        ("l2", Value::Integer(7), "is a section"),
        ("l2.superqueue", Value::Integer(0), "accepted: 1..=1024"),
        ("l2.replacement", Value::String("fifo".into()), "accepted"),
    ];
    for (key, v, words) in bad {
        let (k, msg) = config_err(load_machine_with(
            "machine",
            "xeon-e5-2699v3-2s",
            None,
            &[(key.to_string(), v)],
        ));
        assert_eq!(k, format!("machine_set.{key}"), "{msg}");
        assert!(msg.contains(words), "{key}: {msg}");
    }
}

#[test]
fn a_run_with_machine_set_differs_and_records_it() {
    let base = "machine = \"xeon-e5-2699v3-2s\"\nseed = 1\n[workload]\nkind = \"usemem\"\nnr_task = 2\nsize_per_task_mib = 4\n";
    let set = format!("{base}[machine_set.memory]\nlocal_latency_ns = 300\n");
    let a = run_config(base, Format::Toml, None, &mut |_, _| {}).unwrap();
    let b = run_config(&set, Format::Toml, None, &mut |_, _| {}).unwrap();
    let (a, b): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&a).unwrap(),
        serde_json::from_str(&b).unwrap(),
    );
    assert_eq!(b["config"]["machine_set"]["memory.local_latency_ns"], 300);
    assert!(a["config"].get("machine_set").is_none());
    assert_ne!(a["metrics"]["elapsed_s"], b["metrics"]["elapsed_s"]);
    let unknown = format!("{base}[machine_set]\nfoo = 1\n");
    let e = run_config(&unknown, Format::Toml, None, &mut |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("machine_set.foo"), "{e}");
}

#[test]
fn a_coupled_range_moves_its_values_together_and_bad_couplings_are_refused() {
    let (name, text) = embedded_machines()
        .iter()
        .find(|(n, _)| *n == "xeon-e5-2699v3-2s")
        .unwrap();
    let p = Preset::parse(text, name).unwrap();
    let sets = p.provenance["llc.instances_per_socket"].screen_sets("llc.instances_per_socket");
    assert_eq!(
        sets,
        vec![vec![
            ("llc.instances_per_socket".to_string(), Value::Integer(2)),
            ("llc.size_kib".to_string(), Value::Integer(23040)),
            ("memory.nodes_per_socket".to_string(), Value::Integer(2)),
        ]]
    );
    let split = Preset::parse_with(text, name, &sets[0]).unwrap();
    assert_eq!(
        split.llc.size_kib * split.llc.instances_per_socket,
        p.llc.size_kib,
        "Cluster-on-Die splits the LLC, it does not grow it"
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("instances_per_socket = "))
        .unwrap();
    let good =
        r#"range_with = { "llc.size_kib" = [46080, 23040], "memory.nodes_per_socket" = [1, 2] }"#;
    assert!(line.contains(good));
    for (with, key, words) in [
        (
            r#"range_with = { "llc.size_kib" = [46080] }"#,
            "llc.instances_per_socket.range_with.llc.size_kib",
            "expected 2 values",
        ),
        (
            r#"range_with = { "llc.sise_kib" = [46080, 23040] }"#,
            "llc.instances_per_socket.range_with.llc.sise_kib",
            "not a preset value",
        ),
        (
            r#"range_with = { "llc.size_kib" = [46080, 0] }"#,
            "llc.instances_per_socket.range_with.llc.size_kib",
            "out of range",
        ),
        (
            r#"range_with = 3"#,
            "llc.instances_per_socket.range_with",
            "expected a table",
        ),
    ] {
        let bad = text.replace(line, &line.replace(good, with));
        let (k, m) = config_err(Preset::parse(&bad, "test"));
        assert_eq!(k, key, "{m}");
        assert!(m.contains(words), "{with}: {m}");
    }
}

#[test]
fn every_builtin_coupling_holds_the_presets_own_values_at_its_own_end() {
    for (name, text) in embedded_machines() {
        let p = Preset::parse(text, name).unwrap();
        if let Some(e) = vmsim_core::config::preset::check_couplings(&p.provenance) {
            panic!("{name}: {e}");
        }
    }
    // A coupling that contradicts its preset is found, and a copy that
    // changes a coupled value still loads.
    let (name, text) = embedded_machines()
        .iter()
        .find(|(n, _)| *n == "xeon-e5-2699v3-2s")
        .unwrap();
    let good = r#""llc.size_kib" = [46080, 23040], "memory.nodes_per_socket""#;
    let bad = text.replace(
        good,
        r#""llc.size_kib" = [23040, 46080], "memory.nodes_per_socket""#,
    );
    let p = Preset::parse(&bad, name).unwrap();
    let e = vmsim_core::config::preset::check_couplings(&p.provenance).expect("a contradiction");
    assert!(e.to_string().contains("preset's own value"), "{e}");
    let copy = text.replace(
        "nodes_per_socket = { value = 1,",
        "nodes_per_socket = { value = 2,",
    );
    Preset::parse(&copy, "mine").expect("a copy with two nodes a socket loads");
}
