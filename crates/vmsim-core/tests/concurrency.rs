//! The kernel's concurrency machinery end to end: timers firing at their
//! exact simulated time, a kernel thread sleeping on a wait queue and woken
//! by an allocation, lazy TLB on CPUs that switch to kernel threads.

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use vmsim_core::config::{KernelConfig, Preset};
use vmsim_core::kernel::kthread::{KthreadFn, KthreadStep};
use vmsim_core::kernel::{KFn, Kernel, Work};
use vmsim_core::policy::{Thp, ThpCow};
use vmsim_core::sim::Sim;
use vmsim_core::workload::usemem::Usemem;
use vmsim_core::workload::{Op, Program};

const NODE_BYTES: u64 = 256 << 20;

fn preset() -> Preset {
    common::preset("xeon-e5-2699v3-2s")
}

fn sim() -> Sim {
    let p = preset();
    let cfg = KernelConfig {
        thp_cow: ThpCow::Copy.into(),
        ..KernelConfig::default()
    };
    common::sim(&p.name, cfg, NODE_BYTES, 0)
}

/// Marks its start, sleeps `ns`, marks its end.
struct Sleeper {
    ns: u64,
    step: u32,
}

impl Program for Sleeper {
    fn next(&mut self, _ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::MarkStart,
            2 => Op::Nanosleep { ns: self.ns },
            3 => Op::MarkEnd,
            _ => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        0
    }
}

#[test]
fn a_timer_fires_at_its_exact_simulated_time() {
    let mut s = sim();
    let p = preset();
    let long = s.spawn(
        Box::new(Sleeper {
            ns: 1_000_000,
            step: 0,
        }),
        3,
    );
    let short = s.spawn(
        Box::new(Sleeper {
            ns: 250_000,
            step: 0,
        }),
        3,
    );
    // A busy CPU elsewhere: events interleave with its quanta.
    s.spawn(Box::new(Usemem::new(4 << 20, 1)), 0);
    s.run(&mut |_| {}).unwrap();
    let cycles = |ns: u64| ns * p.cpu.freq_mhz / 1000;
    // The short sleeper wakes first, on a CPU that holds its mm lazily: no flush. The long one
    // then finds the short one's mm loaded: switch_mm writes CR3, a full flush.
    for (t, ns, flush) in [
        (long, 1_000_000, p.costs.hw.tlb_flush_full_cycles),
        (short, 250_000, 0),
    ] {
        let start = s.tasks[t].start.unwrap();
        let woken = s.sched.last_wakeup(t).expect("woken by its timer");
        // The sleep begins after the system-call entry; the timer is armed for exactly `ns` after it.
        let expiry = start + p.costs.kernel.syscall_entry_exit_cycles + cycles(ns);
        assert_eq!(woken, expiry, "task {t}");
        // Its CPU was idle: it runs again at the expiry, after the context switch.
        assert_eq!(
            s.tasks[t].end.unwrap(),
            expiry + p.costs.kernel.context_switch_cycles + flush,
            "task {t}"
        );
    }
    assert_eq!(s.engine.nr_fired, 2);
    assert!(s.engine.is_empty());
}

/// A kernel thread that waits on a node's kswapd queue; each time it is
/// woken it records the time and does 1000 cycles of work.
struct Waiter {
    node: usize,
    woken: Arc<Mutex<Vec<u64>>>,
    waiting: bool,
}

impl KthreadFn for Waiter {
    fn name(&self) -> String {
        format!("waiter{}", self.node)
    }
    fn step(
        &mut self,
        k: &mut Kernel,
        _cpu: usize,
        now: u64,
        work: &mut VecDeque<Work>,
    ) -> KthreadStep {
        if !self.waiting {
            self.waiting = true;
            return KthreadStep::Wait(k.mem.pgdat[self.node].kswapd_wait);
        }
        self.waiting = false;
        self.woken.lock().unwrap().push(now);
        work.push_back(Work::Cycles {
            cycles: 1000,
            instructions: 1000,
            what: KFn::Schedule,
        });
        KthreadStep::Continue
    }
}

