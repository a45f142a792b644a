//! The state of a task's access run (`Op::Access`, kernel/uapi.rs) that
//! access.rs advances: where it is, the access being retried across a
//! fault, the page it last translated, its Zipf sampler; and what the
//! access engine counts per task (reads, writes, a histogram of
//! latencies).

use crate::kernel::uapi::{Access, Pattern};
use serde::Serialize;

/// Sub-buckets of each power of two in [`LatencyHist`]'s percentiles.
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;

/// Histogram of access latencies in cycles, as HdrHistogram keeps one: the
/// power of two `[2^i, 2^(i+1))` (bucket 0 also counts 0 and 1) is cut into
/// `SUB` equal parts from 8 cycles up (below, each cycle is its own
/// part), so a percentile is within 1/8 of its value; `buckets` are the
/// powers of two (pmbench's log2 histogram).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LatencyHist {
    pub buckets: [u64; 32],
    #[serde(skip)]
    pub fine: [u64; 32 * SUB],
}

impl Default for LatencyHist {
    fn default() -> Self {
        LatencyHist {
            buckets: [0; 32],
            fine: [0; 32 * SUB],
        }
    }
}

impl LatencyHist {
    #[inline]
    pub fn record(&mut self, cycles: u64) {
        let b = (63 - (cycles | 1).leading_zeros()).min(31) as usize;
        self.buckets[b] += 1;
        self.fine[Self::fine_index(cycles)] += 1;
    }

    /// The fine bucket of `cycles`: its power of two, then the `SUB_BITS`
    /// bits below its leading one.
    #[inline]
    fn fine_index(cycles: u64) -> usize {
        let b = (63 - (cycles | 1).leading_zeros()).min(31);
        let sub = if b >= SUB_BITS {
            ((cycles >> (b - SUB_BITS)) as usize) & (SUB - 1)
        } else {
            // Fewer than SUB values in the power of two: one part each.
            (cycles as usize).saturating_sub(1 << b) & (SUB - 1)
        };
        b as usize * SUB + sub
    }

    /// The largest latency of fine bucket `i`.
    fn fine_upper(i: usize) -> u64 {
        let (b, sub) = ((i / SUB) as u32, (i % SUB) as u64);
        if b >= SUB_BITS {
            ((SUB as u64 + sub + 1) << (b - SUB_BITS)) - 1
        } else {
            (1u64 << b) + sub
        }
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The upper bound (cycles) of the fine bucket holding the `p`-th
    /// percentile.
    pub fn percentile(&self, p: f64) -> u64 {
        let n = self.count();
        let want = ((n as f64) * p / 100.0).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &c) in self.fine.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Self::fine_upper(i);
            }
        }
        0
    }

    /// Adds what `now` counts beyond `was` (a phase's share of a task's).
    pub fn add_since(&mut self, now: &LatencyHist, was: &LatencyHist) {
        for (b, (&n, &w)) in self
            .buckets
            .iter_mut()
            .zip(now.buckets.iter().zip(&was.buckets))
        {
            *b += n - w;
        }
        for (b, (&n, &w)) in self.fine.iter_mut().zip(now.fine.iter().zip(&was.fine)) {
            *b += n - w;
        }
    }
}

/// What the access engine counted for one task.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AccessStats {
    pub reads: u64,
    pub writes: u64,
    pub latency: LatencyHist,
}

/// No pending access (addresses are 8-byte aligned, so never this).
pub(super) const NONE: u64 = u64::MAX;

/// Progress of an `Access` run.
#[derive(Clone, Debug)]
pub(crate) struct AccessRun {
    pub(super) a: Access,
    pub(super) done: u64,
    pub(super) rng: u64,
    /// The access being made (kept across a fault so it is retried):
    /// its address (`NONE` when there is none) and kind. Two fields rather
    /// than an `Option`: a run is moved in and out of its task every
    /// quantum, so its size is on the hot path.
    pub(super) pending_va: u64,
    pub(super) pending_write: bool,
    pub(super) page: u64,
    pub(super) pfn: u64,
    pub(super) gen: u64,
    pub(super) writable: bool,
    /// The cycle at which a timed run stops (set when it starts).
    pub(super) until: Option<u64>,
    /// The Zipf pattern's sampler over the range's pages (boxed: a run is
    /// moved in and out of its task every quantum, and most runs have none).
    pub(super) zipf: Option<Box<Zipf>>,
}

