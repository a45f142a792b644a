//! The modeled hardware: CPUs with their clocks, miss-handling resources and
//! TLBs, the cache hierarchy, memory and IPIs. It knows nothing of pages or
//! processes: callers hand it line accesses, TLB operations, fixed costs and
//! IPIs, and it advances the issuing CPU's clock and counts events.
//!
//! Timing of one line access (see docs/timing.md):
//! - an L1 hit costs the caller's issue cycles;
//! - an L1 miss takes a line fill buffer; a miss beyond L2 also takes a
//!   superqueue entry; when none is free the CPU stalls until one is;
//! - the entries are held for the latency of the level that serves the line
//!   plus any DRAM queueing, so misses overlap up to the number of entries
//!   (memory-level parallelism) and streams become bandwidth-bound;
//! - on a prefetched stream the L2 streamer has the line on its way, so the
//!   fill buffer is held only for the L2 latency; a dependent load waits for
//!   its data.

pub mod cache;
pub mod core;
pub mod hierarchy;
pub mod ipi;
pub mod memory;
pub mod tlb;
pub mod topology;

use crate::config::Preset;
use self::core::CoreResources;
use cache::Replacement;
use hierarchy::{AccessKind, CacheStats, Hierarchy, HierarchyParams, Latencies, Served};
use ipi::{CpuMask, IpiCause, IpiCosts};
use serde::Serialize;
use tlb::{PageSize, Tlb, TlbConfig, TlbHit, TlbStats};
use topology::Topology;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    User,
    Kernel,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CpuStats {
    pub user_cycles: u64,
    pub sys_cycles: u64,
    pub user_instructions: u64,
    pub sys_instructions: u64,
    pub cache: CacheStats,
    pub tlb_walks: u64,
    pub stlb_hits: u64,
    pub ipis_sent: u64,
    pub ipis_received: u64,
    /// IPIs sent and received by cause, indexed like `IpiCause::ALL`.
    pub ipis_sent_by_cause: [u64; 3],
    pub ipis_received_by_cause: [u64; 3],
    pub tlb_flush_full: u64,
    pub tlb_flush_page: u64,
    pub stall_cycles: u64,
    /// Cycles this thread waited for issue slots its SMT sibling was using.
    pub smt_issue_wait_cycles: u64,
}

pub struct Cpu {
    pub clock: u64,
    pub mode: Mode,
    pub tlb: Tlb,
    pub stats: CpuStats,
    /// Interrupt-handler cycles delivered by IPIs, charged when the CPU next runs.
    pub irq_pending: u64,
}

pub struct Machine {
    pub topo: Topology,
    pub hier: Hierarchy,
    pub cpus: Vec<Cpu>,
    /// Per physical core: fill buffers, superqueue and issue slots, shared by its SMT threads.
    pub cores: Vec<CoreResources>,
    pub freq_mhz: u64,
    pub issue_width: u64,
    pub store_bytes_per_cycle: u64,
    pub string_startup: u64,
    /// String stores of regions larger than this many bytes do not allocate in the caches (0 = never).
    pub nocache_threshold: u64,
    pub ipi: IpiCosts,
    pub tlb_flush_full_cycles: u64,
    pub invlpg_cycles: u64,
    stlb_latency: u64,
    walk_cycles: u64,
    l2_latency: u64,
}

fn repl(s: &str) -> Replacement {
    s.parse().expect("validated by the preset loader")
}

