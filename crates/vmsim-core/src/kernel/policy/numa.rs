//! The NUMA hinting-fault order (`do_numa_page()`): whether the faulting
//! PTE is made accessible before the misplaced page's migration is tried
//! (before 5.13) or only if the page is not migrated (5.13+, b99a342d4f11).
//! The kernel (kernel/memory.rs) carries the order out; whether the page is
//! misplaced stays the kernel's (`mpol_misplaced()`).

/// When the entry of a NUMA hinting fault becomes accessible again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HintOrder {
    /// Before the migration is tried: a migration then has to flush TLBs.
    MapThenMigrate,
    /// After: the page migrates while no TLB can hold it.
    MigrateThenMap,
}

/// What the order is decided from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HintCtx {
    /// The node holding the page.
    pub page_node: usize,
    /// The node of the faulting CPU.
    pub cpu_node: usize,
}

/// A hinting-fault policy. Depends on `ctx` alone.
pub trait NumaHintPolicy: Send + Sync {
    fn decide(&self, ctx: &HintCtx) -> Result<HintOrder, String>;
}

/// The built-in orders, the same for every fault.
pub struct Fixed(pub HintOrder);
impl NumaHintPolicy for Fixed {
    fn decide(&self, _ctx: &HintCtx) -> Result<HintOrder, String> {
        Ok(self.0)
    }
}
