//! The machine's own parameters, typed and in the units the model uses
//! (cycles, bytes, bytes per cycle, policy enums). Whoever builds a machine
//! (the preset loader, a test) converts into these; the model reads nothing
//! else, so it knows no file format and no source of a value.

use super::cache::Replacement;
pub use super::hierarchy::PerfCacheEvents;
use super::ipi::IpiCosts;
pub use super::prefetch::PrefetchParams;
use super::tlb::TlbConfig;
use super::topology::Topology;

/// Cycles to issue a line's eight 8 B scalar stores at the core's
/// `scalar_stores_per_cycle` (at least one cycle).
pub fn scalar_store_line_cycles(scalar_stores_per_cycle: u64) -> u64 {
    8u64.div_ceil(scalar_stores_per_cycle.max(1))
}

/// One cache level of the hierarchy.
#[derive(Clone, Debug)]
pub struct CacheLevelParams {
    pub bytes: u64,
    pub ways: u64,
    pub latency_cycles: u64,
    pub replacement: Replacement,
    /// L1: line fill buffers; L2: superqueue entries; LLC: unused (0).
    pub outstanding: u64,
    /// Bytes per cycle one core can take from this level: L2, its fills of the
    /// L1; LLC, the fills of the core's L2 from the LLC and beyond (0: no
    /// limit; L1: unused).
    pub sustained_bytes_per_cycle: f64,
    /// L2 and LLC: dirty victims of the level below (L1 victims, L2
    /// victims) leave over the same path and take their share of
    /// `sustained_bytes_per_cycle` (L1: unused).
    pub writebacks_share_sustained: bool,
}

/// Where ownership without data is granted to a no-RFO full-line store that
/// misses the LLC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoRfoGrant {
    /// At the LLC, for the LLC latency.
    Llc,
    /// Only once the home has ruled out copies in other sockets: the line's
    /// idle DRAM latency.
    Memory,
    /// After this many cycles for a local home, a remote one adding the
    /// remote-local DRAM latency difference: a grant whose time one core's
    /// measured ownership-only store rate gives (Little's law over the fill
    /// buffers), shorter than a read's round trip.
    Cycles(u64),
}

/// Which lines of a string store longer than the bypass threshold skip the
/// caches (`string.nocache_by`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NocacheBy {
    /// All of them: a step in the call's length.
    Call,
    /// Those stored while more than the threshold remains to be stored: the
    /// call's last threshold bytes are cached, so the bypassed share ramps
    /// with the length.
    Remaining,
}

