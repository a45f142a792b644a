//! Per-hardware-thread TLB: first-level TLBs split by page size (4 KiB,
//! 2 MiB, 1 GiB) and a unified second-level TLB (STLB), each
//! set-associative with LRU replacement.
//!
//! # What it owns
//!
//! Each structure holds entries tagged by (address-space id, virtual page
//! number, page size), stored flat as struct-of-arrays indexed by
//! `set * ways + way`; the set is `vpn % sets`, where `vpn = vaddr >>
//! size.shift()`. The STLB always holds 4 KiB translations, 2 MiB ones when
//! [`TlbConfig::stlb_holds_2m`] says so, and never 1 GiB ones. A structure
//! configured with 0 entries or 0 ways is absent: it never hits and a fill
//! ignores it.
//!
//! The TLB caches translations: each entry keeps the frame number the
//! caller's page walk found for it ([`Tlb::fill_pfn`]) and a hit returns it
//! ([`Tlb::lookup_pfn`]), so the caller can check a hit against its page
//! tables and catch a missing flush. It knows nothing of page tables itself.
//!
//! With [`TlbConfig::stlb_holds_pde`] the STLB also holds page-directory
//! entries, as AMD's L2 TLB does (one per 2 MiB of address space that a
//! walk of a 4 KiB page went through, tagged apart from 2 MiB
//! translations): a walk whose PDE is there skips loading it
//! ([`Tlb::pde_hit`], [`Tlb::pde_fill`]), and PDEs and translations evict
//! each other. Without it no upper-level entry is ever missed (Intel's
//! separate paging-structure caches, whose sizes are not published).
//!
//! # Invariants
//!
//! * A (asid, vpn, size) tag is in at most one way of a structure, always in
//!   its own set.
//! * L1 and STLB are neither inclusive nor exclusive: a fill installs in
//!   both, an STLB hit refills the L1, and each evicts on its own.
//! * Within a set, the victim is the lowest-numbered invalid way, else the
//!   least recently used way (stamps from one counter per TLB).
//! * Deterministic: no randomness and no hashing.

use super::cache::INVALID;

/// Page size of a translation.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum PageSize {
    Size4K,
    Size2M,
    Size1G,
}

impl PageSize {
    /// All sizes, smallest first.
    pub const ALL: [PageSize; 3] = [PageSize::Size4K, PageSize::Size2M, PageSize::Size1G];

    /// log2 of the page size in bytes: 12, 21 or 30.
    #[inline]
    pub const fn shift(self) -> u32 {
        match self {
            PageSize::Size4K => 12,
            PageSize::Size2M => 21,
            PageSize::Size1G => 30,
        }
    }

    /// Page size in bytes.
    #[inline]
    pub const fn bytes(self) -> u64 {
        1 << self.shift()
    }

    #[inline(always)]
    const fn index(self) -> usize {
        self as usize
    }
}

/// TLB shape: each structure is `(entries, ways)`; `(0, 0)` means absent.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TlbConfig {
    pub l1_4k: (u32, u32),
    pub l1_2m: (u32, u32),
    pub l1_1g: (u32, u32),
    pub stlb: (u32, u32),
    pub stlb_holds_2m: bool,
    /// The STLB also caches page-directory entries for walks (AMD).
    pub stlb_holds_pde: bool,
}

impl TlbConfig {
    /// Check that every structure is absent (`entries` or `ways` 0) or has
    /// a whole number of sets.
    pub fn validate(&self) -> Result<(), String> {
        for (name, (entries, ways)) in [
            ("l1_4k", self.l1_4k),
            ("l1_2m", self.l1_2m),
            ("l1_1g", self.l1_1g),
            ("stlb", self.stlb),
        ] {
            if entries != 0 && ways != 0 && entries % ways != 0 {
                return Err(format!(
                    "tlb.{name}: {entries} entries is not a multiple of {ways} ways"
                ));
            }
        }
        Ok(())
    }
}

/// Where a lookup hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TlbHit {
    L1,
    Stlb,
    Miss,
}

