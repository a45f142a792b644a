//! Lock classes and their statistics in the shape of `/proc/lock_stat`
//! (`lock_stat`) and `perf lock`: acquisitions, contentions, wait and hold
//! times.

use serde::Serialize;

/// A lock class, named as `lock_stat` would name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockClass {
    /// The page lock: bit `PG_locked` of a `struct page`'s flags
    /// (`lock_page`/`trylock_page`/`unlock_page`). Bit locks are not lockdep
    /// classes, so the real `/proc/lock_stat` does not list it; the model
    /// reports it as if it did.
    PageLock,
    /// The buddy allocator's `zone->lock`: the per-CPU lists' refill
    /// (`rmqueue_bulk`) and drain (`free_pcppages_bulk`).
    ZoneLock,
    /// The LRU lists' lock: `zone->lru_lock` until 4.7, `pgdat->lru_lock`
    /// 4.8-5.10, `lruvec->lru_lock` since (one zone per node here, so the
    /// same lock).
    LruLock,
    /// A file's page-cache lock: `mapping->tree_lock` until 4.16,
    /// `mapping->i_pages`' xa_lock since.
    TreeLock,
    /// An mm's `mmap_lock` (`mmap_sem` before 5.8; `kernel.rwsems`).
    MmapLock,
    /// A file's `i_mmap_rwsem` (`kernel.rwsems`).
    IMmapRwsem,
    /// An `anon_vma`'s `rwsem` (`kernel.rwsems`).
    AnonVmaRwsem,
    /// A page-table page's split lock (`kernel.pte_locks`): the spinlock in
    /// its `struct page` that `ptlock_ptr()` returns (`pte_offset_map_lock`,
    /// `pmd_lock`); lockdep names the class by that expression.
    PteLock,
}

impl LockClass {
    pub const ALL: [LockClass; 8] = [
        LockClass::PageLock,
        LockClass::ZoneLock,
        LockClass::LruLock,
        LockClass::TreeLock,
        LockClass::MmapLock,
        LockClass::IMmapRwsem,
        LockClass::AnonVmaRwsem,
        LockClass::PteLock,
    ];
    pub fn name(self) -> &'static str {
        match self {
            LockClass::PageLock => "PG_locked",
            LockClass::ZoneLock => "&zone->lock",
            LockClass::LruLock => "&zone->lru_lock",
            LockClass::TreeLock => "&mapping->tree_lock",
            LockClass::MmapLock => "&mm->mmap_lock",
            LockClass::IMmapRwsem => "&mapping->i_mmap_rwsem",
            LockClass::AnonVmaRwsem => "&anon_vma->rwsem",
            LockClass::PteLock => "&(ptlock_ptr(page))->rlock",
        }
    }
}

/// One class's statistics (`lock_stat`'s columns; times in cycles).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LockStat {
    /// Times the lock was taken (`acquisitions`).
    pub acquisitions: u64,
    /// Acquisitions that found it held and had to wait (`contentions`).
    pub contentions: u64,
    /// Time from the first failed attempt to the acquisition, summed and
    /// longest (`waittime-total`, `waittime-max`).
    pub wait_cycles: u64,
    pub wait_max_cycles: u64,
    /// Time held, summed and longest (`holdtime-total`, `holdtime-max`).
    pub hold_cycles: u64,
    pub hold_max_cycles: u64,
    /// Times a waiter went to sleep on the lock (a woken waiter that finds
    /// the lock taken again sleeps again).
    pub sleeps: u64,
    /// Waiters an unlock woke.
    pub wakeups: u64,
}

/// Statistics of every class, indexed like `LockClass::ALL`.
#[derive(Clone, Debug, Default)]
pub struct LockStats(pub [LockStat; LockClass::ALL.len()]);

impl LockStats {
    pub fn class(&mut self, c: LockClass) -> &mut LockStat {
        &mut self.0[c as usize]
    }

    pub fn get(&self, c: LockClass) -> &LockStat {
        &self.0[c as usize]
    }

    /// `{ class name: its statistics }`, for the run's counters.
    pub fn to_json(&self) -> serde_json::Value {
        let m: serde_json::Map<String, serde_json::Value> = LockClass::ALL
            .iter()
            .map(|c| {
                (
                    c.name().to_string(),
                    serde_json::to_value(self.get(*c)).expect("plain counters"),
                )
            })
            .collect();
        serde_json::Value::Object(m)
    }
}