#[derive(Clone, Debug)]
pub struct MachineParams {
    pub topo: Topology,
    pub freq_mhz: u64,
    pub issue_width: u64,
    pub store_bytes_per_cycle: u64,
    /// 8 B scalar stores issued a cycle (the store ports' rate for `mov`).
    pub scalar_stores_per_cycle: u64,
    /// Cycles to issue one line of 8 B non-temporal (`movnti`) stores.
    pub movnti_line_cycles: u64,
    /// Entries of one thread's store queue.
    pub store_queue_entries: u64,
    pub l1d: CacheLevelParams,
    pub l2: CacheLevelParams,
    pub llc: CacheLevelParams,
    pub llc_inclusive: bool,
    pub tlb: TlbConfig,
    pub stlb_latency_cycles: u64,
    pub walk_cycles: u64,
    pub dram_local_cycles: u64,
    pub dram_remote_cycles: u64,
    /// How long a non-temporal (write-combining) line holds its fill buffer and
    /// superqueue entry after leaving the core, for a line of the local node; a
    /// remote home adds the remote-local latency difference.
    pub posted_write_cycles: u64,
    /// A dirty L2 victim holds a superqueue entry for the LLC latency on its way out.
    pub l2_writeback_holds_superqueue: bool,
    pub remote_cache_cycles: u64,
    /// QPI/UPI hops from each NUMA node to each other (`[numa] hops`), node
    /// by node; empty: every node of another socket is one hop away. The
    /// nodes of one socket are zero hops from each other and share a row.
    pub numa_hops: Vec<Vec<u8>>,
    /// What each hop beyond the first adds to a remote access (memory,
    /// cache-to-cache, the acceptance of a posted write).
    pub extra_hop_cycles: u64,
    /// Sustained DRAM bandwidth of one NUMA node.
    pub dram_bytes_per_cycle: f64,
    /// Bandwidth of the inter-socket link.
    pub link_bytes_per_cycle: f64,
    pub string_startup_cycles: u64,
    /// No store of a string instruction issues before every line store of
    /// the thread's previous one is granted, and its start-up runs after
    /// that (Intel SDM Vol. 3A §8.2.4.1; `string.drain_at_boundary`).
    pub string_drain: bool,
    /// Full-line string stores take ownership without reading the line.
    pub no_rfo_full_lines: bool,
    pub no_rfo_grant: NoRfoGrant,
    /// How long a line a string store writes without allocating holds its
    /// miss buffer, where measured apart from other unread lines (None:
    /// `posted_write_cycles`, as they do).
    pub string_bypass_hold_cycles: Option<u64>,
    /// How long a `clzero` line holds its miss buffer, where measured apart
    /// from other unread lines (None: `posted_write_cycles`).
    pub clzero_hold_cycles: Option<u64>,
    /// What an `sfence` waits after the last earlier unread line of its
    /// thread left its buffer (None: it waits for nothing the model holds).
    pub sfence_drain_cycles: Option<u64>,
    /// String stores of regions larger than this many bytes do not allocate in the caches (0 = never).
    pub nocache_threshold_bytes: u64,
    /// Which lines of such a string store bypass the caches.
    pub nocache_by: NocacheBy,
    /// The CPU has `clzero` (AMD; CPUID Fn8000_0008 EBX bit 0).
    pub clzero: bool,
    /// The cores' hardware prefetchers.
    pub prefetch: PrefetchParams,
    /// What perf's generic cache events count on the chip (for `llc_references`/`llc_misses`).
    pub perf_cache_events: PerfCacheEvents,
    pub ipi: IpiCosts,
    pub tlb_flush_full_cycles: u64,
    pub invlpg_cycles: u64,
    /// Broadcast TLB invalidation (AMD INVLPGB/TLBSYNC); None: the CPU lacks it.
    pub invlpgb: Option<InvlpgbCosts>,
    /// The CPU's idle states, shallowest first (empty: leaving idle costs nothing).
    pub idle_states: Vec<IdleState>,
}

/// An idle state (a C-state): what leaving it costs, and how long an idle
/// period must be for the state to be chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdleState {
    pub name: String,
    pub exit_cycles: u64,
    pub target_residency_cycles: u64,
}

/// What a broadcast invalidation costs the CPU that issues it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvlpgbCosts {
    /// Issuing one INVLPGB.
    pub invlpgb_cycles: u64,
    /// TLBSYNC: waiting until every processor has carried out the
    /// invalidations this CPU broadcast.
    pub tlbsync_cycles: u64,
}

#[cfg(test)]
mod tests {
    use super::scalar_store_line_cycles;
    use crate::kernel::instr::mov_clear_line_issue;

    #[test]
    fn a_line_of_eight_scalar_stores_issues_at_the_store_ports_rate() {
        assert_eq!(scalar_store_line_cycles(1), 8);
        assert_eq!(scalar_store_line_cycles(2), 4);
        assert_eq!(scalar_store_line_cycles(3), 3);
        assert_eq!(scalar_store_line_cycles(8), 1);
        // `clear_page_orig`'s 11 instructions a line bound it where the
        // ports are faster than the issue width.
        assert_eq!(mov_clear_line_issue(4, 1), 8);
        assert_eq!(mov_clear_line_issue(4, 2), 4);
        assert_eq!(mov_clear_line_issue(2, 2), 6);
        assert_eq!(mov_clear_line_issue(6, 8), 2);
    }
}
