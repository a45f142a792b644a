//! The engine: the run loop and the tasks — which CPU runs next, what it
//! runs, and the task table — with the executor of the kernel's queued
//! hardware work (exec.rs), the access engine (access.rs), the dispatch of
//! workload operations (user.rs), the windowed parallel loop (window.rs) and
//! the timed events (engine.rs). It drives the kernel and the workloads and
//! owns none of their knowledge: the scheduler's own decisions (run queues,
//! slices, wake-ups) are kernel/sched/rq.rs's, wait queues
//! kernel/sched/wait.rs's; what a context switch does to address spaces is
//! kernel/tlbflush.rs's `switch_mm_irqs_off` / `enter_lazy_tlb`.
//!
//! The loop always advances the CPU with the lowest clock (ties: lowest CPU
//! id) for at most one quantum; an event (timer) due at or before that clock
//! fires first, and an idle CPU it gives a task resumes at the event's time.
//! A CPU first executes the kernel work queued on it, then its current task:
//! a user task's next operation (sim/user.rs) or a kernel thread's next
//! step. More tasks than CPUs are time-sliced round-robin at user level
//! (CFS's 3 ms minimum granularity on >= 8 CPUs). The run ends when every
//! user task has exited (kernel threads and their timers do not keep it
//! alive) or nothing is left to run.
//!
//! fork places the child on the next CPU after the parent's, round-robin
//! (child k of a parent on CPU c goes to CPU (c + 1 + k) mod nr_cpus): on an
//! otherwise idle machine that spreads the children as Linux's fork balancing
//! (`select_task_rq` with SD_BALANCE_FORK) does, over idle CPUs, though not
//! necessarily onto the same ones. A CPU that gets a task while idle resumes
//! at the waker's clock. A task that waits for its children sleeps off the
//! CPU until the last one exits.
//!
//! Invariants: a task is on at most one CPU; every CPU's clock only grows;
//! the order of events depends only on the config and seed.

use crate::error::Error;
use crate::kernel::hw::Hw;
use crate::kernel::kthread::{KthreadFn, KthreadStep};
use crate::kernel::page_alloc::{tag_store, TAG_ZERO};
use crate::kernel::tlbflush::{enter_lazy_tlb, TlbState};
use crate::kernel::uapi::{store_value, Expect, Op, Program};
use crate::kernel::{KFn, Kernel, StoreHow, Work};
use crate::machine::hierarchy::AccessKind;
use crate::machine::{Machine, Mode};
use engine::{Engine, Event};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

pub mod engine;

use crate::kernel::sched::rq::{Scheduler, TaskState};

pub(crate) enum Cur {
    Write {
        start: u64,
        len: u64,
        seed: u64,
        /// Cycles one line's 8 stores take to issue, and their instructions.
        issue: u64,
        instr: u64,
        pos: u64,
        pfn: u64,
        page: u64,
        gen: u64,
        /// The stores are recorded in the mm's shadow (`Op::WriteSeqTracked`).
        shadow: bool,
    },
    /// MAP_POPULATE of a new mapping: `populate_vma_page_range()` faulting in
    /// one page (or huge page) at a time, in kernel mode.
    Populate { start: u64, len: u64, pos: u64 },
    /// An `Op::Access` run of the access engine.
    Access(access_run::AccessRun),
    /// An `Op::Replay` batch of recorded accesses.
    Replay(replay_run::ReplayRun),
}

/// What a task runs.
pub enum Body {
    /// A user program, speaking to the kernel through `Op`s.
    User(Box<dyn Program>),
    /// A kernel thread.
    Kernel(Box<dyn KthreadFn>),
}

pub struct Task {
    pub pid: usize,
    /// The task's address space; None for a kernel thread.
    pub mm: Option<usize>,
    body: Body,
    pub(crate) cur: Option<Cur>,
    pub(crate) ret: u64,
    pub exited: bool,
    /// The task that forked this one.
    pub parent: Option<usize>,
    /// Children forked and not yet exited.
    pub live_children: u64,
    pub nr_forked: u64,
    /// Sleeping in `Op::Wait` until its last child exits.
    pub waiting: bool,
    /// usemem's start pipes, as the parent holds them.
    pub(crate) pipes: StartPipes,
    pub start: Option<u64>,
    pub end: Option<u64>,
    /// `bytes` at the task's timed interval's start and end marks.
    pub bytes_at_start: u64,
    pub bytes_at_end: Option<u64>,
    /// When the task exited.
    pub exit: Option<u64>,
    pub bytes: u64,
    pub pages_checked: u64,
    pub bad_pages: u64,
    pub first_bad: Option<String>,
    /// The access engine's operation counts and latency histogram.
    pub access: access_run::AccessStats,
    /// The phases the task is in, innermost last (sim/phase.rs).
    pub(crate) phase_marks: Vec<phase_stats::PhaseMark>,
    /// `cpus_allowed` (sched_setaffinity / taskset), inherited by children;
    /// None: every CPU.
    pub cpus_allowed: Option<crate::machine::ipi::CpuMask>,
    /// Kernel work of a task that went to sleep inside the kernel (on a
    /// sleeping lock): it goes back on the CPU, first, when the task is
    /// switched in again.
    pub(crate) kernel_work: VecDeque<Work>,
}

