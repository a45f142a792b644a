//! `mm_struct`: VMAs, a two-level page table (PMD entries, each either a
//! huge mapping or a table of 512 PTEs) and `mm_cpumask`.
//!
//! Invariants: VMAs do not overlap and are 2 MiB aligned (the model places
//! anonymous mappings on THP boundaries, as Linux does since 6.7 for large
//! ones); a PMD entry maps either a whole 2 MiB folio or a PTE table;
//! `generation` changes whenever a mapping is removed or changed, so cached
//! translations can be revalidated cheaply.

use crate::machine::ipi::CpuMask;
use crate::machine::tlb::PageSize;
use std::collections::BTreeMap;

pub const PMD_SHIFT: u32 = 21;
pub const PMD_SIZE: u64 = 1 << PMD_SHIFT;
pub const PUD_SHIFT: u32 = 30;
pub const PUD_SIZE: u64 = 1 << PUD_SHIFT;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmaKind {
    /// Private anonymous memory (usemem maps /dev/zero MAP_PRIVATE, which is anonymous).
    AnonPrivate,
    /// `MAP_HUGETLB` memory of the hstate with this page shift (21: 2 MiB, 30: 1 GiB).
    Hugetlb(u32),
}

#[derive(Clone, Debug)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub kind: VmaKind,
    pub writable: bool,
}

/// A present PTE: pfn and write permission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pte {
    pub pfn: u64,
    pub writable: bool,
}

#[derive(Clone)]
pub enum Pmd {
    Huge(Pte),
    Table(Box<[Option<Pte>; 512]>),
}

pub struct Mm {
    pub id: usize,
    pub asid: u16,
    pub vmas: Vec<Vma>,
    pub pmds: BTreeMap<u64, Pmd>,
    /// PUD-level (1 GiB) huge mappings, keyed by `addr >> PUD_SHIFT`.
    pub puds: BTreeMap<u64, Pte>,
    /// CPUs that have run this mm since they last switched away (lazy ones included).
    pub cpumask: CpuMask,
    /// Flushes of this mm's TLB entries so far (`context.tlb_gen`).
    pub tlb_gen: u64,
    pub generation: u64,
    next_mmap: u64,
    pub rss_pages: u64,
}

/// Where a virtual address is mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    pub pfn: u64,
    pub writable: bool,
    pub huge: bool,
    /// Mapped by a 1 GiB PUD entry (then `huge` is set too).
    pub gigantic: bool,
}

impl Translation {
    /// The TLB entry size of this mapping.
    pub fn page_size(&self) -> PageSize {
        if self.gigantic {
            PageSize::Size1G
        } else if self.huge {
            PageSize::Size2M
        } else {
            PageSize::Size4K
        }
    }
}

impl Mm {
    pub fn new(id: usize) -> Mm {
        Mm {
            id,
            asid: (id % 4096) as u16,
            vmas: Vec::new(),
            pmds: BTreeMap::new(),
            puds: BTreeMap::new(),
            cpumask: CpuMask::empty(),
            tlb_gen: 0,
            generation: 0,
            next_mmap: 0x7f00_0000_0000,
            rss_pages: 0,
        }
    }

    /// Places a new VMA of `len` bytes (rounded up to 2 MiB) and returns its start.
    pub fn mmap(&mut self, len: u64, kind: VmaKind, writable: bool) -> u64 {
        let len = (len + PMD_SIZE - 1) & !(PMD_SIZE - 1);
        let start = self.next_mmap;
        // Leave a 2 MiB hole between mappings so VMAs never merge.
        self.next_mmap += len + PMD_SIZE;
        self.vmas.push(Vma { start, end: start + len, kind, writable });
        start
    }

    /// Places a `MAP_HUGETLB` VMA of `len` bytes (rounded up to the huge page
    /// size `1 << shift`), naturally aligned, and returns its start.
    pub fn mmap_hugetlb(&mut self, len: u64, shift: u32) -> u64 {
        let size = 1u64 << shift;
        let len = len.div_ceil(size) * size;
        let start = self.next_mmap.div_ceil(size) * size;
        self.next_mmap = start + len + PMD_SIZE;
        self.vmas.push(Vma { start, end: start + len, kind: VmaKind::Hugetlb(shift), writable: true });
        start
    }

