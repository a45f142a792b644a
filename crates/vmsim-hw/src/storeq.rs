//! The store queue's size (`cpu.store_queue_entries`), measured as H. Wong
//! measured the out-of-order window ("Measuring Reorder Buffer Capacity",
//! 2013): two independent chains of dependent loads through a DRAM-sized
//! buffer take turns, with `n` stores to one L1-resident line after each
//! load. None of those stores can commit before the load ahead of it
//! retires, so while `n` stores fit in the queue the other chain's load
//! issues during this one's miss and the two misses overlap (an iteration
//! takes about one memory latency); once they do not, the core stalls at the
//! store that finds the queue full and the misses run one after the other
//! (two latencies). The queue holds the `n` at which the time crosses the
//! midpoint of the two plateaus.

use crate::sys::{Backing, Mapping};
use crate::HwError;
use core::arch::asm;
use std::time::Instant;
use vmsim_core::validate::chase_order;

/// One timed run: `iters` iterations of load, `N` stores, load, `N` stores;
/// returns the chains' positions.
///
/// # Safety
/// `a` and `b` each start a cycle of pointers inside a live mapping;
/// `sink` is writable for 4 bytes.
#[inline(never)]
unsafe fn chains<const N: usize>(
    a: usize,
    b: usize,
    sink: *mut u32,
    iters: usize,
) -> (usize, usize) {
    let (mut a, mut b) = (a, b);
    asm!(
        "2:",
        "mov {a}, qword ptr [{a}]",
        ".rept {n}",
        "mov dword ptr [{s}], {z:e}",
        ".endr",
        "mov {b}, qword ptr [{b}]",
        ".rept {n}",
        "mov dword ptr [{s}], {z:e}",
        ".endr",
        "dec {i}",
        "jnz 2b",
        a = inout(reg) a,
        b = inout(reg) b,
        s = in(reg) sink,
        z = in(reg) 0u32,
        i = inout(reg) iters.max(1) => _,
        n = const N,
        options(nostack),
    );
    (a, b)
}

/// The stores tried between the loads, and the run for each.
type Run = unsafe fn(usize, usize, *mut u32, usize) -> (usize, usize);
macro_rules! sizes {
    ($($n:literal)*) => {
        const STORES: &[(u64, Run)] = &[$(($n, chains::<$n> as Run)),*];
    };
}
sizes!(16 20 24 28 32 36 40 44 48 52 56 60 64 68 72 76 80 84 88 92 96 100 104 108 112 116 120 124 128);

/// What the probe found.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct StoreQueueProbe {
    /// ns per iteration for each `n`: the median of the rounds.
    pub ns: Vec<(u64, f64)>,
    /// The crossing of the midpoint (None: no step of at least 1.4x).
    pub entries: Option<u64>,
}

/// The entries: where the per-iteration time first crosses the midpoint
/// between its low plateau (the median of the three smallest `n`) and its
/// high one (the three largest), interpolated between the two `n` either
/// side; None unless the high plateau is at least 1.4 times the low.
pub fn crossing(ns: &[(u64, f64)]) -> Option<u64> {
    if ns.len() < 6 {
        return None;
    }
    let med3 = |xs: &[(u64, f64)]| {
        let mut v: Vec<f64> = xs.iter().map(|x| x.1).collect();
        v.sort_by(f64::total_cmp);
        v[1]
    };
    let low = med3(&ns[..3]);
    let high = med3(&ns[ns.len() - 3..]);
    if high < 1.4 * low {
        return None;
    }
    let mid = (low + high) / 2.0;
    let i = ns.iter().position(|&(_, t)| t > mid)?;
    if i == 0 {
        return None;
    }
    let ((n0, t0), (n1, t1)) = (ns[i - 1], ns[i]);
    Some((n0 as f64 + (mid - t0) / (t1 - t0) * (n1 - n0) as f64).round() as u64)
}

/// Runs the probe over a `bytes` THP-backed buffer, `rounds` rounds each
/// timing every `n` once.
pub fn probe(bytes: usize, rounds: usize) -> Result<StoreQueueProbe, HwError> {
    let lines = (bytes / 64).max(1024);
    let mut m = Mapping::anon(lines * 64, Backing::Thp)?;
    let next = chase_order(lines as u64);
    let base = m.as_mut_slice().as_mut_ptr();
    for (from, &to) in next.iter().enumerate() {
        // SAFETY: both line indices < lines, so inside the mapping.
        unsafe { *(base.add(from * 64) as *mut usize) = base.add(to as usize * 64) as usize };
    }
    // The second chain starts half the cycle away from the first.
    let mut a = base as usize;
    let mut b = a;
    for _ in 0..lines / 2 {
        // SAFETY: every link points at a line inside the mapping.
        b = unsafe { *(b as *const usize) };
    }
    drop(next);
    let mut sink = [0u32; 16];
    let sink = sink.as_mut_ptr();
    let iters = 20_000;
    let mut times = vec![Vec::new(); STORES.len()];
    for _ in 0..rounds.max(1) {
        crate::ctl::check()?;
        for (k, &(_, run)) in STORES.iter().enumerate() {
            let t0 = Instant::now();
            // SAFETY: a and b walk the cycles built above; sink is a live array.
            (a, b) = unsafe { run(a, b, sink, iters) };
            times[k].push(t0.elapsed().as_nanos() as f64 / iters as f64);
        }
    }
    let ns: Vec<(u64, f64)> = STORES
        .iter()
        .zip(times)
        .map(|(&(n, _), mut t)| {
            t.sort_by(f64::total_cmp);
            (n, t[t.len() / 2])
        })
        .collect();
    let entries = crossing(&ns);
    Ok(StoreQueueProbe { ns, entries })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crossing_is_interpolated_at_the_midpoint_of_the_plateaus() {
        let ns: Vec<(u64, f64)> = (0..10)
            .map(|i| (16 + 8 * i, if i < 5 { 180.0 } else { 360.0 }))
            .collect();
        // 48 is the last low point, 56 the first high one: the midpoint
        // (270) lies halfway.
        let mut ns2 = ns.clone();
        ns2[5].1 = 360.0;
        assert_eq!(crossing(&ns2), Some(52));
        // A point on the way up moves it.
        ns2[5].1 = 300.0;
        ns2[6].1 = 360.0;
        assert_eq!(crossing(&ns2), Some(54));
        // No step: none.
        let flat: Vec<(u64, f64)> = ns.iter().map(|&(n, _)| (n, 200.0)).collect();
        assert_eq!(crossing(&flat), None);
    }

    #[test]
    fn the_probe_runs_every_size_in_order() {
        // A small buffer: the loops run and give one time per size, in
        // order (the step needs DRAM and is not asserted here).
        let p = probe(1 << 20, 1).unwrap();
        let ns: Vec<u64> = p.ns.iter().map(|x| x.0).collect();
        assert_eq!(ns, (16..=128).step_by(4).collect::<Vec<u64>>());
        assert!(p.ns.iter().all(|&(_, t)| t > 0.0));
    }
}