impl Task {
    pub fn is_kthread(&self) -> bool {
        matches!(self.body, Body::Kernel(_))
    }
    /// The mm of a user task.
    pub(crate) fn user_mm(&self) -> usize {
        self.mm.expect("a user task has an mm")
    }
    pub(crate) fn prog(&mut self) -> &mut Box<dyn Program> {
        match &mut self.body {
            Body::User(p) => p,
            Body::Kernel(_) => panic!("task {} is a kernel thread", self.pid),
        }
    }
}

/// usemem's start pipes on the parent: the children's ready bytes, whether the
/// parent sleeps reading them, whether "go" was written, and the children
/// polling for it (woken in the order they began to poll).
#[derive(Default)]
pub(crate) struct StartPipes {
    pub ready: u64,
    pub reading: Option<u64>,
    pub go: bool,
    pub pollers: Vec<usize>,
}

/// The kernel's per-CPU state beyond the scheduler's: the hardware work
/// queued on the CPU and the attribution of its system time.
#[derive(Default)]
pub struct CpuCtx {
    pub(crate) work: VecDeque<Work>,
    /// Progress in the front work item: lines done, and whether its start-up was paid.
    pos: u64,
    started: bool,
    /// System cycles of this CPU already attributed to a kernel path.
    sys_settled: crate::kernel::hw::Settled,
    /// When the current task was switched in or last had its run time added up.
    pub(crate) curr_since: u64,
    /// The next scheduler tick, on the tick grid.
    next_tick: u64,
    /// Idle with the tick stopped (NO_HZ_IDLE); it restarts on the grid
    /// when the CPU next has something to run.
    tick_stopped: bool,
    /// A tick fired and the current task's tick work (slice check, NUMA
    /// scan check) has not yet looked at it.
    ticked: bool,
    /// When the CPU last went idle (the run loop found it with nothing to do).
    pub idle_since: u64,
}

pub struct Sim {
    pub machine: Machine,
    pub kernel: Kernel,
    pub tasks: Vec<Task>,
    pub cpus: Vec<CpuCtx>,
    pub sched: Scheduler,
    pub engine: Engine,
    /// Each CPU's `cpu_tlbstate`: the mm it has loaded, lazily or not.
    pub tlbstate: Vec<TlbState>,
    quantum: u64,
    /// Cycles to issue a line's eight 8 B scalar stores (the store ports).
    scalar_line: u64,
    string_issue: u64,
    movq_issue: u64,
    /// Cycles a line of the `movnti` loop takes to issue.
    movnti_issue: u64,
    /// Issue cycles of one line of a `clzero` loop.
    clzero_issue: u64,
    total_bytes: u64,
    /// User tasks created and not yet exited.
    pub(crate) live_user_tasks: usize,
    /// For workloads that run for a time rather than a size (pmbench): the
    /// simulated cycles they are expected to take, for progress reports.
    pub progress_horizon: u64,
    /// System cycles by kernel path, indexed like `KFn::ALL`.
    pub kfn_cycles: [u64; KFn::ALL.len()],
    /// The part of `kfn_cycles` the paths' memory accesses took.
    pub kfn_mem_cycles: [u64; KFn::ALL.len()],
    copy_issue: u64,
    /// The scheduler tick's period (1 s / `CONFIG_HZ`) in cycles.
    tick_period: u64,
    /// Where the tick grid starts: when in the jiffy the run began, drawn
    /// from the seed (`seed_tick`).
    tick_phase: u64,
    pub error: Option<Error>,
    /// Counters at the start of the region of interest and, once it ended, at its end.
    pub roi: Option<(crate::stats::Counters, Option<crate::stats::Counters>)>,
    /// Tasks that joined the shared region of interest (`Op::RoiJoin`), and
    /// whether one has left it.
    roi_joined: u64,
    roi_left: bool,
    /// Each measured phase's figures, by the id its program gave (sim/phase.rs).
    pub phases: Vec<phase_stats::PhaseStats>,
    /// Tasks asleep at each barrier, in the order they arrived.
    barriers: std::collections::BTreeMap<u32, Vec<usize>>,
    /// `sim.window_cycles`: 0 for the ordinary loop, else the windowed one (sim/window.rs).
    pub(crate) window: u64,
    /// The partition phase 1 of a window is advancing, and why a step of it stopped.
    pub(crate) win_part: Option<usize>,
    pub(crate) parked: Option<window_stats::Park>,
    /// Phase 1 runs a bulk item's lines only up to here.
    bulk_limit: u64,
    /// A stand-in's phase 1: the window's end, its CPUs with something to
    /// run, the task each may run (or why not), the (task, mm) lent to it,
    /// the CPUs that parked, and its lowest clock after the window.
    win_end: u64,
    win_queued: Vec<usize>,
    win_min: Option<u64>,
    win_quanta: u64,
    win_task: Vec<Result<usize, window_stats::Park>>,
    win_lent: Vec<(usize, usize)>,
    win_parked: Vec<usize>,
    /// Host threads a windowed run may use (at most one per socket).
    host_threads: usize,
    pub window_stats: window_stats::WindowStats,
    /// Exits from idle states of CPUs woken by a timed wake-up.
    pub idle_stats: IdleStats,
    /// Run phase 1's partitions last to first (a test that their order does not matter).
    #[doc(hidden)]
    pub reverse_partitions: bool,
    #[doc(hidden)]
    pub help_override: window_stats::HelpOverride,
}

