//! The modeled hardware: CPUs with their clocks, miss-handling resources and
//! TLBs, the cache hierarchy, memory and IPIs. It knows nothing of pages or
//! processes: callers hand it line accesses, TLB operations, fixed costs and
//! IPIs, and it advances the issuing CPU's clock and counts events.
//!
//! Timing of one line access (docs/model.md, "One cache-line access"):
//! - an L1 hit costs the caller's issue cycles; a dependent load also waits
//!   the L1's load-to-use latency;
//! - an L1 miss takes a line fill buffer; a miss beyond L2 also takes a
//!   superqueue entry; when none is free the CPU stalls until one is;
//! - an ordinary store first takes its store instructions' entries in the
//!   thread's store queue (store_queue.rs), freed in program order once each
//!   store's line is owned; when too few are free the CPU stalls;
//! - the entries are held for the latency of the level that serves the line
//!   plus any DRAM queueing, so misses overlap up to the number of entries
//!   (memory-level parallelism) and streams become bandwidth-bound;
//! - the core's prefetchers (prefetch.rs) are trained by the accesses and
//!   issue requests of their own, which take a fill buffer (L1 prefetch) or a
//!   superqueue entry (beyond L2) only when one is free, reserve DRAM like a
//!   miss and fill the caches; a demand access to a line whose prefetch is
//!   still in flight holds its fill buffer until that data arrives;
//! - a non-temporal line is a posted write: its fill buffer (the
//!   write-combining buffer) and superqueue entry are held until the home
//!   accepts it; a dirty L2 victim holds a superqueue entry for the LLC latency;
//! - an independent access (`independent`) lets the CPU go on once it has its
//!   fill buffer; a dependent load waits for its data.

pub mod cache;
pub mod core;
pub mod divisor;
pub mod hierarchy;
pub mod ipi;
pub mod memory;
pub mod mode_stats;
pub mod params;
pub mod prefetch;
pub mod store_queue;
pub mod tlb;
pub mod topology;

use self::cache::INVALID;
use self::core::{CoreResources, FillBandwidth};
use self::store_queue::StoreQueue;
use hierarchy::spec::{CascadeLake, Haswell};
use hierarchy::{
    AccessKind, AnySpec, CacheStats, Hierarchy, HierarchyParams, Latencies, Served, Spec, SpecId,
};
use ipi::{CpuMask, IpiCause, IpiCosts};
pub use params::{
    CacheLevelParams, IdleState, InvlpgbCosts, MachineParams, NoRfoGrant, NocacheBy,
    PerfCacheEvents, PrefetchParams,
};
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
    /// The walker's loads of page-table entries by where they were served,
    /// L1, L2, LLC, another cache, memory (Haswell's
    /// `PAGE_WALKER_LOADS.DTLB_L1/L2/L3/MEMORY`).
    pub walker_loads: [u64; 5],
    pub stlb_hits: u64,
    pub ipis_sent: u64,
    pub ipis_received: u64,
    /// IPIs sent and received by cause, indexed like `IpiCause::ALL`.
    pub ipis_sent_by_cause: [u64; 3],
    pub ipis_received_by_cause: [u64; 3],
    /// Of `sys_cycles`, those this CPU spent sending IPIs (per target),
    /// and waiting for their last acknowledgement (the delivery and the
    /// slowest target's handler), by cause like `ipis_sent_by_cause`.
    pub ipi_send_cycles_by_cause: [u64; 3],
    pub ipi_wait_cycles_by_cause: [u64; 3],
    pub tlb_flush_full: u64,
    pub tlb_flush_page: u64,
    /// TLBs emptied by a broadcast invalidation (any CPU's INVLPGB).
    pub tlb_flush_broadcast: u64,
    /// INVLPGB + TLBSYNC sequences this CPU issued.
    pub invlpgb_issued: u64,
    pub stall_cycles: u64,
    /// Cycles this thread waited for issue slots its SMT sibling was using.
    pub smt_issue_wait_cycles: u64,
    /// Of `sys_cycles`, those its memory accesses took beyond their issue
    /// (waiting for a buffer, the data or the sibling's issue slots).
    pub sys_mem_cycles: u64,
}

