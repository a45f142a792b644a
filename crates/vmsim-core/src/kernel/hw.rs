//! The one context through which a kernel path touches the hardware: the
//! CPU it runs on, the machine (line accesses, TLB operations, IPIs,
//! cycles), every CPU's `cpu_tlbstate`, and the attribution of the CPU's
//! system time to kernel paths (`sys_cycles_by_function`).
//!
//! A kernel path is a method of `Kernel` that takes a `Hw`; the engine
//! (sim/) lends one for the CPU it is running. Work the path hands to the
//! CPU for later (clears, copies, fixed costs in simulated time) goes on
//! the CPU's queue as `Work` items instead.
//!
//! Invariant: system cycles are attributed once each: `settle` gives the
//! CPU's system cycles since the last settlement to one kernel path.

use super::tlbflush::TlbState;
use super::KFn;
use crate::machine::hierarchy::{AccessKind, Served};
use crate::machine::{Machine, Mode};

/// Issue cycles of a locked read-modify-write (`lock xadd`, `lock cmpxchg`,
/// `lock bts`/`btr`) beyond its memory access: Agner Fog, "Instruction
/// tables" (Haswell): latency about 18-19 cycles for LOCK-prefixed
/// XADD/CMPXCHG on memory. Used for every preset (not measured per core).
pub const LOCKED_RMW_CYCLES: u64 = 18;

/// System cycles by kernel path, indexed like `KFn::ALL`.
pub type KfnCycles = [u64; KFn::ALL.len()];

/// A CPU's system cycles already attributed to a path, and the part of
/// them its memory accesses took (`CpuStats::sys_mem_cycles`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Settled {
    pub sys: u64,
    pub mem: u64,
}

pub struct Hw<'a> {
    /// The CPU the path runs on.
    pub cpu: usize,
    pub(crate) machine: &'a mut Machine,
    /// Every CPU's `cpu_tlbstate` (a flush reads its targets').
    pub(crate) tlbstate: &'a mut [TlbState],
    /// This CPU's system cycles already attributed.
    settled: &'a mut Settled,
    kfn_cycles: &'a mut KfnCycles,
    /// The part of `kfn_cycles` memory accesses took.
    kfn_mem_cycles: &'a mut KfnCycles,
}

impl<'a> Hw<'a> {
    pub fn new(
        cpu: usize,
        m: &'a mut Machine,
        tlbstate: &'a mut [TlbState],
        settled: &'a mut Settled,
        kfn_cycles: &'a mut KfnCycles,
        kfn_mem_cycles: &'a mut KfnCycles,
    ) -> Hw<'a> {
        Hw {
            cpu,
            machine: m,
            tlbstate,
            settled,
            kfn_cycles,
            kfn_mem_cycles,
        }
    }

    /// The path's own software: `cycles` of kernel time and as many instructions.
    pub fn charge(&mut self, cycles: u64) {
        self.machine.advance(self.cpu, cycles, cycles);
    }

    /// The CPU's mode, for the cycles and accesses that follow.
    pub fn mode(&self) -> Mode {
        self.machine.cpus[self.cpu].mode
    }

    pub fn set_mode(&mut self, mode: Mode) {
        self.machine.set_mode(self.cpu, mode);
    }

    /// An interrupt of `cycles` (entry, handler, exit) in kernel mode,
    /// charged to `what` at once, so that system cycles not yet settled
    /// keep their path.
    pub fn interrupt(&mut self, cycles: u64, what: KFn) {
        self.machine.interrupt(self.cpu, cycles);
        self.kfn_cycles[what as usize] += cycles;
        self.settled.sys += cycles;
    }

    /// This CPU's clock.
    pub fn now(&self) -> u64 {
        self.machine.cpus[self.cpu].clock
    }

    /// `n` instructions of the path's own code, at the core's issue width.
    pub fn instructions(&mut self, n: u64) {
        let cycles = n.div_ceil(self.machine.issue_width.max(1));
        self.machine.advance(self.cpu, cycles, n);
    }

    /// A load of one line of the kernel's own memory through the caches;
    /// `independent`: later loads need not wait for it (a loop over an array).
    pub fn load(&mut self, line: u64, independent: bool) -> Served {
        self.machine
            .access(self.cpu, line, AccessKind::Load, independent, 1)
    }

    /// A locked read-modify-write of one line of the kernel's own memory (an
    /// atomic on a `struct page`, a lock word): the line comes in ownership,
    /// from wherever it is, and the CPU waits for it.
    pub fn atomic(&mut self, line: u64) -> Served {
        self.machine.atomic(self.cpu, line, LOCKED_RMW_CYCLES)
    }

    /// A store to one line of the kernel's own memory (a lock's release).
    pub fn store(&mut self, line: u64) -> Served {
        self.machine
            .access(self.cpu, line, AccessKind::Store, true, 1)
    }

    /// Idle cycles for a line `from`'s core holds modified to reach this CPU.
    pub fn transfer_latency(&self, from: usize) -> u64 {
        let t = &self.machine.topo;
        self.machine
            .hier
            .transfer_latency(t.core_of(from), t.core_of(self.cpu))
    }

    /// `cycles` spent spinning on a lock: system time, no instructions counted.
    pub fn spin(&mut self, cycles: u64) {
        self.machine.advance(self.cpu, cycles, 0);
    }

    /// The exit latency of the idle state this CPU would enter for an idle
    /// period of `idle` cycles with nothing in iowait: the deepest state
    /// whose target residency the period reaches and whose exit latency is
    /// at most the period (the menu governor's choice with an exact
    /// prediction, `performance_multiplier()` 1); 0 with no such state.
    pub fn idle_exit_cycles(&self, idle: u64) -> u64 {
        let m = &self.machine;
        m.idle_state_for(idle, idle)
            .map_or(0, |s| m.idle_states[s].exit_cycles)
    }

    /// The system cycles attributed so far, by path (a copy, to diff).
    pub fn kfn_totals(&self) -> KfnCycles {
        *self.kfn_cycles
    }

    /// Attributes this CPU's system cycles since the last settlement to `what`.
    pub fn settle(&mut self, what: KFn) {
        settle(
            self.machine,
            self.cpu,
            self.settled,
            self.kfn_cycles,
            self.kfn_mem_cycles,
            what,
        );
    }
}

/// `cpu`'s system cycles since `settled` go to `what`, and so does the part
/// of them its memory accesses took.
#[inline]
pub fn settle(
    m: &Machine,
    cpu: usize,
    settled: &mut Settled,
    kfn_cycles: &mut KfnCycles,
    kfn_mem_cycles: &mut KfnCycles,
    what: KFn,
) {
    let st = &m.cpus[cpu].stats;
    if st.sys_cycles > settled.sys {
        kfn_cycles[what as usize] += st.sys_cycles - settled.sys;
        settled.sys = st.sys_cycles;
        kfn_mem_cycles[what as usize] += st.sys_mem_cycles - settled.mem;
        settled.mem = st.sys_mem_cycles;
    }
}