/// `performance_multiplier()` of the menu cpuidle governor (4.x
/// drivers/cpuidle/governors/menu.c): `mult += 10 * nr_iowaiters`.
pub const MENU_IOWAIT_MULTIPLIER: u64 = 10;

/// Exits from idle states (`[idle]` of the preset) that woken CPUs paid,
/// and the time CPUs spent with nothing to run.
#[derive(Clone, Debug, Default)]
pub struct IdleStats {
    /// Per idle state, like `Machine::idle_states`.
    pub exits: Vec<u64>,
    pub exit_cycles: u64,
    /// Cycles of idle periods that have ended, summed over CPUs: from the
    /// moment a CPU had nothing to run to the one its next task could run
    /// (the idle exit included), as /proc/stat's `idle` counts them; a CPU
    /// still idle adds its current period when it is next given a task.
    pub idle_cycles: u64,
}

impl IdleStats {
    fn to_json(&self, m: &Machine) -> serde_json::Value {
        let by_state: serde_json::Map<String, serde_json::Value> = m
            .idle_states
            .iter()
            .zip(&self.exits)
            .map(|(s, n)| (s.name.clone(), serde_json::json!(n)))
            .collect();
        serde_json::json!({"exits": by_state, "exit_cycles": self.exit_cycles, "idle_cycles": self.idle_cycles})
    }
}

pub mod access;
pub mod access_run;
mod exec;
pub mod phase;
pub mod phase_stats;
mod replay;
mod replay_run;
mod task;
mod translate;
mod user;
pub mod window;
pub mod window_stats;

impl Sim {
    pub fn new(m: Machine, mut k: Kernel, quantum: u64) -> Sim {
        let n = m.topo.nr_cpus();
        k.cpus.nodes = (0..n).map(|c| m.topo.node_of(c)).collect();
        k.cpus.clzero = m.clzero;
        k.cpus.issue_width = m.issue_width;
        let scalar_line =
            crate::machine::params::scalar_store_line_cycles(m.scalar_stores_per_cycle);
        let string_issue = (64 / m.store_bytes_per_cycle).max(1);
        let movq_issue =
            crate::kernel::instr::mov_clear_line_issue(m.issue_width, m.scalar_stores_per_cycle);
        let movnti_issue =
            crate::kernel::instr::movnti_line_issue(m.issue_width, m.movnti_line_cycles);
        // One store per line: the loop's instructions decide.
        let clzero_issue = crate::kernel::instr::CLEAR_CLZERO_PER_LINE.div_ceil(m.issue_width);
        let copy_issue = (crate::kernel::instr::COPY_PAGE_REGS_PER_LINE.div_ceil(m.issue_width))
            .max(scalar_line);
        let slice = 3 * m.freq_mhz * 1000; // 3 ms
                                           // At least one cycle, so the grid always advances.
        let tick_period = (m.freq_mhz * 1_000_000 / k.cfg.hz.max(1)).max(1);
        let nr_idle_states = m.idle_states.len();
        Sim {
            cpus: (0..n)
                .map(|_| CpuCtx {
                    tick_stopped: true,
                    ..CpuCtx::default()
                })
                .collect(),
            sched: Scheduler::new(n, slice),
            engine: Engine::default(),
            tlbstate: vec![TlbState::default(); n],
            machine: m,
            kernel: k,
            tasks: Vec::new(),
            quantum,
            scalar_line,
            string_issue,
            movq_issue,
            movnti_issue,
            clzero_issue,
            total_bytes: 0,
            live_user_tasks: 0,
            progress_horizon: 0,
            kfn_cycles: [0; KFn::ALL.len()],
            kfn_mem_cycles: [0; KFn::ALL.len()],
            copy_issue,
            tick_period,
            tick_phase: 0,
            error: None,
            roi: None,
            roi_joined: 0,
            roi_left: false,
            phases: Vec::new(),
            barriers: std::collections::BTreeMap::new(),
            window: 0,
            win_part: None,
            parked: None,
            bulk_limit: u64::MAX,
            win_end: 0,
            win_queued: Vec::new(),
            win_min: None,
            win_quanta: 0,
            win_task: Vec::new(),
            win_lent: Vec::new(),
            win_parked: Vec::new(),
            host_threads: 1,
            window_stats: window_stats::WindowStats::default(),
            idle_stats: IdleStats {
                exits: vec![0; nr_idle_states],
                exit_cycles: 0,
                idle_cycles: 0,
            },
            reverse_partitions: false,
            help_override: window_stats::HelpOverride::Auto,
        }
    }

