//! The hardware model's exact timings on the shipped presets: latencies of
//! each level, memory-level parallelism, SMT sharing, bandwidth bounds and
//! coherence, on machines built from `Preset::machine_params`.

use vmsim_core::config::{embedded_machines, Preset};
use vmsim_core::machine::hierarchy::{AccessKind, Served};
use vmsim_core::machine::{Machine, MachineParams, NoRfoGrant};

fn preset_text(name: &str) -> &'static str {
    embedded_machines()
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap()
        .1
}

fn params(name: &str) -> MachineParams {
    Preset::parse(preset_text(name), name)
        .unwrap()
        .machine_params()
        .unwrap()
}

/// The E5-2699 v3 preset with leaf `key` of its string section set to `value`.
fn e5_with(key: &str, value: &str) -> Result<Preset, vmsim_core::api::Error> {
    let text = preset_text("xeon-e5-2699v3-2s");
    let prefix = format!("{key} =");
    let line = text.lines().find(|l| l.starts_with(&prefix)).unwrap();
    let new = format!("{key} = {{ value = {value}, source = \"test\" }}");
    Preset::parse(&text.replace(line, &new), "e5")
}

fn e5() -> (MachineParams, Machine) {
    let p = params("xeon-e5-2699v3-2s");
    let m = Machine::new(&p, 1 << 30, 0).unwrap();
    (p, m)
}

fn icx(grant: NoRfoGrant) -> (MachineParams, Machine) {
    let mut p = params("xeon-8358-icx");
    p.no_rfo_grant = grant;
    let m = Machine::new(&p, 1 << 30, 0).unwrap();
    (p, m)
}

/// Sustained DRAM bandwidth of a node in GB/s.
fn node_gbs(p: &MachineParams) -> f64 {
    p.dram_bytes_per_cycle * p.freq_mhz as f64 * 1e6 / 1e9
}

#[test]
fn a_no_rfo_grant_holds_the_superqueue_for_the_homes_round_trip() {
    // The grant waits for the home (memory directory or other-socket snoop): its idle DRAM latency.
    let (p, mut m) = icx(NoRfoGrant::Memory);
    assert!(p.no_rfo_full_lines);
    let dram = p.dram_local_cycles;
    let remote = p.dram_remote_cycles;
    assert_eq!(
        m.access(0, 100, AccessKind::StringStore, true, 1),
        Served::NoFill { hops: 0 }
    );
    // The store itself only costs its issue; the superqueue entry and the fill buffer are held
    // for the local DRAM latency (no data to prefetch: the buffer waits for the grant).
    assert_eq!(m.cpus[0].clock, 1);
    assert_eq!(m.cores[0].sq.iter().copied().max(), Some(dram));
    assert_eq!(m.cores[0].lfb.iter().copied().max(), Some(dram));
    // No data moves: no DRAM read, and the line is owned dirty-to-be in L1.
    assert_eq!(m.hier.dram[0].stats.bytes_read, 0);
    assert!(m.hier.contains_l1(0, 100));
    // A line homed on the other socket: the remote DRAM latency.
    let remote_line = (1u64 << 30) >> 6 | 5;
    let t = m.cpus[0].clock;
    assert_eq!(
        m.access(0, remote_line, AccessKind::StringStore, true, 1),
        Served::NoFill { hops: 1 }
    );
    assert!(m.cores[0].sq.contains(&(t + remote)));
    // Granted at the LLC instead: the entry is held for the LLC latency only.
    let (p, mut m) = icx(NoRfoGrant::Llc);
    assert_eq!(
        m.access(0, 100, AccessKind::StringStore, true, 1),
        Served::NoFill { hops: 0 }
    );
    assert_eq!(
        m.cores[0].sq.iter().copied().max(),
        Some(p.llc.latency_cycles)
    );
}

#[test]
fn a_measured_grant_holds_the_fill_buffer_for_its_time_and_a_remote_home_adds_the_difference() {
    // Ice Lake-SP as shipped: 62.1 ns for a local home (one core's long rep stosb rate over
    // its 12 fill buffers), at 2.6 GHz 161 cycles.
    let p = params("xeon-8358-icx");
    assert_eq!(p.no_rfo_grant, NoRfoGrant::Cycles(161));
    let (p, mut m) = icx(NoRfoGrant::Cycles(161));
    assert_eq!(
        m.access(0, 100, AccessKind::StringStore, true, 1),
        Served::NoFill { hops: 0 }
    );
    assert_eq!(m.cores[0].sq.iter().copied().max(), Some(161));
    assert_eq!(m.cores[0].lfb.iter().copied().max(), Some(161));
    assert_eq!(m.hier.dram[0].stats.bytes_read, 0);
    // The other socket's home: 161 + (remote - local) DRAM latency.
    let remote_line = (1u64 << 30) >> 6 | 5;
    let t = m.cpus[0].clock;
    assert_eq!(
        m.access(0, remote_line, AccessKind::StringStore, true, 1),
        Served::NoFill { hops: 1 }
    );
    let far = 161 + p.dram_remote_cycles - p.dram_local_cycles;
    assert!(m.cores[0].lfb.contains(&(t + far)), "{:?}", m.cores[0].lfb);
    // A long stream: 12 fill buffers over 161 cycles, 12 x 64 B per 161 cycles.
    let (p, mut m) = icx(NoRfoGrant::Cycles(161));
    let n = 50_000u64;
    for i in 0..n {
        m.access(0, i, AccessKind::StringStore, true, 1);
    }
    let bytes_per_cycle = (n * 64) as f64 / m.cpus[0].clock as f64;
    let bound = p.l1d.outstanding as f64 * 64.0 / 161.0;
    assert!(
        (bytes_per_cycle - bound).abs() / bound < 0.01,
        "{bytes_per_cycle:.3} B/cycle vs {bound:.3}"
    );
    // Reads are not affected: a cold load still waits the local DRAM latency.
    let (p, mut m) = icx(NoRfoGrant::Cycles(161));
    assert_eq!(
        m.access(0, 1 << 20, AccessKind::Load, true, 1),
        Served::Dram { hops: 0 }
    );
    assert!(
        m.cores[0].sq.contains(&p.dram_local_cycles),
        "{:?}",
        m.cores[0].sq
    );
}

