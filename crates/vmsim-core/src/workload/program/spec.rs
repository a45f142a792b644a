//! A program of the workload language as configured: tasks, their steps,
//! the files they map, the phases they measure. Built (and checked) by
//! config/program.rs; sizes, counts and durations are already multiplied
//! by the run's scale. Names are resolved to indices (`slot`, `id`) that
//! the interpreter uses; the names are what the resolved config shows.

use crate::kernel::uapi::Pattern;
use crate::machine::ipi::CpuMask;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct ProgramConfig {
    pub tasks: Vec<TaskSpec>,
    pub files: Vec<FileSpec>,
    /// Phase names; a phase's id is its index.
    pub phases: Vec<String>,
    /// Mapping names; a mapping's slot is its index.
    #[serde(skip)]
    pub maps: Vec<String>,
    /// The built-in benchmark the program was generated for, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub benchmark: Option<Benchmark>,
}

/// A built-in benchmark written as a program (config/willitscale.rs).
#[derive(Clone, Debug, Serialize)]
pub struct Benchmark {
    pub suite: String,
    pub test: String,
    pub mode: String,
    pub nr_task: u64,
    /// Bytes one task maps and touches in each iteration of its loop.
    pub map_bytes: u64,
}

/// A file created (sparse, as a benchmark's set-up script creates it)
/// before the run, for `backing = "file"` mappings.
#[derive(Clone, Debug, Serialize)]
pub struct FileSpec {
    pub name: String,
    pub size: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TaskSpec {
    pub name: String,
    /// Identical processes started together (instance k runs the same steps).
    pub count: u64,
    /// Binding: instance k starts on `cpus[k % len]` and its affinity is
    /// the list (inherited by its children). None: round-robin over every
    /// CPU, unbound.
    pub cpus: Option<Vec<u64>>,
    pub steps: Vec<Step>,
}

/// Where a mapping's memory comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backing {
    /// `mmap(MAP_PRIVATE | MAP_ANONYMOUS)`, read-write (THP as `kernel.thp` says).
    Anon,
    /// `mmap(MAP_HUGETLB)` with pages of `1 << shift` bytes (21 or 30), read-write.
    Hugetlb { shift: u32 },
    /// `mmap(PROT_READ, MAP_SHARED)` of a file of the program, from its start.
    File {
        file: String,
        #[serde(skip)]
        index: usize,
    },
}

/// Which end of a timed interval or region of interest a step marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mark {
    Start,
    End,
}

/// How many accesses an access phase makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccessCount {
    /// `passes` times one access per 8-byte word of the range.
    Passes(u64),
    /// This many accesses.
    Accesses(u64),
    /// As many as fit in this many ns of simulated time.
    DurationNs(u64),
}

#[derive(Clone, Debug, Serialize)]
pub struct AccessStep {
    pub map: String,
    #[serde(skip)]
    pub slot: usize,
    /// Bytes from the mapping's start, and the range's length.
    pub offset: u64,
    pub len: u64,
    /// "sequential", "strided", "uniform", "permutation", "normal" or "zipf".
    pub pattern: String,
    #[serde(skip)]
    pub how: Pattern,
    pub count: AccessCount,
    pub write_permille: u32,
    pub instr_per_access: u64,
    pub dependent: bool,
    pub phase: String,
    #[serde(skip)]
    pub phase_id: u32,
}

