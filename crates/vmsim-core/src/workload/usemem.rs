//! vm-scalability's `usemem` (docs/mechanisms.md#usemem).
//!
//! Without `--prealloc` (case-anon-w-seq): each of `nr_task` processes maps
//! its own private anonymous region, writes every 8-byte word from start to
//! end, then unmaps it. As in usemem's `do_units()`/`output_statistics()`,
//! the timed interval runs from the start to the end of the writes (the
//! unmap is timed apart, "usecs to free memory"), and the bytes reported are
//! those written plus a `bytes / 8` credit for the allocation (`do_unit()`:
//! `rw_bytes = bytes / 8`; with `--prealloc` the credit is the parent's and
//! a child reports only what it wrote). Before unmapping, the task checks
//! every page holds what it wrote.
//!
//! With `--prealloc --prefault` (case-anon-cow-seq): the parent maps one
//! region with MAP_POPULATE (write-populated: zero-filled pages, one write
//! fault per page or huge page, no user stores), then forks `nr_task`
//! children. Each child writes every word of the whole shared region from
//! start to end, so every page (or huge page) takes a copy-on-write fault.
//! As in usemem, a child's timed interval starts at the parent's start time
//! (taken before the region is mapped and populated, and inherited through
//! fork) and ends after its write loop. `workload.clock = "after-go"` gives
//! the usemem of April 2017 - December 2018 (vm-scalability fe0353b, reverted
//! by 7350ec8): each child restarts its clock once the parent's "go" has
//! arrived, and a task without `--prealloc` once its region is mapped. A child checks that it reads its
//! own data; the parent waits for all children, then checks that its region
//! still reads as zero-filled.
//!
//! `workload.warmup` (not a usemem option): each task first writes a region
//! of the same size, untimed and kept mapped, then runs the timed pass above,
//! timing itself from the end of the warm-up. Without `--prealloc` the task
//! maps the warm-up region itself; with it the parent maps and populates two
//! regions and every child writes both (copy-on-write). A scaled run is
//! short, and without this its first huge pages meet empty caches (and with
//! `--prealloc` a shared region that the parent has just left in the LLC), a
//! transient the full-size run (hundreds of huge pages per task) spends a
//! negligible part of its time in; with it, the timed pass starts with the
//! caches full of the tasks' own dirty lines, as the full-size run's are
//! after its first huge pages. Only the timed pass is reported; every region
//! is checked.
//!
//! The report's region of interest (`roi`) is the window in which every
//! task is inside its timed write loop: from the moment the last task starts
//! its loop to the moment the first finishes (none if one finishes before
//! the last starts). Its counters are the timed passes' alone, where the
//! run's own counters also cover faulting in, the warm-up and the checks.
//!
//! `workload.child_start_skew_us` (a diagnostic, not a usemem option): child
//! (or, without `--prealloc`, task) k sleeps k times the skew first and times
//! itself from its wake-up.
//!
//! As in usemem since vm-scalability commit bc76b0a (2016), a child writes a
//! ready byte to a pipe and polls another until the parent, having forked
//! them all and read every ready byte, writes "go" (`ready()`,
//! `synchronize_tasks()`): the children start together. Simplification: the
//! parent's "go" wakes every child at the same instant (the cost of each
//! wake-up to the waker, and an idle CPU's exit latency, are not modelled).

use super::base::MIB;

/// Instructions per 8-byte word of usemem's write loop (`do_rw_once()` and the
/// `do_access()` it calls for each word): 28, measured. vm-scalability's
/// usemem (6f4ef16, 2022-03-03, its maintainer's last commit) built as its
/// Makefile builds it (gcc 12.2 `-O`, so `do_access()` is a call and a
/// return a word), run under callgrind with LKP's anon-w-seq options
/// (`--runtime 300 -n 1 SIZE`) and anon-cow-seq options (`--runtime 300 -n 2
/// --prealloc --prefault SIZE`): the difference of 64 MiB and 128 MiB runs
/// is 28.0004 instructions a word in both (22 in `do_rw_once`, 6 in
/// `do_access`; the rest a runtime check every 65 536 words), as a hand
/// count of the loop's disassembly gives. The source as the 2018 LKP job
/// ran it (vm-scalability 63281524, 2018-12-20) gives the same 28.0004 (its
/// loop is textually the same; docs/notes/2026-usemem-instructions.md).
/// Macro-fusion of compare-and-branch pairs is not modelled.
pub const USEMEM_INSTR_PER_WORD: u64 = 28;

