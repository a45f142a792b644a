//! Where the kernel takes its reader-writer semaphores (`kernel.rwsems`):
//! which semaphore an mm or a file has, given its line on first use, and
//! `down_read`/`up_read`/`down_write`/`up_write` on a CPU with the lock
//! statistics. One semaphore's behaviour is rwsem.rs's.

use super::lock_stat::{LockClass, LockStats};
use super::rwsem::{RwSem, SemRef};
use crate::kernel::hw::Hw;
use crate::kernel::Kernel;

impl Kernel {
    /// The semaphore `r`, given a line on `node` if it has none yet.
    fn rwsem(&mut self, r: SemRef, node: usize) -> Option<&mut RwSem> {
        let rw = self.locks.rwsem.as_mut()?;
        let (key, class) = match r {
            SemRef::Mmap(mm) => ((0, mm), LockClass::MmapLock),
            SemRef::IMmap(ino) => ((1, ino), LockClass::IMmapRwsem),
            SemRef::AnonVma(mm) => ((2, mm), LockClass::AnonVmaRwsem),
        };
        if !rw.sems.contains_key(&key) {
            let line = match (&mut self.locks.spin, &mut rw.kdata) {
                (Some(sl), _) => sl.kdata.line(node),
                (None, Some(kd)) => kd.line(node),
                (None, None) => return None,
            };
            rw.sems.insert(key, RwSem::new(line, class));
        }
        rw.sems.get_mut(&key)
    }

    /// Runs `op` on semaphore `r` for `hw.cpu` (`kernel.rwsems`; nothing
    /// otherwise), with the lock statistics.
    fn on_rwsem(
        &mut self,
        hw: &mut Hw,
        r: SemRef,
        op: impl FnOnce(&mut RwSem, &mut Hw, &mut LockStats),
    ) {
        if self.locks.rwsem.is_none() {
            return;
        }
        let node = self.cpus.nodes.get(hw.cpu).copied().unwrap_or(0);
        let mut stats = std::mem::take(&mut self.locks.stats);
        if let Some(s) = self.rwsem(r, node) {
            op(s, hw, &mut stats);
        }
        self.locks.stats = stats;
    }

    /// `down_read(r)` on `hw.cpu`.
    pub fn down_read(&mut self, hw: &mut Hw, r: SemRef) {
        self.on_rwsem(hw, r, |s, hw, st| {
            s.down_read(hw, st);
        });
    }

    /// `up_read(r)` on `hw.cpu`.
    pub fn up_read(&mut self, hw: &mut Hw, r: SemRef) {
        self.on_rwsem(hw, r, |s, hw, _| s.up_read(hw));
    }

    /// `down_write(r)` on `hw.cpu`.
    pub fn down_write(&mut self, hw: &mut Hw, r: SemRef) {
        self.on_rwsem(hw, r, |s, hw, st| {
            s.down_write(hw, st);
        });
    }

    /// `up_write(r)` on `hw.cpu`.
    pub fn up_write(&mut self, hw: &mut Hw, r: SemRef) {
        self.on_rwsem(hw, r, |s, hw, st| s.up_write(hw, st));
    }

    /// The file whose `i_mmap` an rmap walk of page-cache folio `pfn`
    /// takes for read (`rmap_walk_file` → `i_mmap_lock_read`), taken on
    /// `hw.cpu`; None (nothing taken) without `kernel.rwsems`.
    pub fn i_mmap_lock_read(&mut self, hw: &mut Hw, pfn: u64) -> Option<usize> {
        self.locks.rwsem.as_ref()?;
        let &(ino, _) = self.pagecache.owner.get(&pfn)?;
        self.down_read(hw, SemRef::IMmap(ino));
        Some(ino)
    }

    /// `i_mmap_unlock_read` of what [`Kernel::i_mmap_lock_read`] took.
    pub fn i_mmap_unlock_read(&mut self, hw: &mut Hw, ino: Option<usize>) {
        if let Some(ino) = ino {
            self.up_read(hw, SemRef::IMmap(ino));
        }
    }
}
