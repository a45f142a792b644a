//! The cache hierarchy: per-core L1d and L2 (shared by SMT siblings), one LLC
//! per LLC instance (per socket on Intel, per CCX on AMD), coherence between
//! them, and the DRAM/link traffic their misses and write-backs cause.
//!
//! Coherence is MESI-like at line granularity:
//! - each LLC line keeps core-valid bits (`sharers`, bit = core within the
//!   instance) and `EXCL` (no other LLC instance holds the line);
//! - a store needs exclusivity: it invalidates other cores' copies (found
//!   through the core-valid bits) and, unless `EXCL`, other instances' copies;
//! - an LLC miss probes the other instances (a dirty copy there is forwarded
//!   cache-to-cache instead of read from DRAM).
//!
//! Inclusive LLCs back-invalidate private copies when they evict. Non-inclusive
//! LLCs are filled by L2 victims only; their cross-core coherence is tracked
//! only for lines that are in the LLC (a documented simplification).
//!
//! Invariants: a line is in at most one way of a cache; with an inclusive LLC
//! every line in an L1/L2 is in its instance's LLC with its core's bit set;
//! every dirty line leaving the last cache that holds it is written to DRAM.

use super::cache::{Cache, CacheGeometry, Evicted, Replacement, Split, NO_AUX};
use super::divisor::Divisor;
use super::memory::Calendar;
use super::topology::Topology;
use serde::Serialize;

/// Core-valid bit reserved to mean "no other LLC instance holds this line".
pub const EXCL: u64 = 1 << 63;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    Load,
    /// An ordinary store: a miss reads the line first (RFO).
    Store,
    /// A fast-string store of a whole line: no RFO where the chip allows it.
    StringStore,
    /// A non-temporal store of a whole line: bypasses and evicts the caches.
    NtStore,
}

impl AccessKind {
    #[inline]
    pub fn is_store(self) -> bool {
        !matches!(self, AccessKind::Load)
    }
}

/// Who asks: a demand access or one of the core's prefetchers (into L1, or into L2 only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Req {
    Demand,
    PfL1,
    PfL2,
}

/// Where an access was served from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    L1,
    L2,
    Llc,
    /// Another LLC instance (other socket or CCX) forwarded the line.
    /// `hops`: socket-link hops from the nearest holder (0: a CCX of the
    /// same socket).
    RemoteCache {
        hops: u8,
    },
    /// Ownership granted without data (no-RFO string store, LLC miss).
    /// `hops`: socket-link hops to the line's home (0: this socket's memory).
    NoFill {
        hops: u8,
    },
    Dram {
        hops: u8,
    },
    /// Non-temporal store written to memory.
    NtWrite {
        hops: u8,
    },
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CacheStats {
    pub l1d_loads: u64,
    pub l1d_stores: u64,
    pub l1d_misses: u64,
    pub l2_misses: u64,
    /// What perf's `cache-references` / `cache-misses` count on the chip
    /// ([`PerfCacheEvents`]): demand and L1-prefetch requests at the LLC
    /// (Intel), or every request at the L2 and the L1 requests that miss it (AMD).
    pub llc_references: u64,
    pub llc_misses: u64,
    /// Demand requests (loads, RFOs, ownership requests) that looked up / missed the LLC.
    pub llc_demand_references: u64,
    pub llc_demand_misses: u64,
    /// L1 next-line prefetches sent to the L2 (they missed the L1), and those that missed it.
    pub pf_l1_requests: u64,
    pub pf_l1_l2_misses: u64,
    /// L2 streamer prefetches that looked up the L2 (hit or miss), and those that missed it.
    pub pf_l2_requests: u64,
    pub pf_l2_misses: u64,
    /// Prefetches (either prefetcher) that missed the LLC.
    pub pf_llc_misses: u64,
    /// Dirty lines evicted from the L2 (to the LLC or memory).
    pub l2_writebacks: u64,
    pub remote_cache_hits: u64,
    pub dram_reads: u64,
    pub dram_remote_reads: u64,
    pub nt_stores: u64,
    pub back_invalidations: u64,
    pub coherence_invalidations: u64,
}

/// Which requests perf's generic `cache-references` / `cache-misses` events
/// count on the chip (Linux `arch/x86/events`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerfCacheEvents {
    /// Intel: `LONGEST_LAT_CACHE.REFERENCE` / `.MISS` (0x4f2e / 0x412e): core
    /// requests that look up the LLC, excluding the L2 prefetcher's.
    Llc,
    /// AMD Zen: `L2RequestG1` all (0xff60, L2 prefetcher included) and
    /// `L2CacheReqStat` instruction and data cache misses in L2 (0x0964).
    L2,
}

pub struct Latencies {
    /// A no-RFO ownership grant waits for the home's DRAM-class round trip
    /// (memory directory or other-socket snoop) rather than for the LLC.
    pub no_rfo_grant_at_home: bool,
    /// When it is: the grant's latency for a local home and for a home one
    /// hop away (the line's idle DRAM latencies unless the preset measured it).
    pub grant_local: u64,
    pub grant_remote: u64,
    /// Load-to-use of an L1 hit: what a dependent load waits (an independent
    /// one overlaps it).
    pub l1: u64,
    pub l2: u64,
    pub llc: u64,
    pub remote_cache: u64,
    pub dram_local: u64,
    pub dram_remote: u64,
    /// How long a non-temporal (write-combining) line holds its buffer after
    /// leaving the core, until its home accepts it (local / remote home).
    pub nt_local: u64,
    pub nt_remote: u64,
    /// Added to a remote latency (`remote_cache`, `dram_remote`, `nt_remote`
    /// and a no-RFO grant at home) for each socket-link hop beyond the first.
    pub extra_hop: u64,
}