/// Instructions per 8-byte word of usemem's read loop (`--readonly`, as
/// vm-scalability's case-lru-file-mmap-read runs it: `usemem -f FILE
/// --readonly SIZE`): 27, measured as [`USEMEM_INSTR_PER_WORD`] is, on a
/// sparse file (`--runtime 300 -f FILE --readonly SIZE`, 64 and 128 MiB:
/// 27.0002 a word).
pub const USEMEM_READ_INSTR_PER_WORD: u64 = 27;

/// Instructions per word of the same loop with `--random` (`opt_randomise`):
/// 77, counted with callgrind on the loop and its `os_random_long()`
/// (`lrand48_r()` and the double multiply and divide) compiled by gcc 12.2
/// -O2, 10^6 words, on the project's development host (the difference of
/// two runs, so start-up is not counted).
pub const USEMEM_RANDOM_INSTR_PER_WORD: u64 = 77;
use super::base::Workload;
use crate::error::Error;
use crate::kernel::uapi::{Expect, Op, Program};
use crate::machine::topology::Topology;
use crate::sim::Sim;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct UsememConfig {
    pub nr_task: u64,
    /// Bytes each task maps (from `size_per_task_mib`, times the scale).
    pub size_per_task: u64,
    pub size_per_task_mib: f64,
    /// `--prealloc`: the parent maps one region before forking the tasks, which
    /// share it copy-on-write instead of mapping their own.
    pub prealloc: bool,
    /// `--prefault`: the mapping is made with MAP_POPULATE.
    pub prefault: bool,
    /// A diagnostic that usemem does not have: child (or task) k sleeps k
    /// times this many microseconds before writing and times itself from its
    /// wake-up, to see what desynchronised tasks would do.
    pub child_start_skew_us: u64,
    /// Not a usemem option: each task first writes an untimed region of its
    /// size, kept mapped, so the timed pass starts with warm caches.
    pub warmup: bool,
    /// Where a task's timed interval starts (`workload.clock`).
    pub clock: UsememClock,
    /// `--random`: the timed pass writes `size / 8` words at uniformly drawn
    /// offsets (`os_random_long()`, with replacement) instead of every word in order.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub random: bool,
}

/// Where usemem starts a task's clock: the two behaviours vm-scalability has
/// had (docs/mechanisms.md#usemem).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UsememClock {
    /// `start_time` taken once in `main()`, before the `--prealloc` region is
    /// mapped and the tasks are forked, and inherited by every task: usemem
    /// before vm-scalability fe0353b (2017-04-12) and since its revert
    /// 7350ec8 (2018-12-18).
    Start,
    /// Each task takes `start_time` afresh in `do_unit()`, after its region
    /// is mapped and after `ready()` returns on the parent's "go" (fe0353b,
    /// "Avoid memory allocation/sync time when calculate throughput", until
    /// 7350ec8 reverted it): mapping, populating and forking are not timed.
    AfterGo,
}

impl UsememClock {
    pub const NAMES: &'static [&'static str] = &["start", "after-go"];
}

/// Mixed into a task's seed for its warm-up region's data.
const WARM_SEED: u64 = 0x5741_524D_5550_0001;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Parent {
    Map,
    MapWarm,
    MapRegion,
    Forking,
    Go,
    Reap,
    Check,
    CheckWarm,
    Done,
}

#[derive(Clone)]
pub struct Usemem {
    size: u64,
    seed: u64,
    prealloc: bool,
    prefault: bool,
    nr_task: u64,
    step: u32,
    addr: u64,
    /// Prealloc parent: where it is, and the children forked so far.
    phase: Parent,
    forked: u64,
    /// In a forked child: its index.
    child: Option<u64>,
    /// Child k sleeps k times this before writing (a diagnostic; 0 in usemem).
    child_skew_ns: u64,
    /// Bytes of the untimed warm-up region (0: none); its address once mapped.
    warm: u64,
    warm_addr: u64,
    /// How many tasks share the region of interest each timed write loop
    /// joins (`Op::RoiJoin`).
    roi_tasks: u64,
    /// The clock restarts after the region is mapped and the "go" (fe0353b).
    after_go: bool,
    /// `--random`: the timed pass writes random words (`UsememConfig::random`).
    random: bool,
}

impl Usemem {
    /// One task of case-anon-w-seq: maps and writes its own region.
    pub fn new(size: u64, seed: u64) -> Usemem {
        Usemem {
            size,
            seed,
            prealloc: false,
            prefault: false,
            nr_task: 1,
            step: 0,
            addr: 0,
            phase: Parent::Map,
            forked: 0,
            child: None,
            child_skew_ns: 0,
            warm: 0,
            warm_addr: 0,
            roi_tasks: 1,
            after_go: false,
            random: false,
        }
    }

