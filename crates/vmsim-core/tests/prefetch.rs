//! The hardware prefetchers as requests (machine/prefetch.rs and
//! `Machine::access`): what a sequential stream gains, that no prefetch
//! leaves its 4 KiB page on Intel and that Milan's streamer continues into
//! the physically next one, that a random stream gains nothing, that perf's
//! cache events count what they count on each chip, determinism, and the
//! lines one core's load stream keeps in flight.

use vmsim_core::config::{embedded_machines, Preset};
use vmsim_core::machine::hierarchy::{AccessKind, CacheStats, Served};
use vmsim_core::machine::{Machine, MachineParams, PrefetchParams};

fn params(name: &str) -> MachineParams {
    let text = embedded_machines()
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap()
        .1;
    Preset::parse(text, name).unwrap().machine_params().unwrap()
}

fn machine(p: &MachineParams) -> Machine {
    Machine::new(p, 1 << 30, 0).unwrap()
}

fn e5(prefetch: bool) -> MachineParams {
    let mut p = params("xeon-e5-2699v3-2s");
    if !prefetch {
        p.prefetch = PrefetchParams::off();
    }
    p
}

const PAGES: u64 = 4;
/// Start of the region: page-aligned, away from line 0.
const BASE: u64 = 64 * 1000;

/// Dependent loads of every line of `PAGES` pages, in order.
fn load_stream(m: &mut Machine) -> &CacheStats {
    for l in BASE..BASE + 64 * PAGES {
        m.access(0, l, AccessKind::Load, false, 1);
    }
    &m.cpus[0].stats.cache
}

#[test]
fn a_sequential_load_stream_turns_demand_misses_into_hits() {
    let mut off = machine(&e5(false));
    let s = load_stream(&mut off).clone();
    let lines = 64 * PAGES;
    assert_eq!((s.l1d_misses, s.l2_misses), (lines, lines));
    assert_eq!(s.llc_demand_misses, lines);
    assert_eq!(s.pf_l1_requests + s.pf_l2_requests, 0);
    let t_off = off.cpus[0].clock;

    let mut on = machine(&e5(true));
    let s = load_stream(&mut on).clone();
    // The first two lines miss (nothing has been seen yet, then the load ascends for the
    // first time); from the third on the next-line prefetcher, trained by the ascending
    // loads, has each line in L1 when it is loaded. It does not fetch across the page end,
    // so the first line of each later page misses, and its load ascends from the last line
    // of the page before: the second is prefetched.
    let misses = 2 + (PAGES - 1);
    assert_eq!(s.l1d_misses, misses);
    assert_eq!(s.l2_misses, misses);
    assert_eq!(s.llc_demand_references, misses);
    assert_eq!(s.llc_demand_misses, misses);
    assert_eq!(s.pf_l1_requests, lines - misses);
    // Every other line was read from DRAM by a prefetch: nothing is read twice.
    assert_eq!(s.dram_reads, lines);
    assert_eq!(s.pf_llc_misses + s.llc_demand_misses, lines);
    let t_on = on.cpus[0].clock;
    assert!(t_on * 3 < t_off, "prefetch on {t_on} vs off {t_off} cycles");
}

/// Stores of every line of `PAGES` pages, each once the previous has completed.
fn spaced_store_stream(m: &mut Machine) -> CacheStats {
    for l in BASE..BASE + 64 * PAGES {
        m.access(0, l, AccessKind::Store, true, 1);
        m.advance(0, 2000, 0);
    }
    m.cpus[0].stats.cache.clone()
}

#[test]
fn the_l2_streamer_follows_a_store_stream_within_each_page() {
    // Stores do not train the next-line prefetcher: the L2 streamer alone, on RFOs.
    let mut m = machine(&e5(true));
    let s = spaced_store_stream(&mut m);
    assert_eq!(s.l1d_misses, 64 * PAGES);
    assert_eq!(s.pf_l1_requests, 0);
    // Two demand misses per page train the stream; each later lookup asks for two lines
    // ahead, so every line from the third on is in L2 (a prefetch) when the store comes.
    assert_eq!(s.l2_misses, 2 * PAGES);
    assert_eq!(s.pf_l2_misses, 62 * PAGES);
    assert_eq!(s.pf_llc_misses, 62 * PAGES);
    // The stream's frontier only moves forward: each line from the third to the last of
    // the page is proposed exactly once, and nothing beyond the page.
    assert_eq!(s.pf_l2_requests, 62 * PAGES);
    // Intel's cache-references leave the L2 streamer out.
    assert_eq!(s.llc_references, s.llc_demand_references);
    assert_eq!(s.llc_references, 2 * PAGES);
}

