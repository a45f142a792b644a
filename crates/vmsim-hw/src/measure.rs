//! Micro-measurements behind `calibrate`: bandwidths, core clock, system
//! call, fault and context-switch costs (the pointer chase is
//! `micro::chase`, shared with `microbench`). Those that repeat return
//! every clean repetition ([`Samples`]), the caller choosing the figure;
//! the others plain numbers. The method text lives with the caller.
//!
//! It owns the sizes and counts of a measurement that a preset's sources
//! quote ([`L1_BYTES`], [`L1_PASSES`], [`l1_timings`], [`STOSB_CALLS`],
//! [`SFENCE_PAIRS`]), so that `calibrate`, which measures with them, and
//! `preset`, which cites them, read one number without reading each other.
//!
//! Invariant: a figure is the measurement of exactly the count it is
//! quoted with: `calibrate` passes these constants, not its own.

use crate::clear::{clear_huge, ClearStrategy};
use crate::prim::{clzero_clear, has_clzero, nt_clear, rep_stosb, sfence};
use crate::reps::{repeat, Samples};
use crate::sys::{self, Backing, Mapping, HPAGE, SUBPAGE};
use crate::HwError;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// GB/s of each of `passes` clean passes of `f` over a pre-faulted THP
/// buffer (a pass during which the thread was switched out is run again).
fn bw(bytes: usize, passes: usize, f: impl Fn(&mut [u8])) -> Result<Samples, HwError> {
    let mut m = Mapping::anon(bytes, Backing::Thp)?;
    sys::prefault(m.as_mut_slice(), SUBPAGE, 1);
    repeat(passes, None, || {
        let t0 = Instant::now();
        f(m.as_mut_slice());
        bytes as f64 / t0.elapsed().as_secs_f64() / 1e9
    })
}

pub fn stosb_gbps(bytes: usize, passes: usize) -> Result<Samples, HwError> {
    // SAFETY: the whole slice is writable.
    bw(bytes, passes, |b| unsafe {
        rep_stosb(b.as_mut_ptr(), b.len())
    })
}

/// `movnti` (8 B per instruction, what kernel code can use) and, where AVX2
/// exists, 32 B `vmovntdq` (the store path's own limit rather than the
/// instruction rate). Returns (movnti GB/s, widest GB/s, widest's name).
pub fn nt_gbps(bytes: usize, passes: usize) -> Result<(Samples, Samples, &'static str), HwError> {
    let movnti = bw(bytes, passes, |b| {
        // SAFETY: page-aligned, whole slice writable, length a multiple of 64.
        unsafe { nt_clear(b.as_mut_ptr(), b.len() / 64 * 64) };
        sfence();
    })?;
    if !std::is_x86_feature_detected!("avx2") {
        return Ok((movnti.clone(), movnti, "movnti"));
    }
    let wide = bw(bytes, passes, |b| {
        // SAFETY: AVX2 checked above; page-aligned so 32 B aligned; whole slice writable.
        unsafe { nt_clear_avx2(b) };
        sfence();
    })?;
    Ok((movnti, wide, "vmovntdq 32 B"))
}

/// `clzero` per 64 B line and an `sfence` per pass, where the CPU has it
/// (AMD); None otherwise.
pub fn clzero_gbps(bytes: usize, passes: usize) -> Result<Option<Samples>, HwError> {
    if !has_clzero() {
        return Ok(None);
    }
    let s = bw(bytes, passes, |b| {
        // SAFETY: clzero checked above; page-aligned, whole slice writable,
        // length a multiple of 64.
        unsafe { clzero_clear(b.as_mut_ptr(), b.len() / 64 * 64) };
        sfence();
    })?;
    Ok(Some(s))
}

/// Pairs of fenced and unfenced passes for the `sfence` drain (each pass
/// a few ms over the bandwidth buffer).
pub(crate) const SFENCE_PAIRS: usize = 15;

