//! The page cache and the file read fault (mm/filemap.c, mm/readahead.c, and
//! mm/memory.c's `do_read_fault` / `do_fault_around`).
//!
//! A file is an inode with a size and an `address_space`: the page cache (an
//! ordered map from page index to the frame of its 4 KiB folio, standing for
//! the xarray), the folios marked `PG_readahead`, and `i_mmap`, every VMA
//! that maps the file (the reverse map of file folios, kernel/rmap.rs). The
//! files are sparse: every page is a hole, which `mpage_readahead` fills by
//! zeroing the folio, with no IO. A page-cache folio's content tag is
//! `file_page_tag(file, index)` (zero for a hole), set when the folio is
//! added; the reader checks every page it reads against it.
//!
//! A read fault on a `MAP_SHARED` file mapping (`do_read_fault`) first maps
//! the already-cached neighbours of the address (`do_fault_around` →
//! `filemap_map_pages`, a window of `fault_around_bytes` = 64 KiB, aligned,
//! clipped to the VMA, the PTE table and the file), skipping folios marked
//! for readahead; if the address itself is not mapped by that, `filemap_fault`
//! finds the folio (a folio marked `PG_readahead` starts the asynchronous
//! readahead of the next window) or, on a miss, reads around the address
//! (`do_sync_mmap_readahead`: `ra_pages` = 32 pages from index − 16, the
//! folio at 3/4 of the window marked) and maps it.
//!
//! Invariants: a frame is in at most one page cache, at one index
//! (`owner`); a page-cache folio's refcount is its mapcount plus one (the
//! cache's reference).

use super::locking::sections::{LRU_ADD_INSTR, TREE_INSERT_INSTR};
use super::locking::spinlocks::SpinRef;
use super::memory::FaultError;
use super::mm::{pte_index, Pmd, Pte, VmaKind, PMD_SHIFT};
use super::page_alloc::TAG_ZERO;
use super::pagemap::{FileRaState, Inode};
use super::{KFn, KStep, Kernel, Work};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// `fault_around_bytes` default (debugfs), 64 KiB.
pub const FAULT_AROUND_BYTES: u64 = 64 << 10;
/// `VM_READAHEAD_PAGES` = 128 KiB / PAGE_SIZE: the default `ra_pages` of a block device.
pub const VM_READAHEAD_PAGES: u64 = 32;
/// `MMAP_LOTSAMISS`: above this many net misses mmap read-around stops.
pub const MMAP_LOTSAMISS: u32 = 100;

/// The content tag of page `index` of file `ino`: a sparse file's holes read as zeros.
#[inline]
pub fn file_page_tag(_ino: usize, _index: u64) -> u64 {
    TAG_ZERO
}

impl Kernel {
    /// `truncate -s size`: a new sparse file; returns its inode number.
    pub fn create_sparse_file(&mut self, size: u64) -> usize {
        let ino = self.pagecache.inodes.len();
        // The address_space comes from the slab of the creating CPU's node.
        let node = self
            .cpus
            .nodes
            .get(self.sched.current.cpu)
            .copied()
            .unwrap_or(0);
        if let Some(sl) = self.locks.spin.as_mut() {
            sl.add_file(node);
        }
        let ra = FileRaState {
            start: 0,
            size: 0,
            async_size: 0,
            ra_pages: self.cfg.read_ahead_kb / 4,
            mmap_miss: 0,
        };
        self.pagecache.inodes.push(Inode {
            ino,
            size,
            pages: BTreeMap::new(),
            readahead: BTreeSet::new(),
            i_mmap: BTreeSet::new(),
            shadows: BTreeMap::new(),
            ra,
        });
        ino
    }

    /// `mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0)` of file `ino` in `mm`.
    pub fn mmap_file(&mut self, mm: usize, ino: usize, len: u64) -> u64 {
        let start = self.mms[mm].mmap(len, VmaKind::FileShared { ino, pgoff: 0 }, false);
        self.pagecache.inodes[ino].i_mmap.insert((mm, start));
        start
    }

    /// Takes a VMA being unmapped out of its file's `i_mmap` (`unlink_file_vma`).
    pub fn unlink_file_vma(&mut self, mm: usize, vma: &super::mm::Vma) {
        if let VmaKind::FileShared { ino, .. } = vma.kind {
            self.pagecache.inodes[ino].i_mmap.remove(&(mm, vma.start));
        }
    }