/// Event counters of one TLB.
#[derive(Default, Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TlbStats {
    pub lookups: u64,
    pub l1_hits: u64,
    pub stlb_hits: u64,
    pub misses: u64,
    pub flushes_full: u64,
    pub flushes_asid: u64,
    pub flushes_page: u64,
}

const VALID: u32 = 1 << 31;

/// Tag word besides the VPN: valid bit, size, ASID.
#[inline(always)]
fn key(asid: u16, size: PageSize) -> u32 {
    VALID | (size.index() as u32) << 16 | asid as u32
}

/// Tag word of a page-directory entry: a fourth kind besides the sizes,
/// its VPN that of the 2 MiB region the PDE maps.
#[inline(always)]
fn pde_key(asid: u16) -> u32 {
    VALID | 3 << 16 | asid as u32
}

/// One set-associative, LRU structure.
#[derive(Clone, Debug)]
struct TlbArray {
    sets: u64,
    /// `sets - 1` when `sets` is a power of two, else `u64::MAX`.
    mask: u64,
    ways: usize,
    vpn: Vec<u64>,
    key: Vec<u32>,
    stamp: Vec<u64>,
    /// The frame number each entry translates its page to.
    pfn: Vec<u64>,
}

impl TlbArray {
    fn new((entries, ways): (u32, u32)) -> TlbArray {
        if entries == 0 || ways == 0 {
            return TlbArray {
                sets: 0,
                mask: 0,
                ways: 0,
                vpn: vec![],
                key: vec![],
                stamp: vec![],
                pfn: vec![],
            };
        }
        assert!(
            entries % ways == 0,
            "TLB: {entries} entries is not a multiple of {ways} ways"
        );
        let sets = (entries / ways) as u64;
        let n = entries as usize;
        TlbArray {
            sets,
            mask: if sets.is_power_of_two() {
                sets - 1
            } else {
                u64::MAX
            },
            ways: ways as usize,
            vpn: vec![INVALID; n],
            key: vec![0; n],
            stamp: vec![0; n],
            pfn: vec![INVALID; n],
        }
    }

    #[inline(always)]
    fn base(&self, vpn: u64) -> usize {
        let set = if self.mask != u64::MAX {
            vpn & self.mask
        } else {
            vpn % self.sets
        };
        set as usize * self.ways
    }

    #[inline(always)]
    fn find(&self, vpn: u64, key: u32) -> Option<usize> {
        if self.ways == 0 {
            return None;
        }
        let base = self.base(vpn);
        (base..base + self.ways).find(|&s| self.vpn[s] == vpn && self.key[s] == key)
    }

    /// Install (or refresh) an entry, evicting the set's LRU entry if full.
    #[inline]
    fn insert(&mut self, vpn: u64, key: u32, now: u64, pfn: u64) {
        if self.ways == 0 {
            return;
        }
        let base = self.base(vpn);
        let mut victim = base;
        let mut oldest = u64::MAX;
        for s in base..base + self.ways {
            if self.key[s] == key && self.vpn[s] == vpn {
                victim = s;
                break;
            }
            // Invalid ways have stamp 0 and come first among equals.
            let age = if self.key[s] == 0 { 0 } else { self.stamp[s] };
            if age < oldest {
                oldest = age;
                victim = s;
            }
        }
        self.vpn[victim] = vpn;
        self.key[victim] = key;
        self.stamp[victim] = now;
        self.pfn[victim] = pfn;
    }

    #[inline]
    fn remove(&mut self, vpn: u64, key: u32) -> bool {
        match self.find(vpn, key) {
            Some(s) => {
                self.drop_slot(s);
                true
            }
            None => false,
        }
    }

    #[inline(always)]
    fn drop_slot(&mut self, s: usize) {
        self.vpn[s] = INVALID;
        self.key[s] = 0;
        self.stamp[s] = 0;
    }

    fn clear(&mut self) {
        self.vpn.fill(INVALID);
        self.key.fill(0);
        self.stamp.fill(0);
    }

    fn clear_asid(&mut self, asid: u16) {
        for s in 0..self.key.len() {
            if self.key[s] != 0 && self.key[s] as u16 == asid {
                self.drop_slot(s);
            }
        }
    }