impl Machine {
    /// Builds the machine of a preset with `node_bytes` of memory per NUMA node.
    pub fn new(p: &Preset, node_bytes: u64, seed: u64) -> Result<Machine, String> {
        let topo = Topology {
            sockets: p.sockets as usize,
            cores_per_socket: p.cores_per_socket as usize,
            threads_per_core: p.threads_per_core as usize,
            nodes_per_socket: p.memory.nodes_per_socket as usize,
            llc_per_socket: p.llc_instances_per_socket as usize,
        };
        let cyc = |ns: f64| p.ns_to_cycles(ns);
        let bpc = |gbs: f64| gbs * 1e9 / (p.freq_mhz as f64 * 1e6);
        let hier = Hierarchy::new(HierarchyParams {
            topo: topo.clone(),
            l1: (p.l1d.size_kib * 1024, p.l1d.ways, repl(&p.l1d.replacement)),
            l2: (p.l2.size_kib * 1024, p.l2.ways, repl(&p.l2.replacement)),
            llc: (p.llc.size_kib * 1024, p.llc.ways, repl(&p.llc.replacement)),
            inclusive: p.llc_inclusive,
            no_rfo: p.string.no_rfo_full_lines,
            lat: Latencies {
                no_rfo_grant_at_home: p.string.no_rfo_grant == "memory",
                l2: p.l2.latency_cycles,
                llc: p.llc.latency_cycles,
                remote_cache: cyc(p.memory.remote_cache_latency_ns),
                dram_local: cyc(p.memory.local_latency_ns),
                dram_remote: cyc(p.memory.remote_latency_ns),
            },
            node_bytes,
            dram_bytes_per_cycle: bpc(p.memory.sustained_bandwidth_gbs / p.memory.nodes_per_socket as f64),
            link_bytes_per_cycle: bpc(p.memory.interconnect_bandwidth_gbs.max(0.001)),
            seed,
        })?;
        let tcfg = TlbConfig {
            l1_4k: (p.tlb.l1_4k.0 as u32, p.tlb.l1_4k.1 as u32),
            l1_2m: (p.tlb.l1_2m.0 as u32, p.tlb.l1_2m.1 as u32),
            l1_1g: (p.tlb.l1_1g.0 as u32, p.tlb.l1_1g.1 as u32),
            stlb: (p.tlb.stlb.0 as u32, p.tlb.stlb.1 as u32),
            stlb_holds_2m: p.tlb.stlb_holds_2m,
        };
        let cpus = (0..topo.nr_cpus())
            .map(|_| Cpu {
                clock: 0,
                mode: Mode::User,
                tlb: Tlb::new(&tcfg),
                stats: CpuStats::default(),
                irq_pending: 0,
            })
            .collect();
        let cores = (0..topo.nr_cores())
            .map(|_| CoreResources::new(p.l1d.outstanding as usize, p.l2.outstanding as usize, topo.threads_per_core))
            .collect();
        Ok(Machine {
            topo,
            hier,
            cpus,
            cores,
            freq_mhz: p.freq_mhz,
            issue_width: p.issue_width,
            store_bytes_per_cycle: p.store_bytes_per_cycle,
            string_startup: p.string.startup_cycles,
            nocache_threshold: p.string.nocache_threshold_kib * 1024,
            ipi: IpiCosts {
                send_cycles: p.costs.ipi_send_cycles,
                latency_cycles: cyc(p.costs.ipi_latency_ns),
                handle_cycles: p.costs.ipi_handle_cycles,
            },
            tlb_flush_full_cycles: p.costs.tlb_flush_full_cycles,
            invlpg_cycles: p.costs.invlpg_cycles,
            stlb_latency: p.tlb.stlb_latency_cycles,
            walk_cycles: p.tlb.walk_cycles,
            l2_latency: p.l2.latency_cycles,
        })
    }

    /// Charges fixed work to a CPU in its current mode.
    #[inline]
    pub fn advance(&mut self, cpu: usize, cycles: u64, instructions: u64) {
        let c = &mut self.cpus[cpu];
        c.clock += cycles;
        match c.mode {
            Mode::User => {
                c.stats.user_cycles += cycles;
                c.stats.user_instructions += instructions;
            }
            Mode::Kernel => {
                c.stats.sys_cycles += cycles;
                c.stats.sys_instructions += instructions;
            }
        }
    }

    #[inline]
    pub fn set_mode(&mut self, cpu: usize, mode: Mode) {
        self.cpus[cpu].mode = mode;
    }

