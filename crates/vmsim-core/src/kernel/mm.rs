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

pub const PAGE_SIZE: u64 = 4096;
pub const PMD_SHIFT: u32 = 21;
pub const PMD_SIZE: u64 = 1 << PMD_SHIFT;
pub const PUD_SHIFT: u32 = 30;

/// The PMD slots (keys of `Mm::pmds`) that `[start, end)` touches, a partial
/// last one included (a VMA need not end at a 2 MiB boundary).
pub fn pmd_keys(start: u64, end: u64) -> std::ops::Range<u64> {
    start >> PMD_SHIFT..end.div_ceil(PMD_SIZE)
}
pub const PUD_SIZE: u64 = 1 << PUD_SHIFT;
/// x86-64's `TASK_SIZE` with 4-level paging: the end of the user range.
pub const TASK_SIZE: u64 = (1 << 47) - PAGE_SIZE;
/// The default `vm.mmap_min_addr`: nothing is mapped below it.
pub const MMAP_MIN_ADDR: u64 = 65536;
/// Entries in a PTE table (x86-64's `PTRS_PER_PTE`).
pub const PTRS_PER_PTE: u64 = 512;

/// `pte_index()`: the slot of `addr`'s entry in its PTE table, which is also
/// the 4 KiB sub-page of `addr` within a 2 MiB huge page.
#[inline]
pub const fn pte_index(addr: u64) -> usize {
    ((addr / PAGE_SIZE) & (PTRS_PER_PTE - 1)) as usize
}

/// An mm's NUMA-balancing scanner state (`numa_next_scan`, `numa_scan_offset`,
/// `numa_scan_seq` of `mm_struct`; kernel/sched/numa.rs runs the scanner).
#[derive(Clone, Debug, Default)]
pub struct MmNuma {
    /// `numa_next_scan` in cycles; None until the first thread ticks.
    pub next_scan: Option<u64>,
    /// `numa_scan_offset`: where the next scan starts.
    pub scan_offset: u64,
    /// `numa_scan_seq`: completed passes over the address space.
    pub scan_seq: u64,
    /// A period update slowed the scan down: the next tick moves
    /// `numa_next_scan` to now + the new period.
    pub next_scan_push: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmaKind {
    /// Private anonymous memory (usemem maps /dev/zero MAP_PRIVATE, which is anonymous).
    AnonPrivate,
    /// `MAP_HUGETLB` memory of the hstate with this page shift (21: 2 MiB, 30: 1 GiB).
    Hugetlb(u32),
    /// `MAP_SHARED` of file `ino` from page `pgoff` (kernel/filemap.rs).
    FileShared { ino: usize, pgoff: u64 },
}

#[derive(Clone, Debug)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub kind: VmaKind,
    pub writable: bool,
    /// `VM_HUGEPAGE` / `VM_NOHUGEPAGE` (`madvise(MADV_HUGEPAGE)`,
    /// `MADV_NOHUGEPAGE`): whether THP faults are wanted here under
    /// `thp = "madvise"`, or refused here under any mode.
    pub hugepage: bool,
    pub nohugepage: bool,
}

/// A PTE or huge PMD/PUD entry that is not `pte_none` (absent entries are
/// `None`). `young` (the accessed bit) and `dirty` are set by the hardware
/// walk on access; a `protnone` entry (`PAGE_NONE` in an accessible VMA, as
/// NUMA balancing leaves it) is not present to the hardware: any access faults.
/// A `migration` entry (`make_writable_migration_entry`, kernel/migrate.rs)
/// stands for the frame while it is being migrated: not present either, and
/// a fault on it waits for the migration to finish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pte {
    pub pfn: u64,
    pub writable: bool,
    pub young: bool,
    pub dirty: bool,
    pub protnone: bool,
    pub migration: bool,
}

impl Pte {
    /// A new entry as the fault handler installs it (`mk_pte`): young, and
    /// dirty when writable (`maybe_mkwrite(pte_mkdirty())` of a write fault).
    pub fn new(pfn: u64, writable: bool) -> Pte {
        Pte {
            pfn,
            writable,
            young: true,
            dirty: writable,
            protnone: false,
            migration: false,
        }
    }

    /// Present to the hardware (`pte_present` and not `pte_protnone`, not a
    /// migration entry).
    pub fn accessible(&self) -> bool {
        !self.protnone && !self.migration
    }