/// One unread line marked by `mark(m, true)` holds its fill buffer `hold`
/// cycles, the next unmarked one `posted`; a long marked stream moves the
/// buffers' 64 B per `hold` (within 1%).
fn check_marked_hold(p: &MachineParams, mark: impl Fn(&mut Machine, bool), hold: u64, posted: u64) {
    let mut m = Machine::new(p, 1 << 30, 0).unwrap();
    mark(&mut m, true);
    let t = m.cpus[0].clock;
    assert_eq!(
        m.access(0, 100, AccessKind::NtStore, true, 1),
        Served::NtWrite { hops: 0 }
    );
    mark(&mut m, false);
    assert!(m.cores[0].lfb.contains(&(t + hold)), "{:?}", m.cores[0].lfb);
    let t = m.cpus[0].clock;
    m.access(0, 200, AccessKind::NtStore, true, 1);
    assert!(
        m.cores[0].lfb.contains(&(t + posted)),
        "{:?}",
        m.cores[0].lfb
    );
    let mut m = Machine::new(p, 1 << 30, 0).unwrap();
    let n = 50_000u64;
    mark(&mut m, true);
    let t0 = m.cpus[0].clock;
    for i in 0..n {
        m.access(0, 1000 + i, AccessKind::NtStore, true, 1);
    }
    mark(&mut m, false);
    let bytes_per_cycle = (n * 64) as f64 / (m.cpus[0].clock - t0) as f64;
    let bound = p.l1d.outstanding as f64 * 64.0 / hold as f64;
    assert!(
        (bytes_per_cycle - bound).abs() / bound < 0.01,
        "{bytes_per_cycle:.3} B/cycle vs {bound:.3}"
    );
}

#[test]
fn a_bypassing_string_line_holds_its_buffer_for_the_measured_string_hold() {
    // Milan as shipped: a line a string store writes without allocating holds
    // its miss buffer 41.9 ns (103 cycles at 2.45 GHz); an unread line outside
    // a string instruction (clzero, movnti) the posted-write hold, 33.4 ns (82).
    // A long bypassing call moves 24 buffers x 64 B per 103 cycles.
    let p = params("epyc-7j13-milan");
    assert_eq!(p.string_bypass_hold_cycles, Some(103));
    assert_eq!(p.posted_write_cycles, 82);
    let string = |m: &mut Machine, on: bool| {
        if on {
            m.string_start(0)
        } else {
            m.string_end(0)
        }
    };
    check_marked_hold(&p, string, 103, 82);
    // "posted" (the Intel presets): no difference.
    assert_eq!(params("xeon-8358-icx").string_bypass_hold_cycles, None);
}

#[test]
fn a_clzero_line_holds_its_buffer_for_the_measured_clzero_hold() {
    // Milan as shipped: "posted", a clzero line holds the posted-write
    // hold (82 cycles), which comes from CLZERO's own rate. A host whose
    // clzero drains slower than its vector NT stores: 50 ns (123 cycles at
    // 2.45 GHz) for clzero lines, the rest unchanged; a long loop moves 24
    // buffers x 64 B per 123 cycles.
    let mut p = params("epyc-7j13-milan");
    assert_eq!(p.clzero_hold_cycles, None);
    p.clzero_hold_cycles = Some(123);
    check_marked_hold(&p, |m, on| m.set_clzero(0, on), 123, 82);
    assert_eq!(params("xeon-8358-icx").clzero_hold_cycles, None);
    // Through validate's clzero chunks (the rows `vmsim hw validate` gives a
    // host's clzero sweep): 24 x 64 B / 50 ns = 30.7 GB/s against the
    // posted hold's 45.9.
    use vmsim_core::validate::{measure, Bench};
    let text = preset_text("epyc-7j13-milan");
    let posted = Preset::parse(text, "milan").unwrap();
    let set = |key: &str, ns: f64| [(key.to_string(), toml::Value::Float(ns))];
    let held = Preset::parse_with(text, "milan", &set("string.clzero_hold_ns", 50.0)).unwrap();
    let bench = Bench::ClzeroChunks { chunk_kib: 64 };
    let (a, b) = (measure(&posted, bench), measure(&held, bench));
    assert!((a - 45.9).abs() < 0.5, "{a}");
    assert!((b - 24.0 * 64.0 / 50.0).abs() < 0.5, "{b}");
}

#[test]
fn an_sfence_waits_the_measured_drain_after_the_last_unread_line_leaves_its_buffer() {
    // Milan with a measured drain of 100 ns (245 cycles at 2.45 GHz): 64
    // clzero lines (one issue cycle each), then an sfence. Line k issues once
    // line k - 24 has left its buffer (the posted hold H = 82 cycles); the
    // last line (63) leaves at 2H + 15 + H; the fence completes D after that,
    // the CPU stalled until then, and costs one instruction.
    let mut p = params("epyc-7j13-milan");
    assert_eq!(p.sfence_drain_cycles, None);
    let (h, f) = (p.posted_write_cycles, p.l1d.outstanding);
    assert_eq!((h, f), (82, 24));
    let call = |m: &mut Machine, first: u64| {
        m.set_clzero(0, true);
        for i in first..first + 64 {
            m.access(0, i, AccessKind::NtStore, true, 1);
        }
        m.set_clzero(0, false);
    };
    p.sfence_drain_cycles = Some(245);
    let mut m = Machine::new(&p, 1 << 30, 0).unwrap();
    call(&mut m, 0);
    let last_left = (63 / f) * h + 63 % f + h;
    assert_eq!(m.cores[0].lfb.iter().copied().max(), Some(last_left));
    let (stalled, instr) = (
        m.cpus[0].stats.stall_cycles,
        m.cpus[0].stats.user_instructions,
    );
    let before = m.cpus[0].clock;
    m.sfence(0);
    assert_eq!(m.cpus[0].clock, last_left + 245);
    assert_eq!(
        m.cpus[0].stats.stall_cycles - stalled,
        last_left + 245 - before
    );
    assert_eq!(m.cpus[0].stats.user_instructions - instr, 1);
    // A second fence finds nothing outstanding: one instruction, no wait.
    let t = m.cpus[0].clock;
    m.sfence(0);
    assert_eq!(m.cpus[0].clock, t);
    // The next call starts with every buffer free: its last line leaves at
    // the same offset from the fence.
    call(&mut m, 64);
    assert_eq!(m.cores[0].lfb.iter().copied().max(), Some(t + last_left));
    // "none" (every built-in preset): the fence waits for nothing.
    let p = params("epyc-7j13-milan");
    let mut m = Machine::new(&p, 1 << 30, 0).unwrap();
    call(&mut m, 0);
    let t = m.cpus[0].clock;
    m.sfence(0);
    assert_eq!(m.cpus[0].clock, t);
    // Through validate's fenced clzero calls: a call of n lines takes its
    // last line's leaving time, (n - 1) / 24 x 82 + (n - 1) % 24 + 82
    // cycles, plus the drain: 4096 B / (261 + 245 cycles) at 2.45 GHz =
    // 19.8 GB/s against 45.9 without it; 65536 B / (3541 + 245), 42.4.
    use vmsim_core::validate::{measure, Bench};
    let text = preset_text("epyc-7j13-milan");
    let none = Preset::parse(text, "milan").unwrap();
    let set = [(
        "string.sfence_drain_ns".to_string(),
        toml::Value::Float(100.0),
    )];
    let drained = Preset::parse_with(text, "milan", &set).unwrap();
    let rate = |p: &Preset, kib| measure(p, Bench::ClzeroChunks { chunk_kib: kib });
    assert!((rate(&none, 4) - 45.9).abs() < 0.5, "{}", rate(&none, 4));
    let call_cycles = |n: u64| ((n - 1) / 24 * 82 + (n - 1) % 24 + 82 + 245) as f64;
    let want4 = 4096.0 / (call_cycles(64) / 2.45);
    assert!(
        (rate(&drained, 4) - want4).abs() / want4 < 0.01,
        "{} vs {want4}",
        rate(&drained, 4)
    );
    let want64 = 65536.0 / (call_cycles(1024) / 2.45);
    assert!(
        (rate(&drained, 64) - want64).abs() / want64 < 0.01,
        "{} vs {want64}",
        rate(&drained, 64)
    );
}

