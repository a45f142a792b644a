//! Hardware data prefetchers of one core: what they watch and which lines they
//! ask for. Issuing a request (taking a fill buffer or a superqueue entry,
//! reserving DRAM bandwidth, filling the caches) is the machine's job; this
//! module only trains and proposes.
//!
//! Two prefetchers, as the vendors describe them:
//! - the L1 next-line prefetcher (Intel "DCU prefetcher", AMD "L1 stream"):
//!   a load that ascends from the line last loaded (the same line again, or
//!   the next one) asks for the following line, within the 4 KiB page. Stores
//!   do not train it (Intel Optimization Reference Manual: it is triggered by
//!   loads, not by "a continuous stream of stores");
//! - the L2 streamer: it watches the L2 lookups that L1 misses and L1
//!   prefetches make, keeps up to `streams` streams, one per 4 KiB page, each
//!   with a direction learnt from two lookups, and on each lookup of a trained
//!   stream proposes up to `degree` lines ahead of it, never more than
//!   `distance` lines ahead of the lookup and, unless the chip continues
//!   streams across pages (`cross_page`), never outside its page.
//!
//! Crossing pages: the lines are physical, so the page after a stream's page
//! in its direction is the physically contiguous one. Where the preset says
//! the chip does (AMD: measured on a Zen 4 host, docs/store-path.md), the
//! streamer proposes lines there too, and a lookup in that page takes the
//! stream over, trained, instead of starting an untrained one. Intel's L2
//! streamer does not ("prefetched cache lines must be in the same 4K page").
//!
//! Invariants: every proposed line is in the page of the lookup that
//! proposed it or, with `cross_page`, in the next page in the stream's
//! direction; a stream's frontier only moves in its direction; the state
//! depends only on the sequence of lookups (no time, no randomness).

/// A core's prefetchers as a preset describes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefetchParams {
    /// L1 next-line prefetcher present and enabled.
    pub l1_next_line: bool,
    /// L2 streamer present and enabled.
    pub l2_streamer: bool,
    /// Streams the L2 streamer tracks at once.
    pub l2_streams: usize,
    /// Furthest a prefetch may run ahead of the lookup that proposed it, in lines.
    pub l2_distance_lines: u64,
    /// Prefetches proposed per L2 lookup.
    pub l2_degree: u64,
    /// The L2 streamer continues a trained stream into the next 4 KiB page
    /// (physically contiguous) in its direction.
    pub l2_cross_page: bool,
}

impl PrefetchParams {
    /// No prefetcher at all.
    pub fn off() -> PrefetchParams {
        PrefetchParams {
            l1_next_line: false,
            l2_streamer: false,
            l2_streams: 0,
            l2_distance_lines: 0,
            l2_degree: 0,
            l2_cross_page: false,
        }
    }
}

/// No stream (the ends of the streamer's recency list).
const NONE: usize = usize::MAX;

/// Lines per 4 KiB page: the L1 prefetcher never crosses one, the L2 streamer
/// only where the preset says so (`cross_page`).
const PAGE_LINES: u64 = 64;

#[inline]
fn page(line: u64) -> u64 {
    line / PAGE_LINES
}

/// The L1 next-line prefetcher's state.
#[derive(Clone, Debug, Default)]
pub struct NextLine {
    last_load: Option<u64>,
}

impl NextLine {
    /// A load of `line`: the line to prefetch into L1, if the load ascends
    /// from the last one and the next line is in the same page.
    #[inline]
    pub fn on_load(&mut self, line: u64) -> Option<u64> {
        let ascending = matches!(self.last_load, Some(l) if line == l || line == l + 1);
        self.last_load = Some(line);
        let next = line + 1;
        (ascending && page(next) == page(line)).then_some(next)
    }
}

#[derive(Clone, Copy, Debug)]
struct Stream {
    last: u64,
    /// +1 ascending, -1 descending, 0 not yet trained.
    dir: i64,
    /// The furthest line proposed so far (or the last lookup, if further).
    front: u64,
    /// Lookup count at the stream's last use, for replacing the least recent.
    used: u64,
}