fn run_waiter(low_below_start: Option<u64>) -> (Sim, Vec<u64>, usize) {
    let mut s = sim();
    let woken = Arc::new(Mutex::new(Vec::new()));
    // Its first step (at time 0) queues work, then it waits.
    let kt = s.kthread_run(
        Box::new(Waiter {
            node: 0,
            woken: woken.clone(),
            waiting: false,
        }),
        5,
    );
    if let Some(d) = low_below_start {
        s.kernel.mem.pgdat[0].wmark_low = s.kernel.mem.alloc.nr_free[0] - d;
    }
    s.spawn(Box::new(Usemem::new(8 << 20, 7)), 0);
    s.run(&mut |_| {}).unwrap();
    let w = woken.lock().unwrap().clone();
    (s, w, kt)
}

#[test]
fn a_kernel_thread_sleeps_on_a_wait_queue_until_an_allocation_wakes_it() {
    // The low watermark lies between the second and third huge-page allocation.
    let (s, woken, kt) = run_waiter(Some(2 * 512));
    assert!(s.kernel.mem.pgdat[0].nr_kswapd_wakeups >= 1);
    assert!(!woken.is_empty(), "the kernel thread ran after being woken");
    let first = s.sched.last_wakeup(kt).expect("woken");
    let user = &s.tasks[1];
    assert!(
        first > user.start.unwrap() && first < user.end.unwrap(),
        "woken during the writes"
    );
    // It ran on its own CPU once per wake-up, after it, in kernel mode.
    assert_eq!(woken.len() as u64, s.kernel.mem.pgdat[0].nr_kswapd_wakeups);
    assert!(woken[0] >= first || woken.len() > 1);
    assert_eq!(s.sched.task_cpu(kt), 5);
    assert!(
        s.machine.cpus[5].stats.sys_cycles >= 1000 * woken.len() as u64
            && s.machine.cpus[5].stats.user_cycles == 0
    );
    // Without crossing the watermark it sleeps for good, and the run still ends.
    let (s, woken, kt) = run_waiter(None);
    assert_eq!(s.kernel.mem.pgdat[0].nr_kswapd_wakeups, 0);
    assert!(woken.is_empty());
    assert_eq!(s.sched.last_wakeup(kt), None);
    assert!(s.tasks[1].exited);
}

#[test]
fn a_cpu_running_a_kernel_thread_keeps_the_mm_lazily_in_its_cpumask() {
    let mut s = sim();
    let woken = Arc::new(Mutex::new(Vec::new()));
    // A user task sleeps on CPU 4; the kernel thread queued behind it runs meanwhile.
    let u = s.spawn(
        Box::new(Sleeper {
            ns: 100_000,
            step: 0,
        }),
        4,
    );
    let kt = s.kthread_run(
        Box::new(Waiter {
            node: 0,
            woken,
            waiting: false,
        }),
        4,
    );
    s.run(&mut |_| {}).unwrap();
    let mm = s.tasks[u].mm.unwrap();
    assert!(s.tasks[kt].mm.is_none());
    // After the kernel thread ran and the user task exited, CPU 4 holds the mm lazily.
    assert_eq!(s.tlbstate[4].loaded_mm, Some(mm));
    assert!(s.tlbstate[4].is_lazy);
    assert!(
        s.kernel.mms[mm].cpumask.test(4),
        "a lazy CPU stays in mm_cpumask"
    );
    // Switching from the kernel thread back to the same mm needed no flush:
    // the only full flush on CPU 4 is the first switch to the mm (a CR3 write).
    assert_eq!(s.machine.cpus[4].stats.tlb_flush_full, 1);
}

/// A process that clones one thread; both sleep until T1 and then T2 (so
/// each CPU holds the mm lazily and switches back at the same cost), then
/// store to the same address. The leader writes pages 0 and 1 and checks
/// page 1 (page 0's final contents depend on how the two threads' stores
/// interleave, a data race of the program's own); the thread writes one line
/// of page 0. Both exit; the last one's exit tears the mm down.
#[derive(Clone)]
struct Racer {
    step: u32,
    addr: u64,
    thread: bool,
    t1_ns: u64,
    t2_ns: u64,
    seed: u64,
}