#[test]
fn no_prefetch_crosses_a_4k_page() {
    for descending in [false, true] {
        let mut m = machine(&e5(true));
        let page = BASE + 64 * 10;
        let lines: Vec<u64> = if descending {
            (page..page + 64).rev().collect()
        } else {
            (page..page + 64).collect()
        };
        for &l in &lines {
            m.access(0, l, AccessKind::Load, true, 1);
        }
        let s = &m.cpus[0].stats.cache;
        assert!(s.pf_l2_requests > 0, "the stream was followed");
        // Neighbouring pages, physically adjacent, were never fetched.
        for l in (page - 64..page).chain(page + 64..page + 128) {
            assert!(
                !m.hier.contains_l2(0, l) && !m.hier.contains_l1(0, l),
                "line {l} of a neighbouring page fetched (descending: {descending})"
            );
        }
        // Every line fetched was read once: demand and prefetch reads are the page's 64.
        assert_eq!(s.dram_reads, 64);
    }
}

fn milan(cross: bool) -> MachineParams {
    let mut p = params("epyc-7j13-milan");
    assert!(p.prefetch.l2_cross_page, "the preset as shipped crosses");
    p.prefetch.l2_cross_page = cross;
    p
}

/// Stores of every line of `PAGES` pages, ascending within each page, the
/// pages ascending or descending, each store once the previous has completed.
fn spaced_pages(m: &mut Machine, descending: bool) -> CacheStats {
    for k in 0..PAGES {
        let pg = if descending { PAGES - 1 - k } else { k };
        for l in BASE + 64 * pg..BASE + 64 * (pg + 1) {
            m.access(0, l, AccessKind::Store, true, 1);
            m.advance(0, 2000, 0);
        }
    }
    m.cpus[0].stats.cache.clone()
}

#[test]
fn milans_streamer_continues_a_store_stream_into_the_physically_next_page() {
    let mut m = machine(&milan(true));
    let s = spaced_pages(&mut m, false);
    // Only the first page trains the stream (two demand misses); it then runs the
    // distance (20 lines) into each next page, and a lookup there continues it.
    assert_eq!(s.l2_misses, 2);
    assert_eq!(s.pf_l2_requests, 64 * PAGES - 2 + 20);
    assert!(m.hier.contains_l2(0, BASE + 64 * PAGES + 19));
    assert!(!m.hier.contains_l2(0, BASE + 64 * PAGES + 20));
    // Pages in descending order: an ascending stream does not continue into the
    // page below, so every page trains anew, as on Intel.
    let mut m = machine(&milan(true));
    assert_eq!(spaced_pages(&mut m, true).l2_misses, 2 * PAGES);
    // Without crossing, both orders train every page.
    for descending in [false, true] {
        let mut m = machine(&milan(false));
        let s = spaced_pages(&mut m, descending);
        assert_eq!(s.l2_misses, 2 * PAGES, "descending: {descending}");
        assert_eq!(s.pf_l2_requests, 62 * PAGES);
    }
}

#[test]
fn the_first_store_of_the_next_page_waits_for_the_l2_not_dram() {
    for cross in [true, false] {
        let p = milan(cross);
        let mut m = machine(&p);
        for l in BASE..BASE + 64 {
            m.access(0, l, AccessKind::Store, true, 1);
            m.advance(0, 2000, 0);
        }
        let t = m.cpus[0].clock;
        let served = m.access(0, BASE + 64, AccessKind::Store, true, 1);
        let held = m.cores[0].lfb.iter().copied().max().unwrap() - t;
        if cross {
            // Prefetched by the stream of the page before: an L2 hit, its fill
            // buffer held for the L2 latency.
            assert_eq!(served, Served::L2);
            assert_eq!(held, p.l2.latency_cycles);
        } else {
            assert_eq!(served, Served::Dram { hops: 0 });
            assert_eq!(held, p.dram_local_cycles);
        }
        // The store itself costs its issue cycle either way.
        assert_eq!(m.cpus[0].clock, t + 1);
    }
}

#[test]
fn intel_presets_do_not_cross_and_milan_does() {
    for (name, cross) in [
        ("xeon-e5-2699v3-2s", false),
        ("xeon-e5-1650v3-1s", false),
        ("xeon-e5-4655v3-4s", false),
        ("xeon-6238m-clx", false),
        ("xeon-8358-icx", false),
        ("epyc-7j13-milan", true),
    ] {
        assert_eq!(params(name).prefetch.l2_cross_page, cross, "{name}");
    }
}

#[test]
fn a_crossing_stream_stops_at_the_end_of_memory() {
    // The last page of memory, ascending: the stream's proposals beyond it are dropped.
    let p = milan(true);
    let mut m = Machine::new(&p, 1 << 30, 0).unwrap();
    let last_page = (2u64 << 30) / 4096 - 1;
    for l in last_page * 64..last_page * 64 + 64 {
        m.access(0, l, AccessKind::Store, true, 1);
        m.advance(0, 2000, 0);
    }
    assert_eq!(m.cpus[0].stats.cache.pf_l2_requests, 62);
}