pub struct Hierarchy {
    pub topo: Topology,
    l1: Vec<Cache>,
    l2: Vec<Cache>,
    llc: Vec<Cache>,
    inclusive: bool,
    no_rfo: bool,
    perf_at_l2: bool,
    pub lat: Latencies,
    pub dram: Vec<Calendar>,
    /// Outgoing socket-link bandwidth, per socket.
    pub link: Vec<Calendar>,
    /// Per LLC instance and home node (`u * nodes + node`), the cores of the
    /// instance that have ever filled a line of that node's memory: a core
    /// that never did holds none of its lines (the probe filter for private
    /// copies under a non-inclusive LLC, and `is_local`'s). Kept for
    /// non-inclusive LLCs only: an inclusive one's presence counts cover
    /// the private caches.
    active_home: Vec<u64>,
    /// Set in a partition's stand-in (sim/window.rs): effects of
    /// its work on what other partitions read are queued until it hands its
    /// state back, so the partitions' order does not matter. Those are
    /// write-backs to another socket's memory (posted: the fill does not
    /// wait for them) and the presence counts of lines homed on another
    /// socket entering or leaving this socket's LLCs. Neither can make
    /// another socket's access wrongly local: a count too high only makes it
    /// park, and a non-inclusive LLC gains such a line only from a private
    /// cache whose core's `active_home` bit already parks the line's socket.
    defer: bool,
    deferred_wb: Vec<(u64, u32, u64)>,
    /// (home node, index, up): a presence count's deferred change, in order.
    deferred_presence: Vec<(u32, u32, bool)>,
    /// Longest DRAM queueing wait of a write-back forced by the access in progress:
    /// a fill cannot complete before its dirty victim has left (back-pressure).
    wb_wait: u64,
    /// Dirty L2 victims of the access in progress: each leaves the core through
    /// its miss queue (the machine charges them an entry) and over the path
    /// between the L2 and the LLC.
    l2_writebacks: u32,
    /// Dirty L1 victims of the access in progress: each crosses the path
    /// between the L1 and the L2.
    l1_writebacks: u32,
    /// How many lines of each 4 KiB region each LLC instance holds: an
    /// exact filter that lets a miss skip probing instances that cannot
    /// have the line. Kept by the region's home node, the instances of a
    /// region side by side (`presence[node][local_region * llcs + u]`), so
    /// a node's counts move with its socket's partition in a windowed run.
    presence: Vec<Vec<u16>>,
    /// Regions per node (`node_bytes / 4096`).
    node_regions: usize,
    /// Per core, its LLC instance, its bit there and its socket (the
    /// topology's divisions, done once).
    core_llc: Vec<(u32, u32, u32)>,
    /// Cores per LLC instance, and each node's socket (the divisions of
    /// `Topology::cores_per_llc` and `socket_of_node`, done once).
    cores_per_llc: usize,
    node_socket: Vec<usize>,
    /// Socket-link hops from each socket to each node's memory
    /// (`socket * nodes + node`; 0 for the socket's own nodes).
    node_hops: Vec<u8>,
    /// Hops from the socket to the nearest other LLC instance that held the
    /// line the last probe found.
    probe_hops: u8,
    /// Memory bytes per NUMA node, to divide by: physical addresses are
    /// laid out node by node.
    node_div: Divisor,
    /// The per-request path's spec (spec.rs): what the caches and flags fit.
    spec: SpecId,
}

pub struct HierarchyParams {
    pub topo: Topology,
    pub l1: (u64, u64, Replacement),
    pub l2: (u64, u64, Replacement),
    pub llc: (u64, u64, Replacement),
    pub inclusive: bool,
    pub no_rfo: bool,
    pub perf_events: PerfCacheEvents,
    pub lat: Latencies,
    pub node_bytes: u64,
    pub dram_bytes_per_cycle: f64,
    pub link_bytes_per_cycle: f64,
    /// Hops between NUMA nodes, node by node (empty: every node of another
    /// socket is one hop away).
    pub numa_hops: Vec<Vec<u8>>,
    pub seed: u64,
}

fn mk(size_bytes: u64, ways: u64, pol: Replacement, seed: u64) -> Result<Cache, String> {
    let sets = size_bytes / 64 / ways;
    Cache::new(
        CacheGeometry {
            sets: sets as u32,
            ways: ways as u32,
        },
        pol,
        seed,
    )
}

impl Hierarchy {
    pub fn new(p: HierarchyParams) -> Result<Hierarchy, String> {
        let t = &p.topo;
        let mut l1 = Vec::new();
        let mut l2 = Vec::new();
        let mut llc = Vec::new();
        for c in 0..t.nr_cores() as u64 {
            // Core-valid bits live in the LLC; private caches keep none.
            l1.push(mk(p.l1.0, p.l1.1, p.l1.2, p.seed ^ (c << 8) ^ 1)?.without_sharers());
            let c2 = mk(p.l2.0, p.l2.1, p.l2.2, p.seed ^ (c << 8) ^ 2)?.without_sharers();
            // Under an inclusive LLC each L2 line remembers its LLC slot, so a
            // dirty victim's write-back finds it without searching the set.
            l2.push(if p.inclusive { c2.with_aux() } else { c2 });
        }
        for i in 0..t.nr_llcs() as u64 {
            llc.push(mk(p.llc.0, p.llc.1, p.llc.2, p.seed ^ (i << 8) ^ 3)?);
        }
        // Caches store compact tags: every line of memory must fit them.
        let lines = p.node_bytes * t.nr_nodes() as u64 / 64;
        if let Some(c) = l1
            .iter()
            .chain(&l2)
            .chain(&llc)
            .find(|c| lines > c.line_limit())
        {
            return Err(format!(
                "{lines} lines of memory exceed what a cache of {:?} can tag",
                c.geometry()
            ));
        }
        let dram = (0..t.nr_nodes())
            .map(|_| Calendar::new(p.dram_bytes_per_cycle))
            .collect();
        let t_llcs = t.nr_llcs();
        let node_regions = (p.node_bytes / 4096) as usize;
        // The last node's counts also cover the region just past memory.
        let presence = (0..t.nr_nodes())
            .map(|_| vec![0u16; (node_regions + 1) * t_llcs])
            .collect();
        let link = (0..t.sockets)
            .map(|_| Calendar::new(p.link_bytes_per_cycle))
            .collect();
        let core_llc = (0..t.nr_cores())
            .map(|c| {
                let (u, bit) = t.llc_of_core(c);
                (u as u32, bit as u32, (u / t.llc_per_socket) as u32)
            })
            .collect();
        let cores_per_llc = t.cores_per_llc();
        let node_socket: Vec<usize> = (0..t.nr_nodes()).map(|n| t.socket_of_node(n)).collect();
        // A socket's hops are its first node's row.
        let node_hops = (0..t.sockets)
            .flat_map(|s| {
                let node_socket = &node_socket;
                let numa_hops = &p.numa_hops;
                (0..t.nr_nodes()).map(move |n| match numa_hops.get(s * t.nodes_per_socket) {
                    Some(row) => row[n],
                    None => u8::from(node_socket[n] != s),
                })
            })
            .collect();
        let mut h = Hierarchy {
            active_home: vec![0; t.nr_llcs() * t.nr_nodes()],
            defer: false,
            deferred_wb: Vec::new(),
            deferred_presence: Vec::new(),
            topo: p.topo,
            l1,
            l2,
            llc,
            inclusive: p.inclusive,
            no_rfo: p.no_rfo,
            perf_at_l2: p.perf_events == PerfCacheEvents::L2,
            lat: p.lat,
            dram,
            link,
            wb_wait: 0,
            l2_writebacks: 0,
            l1_writebacks: 0,
            presence,
            node_regions,
            core_llc,
            cores_per_llc,
            node_socket,
            node_hops,
            probe_hops: 0,
            node_div: Divisor::new(p.node_bytes.max(1)),
            spec: SpecId::Any,
        };
        h.spec = h.pick_spec();
        Ok(h)
    }

