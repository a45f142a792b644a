//! Page reclaim (mm/vmscan.c) and its counters.

crate::counters! {
/// Reclaim and LRU counters with their /proc/vmstat names.
pub struct ReclaimStat {
    /// Folios moved to an active list (`folio_activate`, or by reclaim for referenced mapped folios).
    pub pgactivate: u64,
    /// Folios moved from the active to the inactive list by `shrink_active_list`.
    pub pgdeactivate: u64,
}
}