    /// `--random`: the timed pass writes `size / 8` uniformly drawn words.
    pub fn with_random(mut self, on: bool) -> Usemem {
        self.random = on;
        self
    }

    /// The timed pass over `len` bytes at `start` with `seed`: usemem's
    /// sequential write loop, or with `--random` as many writes to words
    /// drawn uniformly from the region.
    fn timed_pass(&self, start: u64, len: u64, seed: u64) -> Op {
        if !self.random {
            return Op::WriteSeq {
                start,
                len,
                seed,
                instr_per_word: USEMEM_INSTR_PER_WORD,
            };
        }
        Op::Access(crate::kernel::uapi::Access {
            start,
            len,
            pattern: crate::kernel::uapi::Pattern::Uniform,
            count: len / 8,
            write_permille: 1000,
            instr_per_access: USEMEM_RANDOM_INSTR_PER_WORD,
            dependent: false,
            seed,
            until_ns: None,
        })
    }

    /// What the timed pass left in the region.
    fn timed_expect(&self, seed: u64) -> Expect {
        if self.random {
            Expect::AccessWrites
        } else {
            Expect::Written { seed }
        }
    }

    /// usemem's clock: from `main()`'s start (false) or restarted in each
    /// task's `do_unit()` after its mapping and the "go" (true, fe0353b).
    pub fn with_clock(mut self, clock: UsememClock) -> Usemem {
        self.after_go = clock == UsememClock::AfterGo;
        self
    }

    /// The diagnostic start skew. A forked child k sleeps k x `ns` after the
    /// parent's "go"; a task without `--prealloc` has no index and sleeps `ns`
    /// itself (its spawner passes k x the skew). Either then marks its own start.
    pub fn with_child_start_skew(mut self, ns: u64) -> Usemem {
        self.child_skew_ns = ns;
        self
    }

    /// Writes an untimed region of the task's size first (`workload.warmup`).
    pub fn with_warmup(mut self, on: bool) -> Usemem {
        self.warm = if on { self.size } else { 0 };
        self
    }

    /// A task with usemem's flags. With `prealloc` this is the parent that maps
    /// the region and forks `nr_task` children; without, one of the tasks.
    pub fn with_flags(
        size: u64,
        seed: u64,
        prealloc: bool,
        prefault: bool,
        nr_task: u64,
    ) -> Usemem {
        Usemem {
            prealloc,
            prefault,
            nr_task,
            roi_tasks: nr_task,
            ..Usemem::new(size, seed)
        }
    }

    /// The number of tasks whose timed write loops make up the region of
    /// interest: it begins when the last of them starts its loop and ends
    /// when the first finishes (every task is then inside its timed pass).
    pub fn with_roi_tasks(mut self, n: u64) -> Usemem {
        self.roi_tasks = n;
        self
    }