#[test]
fn a_no_rfo_stream_is_bound_by_fill_buffers_over_the_grant_latency() {
    // Little's law: one core streaming no-RFO string stores keeps at most min(fill buffers,
    // superqueue) grants in flight, each for the home's round trip.
    let (p, mut m) = icx(NoRfoGrant::Memory);
    let n = 50_000u64;
    for i in 0..n {
        m.access(0, i, AccessKind::StringStore, true, 1);
    }
    let gbs = (n * 64) as f64 / m.cycles_to_s(m.cpus[0].clock) / 1e9;
    let entries = p.l1d.outstanding.min(p.l2.outstanding) as f64;
    let bound = entries * 64.0 / (p.dram_local_cycles as f64 / p.freq_mhz as f64 * 1e-6) / 1e9;
    assert!(
        (gbs - bound).abs() / bound < 0.01,
        "{gbs:.2} GB/s vs fill-buffer bound {bound:.2} GB/s"
    );
}

/// One 4 KiB `rep stosb` as the kernel issues it: start-up, 64 line stores
/// (one issue cycle each), end.
fn string_4k(m: &mut Machine, first_line: u64) {
    m.string_start(0);
    for i in first_line..first_line + 64 {
        m.access(0, i, AccessKind::StringStore, true, 1);
    }
    m.string_end(0);
}

#[test]
fn a_string_instruction_starts_once_the_previous_ones_lines_are_granted() {
    // Ice Lake-SP as shipped: drain at the boundary (Intel SDM Vol. 3A 8.2.4.1),
    // ownership-only line stores granted at the home's round trip D, F fill buffers.
    let (p, mut m) = icx(NoRfoGrant::Memory);
    assert!(p.string_drain && p.no_rfo_full_lines);
    let (s, d, f) = (
        p.string_startup_cycles,
        p.dram_local_cycles,
        p.l1d.outstanding,
    );
    assert!(f <= p.l2.outstanding && f < 64);
    string_4k(&mut m, 0);
    // Line k issues once the fill buffer of line k - F frees: the last line (63)
    // issues at S + 63 % F + (63 / F) * D and is granted D later.
    let last_issue = s + 63 % f + (63 / f) * d;
    assert_eq!(m.cpus[0].clock, last_issue + 1);
    let granted = last_issue + d;
    assert_eq!(m.cores[0].lfb.iter().copied().max(), Some(granted));
    // The next instruction waits (stalled) for that grant, then pays its start-up.
    let stalled = m.cpus[0].stats.stall_cycles;
    m.string_start(0);
    assert_eq!(m.cpus[0].clock, granted + s);
    assert_eq!(
        m.cpus[0].stats.stall_cycles - stalled,
        granted - (last_issue + 1)
    );
    // Its first line issues right away: every fill buffer is free again.
    m.access(0, 64, AccessKind::StringStore, true, 1);
    assert_eq!(m.cpus[0].clock, granted + s + 1);
    assert_eq!(m.cores[0].lfb.iter().copied().max(), Some(granted + s + d));
    m.string_end(0);
}

#[test]
fn without_the_drain_the_start_up_overlaps_the_grants() {
    let (mut p, _) = icx(NoRfoGrant::Memory);
    p.string_drain = false;
    let mut m = Machine::new(&p, 1 << 30, 0).unwrap();
    let (s, d, f) = (
        p.string_startup_cycles,
        p.dram_local_cycles,
        p.l1d.outstanding,
    );
    string_4k(&mut m, 0);
    let last_issue = s + 63 % f + (63 / f) * d;
    assert_eq!(m.cpus[0].clock, last_issue + 1);
    // The start-up runs while the last F lines are still being granted.
    m.string_start(0);
    assert_eq!(m.cpus[0].clock, last_issue + 1 + s);
    // Ordinary stores between string instructions do not hold the next one back,
    // and a drained instruction waits only for string stores.
    let (p, mut m) = icx(NoRfoGrant::Memory);
    string_4k(&mut m, 0);
    let granted = m.cores[0].lfb.iter().copied().max().unwrap();
    m.access(0, 1000, AccessKind::Store, true, 1);
    let after_store = m.cores[0].lfb.iter().copied().max().unwrap();
    assert!(after_store > granted);
    m.string_start(0);
    assert_eq!(m.cpus[0].clock, granted + p.string_startup_cycles);
}

#[test]
fn the_drain_is_on_for_the_intel_presets_only() {
    for (name, drain) in [
        ("xeon-e5-2699v3-2s", true),
        ("xeon-e5-1650v3-1s", true),
        ("xeon-e5-4655v3-4s", true),
        ("xeon-6238m-clx", true),
        ("xeon-8358-icx", true),
        ("epyc-7j13-milan", false),
    ] {
        assert_eq!(params(name).string_drain, drain, "{name}");
    }
}

#[test]
fn exact_latencies_of_a_dependent_load() {
    let (p, mut m) = e5();
    let dram = p.dram_local_cycles;
    // Cold line on node 0 from CPU 0: full local DRAM latency.
    assert_eq!(
        m.access(0, 100, AccessKind::Load, false, 1),
        Served::Dram { hops: 0 }
    );
    assert_eq!(m.cpus[0].clock, dram);
    // Now in L1: the L1's load-to-use latency (the issue overlaps it).
    assert_eq!(m.access(0, 100, AccessKind::Load, false, 1), Served::L1);
    assert_eq!(m.cpus[0].clock, dram + p.l1d.latency_cycles);
    // The SMT sibling (CPU 36) shares the core's L1.
    assert_eq!(m.access(36, 100, AccessKind::Load, false, 1), Served::L1);
    // Another core on the socket finds it in the LLC.
    let t = m.cpus[1].clock;
    assert_eq!(m.access(1, 100, AccessKind::Load, false, 1), Served::Llc);
    assert_eq!(m.cpus[1].clock - t, p.llc.latency_cycles);
    // A core on the other socket: a remote cache hit... of a clean line it reads from memory's owner socket cache.
    let t = m.cpus[18].clock;
    assert_eq!(
        m.access(18, 100, AccessKind::Load, false, 1),
        Served::RemoteCache { hops: 1 }
    );
    assert_eq!(m.cpus[18].clock - t, p.remote_cache_cycles);
    // A line homed on node 1 read cold from socket 0: remote DRAM latency.
    let remote_line = (1u64 << 30) >> 6 | 5;
    let t = m.cpus[2].clock;
    assert_eq!(
        m.access(2, remote_line, AccessKind::Load, false, 1),
        Served::Dram { hops: 1 }
    );
    assert_eq!(m.cpus[2].clock - t, p.dram_remote_cycles);
}