/// In declaration order (`repr(C)`): what every quantum and every access
/// reads (the clock, pending interrupts, the mode, then the time counters at
/// the head of the statistics) sits in the first 56 bytes, one host cache
/// line or two; the TLB, touched once per page, comes last.
#[repr(C)]
pub struct Cpu {
    pub clock: u64,
    /// Interrupt-handler cycles delivered by IPIs, charged when the CPU next runs.
    pub irq_pending: u64,
    pub mode: Mode,
    pub stats: CpuStats,
    pub tlb: Tlb,
    /// Its ordinary stores awaiting commit (store_queue.rs).
    pub store_queue: StoreQueue,
    /// What it counted in kernel mode (mode_stats.rs).
    pub kernel: mode_stats::KernelShare,
}

impl Cpu {
    /// The events it has counted that `by_mode` splits (mode_stats.rs).
    pub fn mode_counters(&self) -> mode_stats::ModeCounters {
        mode_stats::ModeCounters {
            cache: self.stats.cache.clone(),
            tlb: self.tlb.stats(),
            tlb_walks: self.stats.tlb_walks,
        }
    }

    /// Its events in kernel mode and in user mode so far.
    pub fn by_mode(&self) -> (mode_stats::ModeCounters, mode_stats::ModeCounters) {
        self.kernel
            .split(&self.mode_counters(), self.mode == Mode::Kernel)
    }
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
    /// 8 B scalar stores issued a cycle.
    pub scalar_stores_per_cycle: u64,
    /// Cycles to issue one line of 8 B non-temporal (`movnti`) stores.
    pub movnti_line_cycles: u64,
    pub string_startup: u64,
    /// String instructions drain at their boundary (`string.drain_at_boundary`).
    string_drain: bool,
    /// What a line a string store writes without allocating holds its miss
    /// buffer beyond another unread line's hold (`string.bypass_hold_ns`
    /// less `memory.posted_write_ns`; 0 where not measured apart).
    string_bypass_extra: i64,
    /// What a `clzero` line holds its miss buffer beyond another unread
    /// line's hold (`string.clzero_hold_ns` less `memory.posted_write_ns`;
    /// 0 where not measured apart).
    clzero_extra: i64,
    /// What an `sfence` waits after the last earlier unread line of its
    /// thread left its buffer (`string.sfence_drain_ns`; None: nothing).
    sfence_drain: Option<u64>,
    /// String stores of regions larger than this many bytes do not allocate in the caches (0 = never).
    pub nocache_threshold: u64,
    /// Which lines of a string store over the threshold bypass.
    nocache_by: NocacheBy,
    /// The CPUs have `clzero`.
    pub clzero: bool,
    pub ipi: IpiCosts,
    pub tlb_flush_full_cycles: u64,
    pub invlpg_cycles: u64,
    pub invlpgb: Option<InvlpgbCosts>,
    /// The CPU's idle states, shallowest first.
    pub idle_states: Vec<IdleState>,
    stlb_latency: u64,
    walk_cycles: u64,
    /// Ownership-only string stores carry no data request for the streamer to follow.
    no_rfo: bool,
    l1_next_line: bool,
    /// Cycles a dirty L2 victim holds a superqueue entry (0: it holds none).
    l2_writeback_hold: u64,
    /// Per CPU, its core and its thread within the core (the topology's
    /// divisions, done once).
    cpu_core: Vec<(u32, u32)>,
    /// This machine with one-set caches: what [`Machine::shell`] builds.
    shell_params: MachineParams,
    node_bytes: u64,
    /// Lines of memory: a stream crossing pages stops at its end.
    mem_lines: u64,
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
            perf_events: p.perf_cache_events,
            lat: Latencies {
                no_rfo_grant_at_home: p.no_rfo_grant != NoRfoGrant::Llc,
                grant_local: match p.no_rfo_grant {
                    NoRfoGrant::Cycles(c) => c,
                    _ => p.dram_local_cycles,
                },
                grant_remote: match p.no_rfo_grant {
                    NoRfoGrant::Cycles(c) => {
                        c + p.dram_remote_cycles.saturating_sub(p.dram_local_cycles)
                    }
                    _ => p.dram_remote_cycles,
                },
                l1: p.l1d.latency_cycles,
                l2: p.l2.latency_cycles,
                llc: p.llc.latency_cycles,
                remote_cache: p.remote_cache_cycles,
                dram_local: p.dram_local_cycles,
                dram_remote: p.dram_remote_cycles,
                nt_local: p.posted_write_cycles,
                nt_remote: p.posted_write_cycles
                    + p.dram_remote_cycles.saturating_sub(p.dram_local_cycles),
                extra_hop: p.extra_hop_cycles,
            },
            node_bytes,
            dram_bytes_per_cycle: p.dram_bytes_per_cycle,
            link_bytes_per_cycle: p.link_bytes_per_cycle,
            numa_hops: p.numa_hops.clone(),
            seed,
        })?;
        let cpus = (0..topo.nr_cpus())
            .map(|_| Cpu {
                clock: 0,
                mode: Mode::User,
                tlb: Tlb::new(&p.tlb),
                stats: CpuStats::default(),
                irq_pending: 0,
                store_queue: StoreQueue::new(p.store_queue_entries),
                kernel: Default::default(),
            })
            .collect();
        let cores = (0..topo.nr_cores())
            .map(|_| {
                CoreResources::new(
                    p.l1d.outstanding as usize,
                    p.l2.outstanding as usize,
                    topo.threads_per_core,
                    &p.prefetch,
                    FillBandwidth {
                        from_l2: p.l2.sustained_bytes_per_cycle,
                        from_llc: p.llc.sustained_bytes_per_cycle,
                        l1_writebacks_share: p.l2.writebacks_share_sustained,
                        l2_writebacks_share: p.llc.writebacks_share_sustained,
                    },
                )
            })
            .collect();
        let cpu_core = (0..topo.nr_cpus())
            .map(|c| (topo.core_of(c) as u32, topo.thread_of(c) as u32))
            .collect();
        let mut shell_params = p.clone();
        for c in [
            &mut shell_params.l1d,
            &mut shell_params.l2,
            &mut shell_params.llc,
        ] {
            c.bytes = 64 * c.ways;
        }
        Ok(Machine {
            cpu_core,
            shell_params,
            node_bytes,
            mem_lines: node_bytes * topo.nr_nodes() as u64 / 64,
            topo,
            hier,
            cpus,
            cores,
            freq_mhz: p.freq_mhz,
            issue_width: p.issue_width,
            store_bytes_per_cycle: p.store_bytes_per_cycle,
            scalar_stores_per_cycle: p.scalar_stores_per_cycle,
            movnti_line_cycles: p.movnti_line_cycles,
            string_startup: p.string_startup_cycles,
            string_drain: p.string_drain,
            string_bypass_extra: p
                .string_bypass_hold_cycles
                .map_or(0, |c| c as i64 - p.posted_write_cycles as i64),
            clzero_extra: p
                .clzero_hold_cycles
                .map_or(0, |c| c as i64 - p.posted_write_cycles as i64),
            sfence_drain: p.sfence_drain_cycles,
            nocache_threshold: p.nocache_threshold_bytes,
            nocache_by: p.nocache_by,
            clzero: p.clzero,
            ipi: p.ipi.clone(),
            tlb_flush_full_cycles: p.tlb_flush_full_cycles,
            invlpg_cycles: p.invlpg_cycles,
            invlpgb: p.invlpgb,
            idle_states: p.idle_states.clone(),
            stlb_latency: p.stlb_latency_cycles,
            walk_cycles: p.walk_cycles,
            no_rfo: p.no_rfo_full_lines,
            l1_next_line: p.prefetch.l1_next_line,
            l2_writeback_hold: if p.l2_writeback_holds_superqueue {
                p.llc.latency_cycles
            } else {
                0
            },
        })
    }

    /// The idle state a CPU idle for `idle` cycles was in, as a governor that
    /// predicted the period exactly picks it: the deepest whose target
    /// residency the period reached and whose exit latency is at most
    /// `max_exit` cycles (none if no state qualifies, or the machine has none).
    pub fn idle_state_for(&self, idle: u64, max_exit: u64) -> Option<usize> {
        self.idle_states
            .iter()
            .rposition(|s| s.target_residency_cycles <= idle && s.exit_cycles <= max_exit)
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
        let c = &mut self.cpus[cpu];
        match (c.mode, mode) {
            (Mode::User, Mode::Kernel) => c.kernel.enter(c.mode_counters()),
            (Mode::Kernel, Mode::User) => {
                let now = c.mode_counters();
                c.kernel.leave(&now);
            }
            _ => {}
        }
        c.mode = mode;
    }

    /// One cache-line access. `issue` is the cycles the core spends issuing it
    /// when nothing stalls (e.g. 8 scalar stores, or 64 B at the string store width).
    /// `independent`: the CPU does not wait for the data (a stream of independent
    /// accesses); otherwise a load is dependent (the CPU waits for its data).
    #[inline]
    pub fn access(
        &mut self,
        cpu: usize,
        line: u64,
        kind: AccessKind,
        independent: bool,
        issue: u64,
    ) -> Served {
        let waits = kind == AccessKind::Load && !independent;
        self.access_one(cpu, line, kind, waits, issue)
    }

    /// A locked read-modify-write of one line (`lock xadd`, `lock cmpxchg`,
    /// `lock bts`): the line is taken in ownership like a store's, and the
    /// CPU waits until it has it and the operation is done, spending `issue`
    /// cycles of its issue slots on it.
    #[inline]
    pub fn atomic(&mut self, cpu: usize, line: u64, issue: u64) -> Served {
        self.access_one(cpu, line, AccessKind::Store, true, issue)
    }

    /// A machine of the same shape whose caches hold one set each: a
    /// partition's stand-in, into which [`Machine::lend`] moves one
    /// socket's state so that it can advance on its own (sim/window.rs).
    pub fn shell(&self) -> Machine {
        Machine::new(&self.shell_params, self.node_bytes, 0).expect("the machine's own shape")
    }

    /// Moves socket `s`'s CPUs, cores, caches and memory (its DRAM calendars
    /// and every instance's presence counts for it) into `shell`, and the
    /// shell's stand-ins here, and copies which cores of the other sockets
    /// ever cached a line of each node.
    pub fn lend(&mut self, shell: &mut Machine, s: usize) {
        self.swap_socket(shell, s);
        self.hier.lend(&mut shell.hier, s);
    }

    /// Moves socket `s`'s state back from `shell`, with what its
    /// advance deferred.
    pub fn take_back(&mut self, shell: &mut Machine, s: usize) {
        self.swap_socket(shell, s);
        self.hier.take_back(&mut shell.hier, s);
    }

    fn swap_socket(&mut self, shell: &mut Machine, s: usize) {
        let cps = self.topo.cores_per_socket;
        let cores = self.topo.nr_cores();
        for core in s * cps..(s + 1) * cps {
            std::mem::swap(&mut self.cores[core], &mut shell.cores[core]);
            for thread in 0..self.topo.threads_per_core {
                let cpu = thread * cores + core;
                std::mem::swap(&mut self.cpus[cpu], &mut shell.cpus[cpu]);
            }
        }
    }

    /// The socket `cpu` sits on.
    #[inline]
    pub fn socket_of_cpu(&self, cpu: usize) -> usize {
        self.hier.socket_of_core(self.cpu_core[cpu].0 as usize)
    }

    /// Whether `cpu`'s socket can access `line` touching only what it owns
    /// ([`Hierarchy::is_local`]).
    #[inline]
    pub fn is_local(&self, cpu: usize, line: u64) -> bool {
        self.hier.is_local(self.socket_of_cpu(cpu), line)
    }

    /// A bulk clear (`src` None) or copy of lines `dst + i` for `i` in
    /// `from..n`, stopping early once the CPU's clock reaches `deadline`;
    /// returns where it stopped. Per line, exactly what the caller's loop of
    /// [`Machine::access`] calls did: a copy's independent load of `src + i`
    /// (no issue cycles of its own), then the independent store of `dst + i`
    /// of kind `kind` and `issue` cycles, then `per_line` instructions.
    /// One loop with the access inlined, for the streams of the page clears
    /// and copies that dominate the kernel's time.
    #[allow(clippy::too_many_arguments)]
    pub fn bulk_run(
        &mut self,
        cpu: usize,
        dst: u64,
        src: Option<u64>,
        from: u64,
        n: u64,
        kind: AccessKind,
        issue: u64,
        per_line: u64,
        deadline: u64,
    ) -> u64 {
        match self.hier.spec() {
            SpecId::Haswell => {
                self.bulk_run_as::<Haswell>(cpu, dst, src, from, n, kind, issue, per_line, deadline)
            }
            SpecId::CascadeLake => self.bulk_run_as::<CascadeLake>(
                cpu, dst, src, from, n, kind, issue, per_line, deadline,
            ),
            SpecId::Any => {
                self.bulk_run_as::<AnySpec>(cpu, dst, src, from, n, kind, issue, per_line, deadline)
            }
        }
    }

    /// [`Machine::bulk_run`] on the path built for `S`.
    #[allow(clippy::too_many_arguments)]
    fn bulk_run_as<S: Spec>(
        &mut self,
        cpu: usize,
        dst: u64,
        src: Option<u64>,
        from: u64,
        n: u64,
        kind: AccessKind,
        issue: u64,
        per_line: u64,
        deadline: u64,
    ) -> u64 {
        let mut i = from;
        while i < n && self.cpus[cpu].clock < deadline {
            if let Some(src) = src {
                self.access_one_as::<S>(cpu, src + i, AccessKind::Load, false, 0);
            }
            self.access_one_as::<S>(cpu, dst + i, kind, false, issue);
            if per_line > 0 {
                self.advance(cpu, 0, per_line);
            }
            i += 1;
        }
        i
    }

    /// `waits`: the CPU waits for the access to complete (a dependent load,
    /// a locked read-modify-write); otherwise it goes on once the request
    /// has its fill buffer.
    #[inline(always)]
    fn access_one(
        &mut self,
        cpu: usize,
        line: u64,
        kind: AccessKind,
        waits: bool,
        issue: u64,
    ) -> Served {
        match self.hier.spec() {
            SpecId::Haswell => self.access_one_as::<Haswell>(cpu, line, kind, waits, issue),
            SpecId::CascadeLake => self.access_one_as::<CascadeLake>(cpu, line, kind, waits, issue),
            SpecId::Any => self.access_one_as::<AnySpec>(cpu, line, kind, waits, issue),
        }
    }

    /// [`Machine::access_one`] on the path built for `S`.
    #[inline(always)]
    fn access_one_as<S: Spec>(
        &mut self,
        cpu: usize,
        line: u64,
        kind: AccessKind,
        waits: bool,
        issue: u64,
    ) -> Served {
        let (core, thread) = self.cpu_core[cpu];
        let (core, thread) = (core as usize, thread as usize);
        let c = &mut self.cpus[cpu];
        let r = &mut self.cores[core];
        let was = c.clock;
        // An ordinary store first needs its entries in the store queue.
        let store = kind == AccessKind::Store;
        let now = if store {
            was.max(c.store_queue.ready())
        } else {
            was
        };
        c.stats.stall_cycles += now - was;
        // Slots are found before the access so DRAM is reserved when the request can leave.
        let (li, lfree) = r.lfb.argmin();
        let s1 = now.max(lfree);
        let (qi, qfree) = r.sq.argmin();
        let s2 = s1.max(qfree);
        let (served, wait) = self
            .hier
            .access_as::<S>(core, line, kind, s2, &mut c.stats.cache);
        let (start, new_clock, owned) = match served {
            Served::L1 if wait == 0 => {
                let issued = r.issue.reserve(thread, now, issue);
                c.stats.smt_issue_wait_cycles += issued - now - issue;
                // A dependent load waits for the data: the L1's load-to-use, or the
                // line an L1 prefetch is still bringing.
                let ready = if waits {
                    r.inflight(line, now)
                        .unwrap_or(0)
                        .max(now + self.hier.lat.l1)
                } else {
                    0
                };
                let new_clock = issued.max(ready);
                c.stats.stall_cycles += new_clock - issued;
                (now, new_clock, issued)
            }
            _ => {
                let start = if matches!(served, Served::L1 | Served::L2) {
                    s1
                } else {
                    s2
                };
                let mut lat = self.hier.latency(served);
                if matches!(served, Served::NtWrite { .. }) {
                    if self.string_bypass_extra != 0 && r.in_string(thread) {
                        // A string store's line written without allocation.
                        lat = lat.saturating_add_signed(self.string_bypass_extra);
                    } else if self.clzero_extra != 0 && r.in_clzero(thread) {
                        lat = lat.saturating_add_signed(self.clzero_extra);
                    }
                }
                let mut done = r.fill(served, start + lat + wait, true);
                if self.sfence_drain.is_some() && matches!(served, Served::NtWrite { .. }) {
                    r.unread_store(thread, done);
                }
                if matches!(served, Served::L2 | Served::Llc) {
                    // The line is there because a prefetch asked for it: its data may still be on the way.
                    if let Some(ready) = r.inflight(line, start) {
                        done = done.max(ready);
                    }
                }
                let (l1_wbs, l2_wbs) = self.hier.writebacks();
                r.writebacks(l1_wbs, l2_wbs, done);
                r.lfb.set(li, done);
                r.lfb_line[li] = INVALID;
                if self.string_drain
                    && matches!(kind, AccessKind::StringStore | AccessKind::NtStore)
                {
                    // A string instruction's line is granted when its fill buffer frees.
                    r.string_store(thread, done);
                }
                if !matches!(served, Served::L1 | Served::L2) {
                    r.sq.set(qi, done);
                    r.sq_line[qi] = INVALID;
                }
                hold_writebacks(r, l2_wbs, start, self.l2_writeback_hold);
                let issued = r.issue.reserve(thread, start, issue);
                c.stats.smt_issue_wait_cycles += issued - start - issue;
                c.stats.stall_cycles += start - now;
                (start, if waits { done.max(issued) } else { issued }, done)
            }
        };
        if store {
            c.store_queue.commit(owned);
        }
        let cyc = new_clock - was;
        c.clock = new_clock;
        account(c, cyc);
        if c.mode == Mode::Kernel {
            c.stats.sys_mem_cycles += cyc.saturating_sub(issue);
        }
        // Most accesses give the prefetchers nothing to see (an L1 hit or a
        // string store without data, not a load the L1 prefetcher follows):
        // that test is made here, in line.
        let loads_train = kind == AccessKind::Load && self.l1_next_line;
        if loads_train || (self.data_request::<S>(kind) && !matches!(served, Served::L1)) {
            self.train_prefetchers::<S>(cpu, core, line, kind, served, start);
        }
        served
    }

    /// Whether an access of `kind` that misses the L1 looks up the L2: not
    /// an ownership-only string store (no data to follow) nor a
    /// non-temporal store (it bypasses the caches).
    #[inline(always)]
    fn data_request<S: Spec>(&self, kind: AccessKind) -> bool {
        match kind {
            AccessKind::Load | AccessKind::Store => true,
            AccessKind::StringStore => !S::NO_RFO.unwrap_or(self.no_rfo),
            AccessKind::NtStore => false,
        }
    }

    /// Trains the core's prefetchers with a demand access served at `served`
    /// (its L1/L2 lookups at `t`) and issues what they propose.
    #[inline]
    fn train_prefetchers<S: Spec>(
        &mut self,
        cpu: usize,
        core: usize,
        line: u64,
        kind: AccessKind,
        served: Served,
        t: u64,
    ) {
        let data_request = self.data_request::<S>(kind);
        let r = &mut self.cores[core];
        let mut l2_lookups = [None; 2];
        if data_request && !matches!(served, Served::L1) {
            l2_lookups[0] = Some(line);
        }
        if kind == AccessKind::Load && self.l1_next_line {
            if let Some(p) = r.next_line.on_load(line) {
                if !self.hier.contains_l1_as::<S>(core, p) {
                    let (li, lfree) = r.lfb.argmin();
                    let (qi, qfree) = r.sq.argmin();
                    // A fill buffer, and a superqueue entry if the line is not in L2.
                    let in_l2 = self.hier.contains_l2_as::<S>(core, p);
                    if lfree <= t && (in_l2 || qfree <= t) {
                        let st = &mut self.cpus[cpu].stats.cache;
                        {
                            let (s, w) = self.hier.prefetch_absent_as::<S>(
                                core,
                                p,
                                true,
                                Some(in_l2),
                                t,
                                st,
                            );
                            let (l1_wbs, l2_wbs) = self.hier.writebacks();
                            let mut ready = r.fill(s, t + self.hier.latency(s) + w, true);
                            if let Some(x) = r.inflight(p, t) {
                                ready = ready.max(x);
                            }
                            r.writebacks(l1_wbs, l2_wbs, ready);
                            r.lfb.set(li, ready);
                            r.lfb_line[li] = p;
                            if !matches!(s, Served::L2) {
                                r.sq.set(qi, ready);
                                r.sq_line[qi] = INVALID;
                            }
                            // After the prefetch has its entry: the victims take
                            // others, not the one `qi` names.
                            hold_writebacks(r, l2_wbs, t, self.l2_writeback_hold);
                            r.pf_until = r.pf_until.max(ready);
                            l2_lookups[1] = Some(p);
                        }
                    }
                }
            }
        }
        for l in l2_lookups.into_iter().flatten() {
            let Some(i) = r.streamer.on_lookup(l) else {
                continue;
            };
            let mut k = 0;
            while let Some(p) = r.streamer.next(i, l, k) {
                k += 1;
                if p >= self.mem_lines {
                    break;
                }
                if self.hier.contains_l2_as::<S>(core, p) || self.hier.contains_l1_as::<S>(core, p)
                {
                    let st = &mut self.cpus[cpu].stats.cache;
                    self.hier.prefetch_l2_found_as::<S>(st);
                    r.streamer.advance(i, p);
                    continue;
                }
                let (qi, qfree) = r.sq.argmin();
                if qfree > t {
                    // No superqueue entry free: the streamer tries again on a later lookup.
                    break;
                }
                let st = &mut self.cpus[cpu].stats.cache;
                {
                    let (s, w) = self
                        .hier
                        .prefetch_absent_as::<S>(core, p, false, None, t, st);
                    let (l1_wbs, l2_wbs) = self.hier.writebacks();
                    let ready = r.fill(s, t + self.hier.latency(s) + w, false);
                    r.writebacks(l1_wbs, l2_wbs, ready);
                    r.sq.set(qi, ready);
                    r.sq_line[qi] = p;
                    hold_writebacks(r, l2_wbs, t, self.l2_writeback_hold);
                    r.pf_until = r.pf_until.max(ready);
                }
                r.streamer.advance(i, p);
            }
        }
    }

    /// How many leading lines of one string store of `nlines` lines bypass
    /// the caches (as non-temporal stores); the rest allocate. None below the
    /// threshold; above it all of them, or all but the last threshold's worth
    /// (`string.nocache_by`).
    #[inline]
    pub fn string_bypass_lines(&self, nlines: u64) -> u64 {
        let t = self.nocache_threshold;
        if t == 0 || nlines * 64 <= t {
            return 0;
        }
        match self.nocache_by {
            NocacheBy::Call => nlines,
            NocacheBy::Remaining => nlines - t / 64,
        }
    }

    /// One string instruction (`rep stosb`/`rep movsb`) begins: where the
    /// preset drains at the boundary, the CPU first waits (stalled) until
    /// every line store of its previous string instruction is granted, and
    /// only then pays the fixed start-up, which therefore does not overlap
    /// those grants; otherwise the start-up alone.
    pub fn string_start(&mut self, cpu: usize) {
        let (core, thread) = self.cpu_core[cpu];
        let now = self.cpus[cpu].clock;
        let t = self.cores[core as usize].string_begin(thread as usize, now, self.string_drain);
        if t > now {
            self.cpus[cpu].stats.stall_cycles += t - now;
            self.advance(cpu, t - now, 0);
        }
        self.advance(cpu, self.string_startup, 1);
    }

    /// The string instruction begun by [`Machine::string_start`] has issued
    /// its last store (its grants may still be outstanding).
    pub fn string_end(&mut self, cpu: usize) {
        let (core, thread) = self.cpu_core[cpu];
        self.cores[core as usize].string_end(thread as usize);
    }

    /// An `sfence` on CPU `cpu`: one instruction, which, where the preset
    /// measured a drain (`string.sfence_drain_ns`), completes only that long
    /// after the last earlier unread line of the thread left its buffer
    /// (the CPU stalls until then); otherwise it waits for nothing.
    pub fn sfence(&mut self, cpu: usize) {
        if let Some(d) = self.sfence_drain {
            let (core, thread) = self.cpu_core[cpu];
            let now = self.cpus[cpu].clock;
            let t = self.cores[core as usize].unread_left(thread as usize) + d;
            if t > now {
                self.cpus[cpu].stats.stall_cycles += t - now;
                self.advance(cpu, t - now, 0);
            }
        }
        self.advance(cpu, 0, 1);
    }

    /// CPU `cpu`'s ordinary stores write each line in `stores` store
    /// instructions (each a store-queue entry) until set again: 8 for a loop
    /// of 8 B `mov`s, 64 / width for vector stores; 1, the default, takes
    /// each store access as one instruction.
    pub fn set_line_stores(&mut self, cpu: usize, stores: u64) {
        self.cpus[cpu].store_queue.set_line_stores(stores);
    }

    /// CPU `cpu` enters (true) or leaves a `clzero` loop: its lines hold
    /// their miss buffers for `string.clzero_hold_ns` where measured.
    pub fn set_clzero(&mut self, cpu: usize, on: bool) {
        let (core, thread) = self.cpu_core[cpu];
        self.cores[core as usize].set_clzero(thread as usize, on);
    }

    /// Translates `vaddr` through the CPU's TLB; on a miss the walk is
    /// charged and the entry filled with `pfn`, the frame the caller's walk
    /// found for the page. Returns the frame a hit translated to (None on a
    /// miss), for the caller to check against its page tables.
    ///
    /// `entry_line`, asked on a miss only: the line of the page-table entry
    /// at the level that maps pages of the given size (`size` itself: the
    /// leaf), if the page tables are in simulated memory. Then the walk is
    /// that dependent load through the caches plus the walker's own time,
    /// the fixed walk less an L1 hit, so that a walk whose entry is in the
    /// L1 costs the fixed walk; otherwise the fixed walk. The upper levels
    /// hit the paging-structure caches, except that where the STLB holds
    /// page-directory entries (`TlbConfig::stlb_holds_pde`, AMD) a 4 KiB
    /// walk whose PDE is not there loads it first, its line asked as the
    /// 2 MiB level's, and caches it.
    #[inline]
    pub fn tlb_translate(
        &mut self,
        cpu: usize,
        asid: u16,
        vaddr: u64,
        size: PageSize,
        pfn: u64,
        entry_line: impl Fn(PageSize) -> Option<u64>,
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
                match entry_line(size) {
                    Some(line) => {
                        let own = self.walk_cycles.saturating_sub(self.hier.lat.l1);
                        self.advance(cpu, own, 0);
                        if size == PageSize::Size4K && !self.cpus[cpu].tlb.pde_hit(asid, vaddr) {
                            if let Some(pde) = entry_line(PageSize::Size2M) {
                                self.walker_load(cpu, pde);
                            }
                            self.cpus[cpu].tlb.pde_fill(asid, vaddr);
                        }
                        self.walker_load(cpu, line);
                    }
                    None => self.advance(cpu, self.walk_cycles, 0),
                }
                self.cpus[cpu].tlb.fill_pfn(asid, vaddr, size, pfn);
                None
            }
        }
    }

    /// One dependent load of the page walker, counted by where it was served.
    #[inline]
    fn walker_load(&mut self, cpu: usize, line: u64) {
        let served = self.access_one(cpu, line, AccessKind::Load, true, 0);
        let i = match served {
            Served::L1 => 0,
            Served::L2 => 1,
            Served::Llc => 2,
            Served::RemoteCache { .. } => 3,
            _ => 4,
        };
        self.cpus[cpu].stats.walker_loads[i] += 1;
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
        let (send, wait) = self.ipi.sender_parts(n, work);
        let st = &mut self.cpus[from].stats;
        st.ipi_send_cycles_by_cause[cause as usize] += send;
        st.ipi_wait_cycles_by_cause[cause as usize] += wait;
        self.advance(from, send + wait, 20 * n);
    }

    /// Charges pending interrupt handling to a CPU (kernel time).
    pub fn take_interrupts(&mut self, cpu: usize) {
        let p = std::mem::take(&mut self.cpus[cpu].irq_pending);
        if p > 0 {
            self.interrupt(cpu, p);
        }
    }

    /// `cycles` of interrupt handling on `cpu`, in kernel mode whatever mode
    /// it interrupted.
    pub fn interrupt(&mut self, cpu: usize, cycles: u64) {
        let m = self.cpus[cpu].mode;
        self.cpus[cpu].mode = Mode::Kernel;
        self.advance(cpu, cycles, 0);
        self.cpus[cpu].mode = m;
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

/// Dirty L2 victims leave through the superqueue: each takes the entry that
/// frees first, from `t` (or when it frees) for `hold` cycles.
#[inline(always)]
fn hold_writebacks(r: &mut CoreResources, n: u32, t: u64, hold: u64) {
    if hold == 0 {
        return;
    }
    for _ in 0..n {
        let (i, f) = r.sq.argmin();
        r.sq.set(i, f.max(t) + hold);
        r.sq_line[i] = INVALID;
    }
}