    /// The page-cache frame of (file, index), if cached.
    pub fn find_get_page(&self, ino: usize, index: u64) -> Option<u64> {
        self.pagecache.inodes[ino].pages.get(&index).copied()
    }

    fn last_index(&self, ino: usize) -> Option<u64> {
        let size = self.pagecache.inodes[ino].size;
        (size > 0).then(|| (size - 1) >> 12)
    }

    /// `filemap_add_folio` of a new folio read from a hole: allocated on the
    /// faulting node first, zeroed (`folio_zero_segment` of `mpage_readahead`:
    /// a memset, no IO), tagged, inserted. None when no memory is free.
    fn add_hole_folio(
        &mut self,
        ino: usize,
        index: u64,
        node: usize,
        readahead: bool,
        work: &mut VecDeque<Work>,
    ) -> Option<u64> {
        let pfn = self.alloc_file_folio(node, readahead);
        self.queue_pending_wakes(work, KFn::HandleMmFault);
        let pfn = pfn?;
        self.vmstat.pgalloc += 1;
        self.pagecache.stat.nr_page_cache_add += 1;
        // With kernel.spinlocks the tree insertion and the pagevec drain's
        // share run as sections under their locks; the fixed cost keeps the rest.
        let moved = self.moved_cycles(TREE_INSERT_INSTR, 0) + self.moved_cycles(LRU_ADD_INSTR, 1);
        let c =
            self.costs.page_alloc_cycles + self.costs.page_cache_add_cycles.saturating_sub(moved);
        work.push_back(Work::Cycles {
            cycles: c,
            instructions: c,
            what: KFn::FilemapAddFolio,
        });
        self.rmqueue_lock(pfn, 0, work);
        if self.locks.spin.is_some() {
            work.push_back(Work::Kernel(KStep::SpinSection {
                lock: SpinRef::Tree(ino),
                instr: TREE_INSERT_INSTR,
                what: KFn::FilemapAddFolio,
            }));
        }
        let pnode = self.mem.alloc.node_of_pfn(pfn);
        self.lru_cache_add_lock(pnode, KFn::LruCacheAdd, work);
        super::memory::clear_user_highpage(
            &mut self.mem.alloc,
            &mut self.vmstat,
            self.cfg.clear_page,
            pfn,
            work,
        );
        self.mem.alloc.tags[pfn as usize] = file_page_tag(ino, index);
        self.pagecache.inodes[ino].pages.insert(index, pfn);
        self.pagecache.owner.insert(pfn, (ino, index));
        let active = self.workingset_refault(ino, index);
        self.folio_add_lru(pfn, active);
        Some(pfn)
    }

    /// The page allocator's zonelist walk for a page-cache folio: the first
    /// node (local first) above its low watermark (`ALLOC_WMARK_LOW`), else,
    /// with every node's kswapd woken, the first above min. A readahead
    /// allocation (`__GFP_NORETRY`) gives up there; the faulting page's
    /// takes any free page (direct reclaim ran at fault entry if every node
    /// was at min, kernel/vmscan.rs).
    fn alloc_file_folio(&mut self, node: usize, readahead: bool) -> Option<u64> {
        let n = self.mem.alloc.nr_nodes;
        let order: Vec<usize> = (0..n).map(|i| (node + i) % n).collect();
        if let Some(&nd) = order
            .iter()
            .find(|&&nd| self.mem.alloc.nr_free[nd] > self.mem.pgdat[nd].wmark_low)
        {
            return self.alloc_pages_node(nd, 0);
        }
        for &nd in &order {
            self.wakeup_kswapd(nd);
        }
        if let Some(&nd) = order
            .iter()
            .find(|&&nd| self.mem.alloc.nr_free[nd] > self.mem.pgdat[nd].wmark_min)
        {
            return self.alloc_pages_node(nd, 0);
        }
        if readahead {
            return None;
        }
        self.alloc_near(node, 0)
    }

    /// `page_cache_ra_unbounded`: reads `nr` pages from `start` that are not
    /// cached (clipped to the file), marking the one `lookahead` from the end
    /// `PG_readahead`. Readahead allocations do not fail the fault: it stops
    /// at the first one that finds no memory.
    fn page_cache_ra(
        &mut self,
        ino: usize,
        start: u64,
        nr: u64,
        lookahead: u64,
        node: usize,
        work: &mut VecDeque<Work>,
    ) {
        let Some(last) = self.last_index(ino) else {
            return;
        };
        let mark = (start + nr).checked_sub(lookahead);
        for index in start..(start + nr).min(last + 1) {
            if self.find_get_page(ino, index).is_some() {
                continue;
            }
            if self.add_hole_folio(ino, index, node, true, work).is_none() {
                return;
            }
            if Some(index) == mark {
                self.pagecache.inodes[ino].readahead.insert(index);
            }
        }
    }