/// What an `sfence` after a 4 KiB call of non-temporal stores costs, ns
/// per call: each repetition clears the buffer in 4 KiB calls with the
/// widest non-temporal store (`vmovntdq` where AVX2 exists, else `movnti`)
/// twice back to back, with an `sfence` after every call and with one at
/// the end only; the figure is the difference per call, so the host's slow
/// spells, which move both, mostly cancel. Returns the samples and the
/// store's name.
pub fn sfence_drain_ns(bytes: usize, reps: usize) -> Result<(Samples, &'static str), HwError> {
    let mut m = Mapping::anon(bytes, Backing::Thp)?;
    sys::prefault(m.as_mut_slice(), SUBPAGE, 1);
    let avx2 = std::is_x86_feature_detected!("avx2");
    let calls = bytes / SUBPAGE;
    let pass = |b: &mut [u8], fenced: bool| {
        let t0 = Instant::now();
        for c in b.chunks_exact_mut(SUBPAGE) {
            if avx2 {
                // SAFETY: AVX2 checked above; each chunk is page-aligned and writable.
                unsafe { nt_clear_avx2(c) };
            } else {
                // SAFETY: page-aligned, writable, 4 KiB (a multiple of 64).
                unsafe { nt_clear(c.as_mut_ptr(), c.len()) };
            }
            if fenced {
                sfence();
            }
        }
        sfence();
        t0.elapsed().as_secs_f64() * 1e9 / calls as f64
    };
    let s = repeat(reps, None, || {
        let b = m.as_mut_slice();
        let fenced = pass(b, true);
        let unfenced = pass(b, false);
        fenced - unfenced
    })?;
    Ok((s, if avx2 { "vmovntdq 32 B" } else { "movnti 8 B" }))
}

/// `vmovntdq` over `b` (a multiple of 128 B), two lines an iteration: a loop
/// of one store an iteration takes a branch a store and is bound by the
/// front end when the host's core is shared (as [`nt_clear`] is unrolled).
#[target_feature(enable = "avx2")]
unsafe fn nt_clear_avx2(b: &mut [u8]) {
    use core::arch::x86_64::{__m256i, _mm256_setzero_si256, _mm256_stream_si256};
    let p = b.as_mut_ptr() as *mut __m256i;
    let z = _mm256_setzero_si256();
    for i in (0..b.len() / 128).map(|i| i * 4) {
        _mm256_stream_si256(p.add(i), z);
        _mm256_stream_si256(p.add(i + 1), z);
        _mm256_stream_si256(p.add(i + 2), z);
        _mm256_stream_si256(p.add(i + 3), z);
    }
}

pub fn read_gbps(bytes: usize, passes: usize) -> Result<Samples, HwError> {
    bw(bytes, passes, |b| {
        let s: u64 = b
            .chunks_exact(8)
            .map(|w| u64::from_ne_bytes(w.try_into().unwrap()))
            .fold(0, u64::wrapping_add);
        black_box(s);
    })
}

/// Dependent adds timed per repetition of [`core_ghz`]: 2^21, about 0.6 ms
/// at 3.5 GHz. Short enough that most repetitions run between two
/// preemptions on a busy host; long enough that the timer's own cost
/// (tens of ns) and a timer interrupt (a few us) stay below 0.5%.
pub const CLOCK_ADDS: u64 = 1 << 21;

/// Core clock in GHz, one figure per clean repetition: a chain of
/// [`CLOCK_ADDS`] dependent `add`s (one per cycle on every x86-64 core of
/// the last two decades) timed with CLOCK_MONOTONIC, after about 20 ms of
/// untimed chains so the core's clock has left any idle state. Repetitions
/// during which the thread was switched out are run again (see
/// [`repeat`]); none starts after `budget`. A repetition can only read low
/// (time lost to another task or the hypervisor), so the caller takes the
/// highest.
pub fn core_ghz(reps: usize, budget: Duration) -> Result<Samples, HwError> {
    for _ in 0..32 {
        core_ghz_once(CLOCK_ADDS / 8);
    }
    repeat(reps, Some(budget), || core_ghz_once(CLOCK_ADDS / 8))
}