impl Program for Racer {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::MarkStart,
            2 => Op::Mmap {
                len: 2 << 20,
                populate: false,
            },
            3 => {
                self.addr = ret;
                Op::Clone
            }
            4 => {
                self.thread = ret == 0;
                Op::ClockNanosleepAbs { ns: self.t1_ns }
            }
            5 => Op::ClockNanosleepAbs { ns: self.t2_ns },
            6 if self.thread => Op::WriteSeq {
                start: self.addr,
                len: 64,
                seed: self.seed + 1,
                instr_per_word: vmsim_core::workload::usemem::USEMEM_INSTR_PER_WORD,
            },
            6 => Op::WriteSeq {
                start: self.addr,
                len: 8192,
                seed: self.seed,
                instr_per_word: vmsim_core::workload::usemem::USEMEM_INSTR_PER_WORD,
            },
            7 => Op::MarkEnd,
            8 if !self.thread => Op::Check {
                start: self.addr + 4096,
                len: 4096,
                expect: vmsim_core::workload::Expect::Written { seed: self.seed },
            },
            _ => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        8192
    }
    fn fork(&self) -> Option<Box<dyn Program>> {
        Some(Box::new(self.clone()))
    }
}

fn race(thp: Thp) -> Sim {
    let mut s = sim();
    s.kernel.cfg.thp = thp;
    let free = s.kernel.mem.alloc.nr_free.clone();
    let leader = s.spawn(
        Box::new(Racer {
            step: 0,
            addr: 0,
            thread: false,
            t1_ns: 200_000,
            t2_ns: 400_000,
            seed: 9,
        }),
        0,
    );
    s.run(&mut |_| {}).unwrap();
    let thread = leader + 1;
    let p = preset();
    let t2 = 400_000 * p.cpu.freq_mhz / 1000;
    // Both threads woke at T2 on CPUs holding the mm lazily, so both fault at T2 + one context switch.
    assert_eq!(s.sched.last_wakeup(leader), Some(t2));
    assert_eq!(s.sched.last_wakeup(thread), Some(t2));
    assert_eq!(
        s.tasks[thread].mm, s.tasks[leader].mm,
        "CLONE_VM shares the mm"
    );
    assert_eq!((s.sched.task_cpu(leader), s.sched.task_cpu(thread)), (0, 1));
    let faults = if thp == Thp::Always { 2 } else { 3 }; // 4 KiB pages: page 1 is a fault of its own
    assert_eq!(s.kernel.vmstat.pgfault, faults, "both threads faulted");
    assert_eq!(
        s.kernel.vmstat.fault_race_backouts, 1,
        "the second install found the entry taken and backed out"
    );
    let t = &s.tasks[leader];
    assert_eq!((t.pages_checked, t.bad_pages), (1, 0), "{:?}", t.first_bad);
    // Nothing leaked: after the last user's exit (exit_mmap) every frame is free again.
    assert_eq!(s.kernel.mem.alloc.nr_free, free);
    assert_eq!(s.kernel.vmstat.pgalloc, s.kernel.vmstat.pgfree);
    assert_eq!(s.kernel.mms[s.tasks[leader].mm.unwrap()].mm_users, 0);
    s
}

#[test]
fn two_threads_faulting_one_address_map_exactly_one_folio() {
    let s = race(Thp::Always);
    assert_eq!(s.kernel.vmstat.thp_fault_alloc, 2);
    assert_eq!(s.kernel.vmstat.pgalloc, 2 * 512);
    let s = race(Thp::Never);
    assert_eq!(s.kernel.vmstat.pgfault_anon_4k, 3);
    assert_eq!(s.kernel.vmstat.pgalloc, 3);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Leader,
    Thread,
    Child,
}

/// A leader writes page P, clones a thread that writes P and then a long
/// region Q, sleeps, forks a child (which sleeps and exits) and writes P
/// again: a copy-on-write fault that moves P to a new frame while the thread
/// still runs. The thread then writes P again. Every flush of P must reach
/// the thread's CPU, or its TLB keeps P's old frame.
#[derive(Clone)]
struct Shooter {
    step: u32,
    role: Role,
    p: u64,
    q: u64,
}