    fn valid(&self) -> usize {
        self.key.iter().filter(|&&k| k != 0).count()
    }
}

/// The TLBs of one hardware thread. See the module documentation.
#[derive(Clone, Debug)]
pub struct Tlb {
    /// First-level TLBs indexed by [`PageSize`].
    l1: [TlbArray; 3],
    stlb: TlbArray,
    /// Which sizes the STLB holds, indexed by [`PageSize`].
    stlb_holds: [bool; 3],
    /// Whether the STLB holds page-directory entries.
    stlb_holds_pde: bool,
    clock: u64,
    stats: TlbStats,
}

impl Tlb {
    /// Build empty TLBs. A structure with 0 entries or 0 ways is absent.
    ///
    /// # Panics
    /// If a present structure's entries are not a multiple of its ways
    /// (check with [`TlbConfig::validate`] first).
    pub fn new(cfg: &TlbConfig) -> Tlb {
        Tlb {
            l1: [
                TlbArray::new(cfg.l1_4k),
                TlbArray::new(cfg.l1_2m),
                TlbArray::new(cfg.l1_1g),
            ],
            stlb: TlbArray::new(cfg.stlb),
            stlb_holds: [true, cfg.stlb_holds_2m, false],
            stlb_holds_pde: cfg.stlb_holds_pde,
            clock: 0,
            stats: TlbStats::default(),
        }
    }

    /// Translate: look up `vaddr`'s page of `size` for `asid` in the L1 TLB
    /// of that size, then in the STLB if it holds that size. An STLB hit
    /// refills the L1. Hits update LRU state; a miss changes no entry.
    #[inline]
    pub fn lookup(&mut self, asid: u16, vaddr: u64, size: PageSize) -> TlbHit {
        self.lookup_pfn(asid, vaddr, size).0
    }

    /// [`Tlb::lookup`], also returning the frame number a hit translates to.
    #[inline]
    pub fn lookup_pfn(&mut self, asid: u16, vaddr: u64, size: PageSize) -> (TlbHit, u64) {
        self.stats.lookups += 1;
        self.clock += 1;
        let (vpn, k, i) = (vaddr >> size.shift(), key(asid, size), size.index());
        if let Some(s) = self.l1[i].find(vpn, k) {
            self.l1[i].stamp[s] = self.clock;
            self.stats.l1_hits += 1;
            return (TlbHit::L1, self.l1[i].pfn[s]);
        }
        if self.stlb_holds[i] {
            if let Some(s) = self.stlb.find(vpn, k) {
                self.stlb.stamp[s] = self.clock;
                let pfn = self.stlb.pfn[s];
                self.l1[i].insert(vpn, k, self.clock, pfn);
                self.stats.stlb_hits += 1;
                return (TlbHit::Stlb, pfn);
            }
        }
        self.stats.misses += 1;
        (TlbHit::Miss, INVALID)
    }

    /// After a miss (the caller did the page walk): install the translation
    /// into the L1 TLB of that size and into the STLB if it holds that size.
    /// An entry already present is refreshed, never duplicated.
    #[inline]
    pub fn fill(&mut self, asid: u16, vaddr: u64, size: PageSize) {
        self.fill_pfn(asid, vaddr, size, INVALID)
    }

    /// [`Tlb::fill`] with the frame number the page translates to.
    #[inline]
    pub fn fill_pfn(&mut self, asid: u16, vaddr: u64, size: PageSize, pfn: u64) {
        self.clock += 1;
        let (vpn, k, i) = (vaddr >> size.shift(), key(asid, size), size.index());
        self.l1[i].insert(vpn, k, self.clock, pfn);
        if self.stlb_holds[i] {
            self.stlb.insert(vpn, k, self.clock, pfn);
        }
    }

    /// Whether a walk of `vaddr`'s 4 KiB page finds its page-directory
    /// entry cached: in the STLB if it holds PDEs (a hit refreshes it),
    /// always otherwise.
    #[inline]
    pub fn pde_hit(&mut self, asid: u16, vaddr: u64) -> bool {
        if !self.stlb_holds_pde {
            return true;
        }
        self.clock += 1;
        match self
            .stlb
            .find(vaddr >> PageSize::Size2M.shift(), pde_key(asid))
        {
            Some(s) => {
                self.stlb.stamp[s] = self.clock;
                true
            }
            None => false,
        }
    }