/// The L2 streamer's state.
#[derive(Clone, Debug)]
pub struct Streamer {
    streams: Vec<Stream>,
    /// The page of each stream, apart: the search for a lookup's stream
    /// reads this compact array, not the streams.
    pages: Vec<u64>,
    cap: usize,
    distance: u64,
    degree: u64,
    /// A stream may continue into the next page in its direction.
    cross_page: bool,
    clock: u64,
    /// The streams from the most to the least recently used, as a list
    /// threaded through `newer` / `older` (indices; [`NONE`] at the ends):
    /// the least recent, which a new stream replaces, is `oldest`, the
    /// stream of least `used` (lookup counts are unique), without a scan.
    newer: Vec<usize>,
    older: Vec<usize>,
    newest: usize,
    oldest: usize,
    /// The stream the last lookup found or allocated: a stream's page is
    /// unique among the streams, so when it matches it is the one a search
    /// would find (most lookups stay in the page of the one before).
    recent: usize,
}

impl Streamer {
    pub fn new(p: &PrefetchParams) -> Streamer {
        Streamer {
            streams: Vec::with_capacity(p.l2_streams),
            pages: Vec::with_capacity(p.l2_streams),
            cap: if p.l2_streamer { p.l2_streams } else { 0 },
            distance: p.l2_distance_lines,
            degree: p.l2_degree,
            cross_page: p.l2_cross_page,
            clock: 0,
            newer: Vec::with_capacity(p.l2_streams),
            older: Vec::with_capacity(p.l2_streams),
            newest: NONE,
            oldest: NONE,
            recent: 0,
        }
    }

    /// Puts stream `i` (not in the recency list) at its most recent end.
    #[inline(always)]
    fn link_newest(&mut self, i: usize) {
        self.newer[i] = NONE;
        self.older[i] = self.newest;
        if self.newest == NONE {
            self.oldest = i;
        } else {
            self.newer[self.newest] = i;
        }
        self.newest = i;
    }

    /// Stream `i` was just used: it becomes the most recent.
    #[inline(always)]
    fn touch(&mut self, i: usize) {
        if self.newest != i {
            self.make_newest(i);
        }
    }

    /// [`Streamer::touch`] of a stream that is not the newest.
    #[inline(never)]
    fn make_newest(&mut self, i: usize) {
        // Not the newest: there is a newer stream.
        let (n, o) = (self.newer[i], self.older[i]);
        self.older[n] = o;
        if o == NONE {
            self.oldest = n;
        } else {
            self.newer[o] = n;
        }
        self.link_newest(i);
    }

    /// An L2 lookup of `line`: trains the stream of its page and returns the
    /// stream's index if it is trained (then [`Streamer::next`] proposes).
    #[inline]
    pub fn on_lookup(&mut self, line: u64) -> Option<usize> {
        if self.cap == 0 {
            return None;
        }
        self.clock += 1;
        let pg = page(line);
        let found = match self.pages.get(self.recent) {
            Some(&p) if p == pg => Some(self.recent),
            _ => find_page(&self.pages, pg),
        };
        let found = match found {
            None if self.cross_page => self.continued_into(pg),
            f => f,
        };
        let Some(i) = found else {
            let s = Stream {
                last: line,
                dir: 0,
                front: line,
                used: self.clock,
            };
            if self.streams.len() < self.cap {
                let i = self.streams.len();
                self.recent = i;
                self.streams.push(s);
                self.pages.push(pg);
                self.newer.push(NONE);
                self.older.push(NONE);
                self.link_newest(i);
            } else {
                let lru = self.oldest;
                debug_assert_eq!(
                    Some(lru),
                    (0..self.streams.len()).min_by_key(|&i| self.streams[i].used)
                );
                self.streams[lru] = s;
                self.pages[lru] = pg;
                self.recent = lru;
                self.touch(lru);
            }
            return None;
        };
        self.recent = i;
        self.touch(i);
        let s = &mut self.streams[i];
        s.used = self.clock;
        let dir = match line.cmp(&s.last) {
            std::cmp::Ordering::Greater => 1,
            std::cmp::Ordering::Less => -1,
            std::cmp::Ordering::Equal => s.dir,
        };
        if dir != s.dir {
            // First direction, or a reversal: start again from this lookup.
            s.dir = dir;
            s.front = line;
        }
        s.last = line;
        if s.dir == 0 {
            return None;
        }
        // The frontier never lags the lookup.
        if (s.dir > 0 && s.front < line) || (s.dir < 0 && s.front > line) {
            s.front = line;
        }
        Some(i)
    }