#[test]
fn misses_overlap_up_to_the_fill_buffers() {
    let (p, mut m) = e5();
    let lfb = p.l1d.outstanding;
    let sq = p.l2.outstanding;
    let dram = p.dram_local_cycles;
    // Independent (non-dependent) stores: the first `min(lfb, sq)` issue back to back.
    let n = lfb.min(sq);
    for i in 0..n {
        m.access(0, 1000 + i * 64, AccessKind::Store, false, 1);
    }
    assert_eq!(m.cpus[0].clock, n);
    // The next one has to wait for a fill buffer.
    m.access(0, 5000, AccessKind::Store, false, 1);
    assert!(
        m.cpus[0].clock >= dram,
        "stalls until a fill buffer frees: {}",
        m.cpus[0].clock
    );
    assert!(m.cpus[0].stats.stall_cycles > 0);
}

#[test]
fn smt_siblings_share_the_cores_fill_buffers() {
    let (p, mut m) = e5();
    let lfb = p.l1d.outstanding;
    assert!(lfb < p.l2.outstanding);
    let dram = p.dram_local_cycles;
    // CPU 0 takes every fill buffer of core 0 with independent store misses.
    for i in 0..lfb {
        m.access(0, 1000 + i * 64, AccessKind::Store, false, 1);
    }
    assert_eq!(m.cpus[0].clock, lfb);
    // Its SMT sibling (CPU 36, same core) has none left: it waits for the first to free.
    assert_eq!(m.topo.core_of(36), 0);
    m.access(36, 9000, AccessKind::Store, false, 1);
    assert_eq!(m.cpus[36].stats.stall_cycles, dram);
    // Its one issue cycle may be stretched by at most one cycle where it shares an epoch with
    // CPU 0 (which lately issued 10 cycles per epoch); the stretch is counted as an SMT wait.
    let waited = m.cpus[36].stats.smt_issue_wait_cycles;
    assert!(waited <= 1);
    assert_eq!(m.cpus[36].clock, dram + 1 + waited);
    // A thread of another core has its own.
    m.access(1, 9064, AccessKind::Store, false, 1);
    assert_eq!(m.cpus[1].clock, 1);
}

#[test]
fn smt_siblings_share_the_cores_issue_slots() {
    let (_, mut m) = e5();
    for (cpu, line) in [(0, 100u64), (1, 200)] {
        m.access(cpu, line, AccessKind::Load, false, 1);
    }
    let t = 64 * 1000;
    for cpu in [0, 36, 1] {
        m.cpus[cpu].clock = t;
    }
    // CPU 0 issues for a whole epoch (L1 hit, 64 cycles of instructions).
    assert_eq!(m.access(0, 100, AccessKind::Store, true, 64), Served::L1);
    assert_eq!(m.cpus[0].clock, t + 64);
    // Its sibling finds that epoch used up and issues in the next one, leaving half of
    // that one to CPU 0, which is issue-bound and has not got there yet: 8 cycles at half rate.
    assert_eq!(m.access(36, 100, AccessKind::Store, true, 8), Served::L1);
    assert_eq!(m.cpus[36].clock, t + 64 + 16);
    assert_eq!(m.cpus[36].stats.smt_issue_wait_cycles, 64 + 8);
    // Another core issues at once.
    assert_eq!(m.access(1, 200, AccessKind::Store, true, 8), Served::L1);
    assert_eq!(m.cpus[1].clock, t + 8);
    assert_eq!(m.cpus[1].stats.smt_issue_wait_cycles, 0);
}

#[test]
fn streaming_cpus_are_bound_by_the_node_bandwidth() {
    let (p, mut m) = e5();
    let lines_per_cpu = 20_000u64;
    // 18 cores of socket 0 stream loads over disjoint cold regions of node 0.
    let cpus: Vec<usize> = (0..18).collect();
    let mut next = [0u64; 18];
    let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>> =
        cpus.iter().map(|&c| std::cmp::Reverse((0, c))).collect();
    while let Some(std::cmp::Reverse((_, c))) = heap.pop() {
        let stop = m.cpus[c].clock + 2000;
        while m.cpus[c].clock < stop && next[c] < lines_per_cpu {
            m.access(
                c,
                (c as u64) * 1_000_000 + next[c],
                AccessKind::Load,
                true,
                1,
            );
            next[c] += 1;
        }
        if next[c] < lines_per_cpu {
            heap.push(std::cmp::Reverse((m.cpus[c].clock, c)));
        }
    }
    let end = cpus.iter().map(|&c| m.cpus[c].clock).max().unwrap();
    let bytes = 18 * lines_per_cpu * 64;
    let gbs = bytes as f64 / m.cycles_to_s(end) / 1e9;
    let bw = node_gbs(&p);
    assert!(
        gbs <= bw * 1.02 && gbs >= bw * 0.85,
        "aggregate {gbs:.1} GB/s vs sustained {bw} GB/s"
    );
    // One core alone is limited by its superqueue, not by the node.
    let (_, mut m1) = e5();
    for i in 0..lines_per_cpu {
        m1.access(0, i, AccessKind::Load, true, 1);
    }
    let one = (lines_per_cpu * 64) as f64 / m1.cycles_to_s(m1.cpus[0].clock) / 1e9;
    let sq_bound = p.l2.outstanding as f64 * 64.0
        / (p.dram_local_cycles as f64 / (p.freq_mhz as f64 * 1e6))
        / 1e9;
    assert!(
        one < bw && (one - sq_bound).abs() / sq_bound < 0.1,
        "one core {one:.1} GB/s, superqueue bound {sq_bound:.1}"
    );
}

#[test]
fn a_store_invalidates_other_copies_and_nt_stores_bypass() {
    let (_, mut m) = e5();
    m.access(0, 7, AccessKind::Load, false, 1);
    m.access(1, 7, AccessKind::Load, false, 1);
    assert!(m.hier.contains_l1(1, 7));
    m.access(0, 7, AccessKind::Store, false, 1);
    assert!(
        !m.hier.contains_l1(1, 7) && !m.hier.contains_l2(1, 7),
        "core 1's copy is invalidated"
    );
    assert!(m.hier.contains_l1(0, 7));
    m.access(2, 7, AccessKind::NtStore, false, 1);
    assert!(
        !m.hier.contains_l1(0, 7) && !m.hier.contains_llc(0, 7),
        "a non-temporal store drops every cached copy"
    );
    assert_eq!(m.hier.dram[0].stats.bytes_written, 64);
}

