//! Input that was accepted and ignored, or refused without saying where:
//! each is now a config error naming its key (issue 36).

mod common;

use common::with_value;
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
    // An empty key is named, not left out (the error was keyed by nothing).
    let text = "machine = \"xeon-e5-2699v3-2s\"\n\"\" = 1\n";
    let (k, _) = config_err(check_config(text, Format::Toml, None));
    assert_eq!(k, "\"\"");
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

#[test]
fn preset_values_that_were_accepted_and_ignored_are_refused() {
    for (section, key, value, named) in [
        (
            "memory",
            "peak_bandwidth_gbs",
            "0.0",
            "memory.peak_bandwidth_gbs",
        ),
        (
            "memory",
            "peak_bandwidth_gbs",
            "-0.0",
            "memory.peak_bandwidth_gbs",
        ),
        (
            "memory",
            "peak_bandwidth_gbs",
            "10.0",
            "memory.sustained_bandwidth_gbs",
        ),
        (
            "memory",
            "interconnect_bandwidth_gbs",
            "1e-300",
            "memory.interconnect_bandwidth_gbs",
        ),
        (
            "memory",
            "interconnect_bandwidth_gbs",
            "0.0",
            "memory.interconnect_bandwidth_gbs",
        ),
        (
            "memory",
            "remote_latency_ns",
            "0.0",
            "memory.remote_latency_ns",
        ),
        (
            "memory",
            "sustained_bandwidth_gbs",
            "0.002",
            "memory.sustained_bandwidth_gbs",
        ),
        ("tlb", "stlb_ways", "0", "tlb.stlb_ways"),
        ("tlb", "l1_2m_ways", "0", "tlb.l1_2m_ways"),
        ("tlb", "l1_1g_entries", "0", "tlb.l1_1g_ways"),
        ("costs", "ipi_latency_ns", "1e-300", "costs.ipi_latency_ns"),
        ("costs", "ipi_latency_ns", "0.0", "costs.ipi_latency_ns"),
        (
            "costs",
            "map_pages_per_pte_cycles",
            "60000000",
            "costs.map_pages_per_pte_cycles",
        ),
        (
            "costs",
            "page_fault_handler_cycles",
            "90000000",
            "costs.page_fault_handler_cycles",
        ),
        ("prefetch", "l2_streams", "0", "prefetch.l2_streams"),
    ] {
        let (k, m) = config_err(vmsim_core::config::Preset::parse(
            &with_value(section, key, value),
            "test",
        ));
        assert_eq!(
            k,
            format!("{named}.value"),
            "{section}.{key} = {value}: {m}"
        );
        assert!(
            m.contains("accepted") || m.contains("exceed") || m.contains("must be"),
            "{m}"
        );
    }
    // 0 keeps its documented meaning: no fill-path limit; no TLB of that
    // size (0 entries and 0 ways); a cost that charges nothing.
    for (section, key, value) in [
        ("l2", "sustained_bytes_per_cycle", "0"),
        ("costs", "map_pages_per_pte_cycles", "0"),
    ] {
        vmsim_core::config::Preset::parse(&with_value(section, key, value), "test")
            .unwrap_or_else(|e| panic!("{section}.{key} = {value}: {e}"));
    }
    let no_1g = with_value("tlb", "l1_1g_entries", "0");
    let no_1g = no_1g.replacen(
        &no_1g[no_1g.find("\nl1_1g_ways = { value = ").unwrap()..][..26],
        "\nl1_1g_ways = { value = 0,",
        1,
    );
    vmsim_core::config::Preset::parse(&no_1g, "test").expect("no 1 GiB TLB");
}

#[test]
fn a_single_socket_may_have_no_link() {
    let one = include_str!("../../../machines/xeon-e5-1650v3-1s.toml");
    let at = one.find("interconnect_bandwidth_gbs = { value = ").unwrap()
        + "interconnect_bandwidth_gbs = { value = ".len();
    let end = at + one[at..].find(',').unwrap();
    let none = format!("{}0.0{}", &one[..at], &one[end..]);
    vmsim_core::config::Preset::parse(&none, "one").expect("0: no link");
    let tiny = format!("{}1e-300{}", &one[..at], &one[end..]);
    let (k, m) = config_err(vmsim_core::config::Preset::parse(&tiny, "one"));
    assert_eq!(k, "memory.interconnect_bandwidth_gbs.value");
    assert!(m.contains("or 0 (one socket: no link)"), "{m}");
}

#[test]
fn every_builtin_preset_loads() {
    for (name, text) in vmsim_core::config::embedded_machines() {
        vmsim_core::config::Preset::parse(text, name).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