    /// Selects the windowed run loop with windows of `cycles` (sim/window.rs); 0: the ordinary loop.
    pub fn set_window(&mut self, cycles: u64) {
        self.window = cycles;
    }

    /// Host threads a windowed run spreads its sockets over (at most one
    /// per socket); the result is the same for any number.
    pub fn set_host_threads(&mut self, n: usize) {
        self.host_threads = n.max(1);
    }

    /// Places the tick grid from the run's seed. A benchmark starts at no
    /// particular point of a jiffy, so where the first tick falls is what
    /// changes from one run to the next; the seed picks it. Without a call,
    /// the grid starts at 0.
    pub fn seed_tick(&mut self, seed: u64) {
        let z = crate::rng::mix64(seed ^ 0x7469_636b_5f70_6861); // "tick_pha"
        self.tick_phase = z % self.tick_period;
    }

    /// The first tick of `cpu` strictly after `now` (`hrtimer_forward` of the
    /// tick timer): the grid of period `tick_period` from `tick_phase`, each
    /// CPU offset by `cpu * period / 2 / nr_cpus` under `skew_tick`.
    fn tick_after(&self, cpu: usize, now: u64) -> u64 {
        let p = self.tick_period;
        let mut base = self.tick_phase;
        if self.kernel.cfg.skew_tick {
            base += (p / 2) / self.cpus.len() as u64 * cpu as u64;
        }
        if now < base {
            base
        } else {
            base + ((now - base) / p + 1) * p
        }
    }

    /// The scheduler tick on a CPU that has something to run: every tick
    /// due by now is taken (interrupt entry and exit plus the handler), and
    /// the current task's tick work is flagged. An idle CPU has no tick;
    /// it restarts on the grid when the CPU next has work.
    fn scheduler_tick(&mut self, cpu: usize) {
        let now = self.machine.cpus[cpu].clock;
        if self.cpus[cpu].tick_stopped {
            self.cpus[cpu].tick_stopped = false;
            self.cpus[cpu].next_tick = self.tick_after(cpu, now);
            return;
        }
        while self.machine.cpus[cpu].clock >= self.cpus[cpu].next_tick {
            let (k, mut hw) = self.kernel_hw(cpu);
            k.tick(&mut hw);
            self.sched.stats.nr_ticks += 1;
            self.cpus[cpu].ticked = true;
            let next = self.cpus[cpu].next_tick + self.tick_period;
            self.cpus[cpu].next_tick = next;
        }
    }

    /// Bytes a task reports, as the workload counts them.
    pub fn reported_bytes(&self, t: usize) -> u64 {
        match &self.tasks[t].body {
            Body::User(p) if p.reports_timed_bytes() => {
                let task = &self.tasks[t];
                task.bytes_at_end.unwrap_or(task.bytes) - task.bytes_at_start
            }
            Body::User(p) => p.reported_bytes(self.tasks[t].bytes),
            Body::Kernel(_) => 0,
        }
    }