    #[inline]
    pub fn home_node(&self, line: u64) -> usize {
        let node = self.node_div.div(line << 6);
        (node as usize).min(self.dram.len() - 1)
    }

    /// Socket-link hops from `socket` to `node`'s memory.
    #[inline]
    pub fn hops(&self, socket: usize, node: usize) -> u8 {
        self.node_hops[socket * self.dram.len() + node]
    }

    /// Socket-link hops from `socket` to socket `other`.
    #[inline]
    fn socket_hops(&self, socket: usize, other: usize) -> u8 {
        self.hops(socket, other * self.topo.nodes_per_socket)
    }

    /// Moves 64 bytes between DRAM at `node` and a requester on `socket`; returns the queue wait.
    #[inline]
    fn dram_xfer(&mut self, node: usize, socket: usize, t: u64, write: bool) -> u64 {
        let mut xfer = self.dram[node].line_cycles();
        let mut done = self.dram[node].reserve(t, 64, write);
        let home_socket = self.node_socket[node];
        if home_socket != socket {
            // Reads cross from the home socket to us; writes from us to it.
            let from = if write { socket } else { home_socket };
            done = done.max(self.link[from].reserve(t, 64, write));
            xfer = xfer.max(self.link[from].line_cycles());
        }
        // Only time beyond the slower resource's own transfer time is queueing.
        done.saturating_sub(t + xfer)
    }

    fn writeback(&mut self, line: u64, socket: usize, t: u64) {
        let node = self.home_node(line);
        if self.defer && self.node_socket[node] != socket {
            return self.defer_writeback(t, socket, line);
        }
        let w = self.dram_xfer(node, socket, t, true);
        self.wb_wait = self.wb_wait.max(w);
    }

    /// Drops `core`'s private copies of `line`; true if one was dirty.
    #[inline]
    fn drop_private<S: Spec>(&mut self, core: usize, line: u64) -> bool {
        let a = self.l1[core]
            .invalidate_as::<S::L1>(line)
            .map(|(d, _)| d)
            .unwrap_or(false);
        let b = self.l2[core]
            .invalidate_as::<S::L2>(line)
            .map(|(d, _)| d)
            .unwrap_or(false);
        a || b
    }

    /// Invalidates `line` in instance `u`'s private caches (via core-valid bits) except core bit `keep`.
    /// Usually no other core holds it: that test is made in line.
    #[inline(always)]
    fn invalidate_line_sharers<S: Spec>(
        &mut self,
        u: usize,
        line: u64,
        sharers: u64,
        keep: Option<usize>,
        st: &mut CacheStats,
    ) -> bool {
        let mut bits = sharers & !EXCL;
        if let Some(k) = keep {
            bits &= !(1u64 << k);
        }
        if bits == 0 {
            return false;
        }
        self.invalidate_cores::<S>(u, line, bits, st)
    }