#[test]
fn converting_a_preset_whose_policies_were_edited_names_the_dotted_key() {
    let shipped = Preset::parse(preset_text("xeon-e5-2699v3-2s"), "e5").unwrap();
    let mut p = shipped.clone();
    p.l2.replacement = "fifo".into();
    match p.machine_params() {
        Err(vmsim_core::api::Error::Config { key, message }) => {
            assert_eq!(key, "l2.replacement.value");
            assert!(message.contains("lru"), "{message}");
        }
        other => panic!("expected a config error, got {:?}", other.map(|_| ())),
    }
    let mut p = shipped;
    p.string.no_rfo_grant = vmsim_core::config::NameOrNs::Named("dram".into());
    match p.machine_params() {
        Err(vmsim_core::api::Error::Config { key, message }) => {
            assert_eq!(key, "string.no_rfo_grant.value");
            assert!(
                message.contains("llc") && message.contains("memory"),
                "{message}"
            );
        }
        other => panic!("expected a config error, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn a_grant_time_is_refused_unless_above_zero_and_at_most_the_local_dram_latency() {
    let with = |v: &str| e5_with("no_rfo_grant", v);
    // 99 ns is this preset's local DRAM latency.
    let ok = with("62.5").unwrap();
    assert_eq!(
        ok.machine_params().unwrap().no_rfo_grant,
        NoRfoGrant::Cycles(ok.ns_to_cycles(62.5))
    );
    assert!(with("99").is_ok());
    for bad in ["0", "-3.0", "99.5", "\"dram\"", "true"] {
        match with(bad) {
            Err(vmsim_core::api::Error::Config { key, message }) => {
                assert_eq!(key, "string.no_rfo_grant.value", "{bad}");
                assert!(
                    message.contains("\"llc\"") && message.contains("local_latency_ns"),
                    "{bad}: {message}"
                );
            }
            other => panic!(
                "{bad}: expected a config error, got {:?}",
                other.map(|_| ())
            ),
        }
    }
    // The bypassing string line's hold and the clzero line's: "posted" or a
    // time in ns, likewise.
    for name in ["bypass_hold_ns", "clzero_hold_ns"] {
        let with = |v: &str| e5_with(name, v);
        assert!(with("\"posted\"").is_ok() && with("40.0").is_ok());
        for bad in ["0", "120", "\"memory\""] {
            match with(bad) {
                Err(vmsim_core::api::Error::Config { key, message }) => {
                    assert_eq!(key, format!("string.{name}.value"), "{bad}");
                    assert!(message.contains("\"posted\""), "{bad}: {message}");
                }
                other => panic!(
                    "{bad}: expected a config error, got {:?}",
                    other.map(|_| ())
                ),
            }
        }
    }
    // The fence's drain: "none" or a time in ns.
    let with = |v: &str| e5_with("sfence_drain_ns", v);
    assert!(with("\"none\"").is_ok() && with("40.0").is_ok());
    for bad in ["0", "120", "\"posted\""] {
        match with(bad) {
            Err(vmsim_core::api::Error::Config { key, message }) => {
                assert_eq!(key, "string.sfence_drain_ns.value", "{bad}");
                assert!(message.contains("\"none\""), "{bad}: {message}");
            }
            other => panic!(
                "{bad}: expected a config error, got {:?}",
                other.map(|_| ())
            ),
        }
    }
}

#[test]
fn a_non_temporal_line_holds_its_buffers_until_the_home_accepts_it() {
    let (p, mut m) = e5();
    let (local, remote) = (p.posted_write_cycles, p.dram_remote_cycles);
    assert!(p.llc.latency_cycles < local && local < p.dram_local_cycles);
    assert_eq!(
        m.access(0, 100, AccessKind::NtStore, true, 1),
        Served::NtWrite { hops: 0 }
    );
    // Posted: the store costs its issue; the fill buffer and superqueue entry are held
    // until the home accepts the line, not for a read's round trip.
    assert_eq!(m.cpus[0].clock, 1);
    assert_eq!(m.cores[0].lfb.iter().copied().max(), Some(local));
    assert_eq!(m.cores[0].sq.iter().copied().max(), Some(local));
    // A remote home adds the remote-local latency difference.
    let remote_line = (1u64 << 30) >> 6 | 5;
    m.access(0, remote_line, AccessKind::NtStore, true, 1);
    let want = 1 + local + remote - p.dram_local_cycles;
    assert_eq!(m.cores[0].lfb.iter().copied().max(), Some(want));
    // One core's non-temporal fill is bound by the fill buffers over that hold.
    let (p, mut m) = e5();
    let n = 100_000u64;
    for l in 0..n {
        m.access(0, l, AccessKind::NtStore, true, 2);
    }
    let per_line = m.cpus[0].clock as f64 / n as f64;
    let bound = p.posted_write_cycles as f64 / p.l1d.outstanding as f64;
    assert!(
        (per_line - bound).abs() / bound < 0.02,
        "{per_line} cycles per line, bound {bound}"
    );
    assert_eq!(m.hier.dram[0].stats.bytes_read, 0);
}

#[test]
fn one_cores_posted_writes_run_at_the_measured_bandwidth_their_hold_comes_from() {
    // Milan's hold is 24 miss buffers x 64 B over one core's CLZERO bandwidth
    // (46.05 GB/s, Arora's Milan sweep); Ice Lake-SP's 12 fill buffers x 64 B
    // over its MOVNTI bandwidth (24.51 GB/s). A stream of posted full lines
    // (one issue cycle each) gives that bandwidth back, within the rounding of
    // the hold to whole cycles and of DRAM epochs.
    for (name, measured) in [("epyc-7j13-milan", 46.05), ("xeon-8358-icx", 24.51)] {
        let p = params(name);
        let mut m = Machine::new(&p, 1 << 30, 0).unwrap();
        let n = 100_000u64;
        for l in 0..n {
            m.access(0, l, AccessKind::NtStore, true, 1);
        }
        let gbs = (n * 64) as f64 / m.cycles_to_s(m.cpus[0].clock) / 1e9;
        assert!(
            (gbs / measured - 1.0).abs() < 0.01,
            "{name}: {gbs:.2} GB/s against {measured}"
        );
        assert_eq!(m.hier.dram[0].stats.bytes_read, 0);
    }
}

#[test]
fn a_dirty_l2_victim_holds_a_superqueue_entry_for_the_llc_latency() {
    let mut p = params("xeon-e5-2699v3-2s");
    p.prefetch = vmsim_core::machine::PrefetchParams::off();
    // Stores to lines one L2 set-stride apart (the L2 has 512 sets, the L1 64), each
    // completing before the next: dirty lines pile up in one set until one is written back.
    let stride = 512u64;
    let run = |p: &MachineParams| {
        let mut m = Machine::new(p, 1 << 30, 0).unwrap();
        for k in 0..64 {
            m.advance(0, 10_000, 0);
            let t = m.cpus[0].clock;
            m.access(0, k * stride, AccessKind::Store, true, 1);
            if m.cpus[0].stats.cache.l2_writebacks > 0 {
                assert_eq!(m.cpus[0].stats.cache.l2_writebacks, 1);
                let mut busy: Vec<u64> = m.cores[0].sq.iter().copied().filter(|&f| f > t).collect();
                busy.sort();
                return busy.into_iter().map(|f| f - t).collect::<Vec<u64>>();
            }
        }
        panic!("no write-back");
    };
    // The miss's own entry (DRAM latency) and the write-back's (LLC latency).
    assert_eq!(run(&p), vec![p.llc.latency_cycles, p.dram_local_cycles]);
    // Switched off, the write-back holds nothing.
    p.l2_writeback_holds_superqueue = false;
    assert_eq!(run(&p), vec![p.dram_local_cycles]);
}

/// One core reading and writing back every line of `lines` lines, twice
/// (the second pass timed, its lines no longer in any cache): GB/s of lines.
fn update_stream_gbs(p: &MachineParams, lines: u64) -> f64 {
    let mut m = Machine::new(p, 1 << 31, 0).unwrap();
    let pass = |m: &mut Machine| {
        let t = m.cpus[0].clock;
        for l in 0..lines {
            m.access(0, l, AccessKind::Load, true, 1);
            m.access(0, l, AccessKind::Store, true, 1);
        }
        m.cycles_to_s(m.cpus[0].clock - t)
    };
    pass(&mut m);
    (lines * 64) as f64 / pass(&mut m) / 1e9
}

#[test]
fn a_prefetched_streams_dirty_victims_hold_their_superqueue_entries() {
    // In a stream the L2 streamer brings the lines, so most dirty victims
    // leave the L2 when a prefetch fills it. Their hold must survive the
    // prefetch taking its own entry (it once took the same one and the
    // hold was lost, so the switch changed nothing).
    let mut p = params("epyc-7j13-milan");
    let lines = p.llc.bytes / 64 * 3;
    let held = update_stream_gbs(&p, lines);
    p.l2_writeback_holds_superqueue = false;
    let free = update_stream_gbs(&p, lines);
    // Each line written back takes an entry for the LLC latency once one
    // frees, so the stream slows (16.00 against 21.33 GB/s with Milan's
    // superqueue at 40; 17.07 against 23.47 at 48), but by less than half: a victim's hold is shorter than
    // the read that brought its line.
    assert!(
        held < free * 0.98,
        "held {held:.2} GB/s against {free:.2} without the hold"
    );
    assert!(
        held > free * 0.5,
        "held {held:.2} GB/s against {free:.2} without the hold"
    );
}

#[test]
fn a_dependent_load_that_hits_the_l1_waits_its_load_to_use_latency() {
    let (p, mut m) = e5();
    assert_eq!(p.l1d.latency_cycles, 4);
    // Bring the line in, then let every buffer drain.
    m.access(0, 7, AccessKind::Load, false, 1);
    m.advance(0, 10_000, 0);
    let t = m.cpus[0].clock;
    // A chain of dependent hits: each waits for the last one's data.
    for _ in 0..10 {
        assert_eq!(m.access(0, 7, AccessKind::Load, false, 1), Served::L1);
    }
    assert_eq!(m.cpus[0].clock - t, 10 * p.l1d.latency_cycles);
    // Independent hits overlap their latency: only their issue is charged.
    let t = m.cpus[0].clock;
    for _ in 0..10 {
        assert_eq!(m.access(0, 7, AccessKind::Load, true, 1), Served::L1);
    }
    assert_eq!(m.cpus[0].clock - t, 10);
}

#[test]
fn a_remote_load_writes_back_a_line_dirty_in_core_0() {
    // Core 0 of socket 0 owns the line dirty in its L1; a load from socket 1
    // downgrades it (M -> S) and the owner writes the line back. Core 0 is the
    // case a mask of "no core kept" must not leave out.
    for owner in [0usize, 5] {
        let (_, mut m) = e5();
        m.access(owner, 100, AccessKind::Store, false, 1);
        let written = m.hier.dram[0].stats.bytes_written;
        assert_eq!(
            m.access(18, 100, AccessKind::Load, false, 1),
            Served::RemoteCache { hops: 1 }
        );
        assert_eq!(
            m.hier.dram[0].stats.bytes_written,
            written + 64,
            "owner core {owner}"
        );
    }
}

/// Cycles one CPU takes to read lines `lines` with independent loads.
fn read_cycles(m: &mut Machine, cpu: usize, lines: std::ops::Range<u64>) -> u64 {
    let t = m.cpus[cpu].clock;
    for l in lines {
        m.access(cpu, l, AccessKind::Load, true, 1);
    }
    m.cpus[cpu].clock - t
}

/// Reads `lines` on `cpu` and checks they took 64 / `bw` cycles each.
fn assert_line_rate(m: &mut Machine, cpu: usize, lines: std::ops::Range<u64>, bw: f64) {
    let n = lines.end - lines.start;
    let c = read_cycles(m, cpu, lines) as f64 / n as f64;
    assert!(
        (c - 64.0 / bw).abs() < 0.05,
        "{c} cycles per line at {bw} B/cycle"
    );
}

#[test]
fn a_stream_of_l2_hits_runs_at_the_l2s_sustained_bandwidth() {
    let (p, mut m) = e5();
    let bw = p.l2.sustained_bytes_per_cycle;
    assert_eq!(bw, 25.0);
    // 128 KiB: in the L2 (256 KiB), and only its last quarter in the L1 (32 KiB).
    read_cycles(&mut m, 0, 0..2048);
    let served = m.access(0, 0, AccessKind::Load, true, 1);
    assert_eq!(served, Served::L2);
    // Lines 1..1024 are L2 hits: a line per 64 / 25 = 2.56 cycles, where ten
    // fill buffers over the 12-cycle L2 latency would take 1.2.
    assert_line_rate(&mut m, 0, 1..1025, bw);
    // The wait shows in the L2-to-L1 path's queueing counter.
    assert!(m.cores[0].fill_queue_cycles().0 > 1024);
    // Without the limit the fill buffers bound it.
    let mut q = p.clone();
    q.l2.sustained_bytes_per_cycle = 0.0;
    let mut m = Machine::new(&q, 1 << 30, 0).unwrap();
    read_cycles(&mut m, 0, 0..2048);
    let c = read_cycles(&mut m, 0, 0..1024) as f64 / 1024.0;
    assert_eq!(m.cores[0].fill_queue_cycles().0, 0);
    let lfb_bound = p.l2.latency_cycles as f64 / p.l1d.outstanding as f64;
    assert!((c - lfb_bound).abs() < 0.1, "{c} cycles per line");
}

#[test]
fn a_stream_of_llc_hits_runs_at_the_llcs_sustained_bandwidth_shared_by_smt_siblings() {
    let (p, mut m) = e5();
    let bw = p.llc.sustained_bytes_per_cycle;
    assert_eq!(bw, 14.0);
    // Core 1 brings 1 MiB into the LLC; core 0 then finds it there (prefetches included).
    read_cycles(&mut m, 1, 0..16384);
    for cpu in [0, 36] {
        m.cpus[cpu].clock = m.cpus[1].clock;
    }
    assert_eq!(m.access(0, 0, AccessKind::Load, true, 1), Served::Llc);
    assert_line_rate(&mut m, 0, 1..8193, bw);
    // The two threads of core 0 share the path: together, the same rate.
    let t = m.cpus[0].clock.max(m.cpus[36].clock);
    m.cpus[0].clock = t;
    m.cpus[36].clock = t;
    let (mut i, mut j) = (8193u64, 12289u64);
    while i < 12289 || j < 16385 {
        // Advance the thread whose clock is behind, as the scheduler does.
        if j >= 16385 || (i < 12289 && m.cpus[0].clock <= m.cpus[36].clock) {
            m.access(0, i, AccessKind::Load, true, 1);
            i += 1;
        } else {
            m.access(36, j, AccessKind::Load, true, 1);
            j += 1;
        }
    }
    let c = (m.cpus[0].clock.max(m.cpus[36].clock) - t) as f64 / 8192.0;
    assert!(
        (c - 64.0 / bw).abs() < 0.05,
        "{c} cycles per line, two threads"
    );
}

#[test]
fn a_struct_page_atomic_from_36_cpus_moves_its_line_each_time() {
    let (p, mut m) = e5();
    // The head page's flags/_refcount line, homed on node 0; 18 CPUs of each
    // socket (CPU k is core k; cores 0-17 are socket 0's, 18-35 socket 1's).
    let line = 4096;
    let cpus: Vec<usize> = (0..36).collect();
    let mut served = Vec::new();
    for &c in &cpus {
        let t0 = m.cpus[c].clock;
        served.push((m.atomic(c, line, 18), m.cpus[c].clock - t0));
    }
    // The first from memory; then each CPU takes it from the one before:
    // within a socket through its LLC, across sockets from the other's cache.
    assert_eq!(served[0].0, Served::Dram { hops: 0 });
    for (k, &(got, cycles)) in served.iter().enumerate().skip(1) {
        let (want, lat) = if k == 18 {
            (Served::RemoteCache { hops: 1 }, p.remote_cache_cycles)
        } else {
            (Served::Llc, p.llc.latency_cycles)
        };
        assert_eq!(got, want, "CPU {k}");
        // The CPU waits for the line: at least the level's latency.
        assert!(cycles >= lat, "CPU {k}: {cycles} cycles");
    }
    // None kept a copy: CPU 0's next atomic must fetch the line again.
    assert_ne!(m.atomic(0, line, 18), Served::L1);
    // The same CPU again: an L1 hit that still waits for its locked operation.
    let t0 = m.cpus[0].clock;
    assert_eq!(m.atomic(0, line, 18), Served::L1);
    assert_eq!(m.cpus[0].clock - t0, 18);
}

/// The 4-socket preset's nodes sit on a ring (`[numa] hops`): node 2 is two
/// hops from node 0, nodes 1 and 3 one. A cold read of node 2's memory
/// from socket 0 costs exactly `extra_hop_cycles` more than one of node
/// 1's, and a line forwarded from socket 2's cache costs that much more
/// than one from socket 1's.
#[test]
fn a_two_hop_node_costs_the_extra_hop_more_than_a_one_hop_node() {
    let p = params("xeon-e5-4655v3-4s");
    assert_eq!(p.topo.nr_nodes(), 4);
    assert_eq!(p.numa_hops[0], vec![0, 1, 2, 1]);
    let extra = p.extra_hop_cycles;
    assert!(extra > 0);
    let node_bytes = 1u64 << 30;
    let line_on = |node: u64, i: u64| (node * node_bytes) >> 6 | i;
    let mut m = Machine::new(&p, node_bytes, 0).unwrap();
    let cold = |m: &mut Machine, node: u64| {
        let t = m.cpus[0].clock;
        let s = m.access(0, line_on(node, 7), AccessKind::Load, false, 1);
        (s, m.cpus[0].clock - t)
    };
    let (s0, local) = cold(&mut m, 0);
    let (s1, one) = cold(&mut m, 1);
    let (s2, two) = cold(&mut m, 2);
    let (s3, one_back) = cold(&mut m, 3);
    assert_eq!(
        (s0, s1, s2, s3),
        (
            Served::Dram { hops: 0 },
            Served::Dram { hops: 1 },
            Served::Dram { hops: 2 },
            Served::Dram { hops: 1 }
        )
    );
    assert_eq!(local, p.dram_local_cycles);
    assert_eq!(one, p.dram_remote_cycles);
    assert_eq!(one_back, p.dram_remote_cycles);
    assert_eq!(two, one + extra);

    // Cache to cache: a clean line of node 0 held by socket 1 (CPU 6) and
    // one held by socket 2 (CPU 12), each read by CPU 0.
    let cores = p.topo.cores_per_socket;
    let mut m = Machine::new(&p, node_bytes, 0).unwrap();
    let forwarded = |m: &mut Machine, holder_socket: usize, i: u64| {
        let line = line_on(0, 100 + i);
        m.access(holder_socket * cores, line, AccessKind::Load, false, 1);
        let t = m.cpus[0].clock;
        let s = m.access(0, line, AccessKind::Load, false, 1);
        (s, m.cpus[0].clock - t)
    };
    let (s1, one) = forwarded(&mut m, 1, 0);
    let (s2, two) = forwarded(&mut m, 2, 1);
    assert_eq!(s1, Served::RemoteCache { hops: 1 });
    assert_eq!(s2, Served::RemoteCache { hops: 2 });
    assert_eq!(one, p.remote_cache_cycles);
    assert_eq!(two, one + extra);
}

/// Without `[numa]` every other socket is one hop away: the two-socket
/// preset has no hop table and no extra-hop cost.
#[test]
fn presets_without_a_hop_table_keep_one_hop() {
    let p = params("xeon-e5-2699v3-2s");
    assert!(p.numa_hops.is_empty());
    assert_eq!(p.extra_hop_cycles, 0);
}

#[test]
fn where_the_stlb_holds_pdes_a_walk_that_misses_its_pde_loads_it_first() {
    use vmsim_core::machine::tlb::PageSize;
    let p = params("epyc-7j13-milan");
    assert!(p.tlb.stlb_holds_pde);
    let mut m = Machine::new(&p, 1 << 30, 0).unwrap();
    let (walk, l1, dram) = (p.walk_cycles, p.l1d.latency_cycles, p.dram_local_cycles);
    let (pte_line, pde_line) = (4000, 9000);
    let line = |level: PageSize| match level {
        PageSize::Size4K => Some(pte_line),
        _ => Some(pde_line),
    };
    // Cold: the walker's own time, the PDE's line from DRAM, then the PTE's.
    let va = 0x7f00_0000_0000u64;
    assert_eq!(m.tlb_translate(0, 1, va, PageSize::Size4K, 77, line), None);
    assert_eq!(m.cpus[0].clock, walk - l1 + 2 * dram);
    assert_eq!(m.cpus[0].stats.walker_loads, [0, 0, 0, 0, 2]);
    // The next page of the same 2 MiB: the PDE is in the STLB, the PTE's
    // line in the L1: the fixed walk.
    let t = m.cpus[0].clock;
    assert_eq!(
        m.tlb_translate(0, 1, va + 4096, PageSize::Size4K, 78, line),
        None
    );
    assert_eq!(m.cpus[0].clock - t, walk);
    assert_eq!(m.cpus[0].stats.walker_loads, [1, 0, 0, 0, 2]);
}

#[test]
fn a_tlb_miss_walk_loads_its_leaf_entry_through_the_caches() {
    use vmsim_core::machine::tlb::PageSize;
    let (p, mut m) = e5();
    let (walk, l1, dram) = (p.walk_cycles, p.l1d.latency_cycles, p.dram_local_cycles);
    // The leaf entry's line, cold: the walker's own time, then a dependent DRAM read.
    let pte_line = 4000;
    let va = 0x7f00_0000_0000u64;
    assert_eq!(
        m.tlb_translate(0, 1, va, PageSize::Size4K, 77, |_| Some(pte_line)),
        None
    );
    assert_eq!(m.cpus[0].clock, walk - l1 + dram);
    assert_eq!(m.cpus[0].stats.walker_loads, [0, 0, 0, 0, 1]);
    // The next page's entry shares the line (eight entries a line): an L1
    // hit, and the walk costs exactly the fixed walk it stands for.
    let t = m.cpus[0].clock;
    let next = va + 4096;
    assert_eq!(
        m.tlb_translate(0, 1, next, PageSize::Size4K, 78, |_| Some(pte_line)),
        None
    );
    assert_eq!(m.cpus[0].clock - t, walk);
    assert_eq!(m.cpus[0].stats.walker_loads, [1, 0, 0, 0, 1]);
    // A TLB hit asks for no line and costs nothing.
    let t = m.cpus[0].clock;
    let hit = m.tlb_translate(0, 1, next, PageSize::Size4K, 78, |_| -> Option<u64> {
        panic!("a hit walks nothing")
    });
    assert_eq!(hit, Some(78));
    assert_eq!(m.cpus[0].clock, t);
    // Another core's walk of the same entry finds the line in the LLC.
    let t = m.cpus[1].clock;
    assert_eq!(
        m.tlb_translate(1, 1, next, PageSize::Size4K, 78, |_| Some(pte_line)),
        None
    );
    assert_eq!(m.cpus[1].clock - t, walk - l1 + p.llc.latency_cycles);
    assert_eq!(m.cpus[1].stats.walker_loads, [0, 0, 1, 0, 0]);
    // Without a line (page tables not in memory) the walk is the fixed cost.
    let t = m.cpus[2].clock;
    assert_eq!(
        m.tlb_translate(2, 1, va, PageSize::Size4K, 77, |_| None),
        None
    );
    assert_eq!(m.cpus[2].clock - t, walk);
    assert_eq!(m.cpus[2].stats.walker_loads, [0; 5]);
    assert_eq!(m.cpus[2].stats.tlb_walks, 1);
}

#[test]
fn a_kernel_access_counts_what_it_took_beyond_its_issue_as_memory_time() {
    use vmsim_core::machine::Mode;
    let (p, mut m) = e5();
    let dram = p.dram_local_cycles;
    // In user mode nothing is counted.
    m.access(0, 100, AccessKind::Load, false, 1);
    assert_eq!(m.cpus[0].stats.sys_mem_cycles, 0);
    // In kernel mode a cold dependent load waits the DRAM latency less its
    // one issue cycle; an L1 hit the load-to-use latency less it.
    m.set_mode(0, Mode::Kernel);
    m.access(0, 200, AccessKind::Load, false, 1);
    assert_eq!(m.cpus[0].stats.sys_mem_cycles, dram - 1);
    m.access(0, 200, AccessKind::Load, false, 1);
    assert_eq!(
        m.cpus[0].stats.sys_mem_cycles,
        dram - 1 + p.l1d.latency_cycles - 1
    );
    // The path's own instructions are not memory time.
    let before = m.cpus[0].stats.sys_mem_cycles;
    m.advance(0, 500, 500);
    assert_eq!(m.cpus[0].stats.sys_mem_cycles, before);
    assert!(m.cpus[0].stats.sys_cycles >= before + 500);
}

#[test]
fn a_loop_of_narrow_stores_keeps_only_the_store_queues_lines_in_flight() {
    // Haswell's 42 entries hold five lines of eight 8 B stores.
    let (p, mut m) = e5();
    assert_eq!(p.store_queue_entries, 42);
    assert!(p.l1d.outstanding > 5);
    m.set_line_stores(0, 8);
    m.access(0, 1000, AccessKind::Store, false, 1);
    let first = *m.cores[0].lfb.iter().max().unwrap();
    assert!(first >= p.dram_local_cycles);
    for i in 1..5 {
        m.access(0, 1000 + i * 64, AccessKind::Store, false, 1);
    }
    assert_eq!(m.cpus[0].clock, 5);
    // The sixth line's stores find two entries free: they wait for the
    // first line's to commit, when its line is owned.
    m.access(0, 1000 + 5 * 64, AccessKind::Store, false, 1);
    assert_eq!(m.cpus[0].clock, first + 1);
    assert!(m.cpus[0].stats.stall_cycles >= first - 5);
    // One store an access: the fill buffers bind first, as before.
    let (p, mut m) = e5();
    for i in 0..p.l1d.outstanding {
        m.access(0, 1000 + i * 64, AccessKind::Store, false, 1);
    }
    assert_eq!(m.cpus[0].clock, p.l1d.outstanding);
}

#[test]
fn stores_that_hit_commit_behind_a_store_that_missed() {
    let (p, mut m) = e5();
    // Line 7 owned in the L1, and its fill long done.
    m.access(0, 7, AccessKind::Store, false, 1);
    m.advance(0, 10 * p.dram_local_cycles, 0);
    m.access(0, 2000, AccessKind::Store, false, 1);
    let owned = *m.cores[0].lfb.iter().max().unwrap();
    let t = m.cpus[0].clock;
    // 41 hits fill the queue behind the miss without waiting...
    for _ in 0..41 {
        m.access(0, 7, AccessKind::Store, false, 1);
    }
    assert_eq!(m.cpus[0].clock, t + 41);
    // ...and the next waits for the miss to commit.
    m.access(0, 7, AccessKind::Store, false, 1);
    assert_eq!(m.cpus[0].clock, owned + 1);
}