fn core_ghz_once(iters: u64) -> f64 {
    let iters = iters.max(1);
    let t0 = Instant::now();
    let mut x = 0u64;
    // SAFETY: register-only arithmetic.
    unsafe {
        core::arch::asm!(
            "2:",
            "add {x}, 1", "add {x}, 1", "add {x}, 1", "add {x}, 1",
            "add {x}, 1", "add {x}, 1", "add {x}, 1", "add {x}, 1",
            "dec {c}",
            "jnz 2b",
            x = inout(reg) x, c = inout(reg) iters => _,
            options(nomem, nostack),
        );
    }
    black_box(x);
    (iters * 8) as f64 / t0.elapsed().as_nanos() as f64
}

/// The L1-resident buffer the L1 rates are measured over.
pub const L1_BYTES: usize = 16 << 10;

/// Passes over the [`L1_BYTES`] buffer in one timing of an L1 rate: about
/// 10 us, where the timer's own cost (tens of ns) stays under 0.5%.
pub const L1_PASSES: usize = 50;

/// Clean timings of each L1 rate (quick mode: 100), about 10 us each.
pub(crate) fn l1_timings(quick: bool) -> usize {
    if quick {
        100
    } else {
        2000
    }
}

/// What one core's L1 does with stores and loads over an L1-resident 16
/// KiB buffer, each the fastest of many short clean timings ([`repeat`]).
/// Short, because on a shared host what slows an in-core rate (the other
/// hardware thread of the host's core, unseen by a guest) often comes and
/// goes within microseconds: of 20 000 timings of 2 us on a Zen 3 guest,
/// most stored 70-85 GB/s and the fastest 95-100, the core's 32 B a cycle.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct L1Rates {
    /// Bytes per ns of the widest plain stores the CPU has (32 B AVX2
    /// `vmovdqa`, else 8 B `mov`): the store path's width, which the model's
    /// `cpu.store_bytes_per_cycle` is.
    pub store_bpns: f64,
    pub store_how: String,
    /// Bytes per ns of 8 B `mov` stores ([`crate::micro::fill_mov8`]): with
    /// the clock, the scalar stores a cycle (`cpu.scalar_stores_per_cycle`).
    pub scalar_store_bpns: f64,
    pub load_bpns: f64,
    pub load_how: String,
    /// ns per `rep stosb` call of each of [`STOSB_CALLS`] bytes, into the
    /// buffer's first page (no page crossed, no line missing).
    pub stosb_call_ns: [(usize, f64); 2],
}

/// The two `rep stosb` call lengths whose difference gives the rate and
/// whose intercept gives the start-up: 1 KiB is above the short-string
/// paths (a 64 B call costs more than a 256 B one on Zen 3) and 4 KiB is
/// the kernel's `clear_page`, one page.
pub const STOSB_CALLS: [usize; 2] = [1 << 10, 4 << 10];

impl L1Rates {
    /// The faster of two measurements, figure by figure: the highest
    /// rates and the shortest calls. A spell in which the host's other
    /// thread of the core was busy throughout slows every figure of it.
    pub fn fastest(self, other: &L1Rates) -> L1Rates {
        let call = |a: (usize, f64), b: (usize, f64)| (a.0, a.1.min(b.1));
        L1Rates {
            store_bpns: self.store_bpns.max(other.store_bpns),
            store_how: self.store_how,
            scalar_store_bpns: self.scalar_store_bpns.max(other.scalar_store_bpns),
            load_bpns: self.load_bpns.max(other.load_bpns),
            load_how: self.load_how,
            stosb_call_ns: [
                call(self.stosb_call_ns[0], other.stosb_call_ns[0]),
                call(self.stosb_call_ns[1], other.stosb_call_ns[1]),
            ],
        }
    }

    /// A `rep stosb` call's fixed cost (ns) and its rate (bytes per ns),
    /// from the two call lengths: the line through both points. None when
    /// the longer call was not the slower (a disturbed timing).
    pub fn stosb_startup(&self) -> Option<(f64, f64)> {
        let [(b0, t0), (b1, t1)] = self.stosb_call_ns;
        let per_byte = (t1 - t0) / (b1 - b0) as f64;
        if per_byte <= 0.0 {
            return None;
        }
        Some(((t0 - b0 as f64 * per_byte).max(0.0), 1.0 / per_byte))
    }
}

