//! Refault detection (mm/workingset.c): an evicted page-cache folio leaves a
//! shadow entry holding its node's `nonresident_age` at eviction. When the
//! page is read again, the refault distance (ages since) tells whether it
//! would have stayed resident with the active list's room: if the distance
//! fits in the active file list, the refaulting folio starts out active
//! (`workingset_activate_file`). Every refault is `workingset_refault_file`.
//!
//! Simplified: one age per node, bumped by evictions and activations (the
//! kernel's `workingset_age_nonresident`); the workingset size is the node's
//! active file list alone (no anon lists exist).

use super::Kernel;

impl Kernel {
    /// `workingset_eviction`: the shadow entry left for (file, index).
    pub fn workingset_eviction(&mut self, ino: usize, index: u64, node: usize) {
        self.reclaim.nonresident_age[node] += 1;
        let age = self.reclaim.nonresident_age[node];
        self.pagecache.inodes[ino]
            .shadows
            .insert(index, (node, age));
    }

    /// `workingset_refault`: a folio being added where a shadow entry was.
    /// True if it should start on the active list.
    pub fn workingset_refault(&mut self, ino: usize, index: u64) -> bool {
        let Some((node, age)) = self.pagecache.inodes[ino].shadows.remove(&index) else {
            return false;
        };
        self.reclaim.stat.workingset_refault_file += 1;
        let distance = self.reclaim.nonresident_age[node] - age;
        if distance <= self.reclaim.lru.nodes[node].active_file.len() as u64 {
            self.reclaim.stat.workingset_activate_file += 1;
            self.reclaim.nonresident_age[node] += 1;
            return true;
        }
        false
    }
}