/// Rejection-inversion sampling of a Zipf distribution over `1..=n` with
/// exponent `s` (W. Hörmann, G. Derflinger, "Rejection-inversion to generate
/// variates from monotone discrete distributions", ACM TOMACS 6(3), 1996; the
/// form of Apache Commons RNG's `RejectionInversionZipfSampler`): constant
/// time per draw whatever `n`, no table, so a range of any size costs nothing
/// to set up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Zipf {
    pub(super) n: f64,
    pub(super) s: f64,
    pub(super) h_x1: f64,
    pub(super) h_n: f64,
    pub(super) cut: f64,
}

impl Zipf {
    pub(crate) fn new(n: u64, s: f64) -> Zipf {
        let n = n.max(1) as f64;
        let mut z = Zipf {
            n,
            s,
            h_x1: 0.0,
            h_n: 0.0,
            cut: 0.0,
        };
        z.h_x1 = z.h_integral(1.5) - 1.0;
        z.h_n = z.h_integral(n + 0.5);
        z.cut = 2.0 - z.h_integral_inv(z.h_integral(2.5) - z.h(2.0));
        z
    }

    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let lx = x.ln();
        expm1_over_x((1.0 - self.s) * lx) * lx
    }

    fn h_integral_inv(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (ln1p_over_x(t) * x).exp()
    }

    /// A draw in `1..=n`, from uniform variates in [0, 1) that `unit` gives.
    pub(crate) fn sample(&self, mut unit: impl FnMut() -> f64) -> u64 {
        loop {
            let u = self.h_n + unit() * (self.h_x1 - self.h_n);
            let x = self.h_integral_inv(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.cut || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

fn ln1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `i`'s place in a permutation of `0..n` chosen by `key`: a four-round
/// Feistel network over the smallest even power of two at least `n`,
/// walking the cycle until it lands inside `0..n` (Black and Rogaway's
/// cycle-walking cipher, CT-RSA 2002), so each pass needs no table.
fn permute(i: u64, n: u64, key: u64) -> u64 {
    debug_assert!(i < n);
    let bits = (64 - (n.max(4) - 1).leading_zeros()).div_ceil(2);
    let mask = (1u64 << bits) - 1;
    let mut x = i;
    loop {
        let (mut l, mut r) = (x >> bits, x & mask);
        for round in 0..4u64 {
            let f = crate::rng::splitmix64(r ^ key.rotate_left(16 * round as u32) ^ round) & mask;
            (l, r) = (r, l ^ f);
        }
        x = (l << bits) | r;
        if x < n {
            return x;
        }
    }
}

fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

impl AccessRun {
    pub(crate) fn new(a: Access) -> AccessRun {
        AccessRun {
            a,
            done: 0,
            rng: a.seed ^ 0x6A09_E667_F3BC_C909,
            pending_va: NONE,
            pending_write: false,
            page: u64::MAX,
            pfn: 0,
            gen: u64::MAX,
            writable: false,
            until: None,
            zipf: match a.pattern {
                Pattern::Zipf { s } => Some(Box::new(Zipf::new(a.len.max(8).div_ceil(4096), s))),
                _ => None,
            },
        }
    }

    fn next_u64(&mut self) -> u64 {
        crate::rng::next(&mut self.rng)
    }

    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The address and kind of access number `done`.
    pub(super) fn next_access(&mut self) -> (u64, bool) {
        let a = self.a;
        let len = a.len.max(8);
        let off = match a.pattern {
            Pattern::Sequential => (self.done * 8) % len,
            Pattern::Strided { stride } => {
                let x = self.done * stride.max(8);
                (x + (x / len) * 64) % len
            }
            Pattern::Uniform => (self.next_u64() % (len / 8)) * 8,
            Pattern::Permutation => {
                let words = len / 8;
                let pass = self.done / words;
                let key = crate::rng::splitmix64(a.seed ^ pass.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                permute(self.done % words, words, key) * 8
            }
            Pattern::Normal { sigma_pages } => {
                let pages = len.div_ceil(4096);
                let mid = (pages / 2) as f64;
                let page = loop {
                    // A range far narrower than the spread rejects almost
                    // every draw: a stopped run leaves the loop.
                    if crate::interrupt::requested() {
                        break 0;
                    }
                    // Box-Muller.
                    let (u1, u2) = (self.unit().max(f64::MIN_POSITIVE), self.unit());
                    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                    let p = (mid + z * sigma_pages).round();
                    if p >= 0.0 && (p as u64) < pages {
                        break p as u64;
                    }
                };
                (page * 4096 + (self.next_u64() % 512) * 8) % len
            }
            Pattern::Zipf { .. } => {
                let z = *self.zipf.as_deref().expect("a Zipf run has its sampler");
                let page = z.sample(|| self.unit()) - 1;
                (page * 4096 + (self.next_u64() % 512) * 8) % len
            }
        };
        let write = match a.write_permille {
            0 => false,
            w if w >= 1000 => true,
            w => self.next_u64() % 1000 < w as u64,
        };
        (a.start + off, write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn histogram_buckets_are_log2() {
        let mut h = LatencyHist::default();
        for c in [0, 1, 2, 3, 4, 250, 256] {
            h.record(c);
        }
        assert_eq!(&h.buckets[..9], &[2, 2, 1, 0, 0, 0, 0, 1, 1]);
        assert_eq!(h.count(), 7);
        assert_eq!(h.percentile(50.0), 3);
        // 256 is in the first eighth of [256, 512).
        assert_eq!(h.percentile(100.0), 287);
    }

    #[test]
    fn patterns_stay_in_range_and_are_seeded() {
        let a = Access {
            start: 1 << 30,
            len: 8 << 20,
            pattern: Pattern::Uniform,
            count: 1000,
            write_permille: 250,
            instr_per_access: 4,
            dependent: true,
            seed: 5,
            until_ns: None,
        };
        for pattern in [
            Pattern::Sequential,
            Pattern::Strided { stride: 4096 },
            Pattern::Uniform,
            Pattern::Permutation,
            Pattern::Normal { sigma_pages: 100.0 },
            Pattern::Zipf { s: 0.99 },
        ] {
            let mut r = AccessRun::new(Access { pattern, ..a });
            let mut again = AccessRun::new(Access { pattern, ..a });
            let mut writes = 0;
            for _ in 0..1000 {
                let (va, w) = r.next_access();
                assert!(
                    va >= a.start && va < a.start + a.len && va % 8 == 0,
                    "{pattern:?} {va:#x}"
                );
                assert_eq!((va, w), again.next_access());
                writes += w as u32;
                r.done += 1;
                again.done += 1;
            }
            assert!(
                (150..350).contains(&writes),
                "{pattern:?}: {writes} writes of 1000 at 25%"
            );
        }
        // Normal: most accesses fall within two sigmas of the middle page.
        let mut r = AccessRun::new(Access {
            pattern: Pattern::Normal { sigma_pages: 50.0 },
            write_permille: 0,
            ..a
        });
        let mid = (a.len / 4096 / 2) as f64;
        let near = (0..1000)
            .filter(|_| ((((r.next_access().0 - a.start) >> 12) as f64) - mid).abs() <= 100.0)
            .count();
        assert!(near > 900, "{near}");
    }

    /// The sampler against the exact Zipf probabilities over a small range:
    /// each value's share of 200 000 draws within 4 standard errors of
    /// `(1/k^s) / H(n,s)`, for exponents below, at and above 1.
    #[test]
    fn zipf_matches_its_probabilities() {
        for s in [0.5, 0.99, 1.0, 1.5] {
            let n = 20u64;
            let z = Zipf::new(n, s);
            let mut rng = 7u64;
            let draws = 200_000;
            let mut counts = vec![0u64; n as usize];
            for _ in 0..draws {
                let k =
                    z.sample(|| (crate::rng::next(&mut rng) >> 11) as f64 / (1u64 << 53) as f64);
                assert!((1..=n).contains(&k));
                counts[(k - 1) as usize] += 1;
            }
            let hn: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
            for k in 1..=n {
                let p = (k as f64).powf(-s) / hn;
                let got = counts[(k - 1) as usize] as f64 / draws as f64;
                let se = (p * (1.0 - p) / draws as f64).sqrt();
                assert!(
                    (got - p).abs() < 4.0 * se + 1e-9,
                    "s={s} k={k}: {got} vs {p}"
                );
            }
        }
    }
}

#[cfg(test)]
mod latency_tests {
    use super::LatencyHist;

    /// Against the exact percentile of the sorted values: never below it,
    /// and above it by at most an eighth (a cycle below 8), for values from
    /// 0 to a few million cycles; the log2 buckets still count each power.
    #[test]
    fn percentiles_are_within_an_eighth_of_the_exact_ones() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for round in 0..50 {
            let mut h = LatencyHist::default();
            let mut vals = Vec::new();
            let n = 1 + round * 37;
            for _ in 0..n {
                x = crate::rng::splitmix64(x);
                let v = (x >> 11) % (1 << (x % 23));
                h.record(v);
                vals.push(v);
            }
            vals.sort_unstable();
            for p in [1.0, 25.0, 50.0, 90.0, 99.0, 100.0] {
                let want = ((n as f64) * p / 100.0).ceil().max(1.0) as usize;
                let exact = vals[want - 1].max(1);
                let got = h.percentile(p);
                assert!(
                    got >= exact && got <= exact + exact / 8 + 1,
                    "p{p}: {got} for {exact}"
                );
            }
            let mut log2 = [0u64; 32];
            for &v in &vals {
                log2[(63 - (v | 1).leading_zeros()).min(31) as usize] += 1;
            }
            assert_eq!(h.buckets, log2);
        }
    }

    /// Latencies spread over 100 to 199 cycles: the median and the 99th
    /// percentile differ (one power-of-two bucket held both).
    #[test]
    fn a_spread_within_a_power_of_two_has_distinct_percentiles() {
        let mut h = LatencyHist::default();
        for v in 100..200 {
            h.record(v);
        }
        assert_eq!(h.percentile(50.0), 159);
        assert_eq!(h.percentile(99.0), 207);
    }
}

#[cfg(test)]
mod permutation_tests {
    use super::*;

    /// `permute` is a bijection of `0..n` for every size, and two keys give
    /// two orders.
    #[test]
    fn permute_is_a_bijection() {
        for n in (1..=300).chain([1023, 1024, 1025, 65_537]) {
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let p = permute(i, n, 7) as usize;
                assert!(p < n as usize && !seen[p], "n {n}: {i} -> {p}");
                seen[p] = true;
            }
        }
        let a: Vec<u64> = (0..1000).map(|i| permute(i, 1000, 1)).collect();
        let b: Vec<u64> = (0..1000).map(|i| permute(i, 1000, 2)).collect();
        assert_ne!(a, b);
    }

    /// Each pass over a range touches every word once, in an order of its
    /// own: a uniform draw without replacement.
    #[test]
    fn each_pass_touches_every_word_once() {
        let a = Access {
            start: 1 << 30,
            len: 4096 * 3,
            pattern: Pattern::Permutation,
            count: 3 * 1536,
            write_permille: 0,
            instr_per_access: 1,
            dependent: false,
            seed: 11,
            until_ns: None,
        };
        let mut r = AccessRun::new(a);
        let mut orders = Vec::new();
        for _ in 0..3 {
            let mut order = Vec::new();
            for _ in 0..1536 {
                order.push((r.next_access().0 - a.start) / 8);
                r.done += 1;
            }
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..1536).collect::<Vec<u64>>());
            orders.push(order);
        }
        assert_ne!(orders[0], orders[1]);
        assert_ne!(orders[0], (0..1536).collect::<Vec<u64>>());
    }
}
