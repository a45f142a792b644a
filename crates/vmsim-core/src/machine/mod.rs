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
pub mod params;
pub mod tlb;
pub mod topology;

use self::core::CoreResources;
use hierarchy::{AccessKind, CacheStats, Hierarchy, HierarchyParams, Latencies, Served};
use ipi::{CpuMask, IpiCause, IpiCosts};
pub use params::{CacheLevelParams, InvlpgbCosts, MachineParams, NoRfoGrant};
use serde::Serialize;
use tlb::{PageSize, Tlb, TlbHit, TlbStats};
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
    /// TLBs emptied by a broadcast invalidation (any CPU's INVLPGB).
    pub tlb_flush_broadcast: u64,
    /// INVLPGB + TLBSYNC sequences this CPU issued.
    pub invlpgb_issued: u64,
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
    pub invlpgb: Option<InvlpgbCosts>,
    stlb_latency: u64,
    walk_cycles: u64,
    l2_latency: u64,
}

impl Machine {
    /// Builds the machine of `p` with `node_bytes` of memory per NUMA node.
    pub fn new(p: &MachineParams, node_bytes: u64, seed: u64) -> Result<Machine, String> {
        let topo = p.topo.clone();
        let hier = Hierarchy::new(HierarchyParams {
            topo: topo.clone(),
            l1: (p.l1d.bytes, p.l1d.ways, p.l1d.replacement),
            l2: (p.l2.bytes, p.l2.ways, p.l2.replacement),
            llc: (p.llc.bytes, p.llc.ways, p.llc.replacement),
            inclusive: p.llc_inclusive,
            no_rfo: p.no_rfo_full_lines,
            lat: Latencies {
                no_rfo_grant_at_home: p.no_rfo_grant == NoRfoGrant::Memory,
                l2: p.l2.latency_cycles,
                llc: p.llc.latency_cycles,
                remote_cache: p.remote_cache_cycles,
                dram_local: p.dram_local_cycles,
                dram_remote: p.dram_remote_cycles,
            },
            node_bytes,
            dram_bytes_per_cycle: p.dram_bytes_per_cycle,
            link_bytes_per_cycle: p.link_bytes_per_cycle,
            seed,
        })?;
        let cpus = (0..topo.nr_cpus())
            .map(|_| Cpu {
                clock: 0,
                mode: Mode::User,
                tlb: Tlb::new(&p.tlb),
                stats: CpuStats::default(),
                irq_pending: 0,
            })
            .collect();
        let cores = (0..topo.nr_cores())
            .map(|_| {
                CoreResources::new(
                    p.l1d.outstanding as usize,
                    p.l2.outstanding as usize,
                    topo.threads_per_core,
                )
            })
            .collect();
        Ok(Machine {
            topo,
            hier,
            cpus,
            cores,
            freq_mhz: p.freq_mhz,
            issue_width: p.issue_width,
            store_bytes_per_cycle: p.store_bytes_per_cycle,
            string_startup: p.string_startup_cycles,
            nocache_threshold: p.nocache_threshold_bytes,
            ipi: p.ipi.clone(),
            tlb_flush_full_cycles: p.tlb_flush_full_cycles,
            invlpg_cycles: p.invlpg_cycles,
            invlpgb: p.invlpgb,
            stlb_latency: p.stlb_latency_cycles,
            walk_cycles: p.walk_cycles,
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
    pub fn access(
        &mut self,
        cpu: usize,
        line: u64,
        kind: AccessKind,
        stream: bool,
        issue: u64,
    ) -> Served {
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
        r.lfb[li] = if prefetchable {
            start + self.l2_latency
        } else {
            done
        };
        if beyond_l2 {
            r.sq[qi] = done;
        }
        let issued = r.issue.reserve(thread, start, issue);
        c.stats.smt_issue_wait_cycles += issued - start - issue;
        let new_clock = if kind == AccessKind::Load && !stream {
            done.max(issued)
        } else {
            issued
        };
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
    pub fn tlb_translate(
        &mut self,
        cpu: usize,
        asid: u16,
        vaddr: u64,
        size: PageSize,
        pfn: u64,
    ) -> Option<u64> {
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

    /// INVLPGB of every non-global translation of every ASID and PCID
    /// (rAX = 0), then TLBSYNC, issued on `from` (the kernel's
    /// `invlpgb_flush_all_nonglobals()`). The hardware invalidates every
    /// processor's TLB, the issuer's included, without interrupting the
    /// others; the issuer pays the instruction and waits for completion.
    /// Returns false, doing nothing, on a CPU without INVLPGB.
    pub fn invlpgb_flush_all_nonglobals(&mut self, from: usize) -> bool {
        let Some(c) = self.invlpgb else {
            return false;
        };
        for cpu in self.cpus.iter_mut() {
            cpu.tlb.flush_all();
            cpu.stats.tlb_flush_broadcast += 1;
        }
        self.cpus[from].stats.invlpgb_issued += 1;
        self.advance(from, c.invlpgb_cycles + c.tlbsync_cycles, 2);
        true
    }

    /// Sends TLB-flush IPIs from `from` to `targets` (which must not include it).
    /// `pages`: flush these pages of `asid` on each target; None: full flush.
    /// The targets' TLBs are flushed at once (the TLB is a timing structure, the
    /// page tables are the truth); their handler time is charged when they next run.
    pub fn send_tlb_flush_ipis(
        &mut self,
        from: usize,
        targets: &CpuMask,
        asid: u16,
        pages: Option<&[u64]>,
    ) {
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