impl AccessStep {
    /// Runs as usemem's write loop (`Op::WriteSeqTracked`): every word of
    /// the range written once per pass in ascending order, independent stores.
    pub fn is_write_pass(&self) -> bool {
        self.how == Pattern::Sequential
            && self.write_permille >= 1000
            && !self.dependent
            && matches!(self.count, AccessCount::Passes(_))
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Step {
    Mmap {
        map: String,
        #[serde(skip)]
        slot: usize,
        size: u64,
        backing: Backing,
        populate: bool,
    },
    Munmap {
        map: String,
        #[serde(skip)]
        slot: usize,
    },
    /// `mprotect()` of the whole mapping: `write` false is `PROT_READ`,
    /// true `PROT_READ | PROT_WRITE`.
    Mprotect {
        map: String,
        #[serde(skip)]
        slot: usize,
        write: bool,
    },
    /// `madvise(MADV_DONTNEED)` of [offset, offset+len) of the mapping.
    Madvise {
        map: String,
        #[serde(skip)]
        slot: usize,
        advice: String,
        offset: u64,
        len: u64,
    },
    Access(AccessStep),
    /// `count` children by fork(); each runs `steps` and exits.
    Fork {
        count: u64,
        steps: Vec<Step>,
    },
    /// `count` threads by clone(CLONE_VM | CLONE_THREAD); each runs `steps` and exits.
    Clone {
        count: u64,
        steps: Vec<Step>,
    },
    /// Wait for every child and thread of the task to exit.
    Wait,
    Barrier {
        name: String,
        #[serde(skip)]
        id: u32,
        /// Tasks that meet there: every task instance that runs the step.
        #[serde(skip)]
        tasks: u64,
    },
    Sleep {
        ns: u64,
    },
    /// `steps` `count` times, or until `duration_ns` has passed (checked
    /// before each iteration), measured as phase `phase`.
    Repeat {
        count: Option<u64>,
        duration_ns: Option<u64>,
        phase: String,
        #[serde(skip)]
        phase_id: u32,
        steps: Vec<Step>,
    },
    /// The task's timed interval (usemem's start and end marks).
    Clock {
        at: Mark,
    },
    /// The shared region of interest: it begins when every task instance
    /// that runs the `start` step has run it, and ends when the first runs `end`.
    Roi {
        at: Mark,
        #[serde(skip)]
        tasks: u64,
    },
}

/// Where a task instance starts, and the CPUs it may run on (None: any).
pub type Placement = (usize, Option<CpuMask>);

impl ProgramConfig {
    /// The most memory the program can have mapped at once, over-counted:
    /// every mapping of every instance, and for each fork a private copy of
    /// everything the parent has mapped, plus the files once.
    pub fn peak_bytes(&self) -> u64 {
        let files: u64 = self.files.iter().map(|f| f.size).sum();
        let mut total = files;
        for t in &self.tasks {
            total = total.saturating_add(list_bytes(&t.steps, t.count, 0));
        }
        total
    }

    /// Where each task instance starts and the CPUs it may run on.
    pub fn placements(&self, nr_cpus: usize) -> Result<Vec<Vec<Placement>>, crate::error::Error> {
        let mut next = 0usize;
        let mut out = Vec::new();
        for (ti, t) in self.tasks.iter().enumerate() {
            let mut v = Vec::new();
            for k in 0..t.count as usize {
                match &t.cpus {
                    Some(list) => {
                        let mut m = CpuMask::empty();
                        for &c in list {
                            if c as usize >= nr_cpus {
                                return Err(crate::error::Error::Config {
                                    key: format!("workload.task[{ti}].cpus"),
                                    message: format!(
                                        "CPU {c} does not exist; the machine has CPUs 0-{}",
                                        nr_cpus - 1
                                    ),
                                });
                            }
                            m.set(c as usize);
                        }
                        v.push((list[k % list.len()] as usize, Some(m)));
                    }
                    None => {
                        v.push((next % nr_cpus, None));
                        next += 1;
                    }
                }
            }
            out.push(v);
        }
        Ok(out)
    }
}

impl TaskSpec {
    /// Huge pages of each size one instance's own hugetlb mappings take
    /// (children share or copy them; the pool is sized for the mappings).
    pub fn hugetlb_pages(&self) -> Vec<(u32, u64)> {
        let mut v = Vec::new();
        walk(&self.steps, &mut |s| {
            if let Step::Mmap {
                size,
                backing: Backing::Hugetlb { shift },
                ..
            } = s
            {
                v.push((*shift, size.div_ceil(1 << shift)));
            }
        });
        v
    }
}

/// For progress reports: the bytes `steps` access, run by `inst` task
/// instances (loops by count multiply, children by their count), and the
/// longest time their loops by duration take, in ns.
pub fn work(steps: &[Step], inst: u64) -> (u64, u64) {
    let (mut bytes, mut ns) = (0u64, 0u64);
    for s in steps {
        match s {
            Step::Access(a) => {
                let per = match a.count {
                    AccessCount::Passes(n) => n.saturating_mul(a.len),
                    AccessCount::Accesses(n) => n.saturating_mul(8),
                    AccessCount::DurationNs(d) => {
                        ns = ns.saturating_add(d);
                        0
                    }
                };
                bytes = bytes.saturating_add(per.saturating_mul(inst));
            }
            Step::Fork { count, steps } | Step::Clone { count, steps } => {
                let (b, n) = work(steps, inst.saturating_mul(*count));
                bytes = bytes.saturating_add(b);
                ns = ns.max(n);
            }
            Step::Repeat {
                count,
                duration_ns,
                steps,
                ..
            } => {
                let (b, n) = work(steps, inst);
                match (count, duration_ns) {
                    (Some(c), _) => {
                        bytes = bytes.saturating_add(b.saturating_mul(*c));
                        ns = ns.saturating_add(n.saturating_mul(*c));
                    }
                    (None, Some(d)) => ns = ns.saturating_add(*d),
                    _ => {}
                }
            }
            Step::Sleep { ns: d } => ns = ns.saturating_add(*d),
            _ => {}
        }
    }
    (bytes, ns)
}

/// Calls `f` on every step of `steps`, nested ones included.
pub fn walk(steps: &[Step], f: &mut impl FnMut(&Step)) {
    for s in steps {
        f(s);
        match s {
            Step::Fork { steps, .. } | Step::Clone { steps, .. } | Step::Repeat { steps, .. } => {
                walk(steps, f)
            }
            _ => {}
        }
    }
}

/// Bytes `steps` map, run by `inst` instances that already hold `held`
/// bytes each (which a fork copies).
fn list_bytes(steps: &[Step], inst: u64, mut held: u64) -> u64 {
    let mut total = 0u64;
    for s in steps {
        match s {
            Step::Mmap { size, backing, .. } if !matches!(backing, Backing::File { .. }) => {
                let size = size.div_ceil(2 << 20) * (2 << 20);
                total = total.saturating_add(size.saturating_mul(inst));
                held = held.saturating_add(size);
            }
            Step::Fork { count, steps } => {
                let n = inst.saturating_mul(*count);
                total = total
                    .saturating_add(held.saturating_mul(n))
                    .saturating_add(list_bytes(steps, n, held));
            }
            Step::Clone { count, steps } => {
                total = total.saturating_add(list_bytes(steps, inst.saturating_mul(*count), held));
            }
            Step::Repeat { steps, .. } => {
                total = total.saturating_add(list_bytes(steps, inst, held));
            }
            _ => {}
        }
    }
    total
}