    /// `pte_same` for the fields a fault decides on: the frame, the write
    /// permission and PROT_NONE. The accessed and dirty bits are left out: the
    /// model sets them at once on access, where hardware would set them
    /// between the fault and its recheck and the fault would simply retry.
    pub fn same(&self, other: &Pte) -> bool {
        self.pfn == other.pfn
            && self.writable == other.writable
            && self.protnone == other.protnone
            && self.migration == other.migration
    }
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
    /// Tasks using this address space (`mm_users`): a process and its `CLONE_VM` threads.
    pub mm_users: u32,
    /// `tlb_flush_pending`: page-table changes made and their TLB flush not
    /// yet done (`inc_tlb_flush_pending` … `dec_tlb_flush_pending`). While it
    /// is set, x86's `pte_accessible` treats a PROT_NONE entry as one a TLB
    /// may still hold.
    pub tlb_flush_pending: u32,
    /// Fault injection: flushes of this mm send no shootdown IPIs (a kernel
    /// that forgets remote CPUs), for the tests of the TLB truth check.
    pub inject_no_shootdown: bool,
    /// `mm->tlb_flush_batched`: bits 0..14 count batched unmaps of this mm
    /// left for another task's flush (pending), bits 16..30 the pending
    /// count the last `flush_tlb_batched_pending` caught up with (flushed).
    pub tlb_flush_batched: u32,
    pub generation: u64,
    next_mmap: u64,
    pub rss_pages: u64,
    /// NUMA balancing's per-mm scanner state (kernel/sched/numa.rs).
    pub numa: MmNuma,
    /// What every page written through the access engine should hold: per
    /// VMA start, one expected content tag per page, updated with each write
    /// in the same order as the frame's tag. The data check compares the
    /// frames against it, so a migration or reclaim that loses a write is caught.
    pub shadow: BTreeMap<u64, Vec<u64>>,
    /// Which frames hold this mm's page tables (`kernel.page_tables`;
    /// kernel/pgtable.rs); empty otherwise.
    pub pt: PgTables,
}

/// x86-64's `PGDIR_SHIFT` with four-level paging: one PGD entry maps 512 GiB.
pub const PGDIR_SHIFT: u32 = 39;

/// The level of a page-table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Pgd,
    Pud,
    Pmd,
    Pte,
}

/// Which frame holds which table of one mm (`kernel.page_tables`,
/// kernel/pgtable.rs): entry *i* of the table in frame *f* is line
/// *f*·64 + *i*/8.
#[derive(Clone, Debug, Default)]
pub struct PgTables {
    pgd: Option<u64>,
    /// PUD pages by `va >> PGDIR_SHIFT`.
    pud: BTreeMap<u64, u64>,
    /// PMD pages by `va >> PUD_SHIFT`.
    pmd: BTreeMap<u64, u64>,
    /// PTE pages by `va >> PMD_SHIFT`.
    pte: BTreeMap<u64, u64>,
}

/// The line holding entry `index` of the table in frame `pfn`.
#[inline]
fn entry_line(pfn: u64, index: u64) -> u64 {
    (pfn << 6) | ((index & 511) >> 3)
}

impl PgTables {
    /// The line of `va`'s entry at `level`, if that table has a frame.
    #[inline]
    pub fn line(&self, va: u64, level: Level) -> Option<u64> {
        let (pfn, shift) = match level {
            Level::Pgd => (self.pgd?, PGDIR_SHIFT),
            Level::Pud => (*self.pud.get(&(va >> PGDIR_SHIFT))?, PUD_SHIFT),
            Level::Pmd => (*self.pmd.get(&(va >> PUD_SHIFT))?, PMD_SHIFT),
            Level::Pte => (*self.pte.get(&(va >> PMD_SHIFT))?, 12),
        };
        Some(entry_line(pfn, va >> shift))
    }

    /// Frames held by this mm's tables.
    pub fn nr_tables(&self) -> u64 {
        self.pgd.is_some() as u64 + (self.pud.len() + self.pmd.len() + self.pte.len()) as u64
    }

    /// The tables on the way to `va`'s entry at `leaf` that have no frame
    /// yet, top down, with where each would be recorded.
    pub(crate) fn missing(&self, va: u64, leaf: Level) -> Vec<Level> {
        let mut out = Vec::new();
        if self.pgd.is_none() {
            out.push(Level::Pgd);
        }
        if !self.pud.contains_key(&(va >> PGDIR_SHIFT)) {
            out.push(Level::Pud);
        }
        if leaf != Level::Pud && !self.pmd.contains_key(&(va >> PUD_SHIFT)) {
            out.push(Level::Pmd);
        }
        if leaf == Level::Pte && !self.pte.contains_key(&(va >> PMD_SHIFT)) {
            out.push(Level::Pte);
        }
        out
    }