    /// The seed of the data child `k` writes.
    pub fn child_seed(seed: u64, k: u64) -> u64 {
        seed ^ (k + 1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
    }

    /// The seed of the warm-up region's data.
    fn warm_seed(&self) -> u64 {
        self.seed ^ WARM_SEED
    }

    /// A task of case-anon-w-seq: the diagnostic sleep and the warm-up region
    /// (each optional), usemem's six steps, then the warm-up region's check.
    fn next_task(&mut self, ret: u64) -> Op {
        self.step += 1;
        let sleep = u32::from(self.child_skew_ns > 0);
        let warm = if self.warm > 0 { 2 } else { 0 };
        let pre = sleep + warm;
        match self.step {
            1 if sleep == 1 => Op::Nanosleep {
                ns: self.child_skew_ns,
            },
            s if s == sleep + 1 && warm > 0 => Op::Mmap {
                len: self.warm,
                populate: self.prefault,
            },
            s if s == sleep + 2 && warm > 0 => {
                self.warm_addr = ret;
                Op::WriteSeq {
                    start: self.warm_addr,
                    len: self.warm,
                    seed: self.warm_seed(),
                    instr_per_word: USEMEM_INSTR_PER_WORD,
                }
            }
            s if s > pre && s <= pre + 8 => self.timed_step(s - pre, ret),
            s if s == pre + 9 && warm > 0 => Op::Check {
                start: self.warm_addr,
                len: self.warm,
                expect: Expect::Written {
                    seed: self.warm_seed(),
                },
            },
            s if s == pre + 10 && warm > 0 => Op::Munmap {
                start: self.warm_addr,
            },
            _ => Op::Exit,
        }
    }

    /// usemem's own steps of a task: the timed write pass, its check, the unmap.
    /// With the after-go clock (fe0353b) the start mark follows the mapping:
    /// `do_unit()` takes `start_time` after `allocate()`.
    fn timed_step(&mut self, step: u32, ret: u64) -> Op {
        let map = Op::Mmap {
            len: self.size,
            populate: self.prefault,
        };
        match step {
            1 if self.after_go => map,
            1 => Op::MarkStart,
            2 if self.after_go => {
                self.addr = ret;
                Op::MarkStart
            }
            2 => map,
            3 => {
                if !self.after_go {
                    self.addr = ret;
                }
                Op::RoiJoin {
                    tasks: self.roi_tasks,
                }
            }
            4 => self.timed_pass(self.addr, self.size, self.seed),
            5 => Op::RoiLeave,
            6 => Op::MarkEnd,
            7 => Op::Check {
                start: self.addr,
                len: self.size,
                expect: self.timed_expect(self.seed),
            },
            _ => Op::Munmap { start: self.addr },
        }
    }

    /// A child: wait for the parent's "go", then (each optional) the
    /// diagnostic sleep and the untimed warm-up region, a start mark of its
    /// own if either ran, the timed write, its check, the warm-up's check.
    fn next_child(&mut self, k: u64) -> Op {
        let seed = Usemem::child_seed(self.seed, k);
        self.step += 1;
        let sleep = u32::from(self.child_skew_ns > 0);
        let warm = u32::from(self.warm > 0);
        // Without either the child keeps the parent's start mark (module doc),
        // unless its clock restarts after the "go" (fe0353b).
        let mark = u32::from(sleep + warm > 0 || self.after_go);
        let pre = 1 + sleep + warm + mark;
        match self.step {
            // ready(): wait for the parent's "go" before anything else.
            1 => Op::ReadyPoll,
            2 if sleep == 1 => Op::Nanosleep {
                ns: k * self.child_skew_ns,
            },
            s if warm == 1 && s == 2 + sleep => Op::WriteSeq {
                start: self.warm_addr,
                len: self.warm,
                seed: seed ^ WARM_SEED,
                instr_per_word: USEMEM_INSTR_PER_WORD,
            },
            s if mark == 1 && s == pre => Op::MarkStart,
            s if s == pre + 1 => Op::RoiJoin {
                tasks: self.roi_tasks,
            },
            s if s == pre + 2 => self.timed_pass(self.addr, self.size, seed),
            s if s == pre + 3 => Op::RoiLeave,
            s if s == pre + 4 => Op::MarkEnd,
            s if s == pre + 5 => Op::Check {
                start: self.addr,
                len: self.size,
                expect: self.timed_expect(seed),
            },
            s if warm == 1 && s == pre + 6 => Op::Check {
                start: self.warm_addr,
                len: self.warm,
                expect: Expect::Written {
                    seed: seed ^ WARM_SEED,
                },
            },
            _ => Op::Exit,
        }
    }

    fn next_parent(&mut self, ret: u64) -> Op {
        match self.phase {
            Parent::Map => {
                // usemem's main() takes start_time before allocating the --prealloc region.
                self.phase = if self.warm > 0 {
                    Parent::MapWarm
                } else {
                    Parent::MapRegion
                };
                Op::MarkStart
            }
            Parent::MapWarm => {
                self.phase = Parent::MapRegion;
                Op::Mmap {
                    len: self.warm,
                    populate: self.prefault,
                }
            }
            Parent::MapRegion => {
                if self.warm > 0 {
                    // mmap returned the warm-up region.
                    self.warm_addr = ret;
                }
                self.phase = Parent::Forking;
                self.step = 1;
                Op::Mmap {
                    len: self.size,
                    populate: self.prefault,
                }
            }
            Parent::Forking => {
                if self.step == 1 {
                    // mmap returned the region.
                    self.addr = ret;
                    self.step = 2;
                    return Op::Fork;
                }
                if ret == 0 {
                    // fork() returned 0: this is the copy running in child `forked`.
                    let k = self.forked;
                    self.child = Some(k);
                    self.step = 0;
                    return self.next_child(k);
                }
                self.forked += 1;
                if self.forked < self.nr_task {
                    return Op::Fork;
                }
                // synchronize_tasks(): every child's ready byte, then "go".
                self.phase = Parent::Go;
                Op::ReadyRead { n: self.nr_task }
            }
            Parent::Go => {
                self.phase = Parent::Reap;
                Op::Go
            }
            Parent::Reap => {
                self.phase = Parent::Check;
                Op::Wait
            }
            Parent::Check => {
                self.phase = if self.warm > 0 {
                    Parent::CheckWarm
                } else {
                    Parent::Done
                };
                // The children's writes must not show through: the parent still
                // reads the zero-filled pages it populated.
                Op::Check {
                    start: self.addr,
                    len: self.size,
                    expect: Expect::Zero,
                }
            }
            Parent::CheckWarm => {
                self.phase = Parent::Done;
                Op::Check {
                    start: self.warm_addr,
                    len: self.warm,
                    expect: Expect::Zero,
                }
            }
            Parent::Done => Op::Exit,
        }
    }
}

impl Program for Usemem {
    fn next(&mut self, ret: u64) -> Op {
        if let Some(k) = self.child {
            return self.next_child(k);
        }
        if !self.prealloc {
            return self.next_task(ret);
        }
        self.next_parent(ret)
    }
    fn total_bytes(&self) -> u64 {
        if self.prealloc {
            (self.size + self.warm) * self.nr_task
        } else {
            self.size + self.warm
        }
    }
    fn fork(&self) -> Option<Box<dyn Program>> {
        Some(Box::new(self.clone()))
    }
    fn reported_bytes(&self, written: u64) -> u64 {
        // The warm-up region's writes are not the timed pass's.
        written.saturating_sub(self.warm) + self.size / 8
    }
}

/// usemem as a configured workload (`kind = "usemem"`).
pub struct UsememWorkload<'a>(pub &'a UsememConfig);