    pub fn find_vma(&self, addr: u64) -> Option<&Vma> {
        self.vmas.iter().find(|v| v.start <= addr && addr < v.end)
    }

    #[inline]
    pub fn lookup(&self, addr: u64) -> Option<Translation> {
        if !self.puds.is_empty() {
            if let Some(p) = self.puds.get(&(addr >> PUD_SHIFT)) {
                let idx = (addr >> 12) & ((PUD_SIZE >> 12) - 1);
                return Some(Translation { pfn: p.pfn + idx, writable: p.writable, huge: true, gigantic: true });
            }
        }
        match self.pmds.get(&(addr >> PMD_SHIFT))? {
            Pmd::Huge(p) => Some(Translation { pfn: p.pfn + ((addr >> 12) & 511), writable: p.writable, huge: true, gigantic: false }),
            Pmd::Table(t) => {
                t[((addr >> 12) & 511) as usize].map(|p| Translation { pfn: p.pfn, writable: p.writable, huge: false, gigantic: false })
            }
        }
    }

    pub fn pud_is_none(&self, addr: u64) -> bool {
        !self.puds.contains_key(&(addr >> PUD_SHIFT))
    }

    /// A 1 GiB huge mapping (hugetlb's `set_huge_pte_at` on a PUD).
    pub fn set_pud_huge(&mut self, haddr: u64, pte: Pte) {
        debug_assert_eq!(haddr & (PUD_SIZE - 1), 0);
        self.puds.insert(haddr >> PUD_SHIFT, pte);
        self.generation += 1;
    }

    pub fn pmd_is_none(&self, addr: u64) -> bool {
        !self.pmds.contains_key(&(addr >> PMD_SHIFT))
    }

    /// `set_pmd_at()`: maps a huge folio, into an empty PMD or over a huge
    /// mapping being replaced (a copy-on-write fault).
    pub fn set_pmd_huge(&mut self, haddr: u64, pte: Pte) {
        debug_assert_eq!(haddr & (PMD_SIZE - 1), 0);
        match self.pmds.insert(haddr >> PMD_SHIFT, Pmd::Huge(pte)) {
            None => self.rss_pages += 512,
            Some(Pmd::Huge(_)) => self.generation += 1,
            Some(Pmd::Table(_)) => panic!("set_pmd_huge over a PTE table at {haddr:#x}"),
        }
    }

    /// Gives the present entry mapping `addr` write permission (the reuse of a
    /// copy-on-write page: `wp_page_reuse()` / `maybe_pmd_mkwrite()`).
    pub fn make_writable(&mut self, addr: u64) {
        match self.pmds.get_mut(&(addr >> PMD_SHIFT)) {
            Some(Pmd::Huge(p)) => p.writable = true,
            Some(Pmd::Table(t)) => t[((addr >> 12) & 511) as usize].as_mut().expect("present PTE").writable = true,
            None => panic!("make_writable of an unmapped address {addr:#x}"),
        }
        self.generation += 1;
    }

    /// `__split_huge_pmd_locked()`: replaces the huge mapping at `haddr` by a
    /// table of 512 PTEs mapping the same sub-pages with the same permission.
    /// Returns the huge entry that was split.
    pub fn split_huge_pmd(&mut self, haddr: u64) -> Pte {
        let key = haddr >> PMD_SHIFT;
        let Some(Pmd::Huge(p)) = self.pmds.get(&key).cloned() else { panic!("split of a PMD that is not huge at {haddr:#x}") };
        let mut t = Box::new([None; 512]);
        for (i, e) in t.iter_mut().enumerate() {
            *e = Some(Pte { pfn: p.pfn + i as u64, writable: p.writable });
        }
        self.pmds.insert(key, Pmd::Table(t));
        self.generation += 1;
        p
    }

    /// A new mm for a child of `self`: the same VMAs and mmap cursor, no page
    /// tables yet (`dup_mmap()` copies them).
    pub fn dup(&self, id: usize) -> Mm {
        let mut mm = Mm::new(id);
        mm.vmas = self.vmas.clone();
        mm.next_mmap = self.next_mmap;
        mm
    }

