//! Fuzz target over the config parsers' text: run configs as TOML and as
//! JSON, machine presets and experiments, each a valid document with bytes
//! cut, inserted (brackets, quotes, integers of 2^63 and more, deep nesting,
//! control characters) or the document truncated. Whatever the text, parsing
//! never panics, and a refusal is a config error with a key and one line.
//! The case count comes from `VMSIM_FUZZ_CASES` (default 2000).

use proptest::prelude::*;
use vmsim_core::api::{check_config, Error, Format};
use vmsim_core::config::experiment::Experiment;
use vmsim_core::config::Preset;

const PRESET: &str = include_str!("../../../machines/xeon-e5-2699v3-2s.toml");
const EXPERIMENT: &str = include_str!("../../../experiments/clear-target-last.toml");
const RUN_TOML: &str = "machine = \"xeon-e5-2699v3-2s\"\nseed = 0\n[kernel]\nthp = \"always\"\n\
                        [workload]\nkind = \"usemem\"\nnr_task = 2\nsize_per_task_mib = 4\n\
                        [sim.fault_injection]\nskip_clear_subpage = 3\n";
const RUN_JSON: &str = "{\"machine\": \"xeon-e5-2699v3-2s\", \"seed\": 0, \"kernel\": {\"thp\": \"always\"}, \
                        \"workload\": {\"kind\": \"usemem\", \"nr_task\": 2, \"size_per_task_mib\": 4}, \
                        \"sim\": {\"quantum_cycles\": 50}}";

fn cases() -> u32 {
    std::env::var("VMSIM_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

/// One text edit: (where, as a fraction of the length; what).
#[derive(Clone, Debug)]
enum Edit {
    Cut(f64, usize),
    Insert(f64, String),
    Truncate(f64),
}

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "=",
            "[",
            "]",
            "{",
            "}",
            "\"",
            "'",
            ",",
            ".",
            "\n",
            "#",
            "\\",
            "\u{0}",
            "é",
            "\u{7f}",
            "99999999999999999999",
            "9223372036854775808",
            "-9223372036854775809",
            "1e999",
            "nan",
            "-0.0",
            "0x7fffffffffffffff",
            "1979-05-27T07:32:00Z",
            "true",
            "null",
            "\"\"\"",
            "[[x]]",
            "x = 1\n",
            "[workload]\n",
            "machine = 1\n",
        ])
        .prop_map(str::to_string),
        (1usize..3000, prop::bool::ANY).prop_map(|(n, list)| if list {
            format!("{}{}", "[".repeat(n), "]".repeat(n))
        } else {
            format!("{}1{}", "{\"a\": ".repeat(n), "}".repeat(n))
        }),
        "[a-z_.=\\[\\]{}\" 0-9]{0,40}",
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (0.0..1.0f64, 1usize..40).prop_map(|(at, n)| Edit::Cut(at, n)),
        (0.0..1.0f64, piece()).prop_map(|(at, s)| Edit::Insert(at, s)),
        (0.0..1.0f64).prop_map(Edit::Truncate),
    ]
}

/// The byte offset nearest `at` of `text` that is a char boundary.
fn boundary(text: &str, at: f64) -> usize {
    let mut i = ((text.len() as f64) * at) as usize;
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i.min(text.len())
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut t = text.to_string();
    for e in edits {
        match e {
            Edit::Cut(at, n) => {
                let a = boundary(&t, *at);
                let mut b = (a + n).min(t.len());
                while !t.is_char_boundary(b) {
                    b += 1;
                }
                t.replace_range(a..b, "");
            }
            Edit::Insert(at, s) => {
                let a = boundary(&t, *at);
                t.insert_str(a, s);
            }
            Edit::Truncate(at) => {
                let a = boundary(&t, *at);
                t.truncate(a);
            }
        }
    }
    t
}

/// A refusal is a config error with a key, on one line of readable length.
fn check<T>(r: Result<T, Error>, text: &str) -> Result<(), TestCaseError> {
    match r {
        Ok(_) => Ok(()),
        Err(Error::Config { key, message }) => {
            prop_assert!(!key.is_empty(), "no key: {message}");
            prop_assert!(
                key.chars().count() <= 250,
                "key of {} characters",
                key.len()
            );
            prop_assert!(
                !key.contains('\n') && !message.contains('\n'),
                "{key}: {message:?}"
            );
            prop_assert!(
                message.chars().count() <= 2000,
                "{key}: message of {} characters",
                message.len()
            );
            Ok(())
        }
        Err(e) => Err(TestCaseError::fail(format!(
            "not a config error: {e} for {text:?}"
        ))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn run_config_text_never_panics_and_errors_are_keyed_lines(edits in prop::collection::vec(edit(), 1..4)) {
        let toml = apply(RUN_TOML, &edits);
        check(check_config(&toml, Format::Toml, None), &toml)?;
        let json = apply(RUN_JSON, &edits);
        check(check_config(&json, Format::Json, None), &json)?;
    }

    #[test]
    fn preset_and_experiment_text_never_panics_and_errors_are_keyed_lines(
        edits in prop::collection::vec(edit(), 1..4),
    ) {
        let preset = apply(PRESET, &edits);
        check(Preset::parse(&preset, "fuzz.toml"), &preset)?;
        let experiment = apply(EXPERIMENT, &edits);
        check(Experiment::parse(&experiment, "fuzz-experiment.toml", None), &experiment)?;
    }
}
