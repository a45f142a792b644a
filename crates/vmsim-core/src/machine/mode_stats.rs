//! A CPU's cache and TLB events split by the mode it was in (perf's `:u`
//! and `:k`): what it counted between each switch into the kernel and the
//! switch back. Every switch goes through `Machine::set_mode`, which calls
//! [`KernelShare::enter`] and [`KernelShare::leave`]; an interrupt charges
//! cycles only, no events.
//!
//! Invariant: `acc` plus, while the CPU is in the kernel, its counts since
//! `mark` are every event it counted in kernel mode.

use serde::Serialize;

use super::hierarchy::CacheStats;
use super::tlb::TlbStats;

/// Adds `now - was` to `acc`, field by field, for every named field; `N`
/// is their number (a test holds it to the struct's).
macro_rules! add_since {
    ($name:ident, $ty:ty, $n:ident, [$($f:ident),* $(,)?]) => {
        fn $name(acc: &mut $ty, now: &$ty, was: &$ty) {
            $(acc.$f += now.$f - was.$f;)*
        }
        #[cfg(test)]
        const $n: usize = [$(stringify!($f)),*].len();
    };
}

add_since!(
    cache_add_since,
    CacheStats,
    CACHE_FIELDS,
    [
        l1d_loads,
        l1d_stores,
        l1d_misses,
        l2_misses,
        llc_references,
        llc_misses,
        llc_demand_references,
        llc_demand_misses,
        pf_l1_requests,
        pf_l1_l2_misses,
        pf_l2_requests,
        pf_l2_misses,
        pf_llc_misses,
        l2_writebacks,
        remote_cache_hits,
        dram_reads,
        dram_remote_reads,
        nt_stores,
        back_invalidations,
        coherence_invalidations,
    ]
);

add_since!(
    tlb_add_since,
    TlbStats,
    TLB_FIELDS,
    [
        lookups,
        l1_hits,
        stlb_hits,
        misses,
        flushes_full,
        flushes_asid,
        flushes_page,
    ]
);

/// The events split by mode.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ModeCounters {
    pub cache: CacheStats,
    pub tlb: TlbStats,
    pub tlb_walks: u64,
}

impl ModeCounters {
    /// Adds `now - was`.
    pub fn add_since(&mut self, now: &ModeCounters, was: &ModeCounters) {
        cache_add_since(&mut self.cache, &now.cache, &was.cache);
        tlb_add_since(&mut self.tlb, &now.tlb, &was.tlb);
        self.tlb_walks += now.tlb_walks - was.tlb_walks;
    }
}

/// What a CPU counted in kernel mode.
#[derive(Clone, Debug, Default)]
pub struct KernelShare {
    /// The CPU's counts when it last entered the kernel.
    mark: ModeCounters,
    /// Its counts in the kernel before that.
    acc: ModeCounters,
}

impl KernelShare {
    /// The CPU enters the kernel, having counted `now`.
    #[inline]
    pub fn enter(&mut self, now: ModeCounters) {
        self.mark = now;
    }

    /// The CPU leaves the kernel, having counted `now`.
    #[inline]
    pub fn leave(&mut self, now: &ModeCounters) {
        self.acc.add_since(now, &self.mark);
    }

    /// The counts in kernel mode and in user mode of a CPU that has counted
    /// `all` and is in the kernel or not.
    pub fn split(&self, all: &ModeCounters, in_kernel: bool) -> (ModeCounters, ModeCounters) {
        let mut kernel = self.acc.clone();
        if in_kernel {
            kernel.add_since(all, &self.mark);
        }
        let mut user = ModeCounters::default();
        user.add_since(all, &kernel);
        (kernel, user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The field lists name every counter of the structs they split.
    #[test]
    fn every_counter_is_split() {
        let count = |v: serde_json::Value| v.as_object().unwrap().len();
        assert_eq!(
            count(serde_json::to_value(CacheStats::default()).unwrap()),
            CACHE_FIELDS
        );
        assert_eq!(
            count(serde_json::to_value(TlbStats::default()).unwrap()),
            TLB_FIELDS
        );
    }
}
