//! Bad input is refused with a config error naming its key: preset numbers
//! outside their physical range (which used to abort or panic), simulated
//! memory sizes that wrapped, fault injections the run can never reach,
//! JSON values TOML cannot hold, and config files that are not regular files.

mod common;

use common::{with_value, PRESET};
use vmsim_core::api::{run_config, Error, Format};
use vmsim_core::config::Preset;

fn preset_err(section: &str, key: &str, value: &str) -> (String, String) {
    match Preset::parse(&with_value(section, key, value), "test") {
        Err(Error::Config { key, message }) => (key, message),
        Ok(_) => panic!("{section}.{key} = {value} was accepted"),
        Err(e) => panic!("{section}.{key} = {value}: not a config error: {e}"),
    }
}

#[test]
fn shipped_preset_passes_its_bounds() {
    Preset::parse(PRESET, "test").expect("shipped preset is valid");
}

#[test]
fn preset_numbers_out_of_physical_range_name_their_key() {
    for (section, key, value) in [
        ("l1d", "fill_buffers", "1099511627776"),
        ("l1d", "fill_buffers", "9223372036854775807"),
        ("l2", "size_kib", "9223372036854775807"),
        ("l2", "superqueue", "100000"),
        ("l2", "sustained_bytes_per_cycle", "100"),
        ("llc", "sustained_bytes_per_cycle", "0.01"),
        ("llc", "latency_cycles", "9223372036854775807"),
        ("memory", "local_latency_ns", "1e300"),
        ("memory", "sustained_bandwidth_gbs", "1e300"),
        ("cpu", "freq_mhz", "9223372036854775807"),
        ("cpu", "sockets", "4294967296"),
        ("tlb", "stlb_entries", "1099511627776"),
        ("costs", "page_fault_handler_cycles", "9223372036854775807"),
        ("costs", "ipi_latency_ns", "1e300"),
    ] {
        let (k, msg) = preset_err(section, key, value);
        assert_eq!(k, format!("{section}.{key}.value"), "{msg}");
        assert!(msg.contains("accepted"), "{k}: {msg}");
        assert!(msg.len() < 200, "{k}: message too long: {msg}");
    }
}

#[test]
fn modeled_caches_are_bounded_by_host_memory() {
    // 64 GiB of LLC per instance: refused before anything is allocated.
    let (k, _) = preset_err("llc", "size_kib", "67108864");
    assert_eq!(k, "llc.size_kib.value");
    // 2.2 GiB per instance is inside the per-cache range, but 2 sockets x 2.2 GiB
    // with the private caches pass the guard on all modeled caches together.
    let text = with_value("llc", "size_kib", "2304000");
    match Preset::parse(&text, "test") {
        Err(Error::Config { key, message }) => {
            assert_eq!(key, "llc.size_kib.value");
            assert!(message.contains("modeled caches"), "{message}");
        }
        other => panic!("accepted: {:?}", other.map(|p| p.llc.size_kib)),
    }
}

fn run_err(text: &str, format: Format) -> (String, String) {
    match run_config(text, format, None, &mut |_, _| {}) {
        Err(Error::Config { key, message }) => (key, message),
        other => panic!("expected a config error, got {:?}", other.map(|_| ())),
    }
}

fn usemem(extra: &str) -> String {
    format!("machine = \"xeon-e5-2699v3-2s\"\n[workload]\nkind = \"usemem\"\nnr_task = 1\nsize_per_task_mib = 2\n{extra}")
}

#[test]
fn node_memory_that_would_wrap_is_refused() {
    let (k, m) = run_err(
        &usemem("[sim]\nnode_memory_mib = 17592186044480\n"),
        Format::Toml,
    );
    assert_eq!(k, "sim.node_memory_mib");
    assert!(m.contains("out of range"), "{m}");
}