impl Program for Shooter {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        const MS: u64 = 1_000_000;
        match (self.role, self.step) {
            (Role::Leader, 1) => Op::MarkStart,
            (Role::Leader, 2) => Op::Mmap {
                len: 2 << 20,
                populate: false,
            },
            (Role::Leader, 3) => {
                self.p = ret;
                Op::Mmap {
                    len: 32 << 20,
                    populate: false,
                }
            }
            (Role::Leader, 4) => {
                self.q = ret;
                Op::WriteSeq {
                    start: self.p,
                    len: 4096,
                    seed: 1,
                    instr_per_word: vmsim_core::workload::usemem::USEMEM_INSTR_PER_WORD,
                }
            }
            (Role::Leader, 5) => Op::Clone,
            (Role::Leader, 6) if ret == 0 => {
                self.role = Role::Thread;
                Op::WriteSeq {
                    start: self.p,
                    len: 4096,
                    seed: 2,
                    instr_per_word: vmsim_core::workload::usemem::USEMEM_INSTR_PER_WORD,
                }
            }
            (Role::Leader, 6) => Op::ClockNanosleepAbs { ns: 2 * MS },
            (Role::Leader, 7) => Op::Fork,
            (Role::Leader, 8) if ret == 0 => {
                self.role = Role::Child;
                Op::ClockNanosleepAbs { ns: 50 * MS }
            }
            (Role::Leader, 8) => Op::WriteSeq {
                start: self.p,
                len: 4096,
                seed: 3,
                instr_per_word: vmsim_core::workload::usemem::USEMEM_INSTR_PER_WORD,
            },
            (Role::Thread, 7) => Op::WriteSeq {
                start: self.q,
                len: 32 << 20,
                seed: 4,
                instr_per_word: vmsim_core::workload::usemem::USEMEM_INSTR_PER_WORD,
            },
            (Role::Thread, 8) => Op::WriteSeq {
                start: self.p,
                len: 4096,
                seed: 5,
                instr_per_word: vmsim_core::workload::usemem::USEMEM_INSTR_PER_WORD,
            },
            _ => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        0
    }
    fn fork(&self) -> Option<Box<dyn Program>> {
        Some(Box::new(self.clone()))
    }
}

fn shoot(inject: bool) -> (Sim, Result<(), vmsim_core::api::Error>) {
    let mut s = sim();
    let leader = s.spawn(
        Box::new(Shooter {
            step: 0,
            role: Role::Leader,
            p: 0,
            q: 0,
        }),
        0,
    );
    let mm = s.tasks[leader].mm.unwrap();
    s.kernel.mms[mm].inject_no_shootdown = inject;
    let r = s.run(&mut |_| {});
    (s, r)
}

#[test]
fn the_tlb_truth_check_catches_a_missing_shootdown() {
    use vmsim_core::machine::ipi::IpiCause;
    let (s, r) = shoot(false);
    r.expect("with every shootdown sent, no TLB entry is stale");
    // The thread's CPU got the fork's full flush and the copy-on-write fault's flush of P.
    assert!(s.machine.cpus[1].stats.ipis_received_by_cause[IpiCause::TlbShootdown as usize] >= 2);
    assert!(
        s.kernel.vmstat.thp_cow_copies >= 1,
        "P moved to a new frame"
    );
    let (s, r) = shoot(true);
    match r {
        Err(vmsim_core::api::Error::Internal(m)) => {
            assert!(m.contains("stale TLB entry on CPU 1"), "{m}")
        }
        other => panic!("a missing flush must fail the run, got {other:?}"),
    }
    assert_eq!(s.machine.cpus[1].stats.ipis_received, 0);
}