    /// The `k`-th proposal (k < degree) of stream `i` after a lookup of
    /// `line`: the line after the stream's frontier, if it is within the
    /// distance and the page. The caller calls [`Streamer::advance`] once the
    /// line is requested (or found present); a proposal not taken (no free
    /// resource) is proposed again on a later lookup.
    #[inline]
    pub fn next(&self, i: usize, line: u64, k: u64) -> Option<u64> {
        if k >= self.degree {
            return None;
        }
        let s = &self.streams[i];
        let cand = s.front.checked_add_signed(s.dir)?;
        let ahead = cand.abs_diff(line);
        // The distance (at most 63 lines) keeps a crossing stream within the next page.
        ((self.cross_page || page(cand) == self.pages[i]) && ahead <= self.distance).then_some(cand)
    }

    #[inline]
    pub fn advance(&mut self, i: usize, to: u64) {
        self.streams[i].front = to;
    }

    /// The stream of the page before `pg` in its own direction (the page
    /// below an ascending stream, above a descending one), moved to `pg`:
    /// the lookup continues it, trained, where it had been prefetching.
    #[cold]
    fn continued_into(&mut self, pg: u64) -> Option<usize> {
        let from = |prev: Option<u64>, dir: i64, s: &Self| {
            prev.and_then(|p| find_page(&s.pages, p))
                .filter(|&j| s.streams[j].dir == dir)
        };
        let j = from(pg.checked_sub(1), 1, self).or_else(|| from(pg.checked_add(1), -1, self))?;
        self.pages[j] = pg;
        Some(j)
    }
}