/// [`L1Rates`], each figure the fastest of `timings` clean timings of
/// [`L1_PASSES`] passes' worth of work.
pub fn l1_rates(timings: usize) -> Result<L1Rates, HwError> {
    let rounds = L1_PASSES;
    let mut m = Mapping::anon(L1_BYTES, Backing::Small)?;
    let b = m.as_mut_slice();
    sys::prefault(b, SUBPAGE, 1);
    let bytes = (rounds * b.len()) as f64;
    let fastest = |work: f64, f: &mut dyn FnMut()| -> Result<f64, HwError> {
        let s = repeat(timings, None, || {
            let t0 = Instant::now();
            f();
            work / t0.elapsed().as_nanos().max(1) as f64
        })?;
        Ok(s.summary().best(false))
    };
    let avx2 = std::is_x86_feature_detected!("avx2");
    let (store_bpns, store_how) = if avx2 {
        let s = fastest(bytes, &mut || {
            for _ in 0..rounds {
                // SAFETY: AVX2 checked above; the slice is page-aligned and writable.
                unsafe { crate::micro::fill_avx2(b.as_mut_ptr(), b.len()) };
            }
            black_box(&mut *b);
        })?;
        (s, "AVX2 32 B vmovdqa stores")
    } else {
        let s = fastest(bytes, &mut || {
            for _ in 0..rounds {
                for w in b.chunks_exact_mut(8) {
                    // SAFETY: in bounds; volatile so the loop stays 8 B stores.
                    unsafe { std::ptr::write_volatile(w.as_mut_ptr() as *mut u64, 0) };
                }
            }
        })?;
        (s, "8 B mov stores")
    };
    let scalar_store_bpns = fastest(bytes, &mut || {
        for _ in 0..rounds {
            // SAFETY: the slice is page-aligned, writable and a multiple of 256 B.
            unsafe { crate::micro::fill_mov8(b.as_mut_ptr(), b.len()) };
        }
        black_box(&mut *b);
    })?;
    // Calls per timing: as many bytes as the store pass clears.
    let mut stosb_call_ns = [(0, 0.0); 2];
    for (slot, &len) in stosb_call_ns.iter_mut().zip(STOSB_CALLS.iter()) {
        let calls = rounds * b.len() / len;
        let per_ns = fastest(calls as f64, &mut || {
            for _ in 0..calls {
                // SAFETY: len <= the slice's length.
                unsafe { rep_stosb(b.as_mut_ptr(), len) };
            }
        })?;
        *slot = (len, 1.0 / per_ns);
    }
    let (load_bpns, load_how) = if avx2 {
        let load = fastest(bytes, &mut || {
            // SAFETY: AVX2 checked above; the slice is 32-byte aligned (page-aligned mapping).
            unsafe { black_box(sum_avx2(b, rounds)) };
        })?;
        (load, "AVX2 32 B loads")
    } else {
        let load = fastest(bytes, &mut || {
            for _ in 0..rounds {
                black_box(
                    b.chunks_exact(8)
                        .map(|w| u64::from_ne_bytes(w.try_into().unwrap()))
                        .fold(0, u64::wrapping_add),
                );
            }
        })?;
        (load, "compiler-vectorised 16 B loads")
    };
    Ok(L1Rates {
        store_bpns,
        store_how: store_how.into(),
        scalar_store_bpns,
        load_bpns,
        load_how: load_how.into(),
        stosb_call_ns,
    })
}

#[target_feature(enable = "avx2")]
unsafe fn sum_avx2(b: &[u8], rounds: usize) -> u64 {
    use core::arch::x86_64::*;
    let p = b.as_ptr() as *const __m256i;
    let n = b.len() / 32;
    let mut acc = [_mm256_setzero_si256(); 4];
    for _ in 0..rounds {
        for i in (0..n).step_by(4) {
            for (k, a) in acc.iter_mut().enumerate() {
                *a = _mm256_add_epi64(*a, _mm256_load_si256(p.add(i + k)));
            }
        }
        black_box(&acc);
    }
    let mut out = [0u64; 4];
    _mm256_storeu_si256(
        out.as_mut_ptr() as *mut __m256i,
        _mm256_add_epi64(acc[0], acc[3]),
    );
    out.iter().sum()
}