#[test]
fn fault_injection_the_run_cannot_reach_is_refused() {
    // No copy-on-write of huge pages in a plain usemem run.
    let (k, _) = run_err(
        &usemem("[sim.fault_injection]\nskip_copy_subpage = 3\n"),
        Format::Toml,
    );
    assert_eq!(k, "sim.fault_injection.skip_copy_subpage");
    // A 2 MiB page has 512 sub-pages.
    let (k, m) = run_err(
        &usemem("[sim.fault_injection]\nskip_clear_subpage = 600\n"),
        Format::Toml,
    );
    assert_eq!(k, "sim.fault_injection.skip_clear_subpage");
    assert!(m.contains("0..=511"), "{m}");
    // thp = never clears no huge page.
    let (k, _) = run_err(
        &usemem("[kernel]\nthp = \"never\"\n[sim.fault_injection]\nskip_clear_subpage = 1\n"),
        Format::Toml,
    );
    assert_eq!(k, "sim.fault_injection.skip_clear_subpage");
}

#[test]
fn json_values_toml_cannot_hold_name_their_key() {
    let base = r#"{"machine": "xeon-e5-2699v3-2s", "workload": {"kind": "usemem", "nr_task": 1, "size_per_task_mib": 2}, "#;
    let (k, _) = run_err(&format!("{base}\"seed\": null}}"), Format::Json);
    assert_eq!(k, "seed");
    let (k, _) = run_err(
        &format!("{base}\"seed\": 9223372036854775808}}"),
        Format::Json,
    );
    assert_eq!(k, "seed");
    let (k, _) = run_err(
        &format!("{base}\"sim\": {{\"quantum_cycles\": null}}}}"),
        Format::Json,
    );
    assert_eq!(k, "sim.quantum_cycles");
}

#[test]
fn a_json_key_given_twice_is_refused() {
    // TOML refuses a repeated key; JSON parsers keep the last, which would
    // drop the first setting without a word.
    let base = r#"{"machine": "xeon-e5-2699v3-2s", "workload": {"kind": "usemem", "nr_task": 1, "size_per_task_mib": 2"#;
    let (k, m) = run_err(
        &format!("{base}}}, \"seed\": 0, \"seed\": 5}}"),
        Format::Json,
    );
    assert_eq!(k, "config");
    assert!(m.contains("\"seed\"") && m.contains("twice"), "{m}");
    let (_, m) = run_err(&format!("{base}, \"nr_task\": 2}}}}"), Format::Json);
    assert!(m.contains("\"nr_task\"") && m.contains("twice"), "{m}");
    // The same document without the repeat runs.
    let ok = format!("{base}}}, \"seed\": 5}}");
    assert!(run_config(&ok, Format::Json, None, &mut |_, _| {}).is_ok());
}

#[test]
fn pf_test_size_beyond_range_is_refused_not_wrapped() {
    let text =
        "machine = \"xeon-e5-2699v3-2s\"\n[workload]\nkind = \"pf-test\"\nsize_mib = 1e300\n";
    let (k, m) = run_err(text, Format::Toml);
    assert_eq!(k, "workload.size_mib");
    assert!(m.contains("1e300"), "{m}");
}

#[test]
fn long_values_are_cut_in_messages() {
    let long = "x".repeat(5000);
    let (k, m) = run_err(
        &usemem(&format!("[kernel]\nthp = \"{long}\"\n")),
        Format::Toml,
    );
    assert_eq!(k, "kernel.thp");
    assert!(m.len() < 300, "{} characters", m.len());
    assert!(m.contains("5002 characters"), "{m}");
}