    /// `do_sync_mmap_readahead`: mmap read-around of `ra_pages` centred on the miss.
    fn do_sync_mmap_readahead(
        &mut self,
        ino: usize,
        index: u64,
        node: usize,
        work: &mut VecDeque<Work>,
    ) {
        let ra = &mut self.pagecache.inodes[ino].ra;
        if ra.ra_pages == 0 {
            return;
        }
        if ra.mmap_miss < MMAP_LOTSAMISS * 10 {
            ra.mmap_miss += 1;
        }
        if ra.mmap_miss > MMAP_LOTSAMISS {
            return;
        }
        ra.start = index.saturating_sub(ra.ra_pages / 2);
        ra.size = ra.ra_pages;
        ra.async_size = ra.ra_pages / 4;
        let (s, n, a) = (ra.start, ra.size, ra.async_size);
        self.pagecache.stat.readahead_sync += 1;
        self.page_cache_ra(ino, s, n, a, node, work);
    }

    /// `do_async_mmap_readahead` → `page_cache_async_ra`: a hit on a folio
    /// marked `PG_readahead` clears the mark and reads the next window
    /// (`get_next_ra_size`, capped at `ra_pages`), all of it asynchronous so
    /// its first folio is marked.
    fn do_async_mmap_readahead(
        &mut self,
        ino: usize,
        index: u64,
        node: usize,
        work: &mut VecDeque<Work>,
    ) {
        let inode = &mut self.pagecache.inodes[ino];
        if inode.ra.ra_pages == 0 {
            return;
        }
        inode.ra.mmap_miss = inode.ra.mmap_miss.saturating_sub(1);
        if !inode.readahead.remove(&index) {
            return;
        }
        let max = inode.ra.ra_pages;
        let get_next_ra_size = |cur: u64| {
            if cur < max / 16 {
                4 * cur
            } else if cur <= max / 2 {
                2 * cur
            } else {
                max
            }
        };
        let ra = &inode.ra;
        let expected = (ra.start + ra.size).saturating_sub(ra.async_size);
        let (start, size) = if ra.size > 0 && index == expected {
            // Push the window forward and ramp its size up.
            (ra.start + ra.size, get_next_ra_size(ra.size))
        } else {
            // A marked folio without matching state: page_cache_next_miss()
            // finds where the cached run after it ends and reads on from there.
            let Some(start) = (index + 1..=index + max).find(|i| !inode.pages.contains_key(i))
            else {
                return;
            };
            (start, get_next_ra_size(start - index + max))
        };
        let ra = &mut inode.ra;
        ra.start = start;
        ra.size = size;
        ra.async_size = ra.size;
        let (s, n, a) = (ra.start, ra.size, ra.async_size);
        self.pagecache.stat.readahead_async += 1;
        self.page_cache_ra(ino, s, n, a, node, work);
    }

    /// `do_read_fault`: a read fault at `addr` of a `MAP_SHARED` file VMA.
    pub(super) fn do_read_fault(
        &mut self,
        mm_id: usize,
        addr: u64,
        node: usize,
        work: &mut VecDeque<Work>,
    ) -> Result<(), FaultError> {
        let vma = self.mms[mm_id].find_vma(addr).expect("VMA").clone();
        let VmaKind::FileShared { ino, pgoff } = vma.kind else {
            unreachable!("do_read_fault on a VMA that maps no file")
        };
        let index = pgoff + ((addr - vma.start) >> 12);
        if self.last_index(ino).is_none_or(|l| index > l) {
            // Beyond the end of the file: SIGBUS.
            return Err(FaultError::Segv(addr));
        }
        self.pagecache.stat.pgfault_file += 1;
        let c = self.costs.page_fault_handler_cycles;
        work.push_back(Work::Cycles {
            cycles: c,
            instructions: c,
            what: KFn::HandleMmFault,
        });
        // should_fault_around(): fault_around_pages > 1.
        if self.cfg.fault_around_bytes >> 12 > 1
            && self.do_fault_around(mm_id, addr, &vma, ino, index, work)
        {
            return Ok(());
        }
        // filemap_fault().
        let pfn = match self.find_get_page(ino, index) {
            Some(pfn) => {
                self.do_async_mmap_readahead(ino, index, node, work);
                pfn
            }
            None => {
                self.pagecache.stat.pgmajfault += 1;
                self.do_sync_mmap_readahead(ino, index, node, work);
                match self.find_get_page(ino, index) {
                    Some(pfn) => pfn,
                    // __filemap_get_folio(FGP_CREAT): read-around was off or found no memory.
                    None => self
                        .add_hole_folio(ino, index, node, false, work)
                        .ok_or(FaultError::Oom)?,
                }
            }
        };
        // finish_fault(): map it once the folio is ready (after its zeroing).
        work.push_back(Work::Kernel(KStep::InstallFilePte {
            mm: mm_id,
            addr: addr & !4095,
            ino,
            index,
            pfn,
        }));
        Ok(())
    }