    pub(crate) fn record(&mut self, va: u64, table: Level, pfn: u64) {
        match table {
            Level::Pgd => self.pgd = Some(pfn),
            Level::Pud => {
                self.pud.insert(va >> PGDIR_SHIFT, pfn);
            }
            Level::Pmd => {
                self.pmd.insert(va >> PUD_SHIFT, pfn);
            }
            Level::Pte => {
                self.pte.insert(va >> PMD_SHIFT, pfn);
            }
        }
    }
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
    /// `addr`'s translation through a 1 GiB PUD entry `p`.
    #[inline]
    fn pud(p: &Pte, addr: u64) -> Translation {
        Translation {
            pfn: p.pfn + (addr % PUD_SIZE) / PAGE_SIZE,
            writable: p.writable,
            huge: true,
            gigantic: true,
        }
    }
    /// `addr`'s translation through a 2 MiB PMD entry `p`.
    #[inline]
    fn pmd(p: &Pte, addr: u64) -> Translation {
        Translation {
            pfn: p.pfn + pte_index(addr) as u64,
            writable: p.writable,
            huge: true,
            gigantic: false,
        }
    }
    /// The translation of a 4 KiB PTE `p`.
    #[inline]
    fn pte(p: &Pte) -> Translation {
        Translation {
            pfn: p.pfn,
            writable: p.writable,
            huge: false,
            gigantic: false,
        }
    }
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

/// mm/rmap.c: the layout of `mm->tlb_flush_batched`.
pub const TLB_FLUSH_BATCH_FLUSHED_SHIFT: u32 = 16;
pub const TLB_FLUSH_BATCH_PENDING_MASK: u32 = (1 << 15) - 1;
pub const TLB_FLUSH_BATCH_PENDING_LARGE: u32 = TLB_FLUSH_BATCH_PENDING_MASK / 2;

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
            mm_users: 1,
            tlb_flush_pending: 0,
            inject_no_shootdown: false,
            tlb_flush_batched: 0,
            generation: 0,
            next_mmap: 0x7f00_0000_0000,
            rss_pages: 0,
            numa: Default::default(),
            shadow: BTreeMap::new(),
            pt: Default::default(),
        }
    }

    /// The `mm->tlb_flush_batched` part of `set_tlb_ubc_flush_pending`: one
    /// more pending batched unmap; past half the field's range the count
    /// restarts at 1 pending, 0 flushed (so a pending flush is never lost).
    pub fn set_tlb_flush_batched_pending(&mut self) {
        let batch = self.tlb_flush_batched;
        if batch & TLB_FLUSH_BATCH_PENDING_MASK > TLB_FLUSH_BATCH_PENDING_LARGE {
            self.tlb_flush_batched = 1;
        } else {
            self.tlb_flush_batched = batch + 1;
        }
    }

    /// The test of `flush_tlb_batched_pending`: whether a batched unmap of
    /// this mm may still be unflushed (pending differs from flushed); if so
    /// the caller flushes the mm and the flushed count catches up.
    pub fn take_tlb_flush_batched_pending(&mut self) -> bool {
        let batch = self.tlb_flush_batched;
        let pending = batch & TLB_FLUSH_BATCH_PENDING_MASK;
        let flushed = batch >> TLB_FLUSH_BATCH_FLUSHED_SHIFT;
        if pending == flushed {
            return false;
        }
        self.tlb_flush_batched = pending | (pending << TLB_FLUSH_BATCH_FLUSHED_SHIFT);
        true
    }

    /// `free_pgtables`' choice: removes and returns the frames of the
    /// tables whose range maps nothing any more (a PTE page whose 2 MiB
    /// holds no table, a PMD page whose 1 GiB maps nothing, a PUD page with
    /// neither), and with `all` (the mm's end) the PGD too.
    pub fn take_unused_tables(&mut self, all: bool) -> Vec<u64> {
        let mut freed = Vec::new();
        let (pmds, puds, pt) = (&self.pmds, &self.puds, &mut self.pt);
        pt.pte.retain(|k, pfn| {
            let keep = matches!(pmds.get(k), Some(Pmd::Table(_)));
            if !keep {
                freed.push(*pfn);
            }
            keep
        });
        pt.pmd.retain(|g, pfn| {
            let keep = pmds.range(g << 9..(g + 1) << 9).next().is_some();
            if !keep {
                freed.push(*pfn);
            }
            keep
        });
        let pmd_pages = &pt.pmd;
        pt.pud.retain(|t, pfn| {
            let r = t << 9..(t + 1) << 9;
            let keep =
                pmd_pages.range(r.clone()).next().is_some() || puds.range(r).next().is_some();
            if !keep {
                freed.push(*pfn);
            }
            keep
        });
        if all {
            freed.extend(pt.pgd.take());
        }
        freed
    }

    /// Places a new VMA of `len` bytes (rounded up to 4 KiB, as `mmap()`
    /// does) at a 2 MiB boundary and returns its start. The start is aligned
    /// as `thp_get_unmapped_area()` aligns anonymous mappings, so a VMA holds
    /// `len / 2 MiB` whole huge pages; a tail short of 2 MiB fails
    /// `transhuge_vma_suitable()` and is faulted in 4 KiB pages.
    pub fn mmap(&mut self, len: u64, kind: VmaKind, writable: bool) -> u64 {
        let len = len.div_ceil(PAGE_SIZE) * PAGE_SIZE;
        let start = self.next_mmap;
        // Leave a 2 MiB hole between mappings so VMAs never merge.
        self.next_mmap = (start + len).div_ceil(PMD_SIZE) * PMD_SIZE + PMD_SIZE;
        self.vmas.push(Vma {
            start,
            end: start + len,
            kind,
            writable,
            hugepage: false,
            nohugepage: false,
        });
        start
    }

    /// `mmap(MAP_FIXED_NOREPLACE)`: a VMA at exactly [addr, addr+len).
    /// `Err(errno)`: `EINVAL` for an unaligned, empty or out-of-range
    /// request (below `mmap_min_addr` or past x86-64's 47-bit `TASK_SIZE`),
    /// `EEXIST` for one overlapping a VMA. Later placed mappings start
    /// above it, so the two kinds of placement never collide.
    pub fn mmap_fixed(
        &mut self,
        addr: u64,
        len: u64,
        kind: VmaKind,
        writable: bool,
    ) -> Result<u64, i64> {
        const EINVAL: i64 = 22;
        const EEXIST: i64 = 17;
        let end = addr.checked_add(len).ok_or(EINVAL)?;
        if len == 0
            || !addr.is_multiple_of(PAGE_SIZE)
            || !len.is_multiple_of(PAGE_SIZE)
            || addr < MMAP_MIN_ADDR
            || end > TASK_SIZE
        {
            return Err(EINVAL);
        }
        if self.vmas.iter().any(|v| v.start < end && addr < v.end) {
            return Err(EEXIST);
        }
        self.vmas.push(Vma {
            start: addr,
            end,
            kind,
            writable,
            hugepage: false,
            nohugepage: false,
        });
        if end > self.next_mmap {
            self.next_mmap = end.div_ceil(PMD_SIZE) * PMD_SIZE + PMD_SIZE;
        }
        Ok(addr)
    }

    /// Places a `MAP_HUGETLB` VMA of `len` bytes (rounded up to the huge page
    /// size `1 << shift`), naturally aligned, and returns its start.
    pub fn mmap_hugetlb(&mut self, len: u64, shift: u32) -> u64 {
        let size = 1u64 << shift;
        let len = len.div_ceil(size) * size;
        let start = self.next_mmap.div_ceil(size) * size;
        self.next_mmap = start + len + PMD_SIZE;
        self.vmas.push(Vma {
            start,
            end: start + len,
            kind: VmaKind::Hugetlb(shift),
            writable: true,
            hugepage: false,
            nohugepage: false,
        });
        start
    }

    pub fn find_vma(&self, addr: u64) -> Option<&Vma> {
        self.vmas.iter().find(|v| v.start <= addr && addr < v.end)
    }

    #[inline]
    pub fn lookup(&self, addr: u64) -> Option<Translation> {
        if !self.puds.is_empty() {
            if let Some(p) = self.puds.get(&(addr >> PUD_SHIFT)) {
                return Some(Translation::pud(p, addr));
            }
        }
        match self.pmds.get(&(addr >> PMD_SHIFT))? {
            Pmd::Huge(p) => Some(Translation::pmd(p, addr)),
            Pmd::Table(t) => t[pte_index(addr)].as_ref().map(Translation::pte),
        }
    }

    /// The modeled hardware page walk for an access: the translation if the
    /// entry is present to the hardware, with its accessed bit set (and its
    /// dirty bit on a write the entry permits). None: the access faults.
    #[inline]
    pub fn walk(&mut self, addr: u64, write: bool) -> Option<Translation> {
        let mark = |p: &mut Pte| {
            p.young = true;
            if write && p.writable {
                p.dirty = true;
            }
        };
        if !self.puds.is_empty() {
            if let Some(p) = self.puds.get_mut(&(addr >> PUD_SHIFT)) {
                if !p.accessible() {
                    return None;
                }
                mark(p);
                return Some(Translation::pud(p, addr));
            }
        }
        match self.pmds.get_mut(&(addr >> PMD_SHIFT))? {
            Pmd::Huge(p) if p.accessible() => {
                mark(p);
                Some(Translation::pmd(p, addr))
            }
            Pmd::Huge(_) => None,
            Pmd::Table(t) => {
                let p = t[pte_index(addr)].as_mut().filter(|p| p.accessible())?;
                mark(p);
                Some(Translation::pte(p))
            }
        }
    }

    /// The entry (huge or not) mapping `addr`, if any.
    pub fn entry(&self, addr: u64) -> Option<Pte> {
        if let Some(p) = self.puds.get(&(addr >> PUD_SHIFT)) {
            return Some(*p);
        }
        match self.pmds.get(&(addr >> PMD_SHIFT))? {
            Pmd::Huge(p) => Some(*p),
            Pmd::Table(t) => t[pte_index(addr)],
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
        self.present_entry_mut(addr, "make_writable").writable = true;
        self.generation += 1;
    }

    /// Sets or clears PROT_NONE on the entry (huge or not) mapping `addr`
    /// (`change_prot_numa()` sets it; a NUMA hinting fault clears it).
    pub fn set_protnone(&mut self, addr: u64, on: bool) {
        self.present_entry_mut(addr, "set_protnone").protnone = on;
        self.generation += 1;
    }

    /// The 4 KiB PTE or huge PMD at `addr`, if there is one.
    pub fn entry_mut(&mut self, addr: u64) -> Option<&mut Pte> {
        match self.pmds.get_mut(&(addr >> PMD_SHIFT))? {
            Pmd::Huge(p) => Some(p),
            Pmd::Table(t) => t[pte_index(addr)].as_mut(),
        }
    }

    /// Replaces the entry at `addr` (which must exist) and bumps the
    /// generation: a change the hardware must see (`set_pte_at` over a
    /// present or migration entry).
    pub fn replace_entry(&mut self, addr: u64, pte: Pte) {
        *self.present_entry_mut(addr, "replace_entry") = pte;
        self.generation += 1;
    }

    /// The expected tag of the page at `va` after a write of `value` to line
    /// `lip` (see `shadow`): creates the VMA's shadow on its first write.
    #[inline]
    pub fn shadow_store(&mut self, va: u64, lip: u64, value: u64) {
        let Some(vma) = self.find_vma(va) else {
            return;
        };
        let (start, pages) = (vma.start, ((vma.end - vma.start) >> 12) as usize);
        let s = self
            .shadow
            .entry(start)
            .or_insert_with(|| vec![super::page_alloc::TAG_ZERO; pages]);
        let i = ((va - start) >> 12) as usize;
        s[i] = super::page_alloc::tag_store(s[i], lip, value);
    }

    /// The expected tag of the page at `va`, if the access engine wrote it.
    pub fn shadow_tag(&self, va: u64) -> Option<u64> {
        let (start, s) = self.shadow.range(..=va).next_back()?;
        s.get(((va - start) >> 12) as usize).copied()
    }

    /// The entry (huge PMD or 4 KiB PTE) mapping `addr`, which the caller
    /// knows is present: a missing one is a kernel-model bug, named by `op`.
    fn present_entry_mut(&mut self, addr: u64, op: &str) -> &mut Pte {
        match self.pmds.get_mut(&(addr >> PMD_SHIFT)) {
            Some(Pmd::Huge(p)) => p,
            Some(Pmd::Table(t)) => t[pte_index(addr)]
                .as_mut()
                .unwrap_or_else(|| panic!("{op} of an address with no PTE {addr:#x}")),
            None => panic!("{op} of an unmapped address {addr:#x}"),
        }
    }

    /// `__split_huge_pmd_locked()`: replaces the huge mapping at `haddr` by a
    /// table of 512 PTEs mapping the same sub-pages with the same permission.
    /// Returns the huge entry that was split.
    pub fn split_huge_pmd(&mut self, haddr: u64) -> Pte {
        let key = haddr >> PMD_SHIFT;
        let Some(Pmd::Huge(p)) = self.pmds.get(&key).cloned() else {
            panic!("split of a PMD that is not huge at {haddr:#x}")
        };
        let mut t = Box::new([None; 512]);
        for (i, e) in t.iter_mut().enumerate() {
            *e = Some(Pte {
                pfn: p.pfn + i as u64,
                ..p
            });
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
        // The child reads what the parent wrote until it writes its own.
        mm.shadow = self.shadow.clone();
        mm
    }

    pub fn set_pte(&mut self, addr: u64, pte: Pte) {
        let e = self
            .pmds
            .entry(addr >> PMD_SHIFT)
            .or_insert_with(|| Pmd::Table(Box::new([None; 512])));
        match e {
            Pmd::Table(t) => {
                let slot = &mut t[pte_index(addr)];
                if slot.is_none() {
                    self.rss_pages += 1;
                }
                *slot = Some(pte);
            }
            Pmd::Huge(_) => panic!("set_pte under a huge PMD at {addr:#x}"),
        }
        self.generation += 1;
    }

    /// `ptep_test_and_clear_young` on the 4 KiB PTE at `addr`: true if it was
    /// young. x86 clears the accessed bit without a TLB flush
    /// (`ptep_clear_flush_young`), so the generation is left alone.
    pub fn pte_test_and_clear_young(&mut self, addr: u64) -> bool {
        match self.pmds.get_mut(&(addr >> PMD_SHIFT)) {
            Some(Pmd::Table(t)) => match t[pte_index(addr)].as_mut() {
                Some(p) => std::mem::replace(&mut p.young, false),
                None => false,
            },
            _ => false,
        }
    }

    /// `ptep_get_and_clear` of the 4 KiB PTE at `addr`: the entry it held.
    pub fn ptep_get_and_clear(&mut self, addr: u64) -> Option<Pte> {
        let Some(Pmd::Table(t)) = self.pmds.get_mut(&(addr >> PMD_SHIFT)) else {
            return None;
        };
        let old = t[pte_index(addr)].take();
        if old.is_some() {
            self.rss_pages -= 1;
            self.generation += 1;
        }
        old
    }

    /// Removes the VMA that starts at `start` and every mapping in it.
    /// Returns the mapped folios (head pfns) in address order, and the number of PTEs/PMDs cleared.
    pub fn munmap(&mut self, start: u64) -> Option<(Vma, Vec<(u64, bool)>)> {
        let i = self.vmas.iter().position(|v| v.start == start)?;
        let vma = self.vmas.remove(i);
        self.shadow.remove(&vma.start);
        let keys: Vec<u64> = self
            .pmds
            .range(pmd_keys(vma.start, vma.end))
            .map(|(k, _)| *k)
            .collect();
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
        let puds: Vec<u64> = self
            .puds
            .range(vma.start >> PUD_SHIFT..vma.end.div_ceil(PUD_SIZE))
            .map(|(k, _)| *k)
            .collect();
        for k in puds {
            freed.push((self.puds.remove(&k).unwrap().pfn, true));
        }
        self.generation += 1;
        Some((vma, freed))
    }

    /// `change_protection()` of the VMA starting at `start` to `write`:
    /// the VMA's permission, and on a downgrade every present entry's write
    /// bit cleared. Returns the VMA's end and the entries visited (None if
    /// no VMA starts there). An upgrade leaves the entries read-only: the
    /// first write to each takes a write fault that reuses an exclusive
    /// page (`do_wp_page`), as kernels before 6.0 do (6.0's 64fe24a3e05e
    /// makes exclusive anonymous entries writable at once; not modelled).
    pub fn change_protection(&mut self, start: u64, write: bool) -> Option<(u64, u64)> {
        let v = self.vmas.iter_mut().find(|v| v.start == start)?;
        v.writable = write;
        let end = v.end;
        let mut visited = 0u64;
        if !write {
            for (_, pmd) in self.pmds.range_mut(pmd_keys(start, end)) {
                match pmd {
                    Pmd::Huge(p) => {
                        p.writable = false;
                        visited += 1;
                    }
                    Pmd::Table(t) => {
                        for p in t.iter_mut().flatten() {
                            p.writable = false;
                            visited += 1;
                        }
                    }
                }
            }
            self.generation += 1;
        }
        Some((end, visited))
    }

    /// `madvise(MADV_HUGEPAGE)` (`huge`) or `MADV_NOHUGEPAGE` of the VMA
    /// starting at `start`; false if none starts there.
    pub fn madvise_hugepage(&mut self, start: u64, huge: bool) -> bool {
        let Some(v) = self.vmas.iter_mut().find(|v| v.start == start) else {
            return false;
        };
        v.hugepage = huge;
        v.nohugepage = !huge;
        true
    }

    /// Removes every mapping in [start, end) of a private anonymous VMA and
    /// resets the range's shadow to zero-filled pages (`MADV_DONTNEED`,
    /// `zap_page_range_single()`): the VMA stays. Returns the folios unmapped
    /// as `munmap` does. Err (nothing changed) when a huge mapping straddles
    /// an end of the range: the kernel would split it first, which is not
    /// modelled here.
    pub fn zap_range(&mut self, start: u64, end: u64) -> Result<Vec<(u64, bool)>, String> {
        for k in [start >> PMD_SHIFT, (end - 1) >> PMD_SHIFT] {
            if let Some(Pmd::Huge(_)) = self.pmds.get(&k) {
                let (hs, he) = (k << PMD_SHIFT, (k + 1) << PMD_SHIFT);
                if start > hs || end < he {
                    return Err(format!(
                        "[{start:#x}, {end:#x}) cuts the huge page at {hs:#x}; a range that is not whole huge pages needs a split, which is not modelled"
                    ));
                }
            }
        }
        let mut freed = Vec::new();
        let keys: Vec<u64> = self
            .pmds
            .range(pmd_keys(start, end))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            let empty = match self.pmds.get_mut(&k).unwrap() {
                Pmd::Huge(p) => {
                    freed.push((p.pfn, true));
                    self.rss_pages -= 512;
                    true
                }
                Pmd::Table(t) => {
                    for i in 0..512u64 {
                        let va = (k << PMD_SHIFT) | (i << 12);
                        if va < start || va >= end {
                            continue;
                        }
                        if let Some(p) = t[i as usize].take() {
                            freed.push((p.pfn, false));
                            self.rss_pages -= 1;
                        }
                    }
                    t.iter().all(|e| e.is_none())
                }
            };
            if empty {
                self.pmds.remove(&k);
            }
        }
        if let Some(vma) = self.find_vma(start) {
            let vstart = vma.start;
            if let Some(s) = self.shadow.get_mut(&vstart) {
                let n = s.len();
                let (a, b) = ((start - vstart) >> 12, (end - vstart).div_ceil(4096));
                for tag in &mut s[a as usize..(b as usize).min(n)] {
                    *tag = super::page_alloc::TAG_ZERO;
                }
            }
        }
        self.generation += 1;
        Ok(freed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tlb_flush_batched_counts_pending_unmaps_and_catches_up_once() {
        let mut mm = Mm::new(1);
        assert!(!mm.take_tlb_flush_batched_pending(), "nothing pending");
        mm.set_tlb_flush_batched_pending();
        mm.set_tlb_flush_batched_pending();
        assert!(mm.take_tlb_flush_batched_pending(), "two unmaps pending");
        assert_eq!(
            mm.tlb_flush_batched,
            2 | (2 << TLB_FLUSH_BATCH_FLUSHED_SHIFT)
        );
        assert!(
            !mm.take_tlb_flush_batched_pending(),
            "caught up: no second flush"
        );
        mm.set_tlb_flush_batched_pending();
        assert!(mm.take_tlb_flush_batched_pending());
        // Past half the pending field the count restarts at 1 pending, 0 flushed.
        mm.tlb_flush_batched = TLB_FLUSH_BATCH_PENDING_LARGE + 1;
        mm.set_tlb_flush_batched_pending();
        assert_eq!(mm.tlb_flush_batched, 1);
        assert!(mm.take_tlb_flush_batched_pending());
    }
    #[test]
    fn mmap_fixed_noreplace_places_exactly_or_refuses() {
        let mut mm = Mm::new(1);
        let anon = VmaKind::AnonPrivate;
        assert_eq!(
            mm.mmap_fixed(0x1000_0000, 0x4000, anon, true),
            Ok(0x1000_0000)
        );
        assert_eq!(
            mm.mmap_fixed(0x1000_3000, 0x1000, anon, true),
            Err(17),
            "overlap: EEXIST"
        );
        assert_eq!(
            mm.mmap_fixed(0x1000_4000, 0x1000, anon, true),
            Ok(0x1000_4000),
            "adjacent"
        );
        for (addr, len) in [
            (0x1000_8001, 0x1000),
            (0x2000_0000, 0x10),
            (0x2000_0000, 0),
            (0x1000, 0x1000),
            (TASK_SIZE, 0x1000),
            (u64::MAX - 0xfff, 0x1000),
        ] {
            assert_eq!(
                mm.mmap_fixed(addr, len, anon, true),
                Err(22),
                "{addr:#x} {len:#x}: EINVAL"
            );
        }
        // A mapping placed later does not land on a fixed one.
        mm.mmap_fixed(0x7f00_0000_0000, 8 << 20, anon, true)
            .unwrap();
        let b = mm.mmap(4096, anon, true);
        assert!(b >= 0x7f00_0080_0000, "{b:#x}");
    }
    #[test]
    fn map_lookup_unmap() {
        let mut mm = Mm::new(1);
        let a = mm.mmap(3 << 20, VmaKind::AnonPrivate, true);
        assert_eq!(a % PMD_SIZE, 0);
        // The VMA ends where the length does (no rounding to 2 MiB); the
        // next one starts at a 2 MiB boundary past a hole.
        assert_eq!(mm.find_vma(a + (3 << 20) - 1).unwrap().start, a);
        assert!(mm.find_vma(a + (3 << 20)).is_none());
        let b = mm.mmap(4096, VmaKind::AnonPrivate, true);
        assert_eq!(b % PMD_SIZE, 0);
        assert!(b >= a + (4 << 20) + PMD_SIZE);
        assert_eq!(mm.find_vma(b).unwrap().end, b + 4096);
        let c = mm.mmap(5000, VmaKind::AnonPrivate, true);
        assert_eq!(mm.find_vma(c).unwrap().end - c, 8192, "rounded up to 4 KiB");
        mm.set_pmd_huge(a, Pte::new(1024, true));
        assert_eq!(
            mm.lookup(a + 5 * 4096 + 7),
            Some(Translation {
                pfn: 1029,
                writable: true,
                huge: true,
                gigantic: false
            })
        );
        mm.set_pte(a + PMD_SIZE + 4096, Pte::new(77, false));
        assert_eq!(mm.lookup(a + PMD_SIZE + 4096).unwrap().pfn, 77);
        assert_eq!(mm.lookup(a + PMD_SIZE), None);
        assert_eq!(mm.rss_pages, 513);
        let (_, freed) = mm.munmap(a).unwrap();
        assert_eq!(freed, vec![(1024, true), (77, false)]);
        assert_eq!(mm.rss_pages, 0);
        assert!(mm.lookup(a).is_none());
    }

    #[test]
    fn the_walk_sets_accessed_and_dirty_and_prot_none_hides_the_entry() {
        let mut mm = Mm::new(1);
        let a = mm.mmap(4 << 20, VmaKind::AnonPrivate, true);
        mm.set_pte(
            a,
            Pte {
                young: false,
                dirty: false,
                ..Pte::new(5, true)
            },
        );
        mm.set_pmd_huge(
            a + PMD_SIZE,
            Pte {
                young: false,
                dirty: false,
                ..Pte::new(1024, false)
            },
        );
        assert_eq!(mm.walk(a + 8, false).unwrap().pfn, 5);
        assert_eq!(mm.entry(a).map(|p| (p.young, p.dirty)), Some((true, false)));
        mm.walk(a, true);
        assert!(mm.entry(a).unwrap().dirty);
        // A write through a read-only entry sets the accessed bit only (then it faults).
        assert!(!mm.walk(a + PMD_SIZE, true).unwrap().writable);
        assert_eq!(
            mm.entry(a + PMD_SIZE).map(|p| (p.young, p.dirty)),
            Some((true, false))
        );
        mm.set_protnone(a + PMD_SIZE + 4096, true);
        assert_eq!(
            mm.walk(a + PMD_SIZE, false),
            None,
            "PROT_NONE: not present to the hardware"
        );
        assert!(mm.lookup(a + PMD_SIZE).is_some(), "but still mapped");
        mm.set_protnone(a + PMD_SIZE, false);
        assert!(mm.walk(a + PMD_SIZE, false).is_some());
    }

    #[test]
    fn hugetlb_1g_mapping() {
        let mut mm = Mm::new(1);
        let _ = mm.mmap(3 << 20, VmaKind::AnonPrivate, true);
        let g = mm.mmap_hugetlb(2 << 30, PUD_SHIFT);
        assert_eq!(g % PUD_SIZE, 0);
        assert_eq!(mm.find_vma(g).unwrap().kind, VmaKind::Hugetlb(30));
        mm.set_pud_huge(g + PUD_SIZE, Pte::new(1 << 18, true));
        let t = mm.lookup(g + PUD_SIZE + 5 * 4096 + 9).unwrap();
        assert_eq!((t.pfn, t.page_size()), ((1 << 18) + 5, PageSize::Size1G));
        assert!(mm.lookup(g).is_none());
        let (_, freed) = mm.munmap(g).unwrap();
        assert_eq!(freed, vec![(1 << 18, true)]);
        assert!(mm.lookup(g + PUD_SIZE).is_none());
    }

    #[test]
    fn entry_lines_follow_the_x86_64_index_split() {
        let mut pt = PgTables::default();
        let va: u64 = (3 << PGDIR_SHIFT) | (5 << PUD_SHIFT) | (17 << PMD_SHIFT) | (200 << 12);
        assert_eq!(pt.missing(va, Level::Pte).len(), 4);
        assert_eq!(pt.missing(va, Level::Pmd).len(), 3);
        assert_eq!(pt.missing(va, Level::Pud).len(), 2);
        pt.record(va, Level::Pgd, 10);
        pt.record(va, Level::Pud, 11);
        pt.record(va, Level::Pmd, 12);
        pt.record(va, Level::Pte, 13);
        assert!(pt.missing(va, Level::Pte).is_empty());
        // Eight entries a line: entry i of frame f is at line f*64 + i/8.
        assert_eq!(pt.line(va, Level::Pgd), Some(10 * 64));
        assert_eq!(pt.line(va, Level::Pud), Some(11 * 64));
        assert_eq!(pt.line(va, Level::Pmd), Some(12 * 64 + 2));
        assert_eq!(pt.line(va, Level::Pte), Some(13 * 64 + 25));
        // The next 2 MiB has no PTE table; the same PMD table holds its entry.
        let next = va + (1 << PMD_SHIFT);
        assert_eq!(pt.line(next, Level::Pte), None);
        assert_eq!(pt.line(next, Level::Pmd), Some(12 * 64 + 2));
        assert_eq!(pt.missing(next, Level::Pte), vec![Level::Pte]);
        assert_eq!(pt.nr_tables(), 4);
    }
}