#[test]
fn a_preset_that_is_not_a_regular_file_is_refused() {
    let text = "machine = \"/dev/zero.toml\"\n[workload]\nkind = \"usemem\"\nnr_task = 1\nsize_per_task_mib = 2\n";
    // /dev/zero.toml does not exist: the usual unknown-machine error.
    let (k, _) = run_err(text, Format::Toml);
    assert_eq!(k, "machine");
    // A FIFO named like a preset: refused without opening it (opening would block).
    let dir = std::env::temp_dir().join(format!("vmsim-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("m.toml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    let _ = std::fs::remove_file(&fifo);
    assert_eq!(unsafe { mkfifo(c.as_ptr(), 0o600) }, 0);
    let text = format!(
        "machine = {:?}\n[workload]\nkind = \"usemem\"\nnr_task = 1\nsize_per_task_mib = 2\n",
        fifo.to_str().unwrap()
    );
    let (k, m) = run_err(&text, Format::Toml);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(k, "machine");
    assert!(m.contains("not a regular file"), "{m}");
}

extern "C" {
    fn mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
}

/// A pmbench run config with `extra` lines in `[workload]` or `[kernel]`.
fn pmbench_err(kernel: &str, workload: &str) -> (String, String) {
    let text = format!(
        "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\n{kernel}\n[workload]\nkind = \"pmbench\"\nmapsize_mib = 64\nduration_s = 0.001\nnode_memory_mib = 256\n{workload}\n"
    );
    match run_config(&text, Format::Toml, None, &mut |_, _| {}) {
        Err(Error::Config { key, message }) => (key, message),
        Ok(_) => panic!("accepted: {kernel} / {workload}"),
        Err(e) => panic!("not a config error: {e}"),
    }
}

#[test]
fn numa_balancing_and_pmbench_settings_out_of_range_name_their_key() {
    for (kernel, workload, want) in [
        ("numa_hint_fault = \"lazy\"", "", "kernel.numa_hint_fault"),
        ("migrate_tlb_flush = 3", "", "kernel.migrate_tlb_flush"),
        (
            "numa_balancing_scan_size_mb = 0",
            "",
            "kernel.numa_balancing_scan_size_mb",
        ),
        (
            "numa_balancing_scan_period_min_ms = 500\nnuma_balancing_scan_period_max_ms = 100",
            "",
            "kernel.numa_balancing_scan_period_max_ms",
        ),
        (
            "numa_balancing_scan_delays_ms = 5",
            "",
            "kernel.numa_balancing_scan_delays_ms",
        ),
        ("", "nr_threads = 0", "workload.nr_threads"),
        ("", "read_ratio = 101", "workload.read_ratio"),
        ("", "pattern = \"zipf\"", "workload.pattern"),
        ("", "setsize_mib = 128", "workload.setsize_mib"),
        ("", "bind_node = 2", "workload.bind_node"),
        (
            "",
            "eater_mib = 512\neater_exit_s = 1",
            "workload.eater_mib",
        ),
        ("", "eater_mib = 64", "workload.eater_exit_s"),
        ("", "stdev_fraction = -1", "workload.stdev_fraction"),
        ("", "stride_pages = 0", "workload.stride_pages"),
        ("", "stride_pages = 3", "workload.stride_pages"),
        (
            "",
            "pattern = \"linear\"\nstdev_fraction = 0.5",
            "workload.stdev_fraction",
        ),
        ("", "nr_processes = 9", "workload.mapsize_mib"),
    ] {
        let (k, msg) = pmbench_err(kernel, workload);
        assert_eq!(k, want, "{kernel} / {workload}: {msg}");
        // One line; an unknown key lists the accepted ones ([kernel] has 21).
        assert!(msg.len() < 600 && !msg.contains('\n'), "{k}: {msg}");
    }
}

#[test]
fn child_start_skew_needs_a_range() {
    let (k, m) = run_err(
        &usemem("prealloc = true\nchild_start_skew_us = 2000000\n"),
        Format::Toml,
    );
    assert_eq!(k, "workload.child_start_skew_us");
    assert!(m.contains("0 to 1000000"), "{m}");
}

#[test]
fn usemem_clock_names_its_choices() {
    let (k, m) = run_err(&usemem("clock = \"after-sync\"\n"), Format::Toml);
    assert_eq!(k, "workload.clock");
    assert!(m.contains("\"start\"") && m.contains("\"after-go\""), "{m}");
}

#[test]
fn write_back_sharing_takes_only_true_or_false() {
    for section in ["l2", "llc"] {
        let (k, msg) = preset_err(section, "writebacks_share_sustained", "1");
        assert_eq!(k, format!("{section}.writebacks_share_sustained.value"));
        assert!(msg.contains("true or false"), "{k}: {msg}");
    }
}

#[test]
fn page_crossing_takes_only_true_or_false_and_is_required() {
    let (k, msg) = preset_err("prefetch", "l2_cross_page", "\"yes\"");
    assert_eq!(k, "prefetch.l2_cross_page.value");
    assert!(msg.contains("true or false"), "{k}: {msg}");
    let without: String = PRESET
        .lines()
        .filter(|l| !l.starts_with("l2_cross_page"))
        .map(|l| format!("{l}\n"))
        .collect();
    match Preset::parse(&without, "test") {
        Err(Error::Config { key, .. }) => assert_eq!(key, "prefetch.l2_cross_page"),
        other => panic!("a preset without l2_cross_page: {other:?}"),
    }
}

#[test]
fn scalar_stores_a_cycle_are_bounded_and_required() {
    for (value, says) in [("0", "accepted: 1..=8"), ("9", "accepted: 1..=8")] {
        let (k, msg) = preset_err("cpu", "scalar_stores_per_cycle", value);
        assert_eq!(k, "cpu.scalar_stores_per_cycle.value", "{msg}");
        assert!(msg.contains(says), "{k}: {msg}");
    }
    let without: String = PRESET
        .lines()
        .filter(|l| !l.starts_with("scalar_stores_per_cycle"))
        .map(|l| format!("{l}\n"))
        .collect();
    match Preset::parse(&without, "test") {
        Err(Error::Config { key, .. }) => assert_eq!(key, "cpu.scalar_stores_per_cycle"),
        other => panic!("a preset without scalar_stores_per_cycle: {other:?}"),
    }
}

#[test]
fn clzero_takes_only_true_or_false() {
    let (k, msg) = preset_err("string", "clzero", "1");
    assert_eq!(k, "string.clzero.value");
    assert!(msg.contains("true or false"), "{k}: {msg}");
}

#[test]
fn idle_states_name_the_state_at_fault() {
    let err = |from: &str, to: &str| match Preset::parse(&PRESET.replace(from, to), "test") {
        Err(Error::Config { key, message }) => (key, message),
        other => panic!("{to}: {other:?}"),
    };
    // C6 made shallower than C3: its residency decreases.
    let (k, m) = err("target_residency_us = 400", "target_residency_us = 40");
    assert_eq!(k, "idle.states.value[3]");
    assert!(m.contains("must not decrease"), "{m}");
    let (k, m) = err("exit_latency_us = 133", "exit_latency_us = 13300");
    assert_eq!(k, "idle.states.value[3]");
    assert!(m.contains("10000"), "{m}");
    let (k, _) = err("name = \"C1\", ", "");
    assert_eq!(k, "idle.states.value[0].name");
    let (k, _) = err("{ name = \"C1E\"", "{ nam = \"C1E\"");
    assert_eq!(k, "idle.states.value[1].nam");
}

/// The 4-socket preset's text, with its `[numa]` hop table.
const PRESET_4S: &str = include_str!("../../../machines/xeon-e5-4655v3-4s.toml");

/// `[numa] hops` is checked against the topology: square with a row per
/// node, 0 on the diagonal and within a socket, 1..=8 between sockets,
/// symmetric; each fault names its entry.
#[test]
fn numa_hop_tables_name_the_entry_at_fault() {
    Preset::parse(PRESET_4S, "test").expect("shipped 4-socket preset is valid");
    let err = |from: &str, to: &str| {
        assert!(PRESET_4S.contains(from), "{from}");
        match Preset::parse(&PRESET_4S.replace(from, to), "test") {
            Err(Error::Config { key, message }) => (key, message),
            other => panic!("{to}: {other:?}"),
        }
    };
    let row0 = "  [0, 1, 2, 1],\n";
    // A row short: three rows for four nodes.
    let (k, m) = err(row0, "");
    assert_eq!(k, "numa.hops.value");
    assert!(m.contains("3 rows") && m.contains("4 rows of 4"), "{m}");
    // An entry short.
    let (k, m) = err(row0, "  [0, 1, 2],\n");
    assert_eq!(k, "numa.hops.value[0]");
    assert!(m.contains("3 entries"), "{m}");
    // A node away from itself.
    let (k, m) = err(row0, "  [1, 1, 2, 1],\n");
    assert_eq!(k, "numa.hops.value[0][0]");
    assert!(m.contains("itself"), "{m}");
    // Another socket's node at 0 hops, or beyond the range.
    for bad in ["0", "9"] {
        let (k, m) = err(row0, &format!("  [0, {bad}, 2, 1],\n"));
        assert_eq!(k, "numa.hops.value[0][1]");
        assert!(m.contains("1..=8"), "{m}");
    }
    // Not symmetric.
    let (k, m) = err(row0, "  [0, 1, 3, 1],\n");
    assert_eq!(k, "numa.hops.value[0][2]");
    assert!(m.contains("symmetric"), "{m}");
    // Not a number.
    let (k, _) = err(row0, "  [0, 1, \"two\", 1],\n");
    assert_eq!(k, "numa.hops.value[0][2]");
    // A row that is not an array.
    let (k, m) = err(row0, "  5,\n");
    assert_eq!(k, "numa.hops.value[0]");
    assert!(m.contains("array of hop counts"), "{m}");
    // The extra hop's latency: in range, and required with the table.
    let (k, m) = err("value = 37.6", "value = 1e300");
    assert_eq!(k, "numa.extra_hop_latency_ns.value");
    assert!(m.contains("accepted"), "{m}");
    let line = PRESET_4S
        .lines()
        .find(|l| l.starts_with("extra_hop_latency_ns"))
        .unwrap();
    let (k, _) = err(line, "");
    assert_eq!(k, "numa.extra_hop_latency_ns");
    // A table for the wrong topology: the 4-socket table on two sockets.
    let two_sockets = PRESET_4S.replace("sockets = { value = 4,", "sockets = { value = 2,");
    match Preset::parse(&two_sockets, "test") {
        Err(Error::Config { key, message }) => {
            assert_eq!(key, "numa.hops.value");
            assert!(message.contains("2 rows of 2"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

/// With two nodes per socket, the nodes of one socket are 0 hops apart and
/// share a row.
#[test]
fn numa_hops_keep_a_sockets_nodes_together() {
    let two_per_socket = PRESET.replace(
        "nodes_per_socket = { value = 1,",
        "nodes_per_socket = { value = 2,",
    );
    let with = |rows: &str| {
        format!(
            "{two_per_socket}\n[numa]\nhops = {{ value = [{rows}], source = \"test\" }}\nextra_hop_latency_ns = {{ value = 10, source = \"test\" }}\n"
        )
    };
    let ok = "[0,0,1,1],[0,0,1,1],[1,1,0,0],[1,1,0,0]";
    let p = Preset::parse(&with(ok), "test").expect("valid two-node-per-socket table");
    assert_eq!(p.machine_params().unwrap().numa_hops[2], vec![1, 1, 0, 0]);
    let err = |rows: &str| match Preset::parse(&with(rows), "test") {
        Err(Error::Config { key, message }) => (key, message),
        other => panic!("{rows}: {other:?}"),
    };
    let (k, m) = err("[0,1,1,1],[1,0,1,1],[1,1,0,0],[1,1,0,0]");
    assert_eq!(k, "numa.hops.value[0][1]");
    assert!(m.contains("share a socket"), "{m}");
    let (k, m) = err("[0,0,1,2],[0,0,1,1],[1,1,0,0],[2,1,0,0]");
    assert_eq!(k, "numa.hops.value[1]");
    assert!(m.contains("differs from row 0"), "{m}");
}