    /// [`Hierarchy::invalidate_line_sharers`] of the cores `bits` of `u`.
    #[inline(never)]
    fn invalidate_cores<S: Spec>(
        &mut self,
        u: usize,
        line: u64,
        mut bits: u64,
        st: &mut CacheStats,
    ) -> bool {
        let base = u * self.cores_per_llc;
        let mut dirty = false;
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if self.drop_private::<S>(base + b, line) {
                dirty = true;
            }
            st.coherence_invalidations += 1;
        }
        dirty
    }

    /// Writes back any dirty private copy held by the cores of `u` in
    /// `sharers`, except those in `keep`, into the LLC (they keep a clean copy).
    #[inline(always)]
    fn downgrade_sharers<S: Spec>(&mut self, u: usize, line: u64, sharers: u64, keep: u64) -> bool {
        // Usually no core but the reader's holds it: nothing to look for.
        if sharers & !EXCL & !keep == 0 {
            return false;
        }
        self.downgrade_cores::<S>(u, line, sharers, keep)
    }

    /// [`Hierarchy::downgrade_sharers`] with some core to look at.
    #[inline(never)]
    fn downgrade_cores<S: Spec>(&mut self, u: usize, line: u64, sharers: u64, keep: u64) -> bool {
        // With an inclusive LLC a private copy turns dirty only through a
        // store miss or an upgrade, both of which leave one core-valid bit,
        // and every bit added later comes through here: a line with two or
        // more bits has no dirty private copy to look for. (A shared
        // copy-on-write source read by 18 cores would otherwise cost 36
        // private-cache lookups per load.)
        if self.inclusive::<S>() && (sharers & !EXCL).count_ones() >= 2 {
            debug_assert!(!self.any_private_dirty::<S>(u, line, sharers));
            return false;
        }
        let base = u * self.cores_per_llc;
        let mut bits = sharers & !EXCL & !keep;
        let mut dirty = false;
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let c = base + b;
            if self.l1[c].is_dirty_as::<S::L1>(line) == Some(true) {
                self.l1[c].set_dirty_as::<S::L1>(line, false);
                dirty = true;
            }
            if self.l2[c].is_dirty_as::<S::L2>(line) == Some(true) {
                self.l2[c].set_dirty_as::<S::L2>(line, false);
                dirty = true;
            }
        }
        dirty
    }

    /// Whether any core of `u` in `sharers` holds `line` dirty (a check of
    /// `downgrade_sharers`' shortcut).
    fn any_private_dirty<S: Spec>(&self, u: usize, line: u64, sharers: u64) -> bool {
        let base = u * self.cores_per_llc;
        let mut bits = sharers & !EXCL;
        while bits != 0 {
            let c = base + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if self.l1[c].is_dirty_as::<S::L1>(line) == Some(true)
                || self.l2[c].is_dirty_as::<S::L2>(line) == Some(true)
            {
                return true;
            }
        }
        false
    }

    /// Probes the other LLC instances for `line`. For a store (or NT store) every copy is
    /// invalidated; for a load a dirty copy is written back and the line becomes shared.
    /// Returns (found, was_dirty).
    #[inline(always)]
    fn probe_others<S: Spec>(
        &mut self,
        u: usize,
        line: u64,
        store: bool,
        t: u64,
        st: &mut CacheStats,
    ) -> (bool, bool) {
        // The usual miss: no other instance holds a line of the region and
        // none can hold one in private caches only (inclusive, or none of its
        // cores ever filled a line of the node). The probe would find and
        // change nothing.
        let (h, base) = self.presence_at(line);
        let nodes = self.dram.len();
        let counts = &self.presence[h][base..base + self.llc.len()];
        let quiet = counts.iter().enumerate().all(|(v, &c)| {
            v == u || (c == 0 && (self.inclusive::<S>() || self.active_home[v * nodes + h] == 0))
        });
        if quiet {
            return (false, false);
        }
        self.probe_instances::<S>(u, line, store, t, st)
    }

    /// [`Hierarchy::probe_others`] instance by instance.
    #[inline(never)]
    fn probe_instances<S: Spec>(
        &mut self,
        u: usize,
        line: u64,
        store: bool,
        t: u64,
        st: &mut CacheStats,
    ) -> (bool, bool) {
        let mut found = false;
        let mut dirty = false;
        let from = self.socket_of_llc(u);
        self.probe_hops = u8::MAX;
        let (h, counts) = self.presence_at(line);
        let nodes = self.dram.len();
        for v in 0..self.llc.len() {
            if v == u {
                continue;
            }
            let present = self.presence[h][counts + v] != 0;
            let Some(sh) = (if present {
                self.llc[v].sharers_as::<S::Llc>(line)
            } else {
                None
            }) else {
                let active = if self.inclusive::<S>() {
                    0
                } else {
                    self.active_home[v * nodes + h]
                };
                if active != 0 {
                    // Non-inclusive: a copy may sit in a private cache only.
                    let base = v * self.cores_per_llc;
                    let mut bits = active;
                    while bits != 0 {
                        let b = bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        let c = base + b;
                        if self.l1[c].contains_as::<S::L1>(line)
                            || self.l2[c].contains_as::<S::L2>(line)
                        {
                            found = true;
                            let vh = self.socket_hops(from, self.socket_of_llc(v));
                            self.probe_hops = self.probe_hops.min(vh);
                            if store {
                                dirty |= self.drop_private::<S>(c, line);
                            } else {
                                dirty |= self.l1[c].is_dirty_as::<S::L1>(line) == Some(true)
                                    || self.l2[c].is_dirty_as::<S::L2>(line) == Some(true);
                                self.l1[c].set_dirty_as::<S::L1>(line, false);
                                self.l2[c].set_dirty_as::<S::L2>(line, false);
                            }
                        }
                    }
                }
                continue;
            };
            found = true;
            let vh = self.socket_hops(from, self.socket_of_llc(v));
            self.probe_hops = self.probe_hops.min(vh);
            if store {
                dirty |= self.invalidate_line_sharers::<S>(v, line, sh, None, st);
                if let Some((d, _)) = self.llc_invalidate::<S>(v, line) {
                    dirty |= d;
                }
            } else {
                // Another socket reads: every core of `v` is downgraded.
                let pd = self.downgrade_sharers::<S>(v, line, sh, 0);
                let d = self.llc[v].is_dirty_as::<S::Llc>(line).unwrap_or(false) || pd;
                if d {
                    // M -> S: the owner writes the line back.
                    self.llc[v].set_dirty_as::<S::Llc>(line, false);
                    let owner = self.socket_of_llc(v);
                    self.writeback(line, owner, t);
                }
                dirty |= d;
                self.llc[v].set_sharers_as::<S::Llc>(line, sh & !EXCL);
            }
        }
        (found, dirty)
    }

    #[inline]
    fn region(line: u64) -> usize {
        (line >> 6) as usize
    }

    /// Where `line`'s region's presence counts sit: its home node, and the
    /// index of instance 0's count there.
    #[inline]
    fn presence_at(&self, line: u64) -> (usize, usize) {
        let h = self.home_node(line);
        (
            h,
            (Self::region(line) - h * self.node_regions) * self.llc.len(),
        )
    }

    /// Inserts a line known absent from LLC `u` (`at`: its split there),
    /// keeping the presence counts. Returns the victim and the line's slot.
    #[inline]
    fn llc_insert<S: Spec>(
        &mut self,
        u: usize,
        line: u64,
        at: Split,
        dirty: bool,
        sharers: u64,
    ) -> (Option<Evicted>, usize) {
        self.presence_change(u, line, true);
        let (ev, slot) =
            self.llc[u].insert_absent_at_as::<S::Llc>(line, at, dirty, sharers, NO_AUX);
        if let Some(e) = &ev {
            self.presence_change(u, e.line, false);
        }
        (ev, slot)
    }

    #[inline]
    fn llc_invalidate<S: Spec>(&mut self, u: usize, line: u64) -> Option<(bool, u64)> {
        let r = self.llc[u].invalidate_as::<S::Llc>(line);
        if r.is_some() {
            self.presence_change(u, line, false);
        }
        r
    }

    /// `line` entered (`up`) or left LLC `u`: its region's presence count
    /// there changes, or later if it is homed on another socket and the run
    /// defers.
    #[inline(always)]
    fn presence_change(&mut self, u: usize, line: u64, up: bool) {
        let (h, base) = self.presence_at(line);
        if self.defer && self.node_socket[h] != self.socket_of_llc(u) {
            return self.defer_presence(h, base + u, up);
        }
        let c = &mut self.presence[h][base + u];
        if up {
            *c += 1;
        } else {
            *c -= 1;
        }
    }

    /// Idle latency (cycles) of a line that core `from` holds modified,
    /// read by core `to`: its own cache's hit if the same core, the LLC's
    /// (a snoop of the other core's private cache behind it) within one LLC
    /// instance, else another instance's forward across the socket links
    /// between them (`RemoteCache`).
    pub fn transfer_latency(&self, from: usize, to: usize) -> u64 {
        if from == to {
            return self.latency(Served::L1);
        }
        let (uf, _, sf) = self.core_llc[from];
        let (ut, _, st) = self.core_llc[to];
        if uf == ut {
            return self.latency(Served::Llc);
        }
        let hops = self.socket_hops(st as usize, sf as usize);
        self.latency(Served::RemoteCache { hops })
    }

    /// The socket of a core.
    #[inline]
    pub fn socket_of_core(&self, core: usize) -> usize {
        self.core_llc[core].2 as usize
    }

    #[inline]
    fn socket_of_llc(&self, u: usize) -> usize {
        u / self.topo.llc_per_socket
    }

    /// Handles an L2 victim: dirty data goes down to the LLC (or memory).
    /// `hint`: the LLC slot the L2 remembered for it, or `NO_AUX`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn l2_victim<S: Spec>(
        &mut self,
        u: usize,
        bit: usize,
        ev: Evicted,
        hint: u32,
        socket: usize,
        t: u64,
        st: &mut CacheStats,
    ) {
        if ev.dirty {
            self.l2_writebacks += 1;
            st.l2_writebacks += 1;
        }
        if self.inclusive::<S>() {
            if ev.dirty && !self.llc[u].set_dirty_hinted_as::<S::Llc>(ev.line, hint, true) {
                // Inclusion was broken by a racing invalidation: write it back.
                self.writeback(ev.line, socket, t);
            }
        } else {
            match self.llc[u].slot_and_split_as::<S::Llc>(ev.line) {
                (Some(slot), _) => {
                    if ev.dirty {
                        self.llc[u].slot_set_dirty_as::<S::Llc>(slot, true);
                    }
                }
                (None, at) => {
                    let sh = (1u64 << bit) | EXCL;
                    if let (Some(v), _) = self.llc_insert::<S>(u, ev.line, at, ev.dirty, sh) {
                        self.llc_victim::<S>(u, v, socket, t, st);
                    }
                }
            }
        }
    }

    fn llc_victim<S: Spec>(
        &mut self,
        u: usize,
        ev: Evicted,
        socket: usize,
        t: u64,
        st: &mut CacheStats,
    ) {
        let mut dirty = ev.dirty;
        if self.inclusive::<S>() {
            let base = u * self.cores_per_llc;
            let mut bits = ev.sharers & !EXCL;
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                // drop_private(), counting the copies it found.
                let a = self.l1[base + b].invalidate_as::<S::L1>(ev.line);
                let c = self.l2[base + b].invalidate_as::<S::L2>(ev.line);
                if a.is_some() || c.is_some() {
                    st.back_invalidations += 1;
                }
                dirty |= a.is_some_and(|(d, _)| d) || c.is_some_and(|(d, _)| d);
            }
        }
        if dirty {
            self.writeback(ev.line, socket, t);
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn fill_l1<S: Spec>(
        &mut self,
        core: usize,
        u: usize,
        bit: usize,
        line: u64,
        dirty: bool,
        socket: usize,
        t: u64,
        st: &mut CacheStats,
    ) {
        if let Some(ev) = self.l1[core].insert_absent_as::<S::L1>(line, dirty, 0) {
            if ev.dirty {
                self.l1_writebacks += 1;
                // L1 write-back into L2 (allocate there if absent).
                if !self.l2[core].set_dirty_as::<S::L2>(ev.line, true) {
                    if let Some(v2) = self.l2[core].insert_as::<S::L2>(ev.line, true, 0) {
                        let hint = self.l2[core].evicted_aux();
                        self.l2_victim::<S>(u, bit, v2, hint, socket, t, st);
                    }
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn fill_l2<S: Spec>(
        &mut self,
        core: usize,
        u: usize,
        bit: usize,
        line: u64,
        llc_slot: usize,
        socket: usize,
        t: u64,
        st: &mut CacheStats,
    ) {
        let at = self.l2[core].split_of_as::<S::L2>(line);
        let aux = u32::try_from(llc_slot).unwrap_or(NO_AUX);
        if let (Some(ev), _) = self.l2[core].insert_absent_at_as::<S::L2>(line, at, false, 0, aux) {
            let hint = self.l2[core].evicted_aux();
            self.l2_victim::<S>(u, bit, ev, hint, socket, t, st);
        }
    }

    /// One cache-line access by a core at time `t` (the start of its service).
    /// Returns where it was served and the extra queueing wait of any DRAM transfer
    /// it caused, read or write-back.
    pub fn access_as<S: Spec>(
        &mut self,
        core: usize,
        line: u64,
        kind: AccessKind,
        t: u64,
        st: &mut CacheStats,
    ) -> (Served, u64) {
        self.wb_wait = 0;
        self.forget_victims();
        let (s, w) = self.access_inner::<S>(core, line, kind, Req::Demand, false, t, st);
        (s, w.max(self.wb_wait))
    }

    /// A hardware prefetch of `line` by `core` at `t`, into the L1 (and L2) or into
    /// the L2 only. None if the line is already there (no request leaves); else
    /// where it was served from and the DRAM queueing it met.
    pub fn prefetch_as<S: Spec>(
        &mut self,
        core: usize,
        line: u64,
        into_l1: bool,
        t: u64,
        st: &mut CacheStats,
    ) -> Option<(Served, u64)> {
        if self.l1[core].contains_as::<S::L1>(line)
            || (!into_l1 && self.l2[core].contains_as::<S::L2>(line))
        {
            if !into_l1 {
                self.prefetch_l2_found_as::<S>(st);
            } else {
                self.forget_victims();
            }
            return None;
        }
        Some(self.prefetch_absent_as::<S>(core, line, into_l1, None, t, st))
    }

    /// Starts a request with no dirty victims counted: the counts the machine
    /// reads after it are the request's own.
    #[inline(always)]
    fn forget_victims(&mut self) {
        self.l2_writebacks = 0;
        self.l1_writebacks = 0;
    }

    /// An L2 streamer prefetch of a line the caller found in the L1 or L2:
    /// what [`Hierarchy::prefetch`] does then, without looking it up again.
    #[inline]
    pub fn prefetch_l2_found_as<S: Spec>(&mut self, st: &mut CacheStats) {
        // Accepted by the L2 pipeline and found there: AMD still counts it.
        st.pf_l2_requests += 1;
        if self.perf_at_l2::<S>() {
            st.llc_references += 1;
        }
        self.forget_victims();
    }

    /// [`Hierarchy::prefetch`] of a line the caller found absent from the L1
    /// (and, for an L2 prefetch, from the L2). `in_l2`: whether the caller
    /// found it in the L2 (None: not looked up). Skipping the lookups the
    /// caller made changes nothing: they do not change the caches.
    #[inline]
    pub fn prefetch_absent_as<S: Spec>(
        &mut self,
        core: usize,
        line: u64,
        into_l1: bool,
        in_l2: Option<bool>,
        t: u64,
        st: &mut CacheStats,
    ) -> (Served, u64) {
        debug_assert!(!self.l1[core].contains_as::<S::L1>(line));
        debug_assert!(into_l1 || !self.l2[core].contains_as::<S::L2>(line));
        debug_assert!(in_l2.is_none_or(|b| b == self.l2[core].contains_as::<S::L2>(line)));
        self.wb_wait = 0;
        self.forget_victims();
        // Each kind of request on a path of its own, its tests folded.
        let (s, w) = if into_l1 {
            let l2_absent = in_l2 == Some(false);
            self.access_inner::<S>(core, line, AccessKind::Load, Req::PfL1, l2_absent, t, st)
        } else {
            self.access_inner::<S>(core, line, AccessKind::Load, Req::PfL2, true, t, st)
        };
        (s, w.max(self.wb_wait))
    }

    /// `l2_absent`: the caller knows the line is not in the L2 (a prefetch
    /// that looked it up), so the L2 lookup is skipped.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn access_inner<S: Spec>(
        &mut self,
        core: usize,
        line: u64,
        kind: AccessKind,
        req: Req,
        l2_absent: bool,
        t: u64,
        st: &mut CacheStats,
    ) -> (Served, u64) {
        let store = kind.is_store();
        let (u, bit, socket) = self.core_llc[core];
        let (u, bit, socket) = (u as usize, bit as usize, socket as usize);
        if kind == AccessKind::NtStore {
            return self.nt_store::<S>(core, u, line, socket, t, st);
        }
        let demand = req == Req::Demand;
        if demand {
            if store {
                st.l1d_stores += 1;
            } else {
                st.l1d_loads += 1;
            }
            // L1
            if let Some(slot) = self.l1[core].slot_of_as::<S::L1>(line) {
                if !store || self.l1[core].slot_dirty_as::<S::L1>(slot) {
                    self.l1[core].slot_hit_as::<S::L1>(slot, store);
                    return (Served::L1, 0);
                }
                // Clean hit for a store: gain exclusivity, then write. The
                // upgrade touches only the LLC and other cores: `slot` still holds the line.
                self.upgrade::<S>(u, bit, line, t, st);
                self.l1[core].slot_hit_as::<S::L1>(slot, true);
                return (Served::L1, 0);
            }
            st.l1d_misses += 1;
        }
        match req {
            Req::PfL1 => st.pf_l1_requests += 1,
            Req::PfL2 => st.pf_l2_requests += 1,
            Req::Demand => {}
        }
        // Every request reaching the L2 is one of AMD's `cache-references`.
        if self.perf_at_l2::<S>() {
            st.llc_references += 1;
        }
        let fill_l1 = req != Req::PfL2;
        // L2
        let l2_slot = if l2_absent {
            debug_assert!(!self.l2[core].contains_as::<S::L2>(line));
            None
        } else {
            self.l2[core].slot_of_as::<S::L2>(line)
        };
        if let Some(slot) = l2_slot {
            let d = self.l2[core].slot_dirty_as::<S::L2>(slot);
            self.l2[core].slot_hit_as::<S::L2>(slot, false);
            if store && !d {
                self.upgrade::<S>(u, bit, line, t, st);
            }
            if fill_l1 {
                self.fill_l1::<S>(core, u, bit, line, store, socket, t, st);
            }
            return (Served::L2, 0);
        }
        // The L2 fill at the end reads the victim's LLC slot (aux).
        self.l2[core].prefetch_side_of_as::<S::L2>(line);
        match req {
            Req::Demand => st.l2_misses += 1,
            Req::PfL1 => st.pf_l1_l2_misses += 1,
            Req::PfL2 => st.pf_l2_misses += 1,
        }
        // Requests from the L1 (demand or its prefetcher) are what both vendors'
        // events count; the L2 streamer's are left out of Intel's and AMD's misses.
        let counted = req != Req::PfL2;
        if counted {
            if self.perf_at_l2::<S>() {
                st.llc_misses += 1;
            } else {
                st.llc_references += 1;
            }
        }
        if demand {
            st.llc_demand_references += 1;
        }
        if !self.inclusive::<S>() {
            let home = self.home_node(line);
            self.active_home[u * self.dram.len() + home] |= 1u64 << bit;
        }
        // LLC
        let (llc_slot, llc_at) = self.llc[u].slot_and_split_as::<S::Llc>(line);
        if let Some(slot) = llc_slot {
            let sh = self.llc[u].slot_sharers_as::<S::Llc>(slot);
            self.llc[u].slot_hit_as::<S::Llc>(slot, false);
            if store {
                if sh & EXCL == 0 {
                    self.probe_others::<S>(u, line, true, t, st);
                }
                self.invalidate_line_sharers::<S>(u, line, sh, Some(bit), st);
                // Probing touched only the other instances and private caches: `slot` still holds the line.
                self.llc[u].slot_set_sharers_as::<S::Llc>(slot, (1u64 << bit) | EXCL);
            } else {
                if self.downgrade_sharers::<S>(u, line, sh, 1u64 << bit) {
                    self.llc[u].slot_set_dirty_as::<S::Llc>(slot, true);
                }
                self.llc[u].slot_set_sharers_as::<S::Llc>(slot, sh | (1u64 << bit));
            }
            if !self.inclusive::<S>() {
                // Non-inclusive: the line moves up and leaves the victim LLC.
                let (d, _) = self.llc_invalidate::<S>(u, line).unwrap_or((false, 0));
                self.fill_l2::<S>(core, u, bit, line, NO_AUX as usize, socket, t, st);
                if d {
                    self.l2[core].set_dirty_as::<S::L2>(line, true);
                }
            } else {
                self.fill_l2::<S>(core, u, bit, line, slot, socket, t, st);
            }
            if fill_l1 {
                self.fill_l1::<S>(core, u, bit, line, store, socket, t, st);
            }
            return (Served::Llc, 0);
        }
        if counted && !self.perf_at_l2::<S>() {
            st.llc_misses += 1;
        }
        if demand {
            st.llc_demand_misses += 1;
        } else {
            st.pf_llc_misses += 1;
        }
        let (found, was_dirty) = self.probe_others::<S>(u, line, store, t, st);
        let served;
        let mut wait = 0;
        if found && (was_dirty || !store) {
            st.remote_cache_hits += 1;
            served = Served::RemoteCache {
                hops: self.probe_hops,
            };
        } else if kind == AccessKind::StringStore && self.no_rfo::<S>() {
            let node = self.home_node(line);
            served = Served::NoFill {
                hops: self.hops(socket, node),
            };
        } else {
            let node = self.home_node(line);
            let hops = self.hops(socket, node);
            st.dram_reads += 1;
            if self.node_socket[node] != socket {
                st.dram_remote_reads += 1;
            }
            wait = self.dram_xfer(node, socket, t, false);
            served = Served::Dram { hops };
        }
        let sh = (1u64 << bit) | if store || !found { EXCL } else { 0 };
        let mut llc_slot = NO_AUX as usize;
        if self.inclusive::<S>() {
            let (ev, slot) = self.llc_insert::<S>(u, line, llc_at, false, sh);
            llc_slot = slot;
            if let Some(ev) = ev {
                self.llc_victim::<S>(u, ev, socket, t, st);
            }
        }
        self.fill_l2::<S>(core, u, bit, line, llc_slot, socket, t, st);
        if fill_l1 {
            self.fill_l1::<S>(core, u, bit, line, store, socket, t, st);
        }
        (served, wait)
    }

    fn upgrade<S: Spec>(&mut self, u: usize, bit: usize, line: u64, t: u64, st: &mut CacheStats) {
        match self.llc[u].slot_of_as::<S::Llc>(line) {
            Some(slot) => {
                let sh = self.llc[u].slot_sharers_as::<S::Llc>(slot);
                if sh & EXCL == 0 {
                    self.probe_others::<S>(u, line, true, t, st);
                }
                self.invalidate_line_sharers::<S>(u, line, sh, Some(bit), st);
                // Probing touched only the other instances and private caches: `slot` still holds the line.
                self.llc[u].slot_set_sharers_as::<S::Llc>(slot, (1u64 << bit) | EXCL);
            }
            None => {
                self.probe_others::<S>(u, line, true, t, st);
            }
        }
    }

    fn nt_store<S: Spec>(
        &mut self,
        core: usize,
        u: usize,
        line: u64,
        socket: usize,
        t: u64,
        st: &mut CacheStats,
    ) -> (Served, u64) {
        st.nt_stores += 1;
        // The full line is overwritten: every cached copy is dropped, dirty or not.
        self.drop_private::<S>(core, line);
        if let Some((_, sh)) = self.llc_invalidate::<S>(u, line) {
            self.invalidate_line_sharers::<S>(u, line, sh, None, st);
        }
        self.probe_others::<S>(u, line, true, t, st);
        let node = self.home_node(line);
        let hops = self.hops(socket, node);
        let wait = self.dram_xfer(node, socket, t, true);
        (Served::NtWrite { hops }, wait)
    }

    /// Dirty lines the last access or prefetch evicted from the L1 and the
    /// L2: `(l1, l2)`.
    #[inline]
    pub fn writebacks(&self) -> (u32, u32) {
        (self.l1_writebacks, self.l2_writebacks)
    }

    /// Idle latency (cycles) of an access served at `s`, before bandwidth queueing.
    #[inline]
    pub fn latency(&self, s: Served) -> u64 {
        match s {
            Served::L1 => 0,
            Served::L2 => self.lat.l2,
            Served::Llc => self.lat.llc,
            Served::NoFill { .. } if !self.lat.no_rfo_grant_at_home => self.lat.llc,
            Served::NoFill { hops: 0 } => self.lat.grant_local,
            Served::NoFill { hops } => self.far(self.lat.grant_remote, hops),
            Served::Dram { hops: 0 } => self.lat.dram_local,
            Served::Dram { hops } => self.far(self.lat.dram_remote, hops),
            Served::RemoteCache { hops } => self.far(self.lat.remote_cache, hops),
            Served::NtWrite { hops: 0 } => self.lat.nt_local,
            Served::NtWrite { hops } => self.far(self.lat.nt_remote, hops),
        }
    }

    /// A remote latency `one_hop` for a path of `hops` socket-link hops.
    #[inline]
    fn far(&self, one_hop: u64, hops: u8) -> u64 {
        one_hop + u64::from(hops.saturating_sub(1)) * self.lat.extra_hop
    }

    pub fn l1_occupancy(&self, core: usize) -> u64 {
        self.l1[core].occupancy()
    }

    #[inline]
    pub fn contains_l1_as<S: Spec>(&self, core: usize, line: u64) -> bool {
        self.l1[core].contains_as::<S::L1>(line)
    }
    #[inline]
    pub fn contains_l2_as<S: Spec>(&self, core: usize, line: u64) -> bool {
        self.l2[core].contains_as::<S::L2>(line)
    }
    #[inline]
    pub fn contains_llc_as<S: Spec>(&self, u: usize, line: u64) -> bool {
        self.llc[u].contains_as::<S::Llc>(line)
    }

    /// [`Hierarchy::access_as`] for any machine.
    #[inline]
    pub fn access(
        &mut self,
        core: usize,
        line: u64,
        kind: AccessKind,
        t: u64,
        st: &mut CacheStats,
    ) -> (Served, u64) {
        self.access_as::<AnySpec>(core, line, kind, t, st)
    }

    /// [`Hierarchy::prefetch_as`] for any machine.
    #[inline]
    pub fn prefetch(
        &mut self,
        core: usize,
        line: u64,
        into_l1: bool,
        t: u64,
        st: &mut CacheStats,
    ) -> Option<(Served, u64)> {
        self.prefetch_as::<AnySpec>(core, line, into_l1, t, st)
    }

    /// [`Hierarchy::prefetch_l2_found_as`] for any machine.
    #[inline]
    pub fn prefetch_l2_found(&mut self, st: &mut CacheStats) {
        self.prefetch_l2_found_as::<AnySpec>(st)
    }

    /// [`Hierarchy::prefetch_absent_as`] for any machine.
    #[inline]
    pub fn prefetch_absent(
        &mut self,
        core: usize,
        line: u64,
        into_l1: bool,
        in_l2: Option<bool>,
        t: u64,
        st: &mut CacheStats,
    ) -> (Served, u64) {
        self.prefetch_absent_as::<AnySpec>(core, line, into_l1, in_l2, t, st)
    }

    /// [`Hierarchy::contains_l1_as`] for any machine.
    #[inline]
    pub fn contains_l1(&self, core: usize, line: u64) -> bool {
        self.contains_l1_as::<AnySpec>(core, line)
    }

    /// [`Hierarchy::contains_l2_as`] for any machine.
    #[inline]
    pub fn contains_l2(&self, core: usize, line: u64) -> bool {
        self.contains_l2_as::<AnySpec>(core, line)
    }

    /// [`Hierarchy::contains_llc_as`] for any machine.
    #[inline]
    pub fn contains_llc(&self, u: usize, line: u64) -> bool {
        self.contains_llc_as::<AnySpec>(u, line)
    }
}

mod partition;
pub mod spec;
pub use spec::{AnySpec, Spec, SpecId};
use spec::{CascadeLake, Haswell};

/// The spec a hierarchy runs under (spec.rs), chosen from its caches.
impl Hierarchy {
    /// Whether every cache and flag of this hierarchy fits `S`.
    fn fits<S: Spec>(&self) -> bool {
        self.l1.iter().all(|c| c.fits::<S::L1>())
            && self.l2.iter().all(|c| c.fits::<S::L2>())
            && self.llc.iter().all(|c| c.fits::<S::Llc>())
            && S::INCLUSIVE.is_none_or(|b| b == self.inclusive)
            && S::PERF_AT_L2.is_none_or(|b| b == self.perf_at_l2)
            && S::NO_RFO.is_none_or(|b| b == self.no_rfo)
    }

    /// The first spec this hierarchy fits.
    fn pick_spec(&self) -> SpecId {
        if self.fits::<Haswell>() {
            SpecId::Haswell
        } else if self.fits::<CascadeLake>() {
            SpecId::CascadeLake
        } else {
            SpecId::Any
        }
    }

    /// Bytes the machine's LLCs hold together.
    pub fn llc_bytes(&self) -> u64 {
        self.llc.iter().map(|c| c.capacity_bytes()).sum()
    }

    /// The spec the machine's entry points dispatch on.
    #[inline(always)]
    pub fn spec(&self) -> SpecId {
        self.spec
    }

    #[inline(always)]
    fn inclusive<S: Spec>(&self) -> bool {
        S::INCLUSIVE.unwrap_or(self.inclusive)
    }

    #[inline(always)]
    fn perf_at_l2<S: Spec>(&self) -> bool {
        S::PERF_AT_L2.unwrap_or(self.perf_at_l2)
    }

    #[inline(always)]
    fn no_rfo<S: Spec>(&self) -> bool {
        S::NO_RFO.unwrap_or(self.no_rfo)
    }
}
