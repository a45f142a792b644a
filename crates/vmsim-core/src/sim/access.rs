//! The access engine: runs a task's `Op::Access` (kernel/uapi.rs) — `count`
//! word accesses over a range in a pattern (sequential, strided, uniform or
//! normal over pages; seeded), a read/write mix, the workload's own
//! instruction cost per access, dependent or not. Each access walks the page
//! table when it leaves the page it is on (setting accessed/dirty bits),
//! goes through the TLB (checked against the page table), takes a fault
//! where the entry does not allow it (the fault's work runs, then the same
//! access is retried), and is one line access to the machine. Per task it
//! counts reads and writes and keeps a log2 histogram of access latencies
//! (cycles from issue to the core moving on: the full miss latency for a
//! dependent access, the issue and any stall otherwise).
//!
//! The hardware model treats every load that is not part of a sequential
//! stream as dependent, so independent random loads are timed as dependent
//! ones. A read of a never-touched anonymous page allocates and zeroes a
//! page (the shared zero page is not modelled).

use super::translate::Xlate;
use super::*;
use crate::kernel::uapi::{Access, Pattern};
use serde::Serialize;

/// Log2 histogram of access latencies: bucket `i` counts accesses of
/// `[2^i, 2^(i+1))` cycles (bucket 0 also counts 0).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LatencyHist {
    pub buckets: [u64; 32],
}