    /// After a walk that loaded `vaddr`'s page-directory entry: cache it in
    /// the STLB if it holds PDEs.
    #[inline]
    pub fn pde_fill(&mut self, asid: u16, vaddr: u64) {
        if self.stlb_holds_pde {
            self.clock += 1;
            let vpn = vaddr >> PageSize::Size2M.shift();
            self.stlb.insert(vpn, pde_key(asid), self.clock, INVALID);
        }
    }

    /// Drop every entry of every ASID (the model has no PCID-preserved or
    /// global entries).
    pub fn flush_all(&mut self) {
        self.stats.flushes_full += 1;
        self.l1.iter_mut().for_each(TlbArray::clear);
        self.stlb.clear();
    }

    /// Drop every entry of `asid`.
    pub fn flush_asid(&mut self, asid: u16) {
        self.stats.flushes_asid += 1;
        self.l1.iter_mut().for_each(|a| a.clear_asid(asid));
        self.stlb.clear_asid(asid);
    }

    /// INVLPG: drop any entry of `asid`, of any size, covering `vaddr`,
    /// and the page-directory entry on its way (AMD APM Vol. 3, INVLPG:
    /// the upper-level entries cached for the address go too). Returns
    /// true if a translation was dropped.
    pub fn flush_page(&mut self, asid: u16, vaddr: u64) -> bool {
        self.stats.flushes_page += 1;
        let mut dropped = false;
        for size in PageSize::ALL {
            let (vpn, k, i) = (vaddr >> size.shift(), key(asid, size), size.index());
            dropped |= self.l1[i].remove(vpn, k);
            if self.stlb_holds[i] {
                dropped |= self.stlb.remove(vpn, k);
            }
        }
        if self.stlb_holds_pde {
            self.stlb
                .remove(vaddr >> PageSize::Size2M.shift(), pde_key(asid));
        }
        dropped
    }

    /// Counters since construction.
    pub fn stats(&self) -> TlbStats {
        self.stats.clone()
    }