    pub fn set_pte(&mut self, addr: u64, pte: Pte) {
        let e = self.pmds.entry(addr >> PMD_SHIFT).or_insert_with(|| Pmd::Table(Box::new([None; 512])));
        match e {
            Pmd::Table(t) => {
                let slot = &mut t[((addr >> 12) & 511) as usize];
                if slot.is_none() {
                    self.rss_pages += 1;
                }
                *slot = Some(pte);
            }
            Pmd::Huge(_) => panic!("set_pte under a huge PMD at {addr:#x}"),
        }
        self.generation += 1;
    }

    /// Removes the VMA that starts at `start` and every mapping in it.
    /// Returns the mapped folios (head pfns) in address order, and the number of PTEs/PMDs cleared.
    pub fn munmap(&mut self, start: u64) -> Option<(Vma, Vec<(u64, bool)>)> {
        let i = self.vmas.iter().position(|v| v.start == start)?;
        let vma = self.vmas.remove(i);
        let keys: Vec<u64> = self.pmds.range(vma.start >> PMD_SHIFT..vma.end >> PMD_SHIFT).map(|(k, _)| *k).collect();
        let mut freed = Vec::new();
        for k in keys {
            match self.pmds.remove(&k).unwrap() {
                Pmd::Huge(p) => {
                    freed.push((p.pfn, true));
                    self.rss_pages -= 512;
                }
                Pmd::Table(t) => {
                    for p in t.iter().flatten() {
                        freed.push((p.pfn, false));
                        self.rss_pages -= 1;
                    }
                }
            }
        }
        let puds: Vec<u64> = self.puds.range(vma.start >> PUD_SHIFT..vma.end.div_ceil(PUD_SIZE)).map(|(k, _)| *k).collect();
        for k in puds {
            freed.push((self.puds.remove(&k).unwrap().pfn, true));
        }
        self.generation += 1;
        Some((vma, freed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn map_lookup_unmap() {
        let mut mm = Mm::new(1);
        let a = mm.mmap(3 << 20, VmaKind::AnonPrivate, true);
        assert_eq!(a % PMD_SIZE, 0);
        assert_eq!(mm.find_vma(a + (4 << 20) - 1).unwrap().start, a);
        let b = mm.mmap(4096, VmaKind::AnonPrivate, true);
        assert!(b >= a + (4 << 20) + PMD_SIZE);
        mm.set_pmd_huge(a, Pte { pfn: 1024, writable: true });
        assert_eq!(mm.lookup(a + 5 * 4096 + 7), Some(Translation { pfn: 1029, writable: true, huge: true, gigantic: false }));
        mm.set_pte(a + PMD_SIZE + 4096, Pte { pfn: 77, writable: false });
        assert_eq!(mm.lookup(a + PMD_SIZE + 4096).unwrap().pfn, 77);
        assert_eq!(mm.lookup(a + PMD_SIZE), None);
        assert_eq!(mm.rss_pages, 513);
        let (_, freed) = mm.munmap(a).unwrap();
        assert_eq!(freed, vec![(1024, true), (77, false)]);
        assert_eq!(mm.rss_pages, 0);
        assert!(mm.lookup(a).is_none());
    }

    #[test]
    fn hugetlb_1g_mapping() {
        let mut mm = Mm::new(1);
        let _ = mm.mmap(3 << 20, VmaKind::AnonPrivate, true);
        let g = mm.mmap_hugetlb(2 << 30, PUD_SHIFT);
        assert_eq!(g % PUD_SIZE, 0);
        assert_eq!(mm.find_vma(g).unwrap().kind, VmaKind::Hugetlb(30));
        mm.set_pud_huge(g + PUD_SIZE, Pte { pfn: 1 << 18, writable: true });
        let t = mm.lookup(g + PUD_SIZE + 5 * 4096 + 9).unwrap();
        assert_eq!((t.pfn, t.page_size()), ((1 << 18) + 5, PageSize::Size1G));
        assert!(mm.lookup(g).is_none());
        let (_, freed) = mm.munmap(g).unwrap();
        assert_eq!(freed, vec![(1 << 18, true)]);
        assert!(mm.lookup(g + PUD_SIZE).is_none());
    }
}