/// Index of the stream of page `pg`, if any (pages are unique). Compares
/// eight pages at a time without a branch per page: a lookup outside the
/// last one's page searches, and one that starts a stream searches them all.
#[inline(always)]
fn find_page(pages: &[u64], pg: u64) -> Option<usize> {
    let mut chunks = pages.chunks_exact(8);
    let mut base = 0;
    for c in &mut chunks {
        let mut m = 0u32;
        for (i, &p) in c.iter().enumerate() {
            m |= ((p == pg) as u32) << i;
        }
        if m != 0 {
            return Some(base + m.trailing_zeros() as usize);
        }
        base += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&p| p == pg)
        .map(|i| base + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> PrefetchParams {
        PrefetchParams {
            l1_next_line: true,
            l2_streamer: true,
            l2_streams: 4,
            l2_distance_lines: 20,
            l2_degree: 2,
            l2_cross_page: false,
        }
    }

    fn crossing() -> PrefetchParams {
        PrefetchParams {
            l2_cross_page: true,
            ..params()
        }
    }

    /// Runs lookups, taking every proposal; returns the lines proposed.
    fn run(s: &mut Streamer, lines: impl IntoIterator<Item = u64>) -> Vec<u64> {
        let mut out = Vec::new();
        for l in lines {
            if let Some(i) = s.on_lookup(l) {
                let mut k = 0;
                while let Some(c) = s.next(i, l, k) {
                    s.advance(i, c);
                    out.push(c);
                    k += 1;
                }
            }
        }
        out
    }

    #[test]
    fn an_ascending_stream_runs_ahead_up_to_the_distance() {
        let mut s = Streamer::new(&params());
        let base = 64 * 10;
        // The first lookup allocates; the second trains and proposes two lines.
        assert_eq!(run(&mut s, [base]), Vec::<u64>::new());
        assert_eq!(run(&mut s, [base + 1]), vec![base + 2, base + 3]);
        // Two per lookup while demand moves by one: the lead grows to the distance.
        let got = run(&mut s, base + 2..base + 30);
        let lead = got.last().unwrap() - (base + 29);
        assert_eq!(lead, 20);
    }

    #[test]
    fn proposals_never_leave_the_page() {
        let mut s = Streamer::new(&params());
        let base = 64 * 7;
        let up = run(&mut s, base..base + 64);
        assert!(up.iter().all(|&l| page(l) == 7), "{up:?}");
        assert_eq!(*up.last().unwrap(), base + 63);
        let mut s = Streamer::new(&params());
        let down = run(&mut s, (base..base + 64).rev());
        assert!(down.iter().all(|&l| page(l) == 7), "{down:?}");
        assert_eq!(*down.last().unwrap(), base);
    }

    #[test]
    fn a_crossing_stream_runs_into_the_next_page_and_continues_there_trained() {
        let mut s = Streamer::new(&crossing());
        let base = 64 * 10;
        let got = run(&mut s, base..base + 64);
        // At the page's last line the stream is the full distance into page 11.
        assert_eq!(*got.last().unwrap(), base + 63 + 20);
        assert!(got.iter().all(|&l| page(l) == 10 || page(l) == 11));
        // The first lookup in page 11 continues the stream (no training, no new
        // stream): the frontier is 20 ahead already, one more line fits the distance.
        assert_eq!(run(&mut s, [base + 64]), vec![base + 84]);
        assert_eq!(s.streams.len(), 1);
        assert_eq!(s.pages, vec![11]);
        // Without crossing, the same lookups stop at the page and start afresh.
        let mut s = Streamer::new(&params());
        assert_eq!(*run(&mut s, base..base + 64).last().unwrap(), base + 63);
        assert_eq!(run(&mut s, [base + 64]), Vec::<u64>::new());
        assert_eq!(s.streams.len(), 2);
    }

    #[test]
    fn a_crossing_stream_continues_only_in_its_own_direction() {
        let base = 64 * 10;
        // Descending within the page: it continues into the page below.
        let mut s = Streamer::new(&crossing());
        let got = run(&mut s, (base..base + 64).rev());
        assert_eq!(*got.last().unwrap(), base - 20);
        assert_eq!(run(&mut s, [base - 1]), vec![base - 21]);
        assert_eq!(s.streams.len(), 1);
        // Ascending within each page, pages descending (process_huge_page's tail):
        // the page below is not where an ascending stream goes, so each page trains
        // a stream of its own, and its proposals beyond the page find the page above
        // (already cleared).
        let mut s = Streamer::new(&crossing());
        run(&mut s, base..base + 64);
        assert_eq!(run(&mut s, [base - 64]), Vec::<u64>::new());
        assert_eq!(s.streams.len(), 2);
        assert_eq!(run(&mut s, [base - 63]), vec![base - 62, base - 61]);
    }

    proptest::proptest! {
        /// A crossing streamer proposes within the distance, in the lookup's page
        /// or the next one in the stream's direction.
        #[test]
        fn crossing_proposals_stay_within_the_distance_and_the_next_page(
            lines in proptest::collection::vec(0u64..64 * 8, 0..400),
        ) {
            let mut s = Streamer::new(&crossing());
            for l in lines {
                for p in run(&mut s, [l]) {
                    proptest::prop_assert!(p.abs_diff(l) <= 20);
                    proptest::prop_assert!(page(p).abs_diff(page(l)) <= 1);
                }
            }
        }
    }

    #[test]
    fn random_lookups_in_distinct_pages_propose_nothing() {
        let mut s = Streamer::new(&params());
        let mut x = 12345u64;
        let lines = (0..1000).map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            (x >> 20) % (1 << 30)
        });
        // Four streams among a billion lines' pages: pairs in one page are rare.
        assert!(run(&mut s, lines).len() < 10);
    }

    proptest::proptest! {
        /// Trying the last lookup's stream first finds what the search finds.
        #[test]
        fn the_recent_stream_shortcut_changes_nothing(
            lines in proptest::collection::vec(0u64..64 * 40, 0..400),
        ) {
            let (mut a, mut b) = (Streamer::new(&params()), Streamer::new(&params()));
            for l in lines {
                b.recent = usize::MAX; // no shortcut: always the search
                let (x, y) = (run(&mut a, [l]), run(&mut b, [l]));
                proptest::prop_assert_eq!(x, y);
            }
        }
    }

    proptest::proptest! {
        /// The chunked page search finds what a scan finds.
        #[test]
        fn find_page_matches_a_scan(
            pages in proptest::collection::btree_set(0u64..80, 0..40),
            pg in 0u64..80,
        ) {
            let pages: Vec<u64> = pages.into_iter().rev().collect();
            proptest::prop_assert_eq!(find_page(&pages, pg), pages.iter().position(|&p| p == pg));
        }
    }

    #[test]
    fn next_line_needs_an_ascending_load_in_the_page() {
        let mut n = NextLine::default();
        assert_eq!(n.on_load(100), None);
        assert_eq!(n.on_load(101), Some(102));
        assert_eq!(n.on_load(101), Some(102));
        assert_eq!(n.on_load(50), None);
        assert_eq!(n.on_load(63), None);
        // 63 -> 64 ascends, but 65 is in the same page as 64 only.
        assert_eq!(n.on_load(64), Some(65));
        assert_eq!(n.on_load(127), None);
        assert_eq!(n.on_load(127), None, "the next line is in another page");
    }
}