    /// `do_fault_around` → `filemap_map_pages`: maps the cached, not
    /// readahead-marked folios of the `fault_around_bytes` window around
    /// `addr` whose PTE is none. True if that mapped `addr` itself.
    fn do_fault_around(
        &mut self,
        mm_id: usize,
        addr: u64,
        vma: &super::mm::Vma,
        ino: usize,
        index: u64,
        work: &mut VecDeque<Work>,
    ) -> bool {
        let nr_pages = self.cfg.fault_around_bytes >> 12;
        let pte_off = pte_index(addr) as u64;
        let vma_off = (addr - vma.start) >> 12;
        let vma_pages = (vma.end - vma.start) >> 12;
        let from_pte = (pte_off & !(nr_pages - 1)).max(pte_off - pte_off.min(vma_off));
        let to_pte = (from_pte + nr_pages)
            .min(512)
            .min(pte_off + vma_pages - vma_off)
            - 1;
        let last = self.last_index(ino).expect("non-empty file");
        let start_pgoff = index + from_pte - pte_off;
        let end_pgoff = (index + to_pte - pte_off).min(last);
        let mut mapped = 0;
        let mut got_addr = false;
        let inode = &self.pagecache.inodes[ino];
        let cand: Vec<(u64, u64)> = inode
            .pages
            .range(start_pgoff..=end_pgoff)
            .filter(|(i, _)| !inode.readahead.contains(i))
            .map(|(&i, &p)| (i, p))
            .collect();
        let pgoff = index - ((addr - vma.start) >> 12);
        let found = !cand.is_empty();
        for (i, pfn) in cand {
            let va = vma.start + ((i - pgoff) << 12);
            if self.mms[mm_id].entry(va).is_some()
                || matches!(
                    self.mms[mm_id].pmds.get(&(va >> PMD_SHIFT)),
                    Some(Pmd::Huge(_))
                )
            {
                continue;
            }
            self.mem.alloc.map_folio(pfn, 1, false);
            self.mms[mm_id].set_pte(va, Pte::new(pfn, false));
            mapped += 1;
            if i == index {
                got_addr = true;
            } else {
                self.pagecache.stat.fault_around_mapped += 1;
            }
        }
        let ra = &mut self.pagecache.inodes[ino].ra;
        ra.mmap_miss = ra.mmap_miss.saturating_sub(mapped as u32);
        let c = mapped * self.costs.map_pages_per_pte_cycles;
        if self.cfg.pte_locks {
            // filemap_map_pages() takes the PTE table's lock at the first
            // page it can map (its entry may be taken already) and holds it
            // to the window's end; a window with no such page takes none.
            if found {
                work.push_back(Work::Kernel(KStep::PtlCycles {
                    mm: mm_id,
                    va: addr & !4095,
                    cycles: c,
                    what: KFn::HandleMmFault,
                }));
            }
        } else if mapped > 0 {
            work.push_back(Work::Cycles {
                cycles: c,
                instructions: c,
                what: KFn::HandleMmFault,
            });
        }
        got_addr
    }