#[test]
fn the_access_engine_keeps_per_task_latency_histograms_of_random_reads() {
    use vmsim_core::workload::randread::RandRead;
    use vmsim_core::workload::Pattern;
    let run = |seeds: [u64; 2]| {
        let mut s = sim();
        // 96 MiB each: more than both LLCs together, so most reads go to DRAM.
        let a = s.spawn(
            Box::new(RandRead::new(
                96 << 20,
                20_000,
                Pattern::Uniform,
                8,
                true,
                seeds[0],
            )),
            0,
        );
        let b = s.spawn(
            Box::new(RandRead::new(
                16 << 20,
                20_000,
                Pattern::Normal { sigma_pages: 64.0 },
                8,
                true,
                seeds[1],
            )),
            1,
        );
        s.run(&mut |_| {}).unwrap();
        (s, a, b)
    };
    let (s, a, b) = run([1, 2]);
    let p = preset();
    for t in [a, b] {
        let st = &s.tasks[t].access;
        assert_eq!((st.reads, st.writes), (20_000, 0));
        assert_eq!(st.latency.count(), 20_000);
        assert_eq!(
            (s.tasks[t].pages_checked > 0, s.tasks[t].bad_pages),
            (true, 0)
        );
    }
    // Uniform over 96 MiB: the median read misses to local DRAM; a read never costs less than its issue.
    let (ha, hb) = (&s.tasks[a].access.latency, &s.tasks[b].access.latency);
    let dram = p.ns_to_cycles(p.memory.local_latency_ns);
    assert!(
        ha.percentile(50.0) >= dram / 2,
        "median {} vs DRAM {dram}",
        ha.percentile(50.0)
    );
    assert_eq!(ha.buckets[0], 0);
    // Normal with sigma 64 pages keeps most reads in about 1 MiB, which the caches hold: lower median.
    assert!(
        hb.percentile(50.0) < ha.percentile(50.0),
        "{} vs {}",
        hb.percentile(50.0),
        ha.percentile(50.0)
    );
    // Seeded: the same seeds give the same histograms, another seed another one.
    let (s2, _, _) = run([1, 2]);
    assert_eq!(&s2.tasks[a].access, &s.tasks[a].access);
    let (s3, _, _) = run([3, 2]);
    assert_ne!(s3.tasks[a].access.latency, s.tasks[a].access.latency);
}

/// Maps 8 MiB, writes the first 2 MiB, then within a region of interest the other 6 MiB.
struct RoiWriter {
    step: u32,
    addr: u64,
}

impl Program for RoiWriter {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Mmap {
                len: 8 << 20,
                populate: false,
            },
            2 => {
                self.addr = ret;
                Op::WriteSeq {
                    start: self.addr,
                    len: 2 << 20,
                    seed: 11,
                    instr_per_word: vmsim_core::workload::usemem::USEMEM_INSTR_PER_WORD,
                }
            }
            3 => Op::RoiBegin,
            4 => Op::WriteSeq {
                start: self.addr + (2 << 20),
                len: 6 << 20,
                seed: 11,
                instr_per_word: vmsim_core::workload::usemem::USEMEM_INSTR_PER_WORD,
            },
            5 => Op::RoiEnd,
            6 => Op::Check {
                start: self.addr,
                len: 8 << 20,
                expect: vmsim_core::workload::Expect::Written { seed: 11 },
            },
            7 => Op::Munmap { start: self.addr },
            _ => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        8 << 20
    }
}

#[test]
fn a_stats_region_of_interest_is_end_minus_start() {
    let mut s = sim();
    s.spawn(Box::new(RoiWriter { step: 0, addr: 0 }), 2);
    s.run(&mut |_| {}).unwrap();
    let r = vmsim_core::metrics::report(&s);
    assert_eq!(r["data_verified"], true);
    let (roi, all) = (&r["roi"], &r["counters"]);
    // Three of the four huge-page faults fall in the region; the unmap's frees after it.
    assert_eq!(roi["vmstat"]["pgfault"], 3);
    assert_eq!(roi["vmstat"]["thp_fault_alloc"], 3);
    assert_eq!(roi["vmstat"]["pgalloc"], 3 * 512);
    assert_eq!(roi["vmstat"]["pgfree"], 0);
    assert_eq!(all["vmstat"]["pgfault"], 4);
    assert_eq!(all["vmstat"]["pgfree"], 4 * 512);
    // Every counter of every component is in both, and the region's never exceeds the total.
    let (ru, au) = (
        roi["cpu"]["user_instructions"].as_u64().unwrap(),
        all["cpu"]["user_instructions"].as_u64().unwrap(),
    );
    assert!(ru > 0 && ru < au);
    let per_word = vmsim_core::workload::usemem::USEMEM_INSTR_PER_WORD;
    assert_eq!(
        ru,
        3 * 32768 * 8 * per_word,
        "the region's stores: 3 x 2 MiB of 64 B lines at usemem's 8 words of instructions a line"
    );
    for k in ["vmstat", "sched", "events", "cpu", "tlb", "dram"] {
        assert!(roi[k].is_object() && all[k].is_object(), "{k}");
    }
    assert_eq!(
        all["cpu"]["cache"]["l1d_stores"].as_u64(),
        r["l1d_stores"].as_u64()
    );
}
