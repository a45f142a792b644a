//! The page cache's state (include/linux/pagemap.h, include/linux/fs.h):
//! every file's inode and `address_space`, the reverse index from a frame
//! to its file and index, and the page cache's counters. The paths that
//! change it are filemap.rs (faults, readahead), vmscan.rs and
//! workingset.rs (eviction and shadows).
//!
//! Invariants: a frame is in at most one page cache, at one index
//! (`owner`); `owner` holds exactly the frames of every inode's `pages`.

use std::collections::{BTreeMap, BTreeSet};

/// `struct file_ra_state` of the file's (one) open file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileRaState {
    pub start: u64,
    pub size: u64,
    pub async_size: u64,
    pub ra_pages: u64,
    pub mmap_miss: u32,
}

/// An inode and its `address_space`.
#[derive(Clone, Debug)]
pub struct Inode {
    pub ino: usize,
    /// File size in bytes (`i_size`).
    pub size: u64,
    /// The page cache: page index → frame of its 4 KiB folio.
    pub pages: BTreeMap<u64, u64>,
    /// Page indices whose folio is marked `PG_readahead`.
    pub readahead: BTreeSet<u64>,
    /// Every VMA mapping the file, as (mm, VMA start); the VMA's `pgoff` is in its kind.
    pub i_mmap: BTreeSet<(usize, u64)>,
    /// Shadow entries of evicted pages: index → (node, `nonresident_age` at eviction).
    pub shadows: BTreeMap<u64, (usize, u64)>,
    pub ra: FileRaState,
}

/// Every file of the system and the reverse index from frame to (file, index).
#[derive(Default)]
pub struct PageCache {
    pub inodes: Vec<Inode>,
    /// Its counters.
    pub stat: FilemapStat,
    /// `folio->mapping` and `folio->index` of every page-cache frame.
    pub owner: BTreeMap<u64, (usize, u64)>,
}

crate::counters! {
/// Page-cache and file-fault counters (`/proc/vmstat` names where they exist).
pub struct FilemapStat {
    /// Faults on file mappings (part of `pgfault`).
    pub pgfault_file: u64,
    /// /proc/vmstat `pgmajfault`: file faults that found the page not cached.
    pub pgmajfault: u64,
    /// Folios added to the page cache (by readahead or a fault).
    pub nr_page_cache_add: u64,
    /// Pages mapped by fault-around (`filemap_map_pages`), the faulting page excluded.
    pub fault_around_mapped: u64,
    /// Synchronous (`page_cache_sync_ra` / mmap read-around) and asynchronous readahead runs.
    pub readahead_sync: u64,
    pub readahead_async: u64,
}
}