    /// One cache-line access. `issue` is the cycles the core spends issuing it
    /// when nothing stalls (e.g. 8 scalar stores, or 64 B at the string store width).
    /// `stream`: part of a sequential stream the prefetchers follow; otherwise a
    /// load is taken as dependent (the CPU waits for its data).
    #[inline]
    pub fn access(&mut self, cpu: usize, line: u64, kind: AccessKind, stream: bool, issue: u64) -> Served {
        let core = self.topo.core_of(cpu);
        let thread = self.topo.thread_of(cpu);
        let c = &mut self.cpus[cpu];
        let r = &mut self.cores[core];
        let now = c.clock;
        // Slots are found before the access so DRAM is reserved when the request can leave.
        let (li, lfree) = argmin(&r.lfb);
        let s1 = now.max(lfree);
        let (qi, qfree) = argmin(&r.sq);
        let s2 = s1.max(qfree);
        let (served, wait) = self.hier.access(core, line, kind, s2, &mut c.stats.cache);
        let start = match served {
            Served::L1 if wait == 0 => {
                let issued = r.issue.reserve(thread, now, issue);
                c.stats.smt_issue_wait_cycles += issued - now - issue;
                let cyc = issued - now;
                c.clock = issued;
                account(c, cyc);
                return served;
            }
            Served::L1 | Served::L2 => s1,
            _ => s2,
        };
        let done = start + self.hier.latency(served) + wait;
        let beyond_l2 = !matches!(served, Served::L2);
        // The L2 streamer can have a read or RFO of a stream on its way, freeing the fill buffer
        // at the L2 latency; an ownership-only request (no data) cannot be prefetched and holds
        // its fill buffer until the grant, as the superqueue entry.
        let prefetchable = stream && beyond_l2 && !matches!(served, Served::NoFill { .. });
        r.lfb[li] = if prefetchable { start + self.l2_latency } else { done };
        if beyond_l2 {
            r.sq[qi] = done;
        }
        let issued = r.issue.reserve(thread, start, issue);
        c.stats.smt_issue_wait_cycles += issued - start - issue;
        let new_clock = if kind == AccessKind::Load && !stream { done.max(issued) } else { issued };
        let cyc = new_clock - now;
        c.stats.stall_cycles += start - now;
        c.clock = new_clock;
        account(c, cyc);
        served
    }

    /// Fixed start-up cost of one string instruction (`rep stosb`/`rep movsb`).
    pub fn string_start(&mut self, cpu: usize) {
        self.advance(cpu, self.string_startup, 1);
    }

    /// Translates `vaddr` through the CPU's TLB; on a miss the walk is
    /// charged and the entry filled with `pfn`, the frame the caller's walk
    /// found for the page. Returns the frame a hit translated to (None on a
    /// miss), for the caller to check against its page tables.
    #[inline]
    pub fn tlb_translate(&mut self, cpu: usize, asid: u16, vaddr: u64, size: PageSize, pfn: u64) -> Option<u64> {
        let (hit, cached) = self.cpus[cpu].tlb.lookup_pfn(asid, vaddr, size);
        match hit {
            TlbHit::L1 => Some(cached),
            TlbHit::Stlb => {
                self.cpus[cpu].stats.stlb_hits += 1;
                self.advance(cpu, self.stlb_latency, 0);
                Some(cached)
            }
            TlbHit::Miss => {
                self.cpus[cpu].stats.tlb_walks += 1;
                self.advance(cpu, self.walk_cycles, 0);
                self.cpus[cpu].tlb.fill_pfn(asid, vaddr, size, pfn);
                None
            }
        }
    }

    pub fn flush_tlb_local_all(&mut self, cpu: usize) {
        self.cpus[cpu].tlb.flush_all();
        self.cpus[cpu].stats.tlb_flush_full += 1;
        self.advance(cpu, self.tlb_flush_full_cycles, 1);
    }

