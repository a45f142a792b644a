//! Input that was accepted and ignored, or refused without saying where:
//! each is now a config error naming its key (issue 36).

use vmsim_core::api::{self, check_config, Error, Format};

fn config_err<T>(r: Result<T, Error>) -> (String, String) {
    match r {
        Err(Error::Config { key, message }) => (key, message),
        Ok(_) => panic!("accepted"),
        Err(e) => panic!("not a config error: {e}"),
    }
}

fn usemem(extra: &str) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\nthp_cow = \"copy\"\n\
         [workload]\nkind = \"usemem\"\nnr_task = 3\nsize_per_task_mib = 4\nprealloc = true\n{extra}"
    )
}

#[test]
fn skip_copy_subpage_needs_a_prefaulted_region() {
    // With prealloc alone the children fault in pages of their own: nothing
    // is copied, and the injected defect was a silent no-op.
    let inject = "[sim.fault_injection]\nskip_copy_subpage = 3\n";
    let (k, m) = config_err(check_config(&usemem(inject), Format::Toml, None));
    assert_eq!(k, "sim.fault_injection.skip_copy_subpage");
    assert!(m.contains("prefault = true"), "{m}");
    let prefaulted = usemem(&format!("prefault = true\n{inject}"));
    check_config(&prefaulted, Format::Toml, None).expect("a copy happens");
}

#[test]
fn toml_integers_too_large_name_their_key_and_line() {
    let text = usemem("[sim]\nquantum_cycles = 9223372036854775808\n");
    let (k, m) = config_err(check_config(&text, Format::Toml, None));
    assert_eq!(k, "sim.quantum_cycles");
    assert!(m.contains("line 11"), "{m}");
    let text = "seed = 99999999999999999999999\nmachine = \"xeon-e5-2699v3-2s\"\n";
    let (k, m) = config_err(check_config(text, Format::Toml, None));
    assert_eq!(k, "seed");
    assert!(m.contains("line 1, column 8"), "{m}");
    // Other syntax errors keep the document's key, with the line.
    let (k, m) = config_err(check_config("seed = = 1\n", Format::Toml, None));
    assert_eq!(k, "config");
    assert!(m.contains("line 1"), "{m}");
    // In a preset, the preset's dotted key.
    let preset = include_str!("../../../machines/xeon-e5-2699v3-2s.toml");
    let at = preset.find("fill_buffers = { value = ").unwrap() + "fill_buffers = { value = ".len();
    let end = at + preset[at..].find(',').unwrap();
    let bad = format!("{}9223372036854775808{}", &preset[..at], &preset[end..]);
    let (k, m) = config_err(vmsim_core::config::Preset::parse(&bad, "p.toml"));
    assert_eq!(k, "l1d.fill_buffers");
    assert!(m.contains("line "), "{m}");
}

#[test]
fn a_long_unknown_key_is_cut() {
    let long = "k".repeat(5000);
    let text = format!("machine = \"xeon-e5-2699v3-2s\"\n{long} = 1\n");
    let (k, _) = config_err(check_config(&text, Format::Toml, None));
    assert!(k.len() < 100 && k.contains("5000 characters"), "{k}");
    let text = usemem(&format!("{long} = 1\n"));
    let (k, _) = config_err(check_config(&text, Format::Toml, None));
    assert!(k.starts_with("workload.kkk") && k.len() < 100, "{k}");
}

#[test]
fn a_seed_the_arms_cannot_hold_is_refused() {
    let (k, m) = config_err(api::compare_with(
        "clear-target-last",
        None,
        u64::MAX,
        None,
        1,
        &mut |_, _| {},
    ));
    assert_eq!(k, "seed");
    assert!(m.contains("9223372036854775807"), "{m}");
}