    /// Valid entries in the L1 TLBs (4K, 2M, 1G) and the STLB.
    pub fn occupancy(&self) -> ([usize; 3], usize) {
        (
            [self.l1[0].valid(), self.l1[1].valid(), self.l1[2].valid()],
            self.stlb.valid(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use PageSize::*;

    fn small() -> TlbConfig {
        TlbConfig {
            l1_4k: (8, 4),
            l1_2m: (4, 4),
            l1_1g: (2, 2),
            stlb: (16, 4),
            stlb_holds_2m: true,
            stlb_holds_pde: false,
        }
    }

    const K4: u64 = 1 << 12;
    const M2: u64 = 1 << 21;
    const G1: u64 = 1 << 30;

    #[test]
    fn page_size_shifts() {
        assert_eq!(
            [Size4K.shift(), Size2M.shift(), Size1G.shift()],
            [12, 21, 30]
        );
        assert_eq!(Size2M.bytes(), 2 << 20);
    }

    #[test]
    fn config_validation() {
        assert!(small().validate().is_ok());
        let mut c = small();
        c.stlb = (1536, 12);
        assert!(c.validate().is_ok());
        c.stlb = (100, 12);
        assert!(c.validate().unwrap_err().contains("stlb"));
        c.stlb = (0, 0);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn entries_keep_their_frame_number() {
        let mut t = Tlb::new(&small());
        t.fill_pfn(1, 4 * M2, Size2M, 777);
        assert_eq!(t.lookup_pfn(1, 4 * M2 + 9 * K4, Size2M), (TlbHit::L1, 777));
        t.fill_pfn(1, 4 * M2, Size2M, 778);
        assert_eq!(
            t.lookup_pfn(1, 4 * M2, Size2M),
            (TlbHit::L1, 778),
            "a refill replaces the frame"
        );
        assert_eq!(t.lookup_pfn(1, 6 * M2, Size2M).0, TlbHit::Miss);
    }

    #[test]
    fn hit_after_fill() {
        let mut t = Tlb::new(&small());
        assert_eq!(t.lookup(1, 0x1234_5678, Size4K), TlbHit::Miss);
        t.fill(1, 0x1234_5678, Size4K);
        assert_eq!(t.lookup(1, 0x1234_5000, Size4K), TlbHit::L1);
        assert_eq!(t.lookup(1, 0x1234_5fff, Size4K), TlbHit::L1);
        assert_eq!(t.lookup(1, 0x1234_6000, Size4K), TlbHit::Miss);
        assert_eq!(t.lookup(2, 0x1234_5000, Size4K), TlbHit::Miss); // other ASID
        let s = t.stats();
        assert_eq!((s.lookups, s.l1_hits, s.stlb_hits, s.misses), (5, 2, 0, 3));
        // Filling twice does not duplicate.
        t.fill(1, 0x1234_5000, Size4K);
        assert_eq!(t.occupancy(), ([1, 0, 0], 1));
    }

    #[test]
    fn size_classes_are_separate() {
        let mut t = Tlb::new(&small());
        t.fill(1, 4 * M2, Size2M);
        assert_eq!(t.lookup(1, 4 * M2 + 5 * K4, Size4K), TlbHit::Miss);
        assert_eq!(t.lookup(1, 4 * M2 + 5 * K4, Size2M), TlbHit::L1);
        assert_eq!(t.lookup(1, 4 * M2, Size1G), TlbHit::Miss);
        t.fill(1, 3 * G1, Size1G);
        assert_eq!(t.lookup(1, 3 * G1 + 7 * M2, Size1G), TlbHit::L1);
        assert_eq!(t.occupancy(), ([0, 1, 1], 1)); // 1G entries never in the STLB
    }

    #[test]
    fn stlb_refills_l1() {
        // L1 4K: 1 set x 2 ways; STLB 1 set x 8 ways.
        let cfg = TlbConfig {
            l1_4k: (2, 2),
            l1_2m: (0, 0),
            l1_1g: (0, 0),
            stlb: (8, 8),
            stlb_holds_2m: false,
            stlb_holds_pde: false,
        };
        let mut t = Tlb::new(&cfg);
        for p in 0..3 {
            t.fill(0, p * K4, Size4K); // page 0 falls out of the L1
        }
        assert_eq!(t.lookup(0, 0, Size4K), TlbHit::Stlb); // refills L1, evicting page 1
        assert_eq!(t.lookup(0, 0, Size4K), TlbHit::L1);
        assert_eq!(t.lookup(0, K4, Size4K), TlbHit::Stlb);
        assert_eq!(t.lookup(0, 2 * K4, Size4K), TlbHit::Stlb); // page 2 was LRU in L1
        let s = t.stats();
        assert_eq!((s.l1_hits, s.stlb_hits, s.misses), (1, 3, 0));
        // No L1 for 2M and the STLB does not hold 2M: always a miss.
        t.fill(0, M2, Size2M);
        assert_eq!(t.lookup(0, M2, Size2M), TlbHit::Miss);
    }

    #[test]
    fn stlb_holds_2m_only_when_configured() {
        let mut cfg = small();
        cfg.l1_2m = (1, 1);
        for holds in [false, true] {
            cfg.stlb_holds_2m = holds;
            let mut t = Tlb::new(&cfg);
            t.fill(0, 0, Size2M);
            t.fill(0, M2, Size2M); // evicts page 0 from the 1-entry L1
            let want = if holds { TlbHit::Stlb } else { TlbHit::Miss };
            assert_eq!(t.lookup(0, 0, Size2M), want);
        }
    }

    #[test]
    fn flush_page_drops_covering_entries_of_any_size() {
        let mut t = Tlb::new(&small());
        t.fill(1, 2 * M2, Size2M);
        t.fill(1, 2 * M2 + 3 * K4, Size4K);
        t.fill(1, 0, Size1G);
        t.fill(2, 2 * M2, Size2M);
        // An address inside the 2M page, not the 4K page: drops the 2M and
        // 1G entries of ASID 1 only.
        assert!(t.flush_page(1, 2 * M2 + 100 * K4));
        assert_eq!(t.lookup(1, 2 * M2, Size2M), TlbHit::Miss);
        assert_eq!(t.lookup(1, 0, Size1G), TlbHit::Miss);
        assert_eq!(t.lookup(1, 2 * M2 + 3 * K4, Size4K), TlbHit::L1);
        assert_eq!(t.lookup(2, 2 * M2, Size2M), TlbHit::L1);
        assert!(t.flush_page(1, 2 * M2 + 3 * K4));
        assert!(!t.flush_page(1, 2 * M2 + 3 * K4));
        assert_eq!(t.lookup(1, 2 * M2 + 3 * K4, Size4K), TlbHit::Miss);
        assert_eq!(t.stats().flushes_page, 3);
    }

    #[test]
    fn flush_asid_and_flush_all() {
        let mut t = Tlb::new(&small());
        for asid in [1, 2] {
            t.fill(asid, 5 * K4, Size4K);
            t.fill(asid, 5 * M2, Size2M);
        }
        t.flush_asid(1);
        assert_eq!(t.lookup(1, 5 * K4, Size4K), TlbHit::Miss);
        assert_eq!(t.lookup(1, 5 * M2, Size2M), TlbHit::Miss);
        assert_eq!(t.lookup(2, 5 * K4, Size4K), TlbHit::L1);
        assert_eq!(t.lookup(2, 5 * M2, Size2M), TlbHit::L1);
        t.flush_all();
        assert_eq!(t.lookup(2, 5 * K4, Size4K), TlbHit::Miss);
        assert_eq!(t.occupancy(), ([0, 0, 0], 0));
        let s = t.stats();
        assert_eq!((s.flushes_full, s.flushes_asid), (1, 1));
    }

    #[test]
    fn pdes_share_the_stlb_with_translations_when_it_holds_them() {
        // One STLB set of 2 ways: a PDE and a 4 KiB translation fill it.
        let mut cfg = small();
        cfg.stlb = (2, 2);
        cfg.l1_4k = (0, 0);
        cfg.stlb_holds_pde = true;
        let mut t = Tlb::new(&cfg);
        assert!(!t.pde_hit(0, 5 * K4));
        t.pde_fill(0, 5 * K4);
        // Every 4 KiB page of the 2 MiB region shares it; another ASID does not.
        assert!(t.pde_hit(0, 9 * K4));
        assert!(!t.pde_hit(1, 9 * K4));
        // A PDE is no translation of a 2 MiB page.
        assert_eq!(t.lookup(0, 0, Size2M), TlbHit::Miss);
        t.fill(0, 5 * K4, Size4K);
        assert_eq!(t.occupancy().1, 2);
        // A third entry evicts the least recently used: the PDE.
        t.fill(0, 6 * K4, Size4K);
        assert!(!t.pde_hit(0, 5 * K4));
        assert_eq!(t.lookup(0, 5 * K4, Size4K), TlbHit::Stlb);
        // INVLPG of any page of the region drops a PDE.
        t.pde_fill(0, M2 + K4);
        assert!(t.pde_hit(0, M2));
        t.flush_page(0, M2 + 3 * K4);
        assert!(!t.pde_hit(0, M2));
        // Not held: every PDE hits and nothing is cached.
        cfg.stlb_holds_pde = false;
        let mut t = Tlb::new(&cfg);
        t.pde_fill(0, 0);
        assert!(t.pde_hit(0, 0));
        assert_eq!(t.occupancy().1, 0);
    }

    #[test]
    fn non_power_of_two_sets_and_lru() {
        // STLB like Skylake's: 1536 entries, 12 ways = 128 sets; L1 of 3 sets.
        let cfg = TlbConfig {
            l1_4k: (6, 2),
            l1_2m: (0, 0),
            l1_1g: (0, 0),
            stlb: (1536, 12),
            stlb_holds_2m: true,
            stlb_holds_pde: false,
        };
        let mut t = Tlb::new(&cfg);
        // Pages 0, 3, 6 share L1 set 0 (3 sets).
        t.fill(0, 0, Size4K);
        t.fill(0, 3 * K4, Size4K);
        assert_eq!(t.lookup(0, 0, Size4K), TlbHit::L1); // 3 becomes LRU
        t.fill(0, 6 * K4, Size4K);
        assert_eq!(t.lookup(0, 0, Size4K), TlbHit::L1);
        assert_eq!(t.lookup(0, 3 * K4, Size4K), TlbHit::Stlb);
        assert_eq!(t.lookup(0, K4, Size4K), TlbHit::Miss);
    }

    // ------------------------------------------------ differential proptest

    /// Naive reference: each structure is a flat list of
    /// (asid, vpn, size, last use), filtered by set on every operation; a
    /// page-directory entry has no size (None) and the VPN of its 2 MiB.
    #[derive(Default)]
    struct RefArray {
        sets: u64,
        ways: usize,
        entries: Vec<(u16, u64, Option<PageSize>, u64)>,
    }
    impl RefArray {
        fn new((e, w): (u32, u32)) -> Self {
            if e == 0 || w == 0 {
                return RefArray::default();
            }
            RefArray {
                sets: (e / w) as u64,
                ways: w as usize,
                entries: vec![],
            }
        }
        fn present(&self) -> bool {
            self.ways > 0
        }
        fn hit(&mut self, asid: u16, vpn: u64, size: Option<PageSize>, now: u64) -> bool {
            if !self.present() {
                return false;
            }
            match self
                .entries
                .iter_mut()
                .find(|e| (e.0, e.1, e.2) == (asid, vpn, size))
            {
                Some(e) => {
                    e.3 = now;
                    true
                }
                None => false,
            }
        }
        fn put(&mut self, asid: u16, vpn: u64, size: Option<PageSize>, now: u64) {
            if !self.present() || self.hit(asid, vpn, size, now) {
                return;
            }
            let set = vpn % self.sets;
            let sets = self.sets;
            let in_set: Vec<usize> = (0..self.entries.len())
                .filter(|&i| self.entries[i].1 % sets == set)
                .collect();
            if in_set.len() == self.ways {
                let lru = *in_set.iter().min_by_key(|&&i| self.entries[i].3).unwrap();
                self.entries.remove(lru);
            }
            self.entries.push((asid, vpn, size, now));
        }
    }

    #[derive(Clone, Debug)]
    enum TOp {
        LookupFill(u16, u64, PageSize),
        FlushAll,
        FlushAsid(u16),
        FlushPage(u16, u64),
        /// A walk of a 4 KiB page: its PDE looked up, and filled on a miss.
        Pde(u16, u64),
    }

    fn size_strategy() -> impl Strategy<Value = PageSize> {
        prop_oneof![4 => Just(Size4K), 2 => Just(Size2M), 1 => Just(Size1G)]
    }

    fn tlb_op() -> impl Strategy<Value = TOp> {
        // Addresses: a few 1G regions, 2M pages and 4K pages, so that every
        // size class sees reuse and conflicts.
        let addr = (0u64..2, 0u64..3, 0u64..6).prop_map(|(g, m, k)| g * G1 + m * M2 + k * K4);
        prop_oneof![
            30 => (0u16..2, addr.clone(), size_strategy()).prop_map(|(a, v, s)| TOp::LookupFill(a, v, s)),
            1 => Just(TOp::FlushAll),
            1 => (0u16..2).prop_map(TOp::FlushAsid),
            2 => (0u16..2, addr.clone()).prop_map(|(a, v)| TOp::FlushPage(a, v)),
            10 => (0u16..2, addr).prop_map(|(a, v)| TOp::Pde(a, v)),
        ]
    }

    fn structure() -> impl Strategy<Value = (u32, u32)> {
        prop_oneof![
            Just((0, 0)),
            (1u32..=3, 1u32..=4).prop_map(|(s, w)| (s * w, w))
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn tlb_matches_reference(
            l1_4k in structure(), l1_2m in structure(), l1_1g in structure(), stlb in structure(),
            stlb_holds_2m in any::<bool>(),
            stlb_holds_pde in any::<bool>(),
            ops in proptest::collection::vec(tlb_op(), 1..300),
        ) {
            let cfg = TlbConfig { l1_4k, l1_2m, l1_1g, stlb, stlb_holds_2m, stlb_holds_pde };
            let mut t = Tlb::new(&cfg);
            let mut l1 = [RefArray::new(l1_4k), RefArray::new(l1_2m), RefArray::new(l1_1g)];
            let mut st = RefArray::new(stlb);
            let holds = |s: PageSize| s == Size4K || (s == Size2M && stlb_holds_2m);
            let mut now = 0u64;
            let mut want_stats = TlbStats::default();
            for (i, op) in ops.iter().enumerate() {
                now += 1;
                match *op {
                    TOp::LookupFill(asid, va, size) => {
                        let vpn = va >> size.shift();
                        let li = size as usize;
                        let want = if l1[li].hit(asid, vpn, Some(size), now) {
                            TlbHit::L1
                        } else if holds(size) && st.hit(asid, vpn, Some(size), now) {
                            l1[li].put(asid, vpn, Some(size), now);
                            TlbHit::Stlb
                        } else {
                            TlbHit::Miss
                        };
                        want_stats.lookups += 1;
                        match want {
                            TlbHit::L1 => want_stats.l1_hits += 1,
                            TlbHit::Stlb => want_stats.stlb_hits += 1,
                            TlbHit::Miss => want_stats.misses += 1,
                        }
                        prop_assert_eq!(t.lookup(asid, va, size), want, "step {}: {:?}", i, op);
                        if want == TlbHit::Miss {
                            now += 1;
                            l1[li].put(asid, vpn, Some(size), now);
                            if holds(size) {
                                st.put(asid, vpn, Some(size), now);
                            }
                            t.fill(asid, va, size);
                        }
                    }
                    TOp::FlushAll => {
                        want_stats.flushes_full += 1;
                        l1.iter_mut().for_each(|a| a.entries.clear());
                        st.entries.clear();
                        t.flush_all();
                    }
                    TOp::FlushAsid(asid) => {
                        want_stats.flushes_asid += 1;
                        l1.iter_mut().for_each(|a| a.entries.retain(|e| e.0 != asid));
                        st.entries.retain(|e| e.0 != asid);
                        t.flush_asid(asid);
                    }
                    TOp::FlushPage(asid, va) => {
                        want_stats.flushes_page += 1;
                        let shift = |e: &(u16, u64, Option<PageSize>, u64)| e.2.unwrap_or(Size2M).shift();
                        let covers = |e: &(u16, u64, Option<PageSize>, u64)| e.0 == asid && e.1 == va >> shift(e);
                        let translations = |l1: &[RefArray; 3], st: &RefArray| {
                            l1.iter().map(|a| a.entries.len()).sum::<usize>()
                                + st.entries.iter().filter(|e| e.2.is_some()).count()
                        };
                        let before = translations(&l1, &st);
                        l1.iter_mut().for_each(|a| a.entries.retain(|e| !covers(e)));
                        st.entries.retain(|e| !covers(e));
                        let after = translations(&l1, &st);
                        prop_assert_eq!(t.flush_page(asid, va), after < before, "step {}: {:?}", i, op);
                    }
                    TOp::Pde(asid, va) => {
                        let vpn = va >> Size2M.shift();
                        let want = !stlb_holds_pde || st.hit(asid, vpn, None, now);
                        prop_assert_eq!(t.pde_hit(asid, va), want, "step {}: {:?}", i, op);
                        if !want {
                            now += 1;
                            st.put(asid, vpn, None, now);
                            t.pde_fill(asid, va);
                        }
                    }
                }
                let occ = t.occupancy();
                prop_assert_eq!(occ.0, [l1[0].entries.len(), l1[1].entries.len(), l1[2].entries.len()], "step {}", i);
                prop_assert_eq!(occ.1, st.entries.len(), "step {}", i);
            }
            prop_assert_eq!(t.stats(), want_stats);
        }
    }
}