    pub fn flush_tlb_local_page(&mut self, cpu: usize, asid: u16, vaddr: u64) {
        self.cpus[cpu].tlb.flush_page(asid, vaddr);
        self.cpus[cpu].stats.tlb_flush_page += 1;
        self.advance(cpu, self.invlpg_cycles, 1);
    }

    /// Sends TLB-flush IPIs from `from` to `targets` (which must not include it).
    /// `pages`: flush these pages of `asid` on each target; None: full flush.
    /// The targets' TLBs are flushed at once (the TLB is a timing structure, the
    /// page tables are the truth); their handler time is charged when they next run.
    pub fn send_tlb_flush_ipis(&mut self, from: usize, targets: &CpuMask, asid: u16, pages: Option<&[u64]>) {
        let n = targets.count() as u64;
        if n == 0 {
            return;
        }
        let work = match pages {
            None => self.tlb_flush_full_cycles,
            Some(p) => self.invlpg_cycles * p.len() as u64,
        };
        for t in targets.iter() {
            debug_assert_ne!(t, from);
            let c = &mut self.cpus[t];
            match pages {
                None => {
                    c.tlb.flush_all();
                    c.stats.tlb_flush_full += 1;
                }
                Some(p) => {
                    for &va in p {
                        c.tlb.flush_page(asid, va);
                    }
                    c.stats.tlb_flush_page += p.len() as u64;
                }
            }
        }
        self.send_ipi(from, targets, IpiCause::TlbShootdown, work);
    }

    /// Sends an IPI for `cause` from `from` to `targets` (which must not
    /// include it): the sender pays per target and waits for the last
    /// acknowledgement; each target's handler (entry, `work` cycles, exit) is
    /// charged when it next runs.
    pub fn send_ipi(&mut self, from: usize, targets: &CpuMask, cause: IpiCause, work: u64) {
        let n = targets.count() as u64;
        if n == 0 {
            return;
        }
        for t in targets.iter() {
            debug_assert_ne!(t, from);
            let c = &mut self.cpus[t];
            c.stats.ipis_received += 1;
            c.stats.ipis_received_by_cause[cause as usize] += 1;
            c.irq_pending += self.ipi.handle_cycles + work;
        }
        self.cpus[from].stats.ipis_sent += n;
        self.cpus[from].stats.ipis_sent_by_cause[cause as usize] += n;
        let cyc = self.ipi.sender_cycles(n, work);
        self.advance(from, cyc, 20 * n);
    }

    /// Charges pending interrupt handling to a CPU (kernel time).
    pub fn take_interrupts(&mut self, cpu: usize) {
        let p = std::mem::take(&mut self.cpus[cpu].irq_pending);
        if p > 0 {
            let m = self.cpus[cpu].mode;
            self.cpus[cpu].mode = Mode::Kernel;
            self.advance(cpu, p, 0);
            self.cpus[cpu].mode = m;
        }
    }

    pub fn tlb_stats(&self, cpu: usize) -> TlbStats {
        self.cpus[cpu].tlb.stats()
    }

    pub fn cycles_to_s(&self, cycles: u64) -> f64 {
        cycles as f64 / (self.freq_mhz as f64 * 1e6)
    }
}

#[inline]
fn account(c: &mut Cpu, cyc: u64) {
    match c.mode {
        Mode::User => c.stats.user_cycles += cyc,
        Mode::Kernel => c.stats.sys_cycles += cyc,
    }
}