/// ns per getppid() system call (glibc does not cache it; issued raw anyway).
pub fn syscall_ns(calls: usize) -> f64 {
    let t0 = Instant::now();
    for _ in 0..calls {
        // SAFETY: getppid has no arguments or side effects.
        black_box(unsafe { libc::syscall(libc::SYS_getppid) });
    }
    t0.elapsed().as_nanos() as f64 / calls as f64
}

/// Faults in `bytes` one byte per `stride`; returns (ns per fault, ns per page at munmap, AnonHugePages KiB).
///
/// One untimed round first: on a VM the first touch of guest memory the
/// hypervisor has not yet backed costs far more than the guest kernel's fault.
pub fn fault_ns(
    bytes: usize,
    backing: Backing,
    stride: usize,
) -> Result<(f64, f64, Option<u64>), HwError> {
    {
        let mut warm = Mapping::anon(bytes, backing)?;
        sys::prefault(warm.as_mut_slice(), stride, 1);
    }
    let m = Mapping::anon(bytes, backing)?;
    let p = m.as_ptr();
    let faults = bytes / stride;
    let t0 = Instant::now();
    for off in (0..bytes).step_by(stride) {
        // SAFETY: inside the mapping.
        unsafe { std::ptr::write_volatile(p.add(off), 1) };
    }
    let fault = t0.elapsed().as_nanos() as f64 / faults as f64;
    let thp = m.anon_huge_kib();
    let t1 = Instant::now();
    drop(m);
    let free = t1.elapsed().as_nanos() as f64 / faults as f64;
    Ok((fault, free, thp))
}

/// ns to clear one `unit` (4 KiB with `rep stosb`, or 2 MiB in process_huge_page
/// order as this kernel's fault path does) over a pre-faulted buffer larger than the LLC.
pub fn clear_ns(bytes: usize, unit: usize) -> Result<f64, HwError> {
    let mut m = Mapping::anon(bytes, Backing::Thp)?;
    sys::prefault(m.as_mut_slice(), SUBPAGE, 1);
    let b = m.as_mut_slice();
    let t0 = Instant::now();
    for c in b.chunks_exact_mut(unit) {
        if unit == HPAGE {
            clear_huge(ClearStrategy::TargetLast, c, 0);
        } else {
            // SAFETY: the chunk is writable.
            unsafe { rep_stosb(c.as_mut_ptr(), c.len()) };
        }
    }
    Ok(t0.elapsed().as_nanos() as f64 / (bytes / unit) as f64)
}