impl Workload for UsememWorkload<'_> {
    fn node_bytes(&self, topo: &Topology, nr_cpus: usize) -> u64 {
        let u = self.0;
        let mut per_node = vec![0u64; topo.nr_nodes()];
        let mut sz = u.size_per_task.div_ceil(2 * MIB) * 2 * MIB;
        if u.warmup {
            sz *= 2;
        }
        if u.prealloc {
            // The parent's region on CPU 0's node; each child's copies on its own CPU's node.
            per_node[topo.node_of(0)] += sz;
            for k in 0..u.nr_task as usize {
                per_node[topo.node_of((1 + k) % nr_cpus)] += sz;
            }
        } else {
            for i in 0..u.nr_task as usize {
                per_node[topo.node_of(i % nr_cpus)] += sz;
            }
        }
        super::base::with_headroom(&per_node)
    }

    fn spawn(&self, sim: &mut Sim, seed: u64) -> Result<(), Error> {
        let u = self.0;
        let base = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        if u.prealloc {
            // One parent on CPU 0 that maps, populates and forks the tasks.
            sim.spawn(
                Box::new(
                    Usemem::with_flags(u.size_per_task, base, true, u.prefault, u.nr_task)
                        .with_child_start_skew(u.child_start_skew_us * 1000)
                        .with_warmup(u.warmup)
                        .with_clock(u.clock)
                        .with_random(u.random),
                ),
                0,
            );
        } else {
            let nr_cpus = sim.machine.topo.nr_cpus();
            for i in 0..u.nr_task as usize {
                let seed = base ^ (i as u64 + 1);
                sim.spawn(
                    Box::new(
                        Usemem::with_flags(u.size_per_task, seed, false, u.prefault, 1)
                            .with_child_start_skew(i as u64 * u.child_start_skew_us * 1000)
                            .with_warmup(u.warmup)
                            .with_clock(u.clock)
                            .with_random(u.random)
                            .with_roi_tasks(u.nr_task),
                    ),
                    i % nr_cpus,
                );
            }
        }
        Ok(())
    }

    fn scale_text(&self) -> String {
        let u = self.0;
        let huge = u.size_per_task / (2 * MIB);
        // A region's tail short of 2 MiB is faulted in 4 KiB pages (mm.rs):
        // said where it is all of a region, as such a run compares nothing
        // a huge-page policy changes.
        let small = if huge == 0 {
            ": under 2 MiB, faulted in 4 KiB pages"
        } else {
            ""
        };
        if u.prealloc {
            format!(
                "usemem --prealloc{}{}: one {} MiB region ({huge} huge pages{small}) mapped by the parent, shared copy-on-write by {} child task(s), each writing all of it",
                if u.prefault { " --prefault" } else { "" },
                if u.random { " --random" } else { "" },
                u.size_per_task_mib,
                u.nr_task,
            )
        } else {
            format!(
                "usemem{}: {} task(s) x {} MiB each ({} MiB in all, {huge} huge pages per task{small})",
                if u.random { " --random" } else { "" },
                u.nr_task,
                u.size_per_task_mib,
                u.size_per_task_mib * u.nr_task as f64,
            )
        }
    }
}