#[test]
fn a_random_stream_gets_no_useful_prefetch() {
    let run = |prefetch: bool| {
        let mut m = machine(&e5(prefetch));
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Random lines of 512 MiB: two in one page are rare.
            m.access(0, (x >> 20) % (1 << 23), AccessKind::Load, false, 1);
        }
        (m.cpus[0].stats.cache.clone(), m.cpus[0].clock)
    };
    let (off, t_off) = run(false);
    let (on, t_on) = run(true);
    let issued = on.pf_l1_requests + on.pf_l2_requests;
    assert!(issued < 100, "{issued} prefetches on a random stream");
    // Demand misses are not reduced by more than the prefetches could have covered.
    assert!(on.l2_misses + issued >= off.l2_misses, "{on:?} vs {off:?}");
    // And the time is the same within those few requests' latency.
    assert!(t_on.abs_diff(t_off) * 1000 < t_off, "{t_on} vs {t_off}");
}

#[test]
fn perf_cache_events_count_what_each_chip_counts() {
    let mut m = machine(&e5(true));
    load_stream(&mut m);
    let s = &m.cpus[0].stats.cache;
    // Intel: demand and L1-prefetch requests at the LLC.
    assert_eq!(
        s.llc_references,
        s.llc_demand_references + s.pf_l1_l2_misses
    );
    assert!(s.pf_l1_l2_misses > 0);

    let mut m = machine(&params("epyc-7j13-milan"));
    load_stream(&mut m);
    let s = &m.cpus[0].stats.cache;
    // AMD Zen: every request reaching the L2, the L2 prefetcher's included, and the L1's
    // requests that miss it.
    assert_eq!(
        s.llc_references,
        s.l1d_misses + s.pf_l1_requests + s.pf_l2_requests
    );
    assert_eq!(s.llc_misses, s.l2_misses + s.pf_l1_l2_misses);
    assert!(s.pf_l2_requests > 0);
}

#[test]
fn prefetching_is_deterministic() {
    let run = || {
        let mut m = machine(&params("xeon-8358-icx"));
        for k in 0..4u64 {
            for l in 0..2048u64 {
                let line = BASE + ((l * 7 + k * 13) % 4096);
                let kind = if l % 3 == 0 {
                    AccessKind::Store
                } else {
                    AccessKind::Load
                };
                m.access((k % 2) as usize, line, kind, l % 5 != 0, 2);
            }
        }
        let cpus: Vec<String> = m
            .cpus
            .iter()
            .take(2)
            .map(|c| format!("{} {:?}", c.clock, c.stats.cache))
            .collect();
        cpus.join("\n")
    };
    assert_eq!(run(), run());
}

/// Lines one core keeps in flight streaming loads (the validate `load`
/// kernel: each load waits for its data) over 16 MiB of cold memory, by
/// Little's law: lines x DRAM latency / elapsed cycles.
fn lines_in_flight(p: &MachineParams) -> f64 {
    let mut m = machine(p);
    let (warm, lines) = (4096, 16 << 14);
    for l in BASE..BASE + warm {
        m.access(0, l, AccessKind::Load, true, 1);
    }
    let t0 = m.cpus[0].clock;
    for l in BASE + warm..BASE + warm + lines {
        m.access(0, l, AccessKind::Load, true, 1);
    }
    (lines * p.dram_local_cycles) as f64 / (m.cpus[0].clock - t0) as f64
}

#[test]
fn a_load_stream_keeps_the_streamers_distance_plus_the_fill_buffers_in_flight() {
    // What `vmsim hw calibrate` derives `prefetch.l2_distance_lines` from:
    // with neither the superqueue nor a bandwidth in the way, one core's
    // sequential stream has the streamer's distance ahead of its L2 lookups
    // and its fill buffers' lines in flight, so its DRAM rate is
    // (distance + fill buffers) x 64 B / latency.
    for d in [8, 20, 40, 63] {
        let mut p = params("epyc-7j13-milan");
        p.prefetch.l2_distance_lines = d;
        p.l2.outstanding = 256;
        p.l2.sustained_bytes_per_cycle = 0.0;
        p.llc.sustained_bytes_per_cycle = 0.0;
        p.dram_bytes_per_cycle = 1e4;
        let got = lines_in_flight(&p);
        let want = (d + p.l1d.outstanding) as f64;
        assert!(
            (got - want).abs() < 0.01,
            "distance {d}: {got:.3} lines in flight, want {want}"
        );
    }
}