    /// NUMA balancing's scanner, hinting-fault and migration counters so
    /// far, by their report names (the kernel's).
    pub fn numa_balancing_counters(&self) -> [(&'static str, u64); 12] {
        self.kernel.numa_balancing_counters()
    }

    /// Context switches so far.
    pub fn nr_context_switches(&self) -> u64 {
        self.sched.stats.nr_switches
    }

    /// Every component's counters now: the kernel's vmstat, the scheduler's,
    /// the engine's and wait queues', and the hardware's summed over CPUs
    /// (cycles, instructions, caches, TLBs, IPIs) and memory channels.
    pub fn counters(&self) -> crate::stats::Counters {
        use crate::stats::Counters;
        let mut cpu = Counters::default();
        let mut tlb = Counters::default();
        for (i, c) in self.machine.cpus.iter().enumerate() {
            cpu.add(&Counters::of(&c.stats));
            tlb.add(&Counters::of(&self.machine.tlb_stats(i)));
        }
        let mut dram = Counters::default();
        for d in &self.machine.hier.dram {
            dram.add(&Counters::of(&d.stats));
        }
        let mut all = serde_json::json!({
            "sched": Counters::of(&self.sched.stats).0,
            "events": {"timers_fired": self.engine.nr_fired, "wait_queue_wakeups": self.kernel.nr_queue_wakeups(), "kswapd_wakeups": self.kernel.nr_kswapd_wakeups()},
            "idle": self.idle_stats.to_json(&self.machine),
            "cpu": cpu.0,
            "tlb": tlb.0,
            "dram": dram.0,
        });
        for (name, group) in self.kernel.counter_groups() {
            all[name] = group;
        }
        Counters(all)
    }

    /// Creates a task with a new mm on `cpu`'s run queue.
    pub fn spawn(&mut self, prog: Box<dyn Program>, cpu: usize) -> usize {
        let mm = self.kernel.new_mm();
        self.total_bytes += prog.total_bytes();
        let pid = self.add_task(Body::User(prog), Some(mm), None);
        self.sched.add_task(pid, cpu);
        pid
    }

    /// Creates a task with a new mm on `cpu`, its children kept to the CPUs of `allowed`.
    pub fn spawn_bound(
        &mut self,
        prog: Box<dyn Program>,
        cpu: usize,
        allowed: crate::machine::ipi::CpuMask,
    ) -> usize {
        let pid = self.spawn(prog, cpu);
        self.tasks[pid].cpus_allowed = Some(allowed);
        pid
    }

    /// `kthread_run` bound to `cpu` (`kthread_create_on_cpu` + `wake_up_process`).
    /// `kswapd_run(nid)`: starts node `node`'s kswapd on the first CPU of the node.
    pub fn kswapd_run(&mut self, node: usize) -> usize {
        let cpu = (0..self.machine.topo.nr_cpus())
            .find(|&c| self.machine.topo.node_of(c) == node)
            .expect("a node has CPUs");
        self.kthread_run(Box::new(crate::kernel::vmscan::Kswapd { node }), cpu)
    }

    /// The kernel and the hardware context of `cpu` for a kernel path run there.
    pub(crate) fn kernel_hw(&mut self, cpu: usize) -> (&mut Kernel, Hw<'_>) {
        (
            &mut self.kernel,
            Hw::new(
                cpu,
                &mut self.machine,
                &mut self.tlbstate,
                &mut self.cpus[cpu].sys_settled,
                &mut self.kfn_cycles,
                &mut self.kfn_mem_cycles,
            ),
        )
    }

    pub fn kthread_run(&mut self, f: Box<dyn KthreadFn>, cpu: usize) -> usize {
        let pid = self.add_task(Body::Kernel(f), None, None);
        self.sched.add_task(pid, cpu);
        pid
    }

    pub(crate) fn add_task(
        &mut self,
        body: Body,
        mm: Option<usize>,
        parent: Option<usize>,
    ) -> usize {
        let pid = self.tasks.len();
        if let Body::User(_) = body {
            self.live_user_tasks += 1;
        }
        self.tasks.push(Task {
            pid,
            mm,
            body,
            cur: None,
            ret: 0,
            exited: false,
            parent,
            live_children: 0,
            nr_forked: 0,
            waiting: false,
            pipes: StartPipes::default(),
            start: None,
            bytes_at_start: 0,
            bytes_at_end: None,
            end: None,
            exit: None,
            bytes: 0,
            pages_checked: 0,
            bad_pages: 0,
            first_bad: None,
            access: access_run::AccessStats::default(),
            phase_marks: Vec::new(),
            cpus_allowed: None,
            kernel_work: VecDeque::new(),
        });
        pid
    }

    fn busy(&self, cpu: usize) -> bool {
        self.sched.has_tasks(cpu) || !self.cpus[cpu].work.is_empty()
    }

    /// Runs until every user task has exited (or an error stops the run).
    pub fn run(&mut self, progress: &mut dyn FnMut(f64)) -> Result<(), Error> {
        // The caller learns the run has begun, whatever it then reports.
        progress(0.0);
        if self.window > 0 {
            self.run_windowed(progress)?;
            // A task a stop made exit is not a finished run.
            if crate::interrupt::requested() {
                return Err(Error::Interrupted);
            }
            return Ok(());
        }
        let mut heap = BinaryHeap::new();
        let mut queued = vec![false; self.cpus.len()];
        for (cpu, q) in queued.iter_mut().enumerate() {
            if self.busy(cpu) {
                heap.push(Reverse((self.machine.cpus[cpu].clock, cpu)));
                *q = true;
            }
        }
        let mut quanta: u64 = 0;
        while self.live_user_tasks > 0 {
            // Sleeping tasks run on events alone, never reaching a quantum.
            if crate::interrupt::requested() {
                return Err(Error::Interrupted);
            }
            // An event due before the next CPU's quantum fires first.
            if let Some(te) = self.engine.next_time() {
                if heap.peek().is_none_or(|Reverse((c, _))| te <= *c) {
                    let (t, ev) = self.engine.pop_due(te).expect("due");
                    self.fire(t, ev);
                    self.kick(&mut heap, &mut queued);
                    continue;
                }
            }
            // The CPU stays at the top of the heap while it runs (nothing
            // touches the heap meanwhile) and its key is replaced in place
            // afterwards: one sift-down instead of a pop and a push. The
            // keys are distinct, so the order of the CPUs is the same.
            let Some(&Reverse((_, cpu))) = heap.peek() else {
                break;
            };
            self.run_quantum(cpu);
            if let Some(e) = &self.error {
                return Err(e.clone());
            }
            if self.busy(cpu) {
                let clock = self.machine.cpus[cpu].clock;
                *heap.peek_mut().expect("the CPU just run") = Reverse((clock, cpu));
            } else {
                heap.pop();
                queued[cpu] = false;
                self.cpus[cpu].idle_since = self.machine.cpus[cpu].clock;
            }
            if self.kernel.has_stray_kswapd_wakes() {
                self.wake_stray_pending();
            }
            if self.kernel.has_woken() {
                self.wake_woken(self.machine.cpus[cpu].clock);
            }
            self.kick(&mut heap, &mut queued);
            quanta += 1;
            if quanta.is_multiple_of(8192) {
                if self.total_bytes > 0 {
                    let done: u64 = self.tasks.iter().map(|t| t.bytes).sum();
                    progress(done as f64 / self.total_bytes as f64);
                } else if self.progress_horizon > 0 {
                    // Workloads that run for a time: the simulated time reached.
                    let now = self.machine.cpus[cpu].clock as f64;
                    progress((now / self.progress_horizon as f64).min(0.99));
                }
            }
        }
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        // A task a stop made exit is not a finished run.
        if crate::interrupt::requested() {
            return Err(Error::Interrupted);
        }
        self.check_finished()?;
        progress(1.0);
        Ok(())
    }

    /// Queues the CPUs given a task while idle; an idle CPU wakes at the waker's time.
    fn kick(&mut self, heap: &mut BinaryHeap<Reverse<(u64, usize)>>, queued: &mut [bool]) {
        for (w, now) in self.sched.take_wakeups() {
            if !queued[w] {
                let c = &mut self.machine.cpus[w].clock;
                let idle_from = *c;
                *c = (*c).max(now);
                self.idle_stats.idle_cycles += *c - idle_from;
                heap.push(Reverse((*c, w)));
                queued[w] = true;
            }
        }
    }

    /// An event's time has come.
    fn fire(&mut self, t: u64, ev: Event) {
        match ev {
            Event::WakeTask(pid) => {
                self.try_to_wake_up(None, pid, t, false);
            }
            Event::WakeQueue(q) => {
                self.kernel.wake_queue(q);
            }
        }
        self.wake_woken(t);
    }

    /// Wake-ups an allocation left pending on a path that queues none
    /// (kernel/mmzone.rs) break the invariant that the waker pays for them:
    /// the run stops with an internal error (they are still made, so that
    /// the run ends cleanly). No path does this today.
    #[cold]
    fn wake_stray_pending(&mut self) {
        let n = self.kernel.wake_stray_kswapds();
        if self.error.is_none() {
            self.error = Some(Error::Internal(format!(
                "a kernel path left {n} wake-up(s) of kswapd pending with kernel.wakeups on"
            )));
        }
    }

    /// Hands the tasks woken from wait queues to the scheduler. A timed
    /// wake-up (one a CPU made and paid for: a sleeping lock's, kswapd's, a
    /// migration's) makes the task runnable at its waker's time, after its
    /// CPU, if idle, has left its idle state; with `kernel.wakeups` an
    /// untimed one (a timer's, `Event::WakeQueue`) too, at `now`.
    pub fn wake_woken(&mut self, now: u64) {
        for w in self.kernel.take_woken() {
            let at = match w.at {
                None if !self.kernel.cfg.wakeups => now,
                None => self.idle_exit(w.pid, now, w.iowait),
                Some(at) => self.idle_exit(w.pid, at, w.iowait),
            };
            self.sched.wake_up_process(w.pid, at);
        }
    }

    /// `try_to_wake_up()` of task `pid` at `now`, by the task running on
    /// `waker` (None: a timer, `hrtimer_wakeup`). With `kernel.wakeups` the
    /// waker pays `try_to_wake_up_cycles` in kernel mode and the task runs
    /// no earlier than the end of that, and, if its CPU is idle, than that
    /// CPU's exit from its idle state ([`Sim::idle_exit`]; `iowait`: the
    /// task slept in `io_schedule()`). Without it the task is runnable at
    /// `now` for nothing. False if the task was not sleeping.
    pub fn try_to_wake_up(
        &mut self,
        waker: Option<usize>,
        pid: usize,
        now: u64,
        iowait: bool,
    ) -> bool {
        if !self.kernel.cfg.wakeups {
            return self.sched.wake_up_process(pid, now);
        }
        if self.sched.state(pid) != TaskState::Sleeping {
            return false;
        }
        let mut at = now;
        if let Some(cpu) = waker {
            let (k, mut hw) = self.kernel_hw(cpu);
            at = k.try_to_wake_up_cost(&mut hw);
        }
        let at = self.idle_exit(pid, at, iowait);
        self.sched.wake_up_process(pid, at)
    }

    /// When task `pid`, woken at `at`, can run: if its CPU is idle, after the
    /// exit latency of the idle state it is in ([`Sim::idle_exit_on`]).
    pub(crate) fn idle_exit(&mut self, pid: usize, at: u64, iowait: bool) -> u64 {
        self.idle_exit_on(self.sched.task_cpu(pid), at, iowait)
    }

    /// When a task given to `cpu` at `at` can run: if the CPU is idle, after
    /// the exit latency of the idle state it is in. The state is the menu
    /// governor's choice (drivers/cpuidle/governors/menu.c, `menu_select`)
    /// had it predicted the idle period exactly: the deepest state whose
    /// target residency the period reaches and whose exit latency is at most
    /// the period divided by `performance_multiplier()`, 1 + 10 per task in
    /// iowait on the CPU: with `iowait` (the task slept in `io_schedule()`,
    /// as the page lock's waiters do) one, so the period / 11; otherwise
    /// the period. What the model does not have: the governor's prediction
    /// from the next timer and recent periods.
    pub(crate) fn idle_exit_on(&mut self, cpu: usize, at: u64, iowait: bool) -> u64 {
        if self.busy(cpu) {
            return at;
        }
        let idle = at.saturating_sub(self.cpus[cpu].idle_since);
        let Some(s) = self
            .machine
            .idle_state_for(idle, idle / (1 + MENU_IOWAIT_MULTIPLIER * iowait as u64))
        else {
            return at;
        };
        let exit = self.machine.idle_states[s].exit_cycles;
        self.idle_stats.exits[s] += 1;
        self.idle_stats.exit_cycles += exit;
        at + exit
    }

    /// `nanosleep`-style: the current task of `cpu` sleeps until simulated time `until`.
    pub(crate) fn sleep_until(&mut self, cpu: usize, until: u64) {
        let t = self.sched.sleep_current(cpu);
        self.engine.arm(until, Event::WakeTask(t));
    }

    fn run_quantum(&mut self, cpu: usize) {
        self.run_quantum_body(cpu);
        self.take_policy_error();
    }

    /// A policy's failure in the kernel becomes the run's error.
    pub(crate) fn take_policy_error(&mut self) {
        if self.kernel.policy_error.is_some() && self.error.is_none() {
            self.error = self.kernel.policy_error.take();
        }
    }

    fn run_quantum_body(&mut self, cpu: usize) {
        let deadline = self.machine.cpus[cpu].clock + self.quantum;
        self.machine.take_interrupts(cpu);
        self.settle(cpu, KFn::Interrupt);
        while self.machine.cpus[cpu].clock < deadline {
            // A step that takes no simulated time (an empty timed loop)
            // would otherwise hold the quantum for ever.
            if crate::interrupt::requested() {
                self.error.get_or_insert(Error::Interrupted);
                return;
            }
            if self.cpus[cpu].tick_stopped
                || self.machine.cpus[cpu].clock >= self.cpus[cpu].next_tick
            {
                self.scheduler_tick(cpu);
            }
            if let Some(what) = self.cpus[cpu].work.front().map(Work::kfn) {
                self.exec_work(cpu, deadline);
                self.settle(cpu, what);
                continue;
            }
            let t = match self.sched.current(cpu) {
                Some(t) => t,
                None => match self.sched.pick_next_task(cpu) {
                    Some(t) => {
                        self.context_switch(cpu, t);
                        self.settle(cpu, KFn::Schedule);
                        t
                    }
                    None => {
                        // The idle task is a kernel thread: lazy TLB; NO_HZ_IDLE stops the tick.
                        enter_lazy_tlb(&mut self.tlbstate[cpu]);
                        self.cpus[cpu].tick_stopped = true;
                        self.cpus[cpu].ticked = false;
                        return;
                    }
                },
            };
            // The tick's work for the current task: `task_tick_fair`'s slice
            // check (`check_preempt_tick`) and `task_tick_numa`.
            let ticked = std::mem::take(&mut self.cpus[cpu].ticked);
            if ticked && self.sched.tick(cpu, self.machine.cpus[cpu].clock) {
                // Time slice over: round-robin to the next task.
                self.account_runtime(cpu, t);
                continue;
            }
            if self.tasks[t].is_kthread() {
                self.exec_kthread(cpu, t);
            } else {
                if self.kernel.cfg.numa_balancing && ticked {
                    self.task_tick_numa(cpu, t);
                    if !self.cpus[cpu].work.is_empty() {
                        continue; // the scan runs before the task's next operation
                    }
                }
                self.exec_user(cpu, t, deadline);
                if self.sched.current(cpu) != Some(t) {
                    self.account_runtime(cpu, t); // it slept or exited
                }
                // Kernel time a user operation caused and did not attribute itself: its system call.
                self.settle(cpu, KFn::Syscall);
            }
            if self.error.is_some() {
                return;
            }
        }
    }

    /// Attributes the system cycles `cpu` spent since the last settle to `what`.
    pub(crate) fn settle(&mut self, cpu: usize, what: KFn) {
        crate::kernel::hw::settle(
            &self.machine,
            cpu,
            &mut self.cpus[cpu].sys_settled,
            &mut self.kfn_cycles,
            &mut self.kfn_mem_cycles,
            what,
        );
    }

    /// `context_switch()` to `t` on `cpu`: `switch_mm_irqs_off` for a user
    /// task, lazy TLB for a kernel thread; a fresh slice.
    fn context_switch(&mut self, cpu: usize, t: usize) {
        let mm = self.tasks[t].mm;
        let (k, mut hw) = self.kernel_hw(cpu);
        k.context_switch(&mut hw, mm);
        if !self.tasks[t].kernel_work.is_empty() {
            // It slept inside the kernel: it resumes there.
            debug_assert!(self.cpus[cpu].work.is_empty());
            self.cpus[cpu].work = std::mem::take(&mut self.tasks[t].kernel_work);
            self.machine.set_mode(cpu, Mode::Kernel);
        }
        self.sched.start_slice(cpu, self.machine.cpus[cpu].clock);
        self.cpus[cpu].curr_since = self.machine.cpus[cpu].clock;
    }

    /// One step of a kernel thread: its queued work runs before the next step.
    fn exec_kthread(&mut self, cpu: usize, t: usize) {
        let now = self.machine.cpus[cpu].clock;
        let mut work = std::mem::take(&mut self.cpus[cpu].work);
        let Body::Kernel(f) = &mut self.tasks[t].body else {
            unreachable!("a kernel thread")
        };
        let step = f.step(&mut self.kernel, cpu, now, &mut work);
        let queued = !work.is_empty();
        self.cpus[cpu].work = work;
        match step {
            KthreadStep::Continue if queued => {}
            KthreadStep::Continue => {
                let name = f.name();
                self.error = Some(Error::Internal(format!(
                    "kernel thread {name} continued without queuing work"
                )));
            }
            KthreadStep::Wait(q) => {
                let t = self.sched.sleep_current(cpu);
                self.kernel.wait_on(q, t);
            }
            KthreadStep::SleepUntil(until) => self.sleep_until(cpu, until),
            KthreadStep::Exit => {
                self.sched.exit_current(cpu);
                self.tasks[t].exited = true;
                self.tasks[t].exit = Some(now);
            }
        }
    }
}