#[inline]
fn argmin(v: &[u64]) -> (usize, u64) {
    let mut bi = 0;
    let mut bv = u64::MAX;
    for (i, &x) in v.iter().enumerate() {
        if x < bv {
            bv = x;
            bi = i;
        }
    }
    (bi, bv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{embedded_machines, Preset};

    fn e5() -> (Preset, Machine) {
        let text = embedded_machines().iter().find(|(n, _)| *n == "xeon-e5-2699v3-2s").unwrap().1;
        let p = Preset::parse(text, "e5").unwrap();
        let m = Machine::new(&p, 1 << 30, 0).unwrap();
        (p, m)
    }

    fn icx(grant: &str) -> (Preset, Machine) {
        let text = embedded_machines().iter().find(|(n, _)| *n == "xeon-8358-icx").unwrap().1;
        let mut p = Preset::parse(text, "icx").unwrap();
        p.string.no_rfo_grant = grant.to_string();
        let m = Machine::new(&p, 1 << 30, 0).unwrap();
        (p, m)
    }

    #[test]
    fn a_no_rfo_grant_holds_the_superqueue_for_the_homes_round_trip() {
        // Preset as shipped: the grant waits for the home (memory directory or other-socket snoop).
        let (p, mut m) = icx("memory");
        assert!(p.string.no_rfo_full_lines);
        let dram = p.ns_to_cycles(p.memory.local_latency_ns);
        let remote = p.ns_to_cycles(p.memory.remote_latency_ns);
        assert_eq!(m.access(0, 100, AccessKind::StringStore, true, 1), Served::NoFill { remote: false });
        // The store itself only costs its issue; the superqueue entry and the fill buffer are held
        // for the local DRAM latency (no data to prefetch: the buffer waits for the grant).
        assert_eq!(m.cpus[0].clock, 1);
        assert_eq!(m.cores[0].sq.iter().copied().max(), Some(dram));
        assert_eq!(m.cores[0].lfb.iter().copied().max(), Some(dram));
        // No data moves: no DRAM read, and the line is owned dirty-to-be in L1.
        assert_eq!(m.hier.dram[0].stats.bytes_read, 0);
        assert!(m.hier.contains_l1(0, 100));
        // A line homed on the other socket: the remote DRAM latency.
        let remote_line = (1u64 << 30) >> 6 | 5;
        let t = m.cpus[0].clock;
        assert_eq!(m.access(0, remote_line, AccessKind::StringStore, true, 1), Served::NoFill { remote: true });
        assert!(m.cores[0].sq.contains(&(t + remote)));
        // Granted at the LLC instead: the entry is held for the LLC latency only.
        let (p, mut m) = icx("llc");
        assert_eq!(m.access(0, 100, AccessKind::StringStore, true, 1), Served::NoFill { remote: false });
        assert_eq!(m.cores[0].sq.iter().copied().max(), Some(p.llc.latency_cycles));
    }

    #[test]
    fn a_no_rfo_stream_is_bound_by_fill_buffers_over_the_grant_latency() {
        // Little's law: one core streaming no-RFO string stores keeps at most min(fill buffers,
        // superqueue) grants in flight, each for the home's round trip.
        let (p, mut m) = icx("memory");
        let n = 50_000u64;
        for i in 0..n {
            m.access(0, i, AccessKind::StringStore, true, 1);
        }
        let gbs = (n * 64) as f64 / m.cycles_to_s(m.cpus[0].clock) / 1e9;
        let entries = p.l1d.outstanding.min(p.l2.outstanding) as f64;
        let bound = entries * 64.0 / (p.ns_to_cycles(p.memory.local_latency_ns) as f64 / p.freq_mhz as f64 * 1e-6) / 1e9;
        assert!((gbs - bound).abs() / bound < 0.01, "{gbs:.2} GB/s vs fill-buffer bound {bound:.2} GB/s");
    }

    #[test]
    fn exact_latencies_of_a_dependent_load() {
        let (p, mut m) = e5();
        let dram = p.ns_to_cycles(p.memory.local_latency_ns);
        // Cold line on node 0 from CPU 0: full local DRAM latency.
        assert_eq!(m.access(0, 100, AccessKind::Load, false, 1), Served::Dram { remote: false });
        assert_eq!(m.cpus[0].clock, dram);
        // Now in L1: the issue cost only.
        assert_eq!(m.access(0, 100, AccessKind::Load, false, 1), Served::L1);
        assert_eq!(m.cpus[0].clock, dram + 1);
        // The SMT sibling (CPU 36) shares the core's L1.
        assert_eq!(m.access(36, 100, AccessKind::Load, false, 1), Served::L1);
        // Another core on the socket finds it in the LLC.
        let t = m.cpus[1].clock;
        assert_eq!(m.access(1, 100, AccessKind::Load, false, 1), Served::Llc);
        assert_eq!(m.cpus[1].clock - t, p.llc.latency_cycles);
        // A core on the other socket: a remote cache hit... of a clean line it reads from memory's owner socket cache.
        let t = m.cpus[18].clock;
        assert_eq!(m.access(18, 100, AccessKind::Load, false, 1), Served::RemoteCache);
        assert_eq!(m.cpus[18].clock - t, p.ns_to_cycles(p.memory.remote_cache_latency_ns));
        // A line homed on node 1 read cold from socket 0: remote DRAM latency.
        let remote_line = (1u64 << 30) >> 6 | 5;
        let t = m.cpus[2].clock;
        assert_eq!(m.access(2, remote_line, AccessKind::Load, false, 1), Served::Dram { remote: true });
        assert_eq!(m.cpus[2].clock - t, p.ns_to_cycles(p.memory.remote_latency_ns));
    }

    #[test]
    fn misses_overlap_up_to_the_fill_buffers() {
        let (p, mut m) = e5();
        let lfb = p.l1d.outstanding;
        let sq = p.l2.outstanding;
        let dram = p.ns_to_cycles(p.memory.local_latency_ns);
        // Independent (non-dependent) stores: the first `min(lfb, sq)` issue back to back.
        let n = lfb.min(sq);
        for i in 0..n {
            m.access(0, 1000 + i * 64, AccessKind::Store, false, 1);
        }
        assert_eq!(m.cpus[0].clock, n);
        // The next one has to wait for a fill buffer.
        m.access(0, 5000, AccessKind::Store, false, 1);
        assert!(m.cpus[0].clock >= dram, "stalls until a fill buffer frees: {}", m.cpus[0].clock);
        assert!(m.cpus[0].stats.stall_cycles > 0);
    }

    #[test]
    fn smt_siblings_share_the_cores_fill_buffers() {
        let (p, mut m) = e5();
        let lfb = p.l1d.outstanding;
        assert!(lfb < p.l2.outstanding);
        let dram = p.ns_to_cycles(p.memory.local_latency_ns);
        // CPU 0 takes every fill buffer of core 0 with independent store misses.
        for i in 0..lfb {
            m.access(0, 1000 + i * 64, AccessKind::Store, false, 1);
        }
        assert_eq!(m.cpus[0].clock, lfb);
        // Its SMT sibling (CPU 36, same core) has none left: it waits for the first to free.
        assert_eq!(m.topo.core_of(36), 0);
        m.access(36, 9000, AccessKind::Store, false, 1);
        assert_eq!(m.cpus[36].stats.stall_cycles, dram);
        // Its one issue cycle may be stretched by at most one cycle where it shares an epoch with
        // CPU 0 (which lately issued 10 cycles per epoch); the stretch is counted as an SMT wait.
        let waited = m.cpus[36].stats.smt_issue_wait_cycles;
        assert!(waited <= 1);
        assert_eq!(m.cpus[36].clock, dram + 1 + waited);
        // A thread of another core has its own.
        m.access(1, 9064, AccessKind::Store, false, 1);
        assert_eq!(m.cpus[1].clock, 1);
    }

    #[test]
    fn smt_siblings_share_the_cores_issue_slots() {
        let (_, mut m) = e5();
        for (cpu, line) in [(0, 100u64), (1, 200)] {
            m.access(cpu, line, AccessKind::Load, false, 1);
        }
        let t = 64 * 1000;
        for cpu in [0, 36, 1] {
            m.cpus[cpu].clock = t;
        }
        // CPU 0 issues for a whole epoch (L1 hit, 64 cycles of instructions).
        assert_eq!(m.access(0, 100, AccessKind::Store, true, 64), Served::L1);
        assert_eq!(m.cpus[0].clock, t + 64);
        // Its sibling finds that epoch used up and issues in the next one, leaving half of
        // that one to CPU 0, which is issue-bound and has not got there yet: 8 cycles at half rate.
        assert_eq!(m.access(36, 100, AccessKind::Store, true, 8), Served::L1);
        assert_eq!(m.cpus[36].clock, t + 64 + 16);
        assert_eq!(m.cpus[36].stats.smt_issue_wait_cycles, 64 + 8);
        // Another core issues at once.
        assert_eq!(m.access(1, 200, AccessKind::Store, true, 8), Served::L1);
        assert_eq!(m.cpus[1].clock, t + 8);
        assert_eq!(m.cpus[1].stats.smt_issue_wait_cycles, 0);
    }

    #[test]
    fn streaming_cpus_are_bound_by_the_node_bandwidth() {
        let (p, mut m) = e5();
        let lines_per_cpu = 20_000u64;
        // 18 cores of socket 0 stream loads over disjoint cold regions of node 0.
        let cpus: Vec<usize> = (0..18).collect();
        let mut next = vec![0u64; 18];
        let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>> = cpus.iter().map(|&c| std::cmp::Reverse((0, c))).collect();
        while let Some(std::cmp::Reverse((_, c))) = heap.pop() {
            let stop = m.cpus[c].clock + 2000;
            while m.cpus[c].clock < stop && next[c] < lines_per_cpu {
                m.access(c, (c as u64) * 1_000_000 + next[c], AccessKind::Load, true, 1);
                next[c] += 1;
            }
            if next[c] < lines_per_cpu {
                heap.push(std::cmp::Reverse((m.cpus[c].clock, c)));
            }
        }
        let end = cpus.iter().map(|&c| m.cpus[c].clock).max().unwrap();
        let bytes = 18 * lines_per_cpu * 64;
        let gbs = bytes as f64 / m.cycles_to_s(end) / 1e9;
        let bw = p.memory.sustained_bandwidth_gbs;
        assert!(gbs <= bw * 1.02 && gbs >= bw * 0.85, "aggregate {gbs:.1} GB/s vs sustained {bw} GB/s");
        // One core alone is limited by its superqueue, not by the node.
        let (_, mut m1) = e5();
        for i in 0..lines_per_cpu {
            m1.access(0, i, AccessKind::Load, true, 1);
        }
        let one = (lines_per_cpu * 64) as f64 / m1.cycles_to_s(m1.cpus[0].clock) / 1e9;
        let sq_bound = p.l2.outstanding as f64 * 64.0 / (p.memory.local_latency_ns * 1e-9) / 1e9;
        assert!(one < bw && (one - sq_bound).abs() / sq_bound < 0.1, "one core {one:.1} GB/s, superqueue bound {sq_bound:.1}");
    }

    #[test]
    fn a_store_invalidates_other_copies_and_nt_stores_bypass() {
        let (_, mut m) = e5();
        m.access(0, 7, AccessKind::Load, false, 1);
        m.access(1, 7, AccessKind::Load, false, 1);
        assert!(m.hier.contains_l1(1, 7));
        m.access(0, 7, AccessKind::Store, false, 1);
        assert!(!m.hier.contains_l1(1, 7) && !m.hier.contains_l2(1, 7), "core 1's copy is invalidated");
        assert!(m.hier.contains_l1(0, 7));
        m.access(2, 7, AccessKind::NtStore, false, 1);
        assert!(!m.hier.contains_l1(0, 7) && !m.hier.contains_llc(0, 7), "a non-temporal store drops every cached copy");
        assert_eq!(m.hier.dram[0].stats.bytes_written, 64);
    }
}