    /// `finish_fault` → `set_pte_range` of a page-cache folio, once its
    /// zeroing is done, if the PTE is still none and the folio is still the
    /// cache's page at `index` (reclaim may have dropped it meanwhile; the
    /// access then simply faults again).
    pub fn install_file_pte(
        &mut self,
        mm_id: usize,
        addr: u64,
        ino: usize,
        index: u64,
        pfn: u64,
    ) -> bool {
        if self.find_get_page(ino, index) != Some(pfn) {
            return false;
        }
        let mm = &self.mms[mm_id];
        if mm.find_vma(addr).is_none() || mm.entry(addr).is_some() {
            self.vmstat.fault_race_backouts += 1;
            return false;
        }
        self.mem.alloc.map_folio(pfn, 1, false);
        self.mms[mm_id].set_pte(addr, Pte::new(pfn, false));
        true
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::{embedded_machines, KernelConfig, Preset};

    pub(crate) fn kernel() -> Kernel {
        let (name, text) = embedded_machines()
            .iter()
            .find(|(n, _)| *n == "xeon-e5-2699v3-2s")
            .unwrap();
        let preset = Preset::parse(text, name).unwrap();
        let cfg = KernelConfig::default();
        Kernel::new(cfg, preset.kernel_costs(), 1, 64 << 20)
    }

    /// Takes a read fault at page `i` and runs its installs.
    fn fault(k: &mut Kernel, mm: usize, base: u64, i: u64) {
        let mut w = VecDeque::new();
        k.handle_mm_fault(mm, base + i * 4096 + 8, false, 0, &mut w)
            .unwrap();
        for item in w {
            if let Work::Kernel(KStep::InstallFilePte {
                mm,
                addr,
                ino,
                index,
                pfn,
            }) = item
            {
                assert!(k.install_file_pte(mm, addr, ino, index, pfn));
            }
        }
    }

    fn mapped(k: &Kernel, mm: usize, base: u64, pages: u64) -> Vec<u64> {
        (0..pages)
            .filter(|i| k.mms[mm].entry(base + i * 4096).is_some())
            .collect()
    }

    #[test]
    fn read_around_then_fault_around_then_async_readahead() {
        let mut k = kernel();
        let ino = k.create_sparse_file(100 * 4096);
        let mm = k.new_mm();
        let base = k.mmap_file(mm, ino, 100 * 4096);
        // A miss reads around: ra_pages (32) from max(0, 0 - 16), the folio at 32 - 8 marked.
        fault(&mut k, mm, base, 0);
        assert_eq!(k.pagecache.inodes[ino].pages.len(), 32);
        assert_eq!(
            k.pagecache.inodes[ino]
                .readahead
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            vec![24]
        );
        assert_eq!(mapped(&k, mm, base, 100), vec![0]);
        assert_eq!(
            (k.pagecache.stat.pgmajfault, k.pagecache.stat.readahead_sync),
            (1, 1)
        );
        // The next fault maps its 64 KiB window (16 pages) from the cache.
        fault(&mut k, mm, base, 1);
        assert_eq!(mapped(&k, mm, base, 100), (0..16).collect::<Vec<_>>());
        assert_eq!(
            k.pagecache.stat.fault_around_mapped, 14,
            "pages 2..15: page 1 is the faulting one, 0 was mapped"
        );
        // Fault-around skips the readahead-marked folio ...
        fault(&mut k, mm, base, 16);
        assert_eq!(
            mapped(&k, mm, base, 100),
            (0..32).filter(|&i| i != 24).collect::<Vec<_>>()
        );
        // ... whose own fault starts the asynchronous readahead of the next window.
        fault(&mut k, mm, base, 24);
        assert_eq!(k.pagecache.stat.readahead_async, 1);
        assert_eq!(k.pagecache.inodes[ino].pages.len(), 64);
        assert_eq!(
            k.pagecache.inodes[ino]
                .readahead
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            vec![32]
        );
        assert_eq!(mapped(&k, mm, base, 100), (0..32).collect::<Vec<_>>());
        assert_eq!(
            k.pagecache.stat.pgmajfault, 1,
            "only the first fault missed the cache"
        );
        // Every cached page reads as a hole and is owned by its (file, index).
        for (&i, &pfn) in &k.pagecache.inodes[ino].pages {
            assert_eq!(k.mem.alloc.tag(pfn), file_page_tag(ino, i));
            assert_eq!(k.pagecache.owner[&pfn], (ino, i));
            assert_eq!(
                k.mem.alloc.folio_mapcount(pfn) + 1,
                k.mem.alloc.folios[pfn as usize].refcount
            );
        }
        // Readahead stops at the end of the file; a fault beyond it is an error.
        for i in [32, 64, 96] {
            fault(&mut k, mm, base, i);
        }
        assert_eq!(k.pagecache.inodes[ino].pages.len(), 100);
        let mut w = VecDeque::new();
        assert!(k
            .handle_mm_fault(mm, base + 100 * 4096, false, 0, &mut w)
            .is_err());
        assert!(
            k.handle_mm_fault(mm, base, true, 0, &mut w).is_err(),
            "PROT_READ"
        );
    }
}