/// ns per switch: two threads pinned to CPU 0 bounce a byte over two pipes
/// (so each switch includes one read and one write system call).
pub fn context_switch_ns(round_trips: usize) -> Result<f64, HwError> {
    let mut a = [0i32; 2];
    let mut b = [0i32; 2];
    // SAFETY: pipe() fills the arrays.
    if unsafe { libc::pipe(a.as_mut_ptr()) != 0 || libc::pipe(b.as_mut_ptr()) != 0 } {
        return Err(HwError::Io(format!(
            "pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    let bounce = |rd: i32, wr: i32, first: bool| {
        let mut byte = [0u8; 1];
        for i in 0..round_trips * 2 {
            // SAFETY: valid fds and a 1-byte buffer.
            unsafe {
                if (i % 2 == 0) == first {
                    libc::write(wr, byte.as_ptr() as *const _, 1);
                } else {
                    libc::read(rd, byte.as_mut_ptr() as *mut _, 1);
                }
            }
        }
    };
    let t0 = Instant::now();
    let res = std::thread::scope(|s| {
        let h = s.spawn(|| sys::pin_to_cpu(0).map(|_| bounce(a[0], b[1], false)));
        let mine = sys::pin_to_cpu(0).map(|_| bounce(b[0], a[1], true));
        let theirs = h
            .join()
            .unwrap_or_else(|_| Err(HwError::Io("ping-pong thread panicked".into())));
        mine.and(theirs)
    });
    let ns = t0.elapsed().as_nanos() as f64 / (round_trips * 2) as f64;
    // SAFETY: closing the fds created above.
    unsafe {
        [a[0], a[1], b[0], b[1]].iter().for_each(|&fd| {
            libc::close(fd);
        })
    };
    res.map(|_| ns)
}

/// ns to read the last 4 KiB written by one `rep stosb` of `size` bytes into
/// flushed memory: low if the string store left its lines in cache, DRAM-like
/// if it bypassed them (the CPU's no-allocate threshold for large strings).
/// With `size == 0`, the reference instead: the same read of 4 KiB that was
/// flushed and not rewritten (a cold read from DRAM).
pub fn stosb_tail_touch_ns(size: usize, reps: usize, tsc_ghz: f64) -> Result<Samples, HwError> {
    let (size, store) = if size == 0 {
        (SUBPAGE, false)
    } else {
        (size, true)
    };
    use core::arch::x86_64::{_mm_clflush, _mm_mfence};
    let mut m = Mapping::anon(size, Backing::Thp)?;
    sys::prefault(m.as_mut_slice(), SUBPAGE, 1);
    let p = m.as_mut_slice().as_mut_ptr();
    repeat(reps, None, || {
        // SAFETY: every address is inside the mapping; clflush/mfence need SSE2 (baseline).
        unsafe {
            for off in (0..size).step_by(64) {
                _mm_clflush(p.add(off));
            }
            _mm_mfence();
            if store {
                rep_stosb(p, size);
            }
            let tail = p.add(size - SUBPAGE);
            let t0 = sys::rdtsc_start();
            let mut s = 0u64;
            for off in (0..SUBPAGE).step_by(64) {
                s = s.wrapping_add(std::ptr::read_volatile(tail.add(off) as *const u64));
            }
            let t1 = sys::rdtsc_end();
            black_box(s);
            t1.saturating_sub(t0) as f64 / tsc_ghz
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spells_combine_to_the_fastest_of_each_figure() {
        let a = L1Rates {
            store_bpns: 95.0,
            store_how: "avx2".into(),
            scalar_store_bpns: 32.4,
            load_bpns: 150.0,
            load_how: "avx2".into(),
            stosb_call_ns: [(STOSB_CALLS[0], 40.0), (STOSB_CALLS[1], 90.0)],
        };
        let b = L1Rates {
            store_bpns: 55.7,
            scalar_store_bpns: 50.2,
            load_bpns: 190.0,
            stosb_call_ns: [(STOSB_CALLS[0], 45.0), (STOSB_CALLS[1], 80.0)],
            ..a.clone()
        };
        let f = a.fastest(&b);
        assert_eq!(f.store_bpns, 95.0);
        assert_eq!(f.scalar_store_bpns, 50.2);
        assert_eq!(f.load_bpns, 190.0);
        assert_eq!(
            f.stosb_call_ns,
            [(STOSB_CALLS[0], 40.0), (STOSB_CALLS[1], 80.0)]
        );
    }

    fn rates(ns_1k: f64, ns_4k: f64) -> L1Rates {
        L1Rates {
            store_bpns: 0.0,
            store_how: String::new(),
            scalar_store_bpns: 0.0,
            load_bpns: 0.0,
            load_how: String::new(),
            stosb_call_ns: [(STOSB_CALLS[0], ns_1k), (STOSB_CALLS[1], ns_4k)],
        }
    }

    #[test]
    fn the_start_up_is_the_intercept_of_the_two_call_lengths() {
        // 3 KiB more in 96 ns more: 32 B/ns; 1 KiB then costs 32 ns of a 52 ns call.
        let (ns, rate) = rates(52.0, 148.0).stosb_startup().unwrap();
        assert!((rate - 32.0).abs() < 1e-9, "{rate}");
        assert!((ns - 20.0).abs() < 1e-9, "{ns}");
        // A steeper line through the origin's far side reads no negative start-up.
        assert_eq!(rates(10.0, 148.0).stosb_startup().unwrap().0, 0.0);
    }

    #[test]
    fn a_longer_call_timed_no_slower_gives_no_start_up() {
        assert!(rates(60.0, 60.0).stosb_startup().is_none());
        assert!(rates(60.0, 50.0).stosb_startup().is_none());
    }
}