impl LatencyHist {
    #[inline]
    pub fn record(&mut self, cycles: u64) {
        let b = (63 - (cycles | 1).leading_zeros()).min(31) as usize;
        self.buckets[b] += 1;
    }
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
    /// The upper bound (cycles) of the bucket holding the `p`-th percentile.
    pub fn percentile(&self, p: f64) -> u64 {
        let n = self.count();
        let want = ((n as f64) * p / 100.0).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= want {
                return (2u64 << i) - 1;
            }
        }
        0
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
const NONE: u64 = u64::MAX;

/// Progress of an `Access` run.
#[derive(Clone, Debug)]
pub(crate) struct AccessRun {
    a: Access,
    done: u64,
    rng: u64,
    /// The access being made (kept across a fault so it is retried):
    /// its address (`NONE` when there is none) and kind. Two fields rather
    /// than an `Option`: a run is moved in and out of its task every
    /// quantum, so its size is on the hot path.
    pending_va: u64,
    pending_write: bool,
    page: u64,
    pfn: u64,
    gen: u64,
    writable: bool,
    /// The cycle at which a timed run stops (set when it starts).
    until: Option<u64>,
    /// The Zipf pattern's sampler over the range's pages (boxed: a run is
    /// moved in and out of its task every quantum, and most runs have none).
    zipf: Option<Box<Zipf>>,
}

/// Rejection-inversion sampling of a Zipf distribution over `1..=n` with
/// exponent `s` (W. Hörmann, G. Derflinger, "Rejection-inversion to generate
/// variates from monotone discrete distributions", ACM TOMACS 6(3), 1996; the
/// form of Apache Commons RNG's `RejectionInversionZipfSampler`): constant
/// time per draw whatever `n`, no table, so a range of any size costs nothing
/// to set up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    cut: f64,
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
    fn next_access(&mut self) -> (u64, bool) {
        let a = self.a;
        let len = a.len.max(8);
        let off = match a.pattern {
            Pattern::Sequential => (self.done * 8) % len,
            Pattern::Strided { stride } => {
                let x = self.done * stride.max(8);
                (x + (x / len) * 64) % len
            }
            Pattern::Uniform => (self.next_u64() % (len / 8)) * 8,
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

impl Sim {
    pub(crate) fn exec_access(&mut self, cpu: usize, t: usize, deadline: u64, mut r: AccessRun) {
        let mm = self.tasks[t].user_mm();
        let asid = self.kernel.mms[mm].asid;
        let issue =
            r.a.instr_per_access
                .div_ceil(self.machine.issue_width)
                .max(1);
        let stream = r.a.pattern == Pattern::Sequential && !r.a.dependent;
        if r.until.is_none() {
            let now = self.machine.cpus[cpu].clock;
            r.until = Some(
                r.a.until_ns
                    .map_or(u64::MAX, |ns| now + ns * self.machine.freq_mhz / 1000),
            );
        }
        let until = r.until.unwrap_or(u64::MAX);
        while r.done < r.a.count && self.machine.cpus[cpu].clock < deadline {
            if self.machine.cpus[cpu].clock >= until {
                r.done = r.a.count;
                break;
            }
            let (va, write) = if r.pending_va != NONE {
                (r.pending_va, r.pending_write)
            } else {
                let (va, write) = r.next_access();
                (r.pending_va, r.pending_write) = (va, write);
                (va, write)
            };
            let vpage = va >> 12;
            if vpage != r.page || r.gen != self.kernel.mms[mm].generation || (write && !r.writable)
            {
                if self.win_part.is_some() && vpage != r.page && !write && self.is_file_page(mm, va)
                {
                    // The reader's check of a file page reads the page cache: not in phase 1.
                    self.tasks[t].cur = Some(Cur::Access(r));
                    self.parked = Some(window::Park::FilePage);
                    return;
                }
                match self.translate(cpu, t, mm, asid, va, write) {
                    Xlate::Stale => return,
                    Xlate::Mapped(tr) => {
                        if vpage != r.page && !write {
                            self.check_file_page(t, mm, va, tr.pfn);
                        }
                        (r.pfn, r.page, r.gen, r.writable) =
                            (tr.pfn, vpage, self.kernel.mms[mm].generation, tr.writable);
                    }
                    Xlate::Fault => {
                        r.page = u64::MAX;
                        self.tasks[t].cur = Some(Cur::Access(r));
                        if self.win_part.is_some() {
                            self.parked = Some(window::Park::Fault);
                            return;
                        }
                        self.fault(cpu, t, va, write);
                        return;
                    }
                }
            }
            let lip = (va >> 6) & 63;
            if self.win_part.is_some() && !self.machine.is_local(cpu, (r.pfn << 6) | lip) {
                self.tasks[t].cur = Some(Cur::Access(r));
                self.parked = Some(window::Park::RemoteLine);
                return;
            }
            let t0 = self.machine.cpus[cpu].clock;
            let kind = if write {
                AccessKind::Store
            } else {
                AccessKind::Load
            };
            self.machine
                .access(cpu, (r.pfn << 6) | lip, kind, stream, issue);
            self.machine.advance(cpu, 0, r.a.instr_per_access);
            let st = &mut self.tasks[t].access;
            st.latency.record(self.machine.cpus[cpu].clock - t0);
            if write {
                st.writes += 1;
                let v = store_value(r.a.seed, vpage);
                self.kernel.mem.alloc.store_line(r.pfn, lip, v);
                self.kernel.mms[mm].shadow_store(va, lip, v);
            } else {
                st.reads += 1;
            }
            self.tasks[t].bytes += 8;
            r.done += 1;
            r.pending_va = NONE;
        }
        if r.done < r.a.count {
            self.tasks[t].cur = Some(Cur::Access(r));
        }
    }
}

impl Sim {
    /// Whether `va` lies in a file mapping of `mm`.
    fn is_file_page(&self, mm: usize, va: u64) -> bool {
        self.kernel.mms[mm]
            .find_vma(va)
            .is_some_and(|v| matches!(v.kind, crate::kernel::mm::VmaKind::FileShared { .. }))
    }

    /// The reader's check of a page of a file mapping as it starts reading
    /// it: the frame must be the page cache's folio for (file, index) and
    /// hold that page's content (`file_page_tag`). Untimed bookkeeping.
    fn check_file_page(&mut self, t: usize, mm: usize, va: u64, pfn: u64) {
        let Some(vma) = self.kernel.mms[mm].find_vma(va) else {
            return;
        };
        let crate::kernel::mm::VmaKind::FileShared { ino, pgoff } = vma.kind else {
            return;
        };
        let index = pgoff + ((va - vma.start) >> 12);
        let want = crate::kernel::filemap::file_page_tag(ino, index);
        let cached = self.kernel.find_get_page(ino, index);
        let got = self.kernel.mem.alloc.tag(pfn);
        let task = &mut self.tasks[t];
        task.pages_checked += 1;
        if cached != Some(pfn) || got != want {
            task.bad_pages += 1;
            if task.first_bad.is_none() {
                task.first_bad = Some(format!(
                    "file {ino} page {index} at {va:#x}: frame {pfn:#x} with tag {got:#018x}; the page cache holds {cached:?}, the file reads {want:#018x}"
                ));
            }
        }
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
        assert_eq!(h.percentile(100.0), 511);
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
