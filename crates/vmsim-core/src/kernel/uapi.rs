//! The system-call ABI, owned by the kernel: what a user program may ask
//! (`Op`), the access descriptions of the access engine (`Access`,
//! `Pattern`), the program interface the kernel drives (`Program`) and the
//! data convention the untimed check uses (`store_value`, `Expect`).
//! Workloads (crate::workload) implement `Program` against it; the kernel
//! never depends on a workload.

/// What a task asks of the system next. `ret` of the following `next()` call
/// carries the result (the address for `Mmap`; for `Fork`, the child's pid in
/// the parent and 0 in the child; 0 otherwise).
#[derive(Clone, Debug)]
pub enum Op {
    /// Anonymous private mapping of `len` bytes, read-write; with `populate`
    /// (MAP_POPULATE) the kernel faults every page in for writing before returning.
    Mmap {
        len: u64,
        populate: bool,
    },
    /// `mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0)` of file `ino` (created
    /// before the run, as a benchmark's script creates its files).
    MmapFile {
        ino: usize,
        len: u64,
    },
    /// fork(): a child process with a copy-on-write copy of the address space,
    /// running a copy of the program (`Program::fork`).
    Fork,
    /// Wait until every child has exited (the task sleeps meanwhile).
    Wait,
    /// A write loop: store every 8-byte word of [start, start+len) in
    /// ascending order, `instr_per_word` instructions a word (modeled per
    /// line: 8 stores and 8 times that many instructions), as usemem's
    /// `do_rw_once()` does.
    WriteSeq {
        start: u64,
        len: u64,
        seed: u64,
        instr_per_word: u64,
    },
    /// `WriteSeq` whose stores are also recorded in the mm's shadow of
    /// expected tags (kernel/mm.rs), so that later writes through the access
    /// engine and `Expect::AccessWrites` see them: the workload language's
    /// sequential write pass (workload/program.rs).
    WriteSeqTracked {
        start: u64,
        len: u64,
        seed: u64,
        instr_per_word: u64,
    },
    /// A run of accesses through the access engine (sim/access.rs).
    Access(Access),
    /// Check (untimed) that every 4 KiB page of the range holds what `expect` says.
    Check {
        start: u64,
        len: u64,
        expect: Expect,
    },
    Munmap {
        start: u64,
    },
    /// `mmap(MAP_HUGETLB)` of `len` bytes with pages of `1 << page_shift` (21 or 30), read-write.
    MmapHugetlb {
        len: u64,
        page_shift: u32,
    },
    /// `nanosleep()`: sleep for `ns` nanoseconds of simulated time.
    Nanosleep {
        ns: u64,
    },
    /// `clock_nanosleep(TIMER_ABSTIME)`: sleep until simulated time `ns` (from the start of the run).
    ClockNanosleepAbs {
        ns: u64,
    },
    /// `clone(CLONE_VM | CLONE_THREAD)`: a thread sharing the caller's address
    /// space, running a copy of the program (`Program::fork`); `ret` as for `Fork`.
    Clone,
    /// Start and end of the run's region of interest (as `perf stat --control`
    /// enable/disable): the report gives every counter's change over it.
    RoiBegin,
    RoiEnd,
    /// A region of interest shared by `tasks` tasks: it begins when the last
    /// of them has joined and ends when the first leaves (no region if one
    /// leaves before all have joined). usemem marks its timed write loop so.
    RoiJoin {
        tasks: u64,
    },
    RoiLeave,
    /// usemem's start pipes (`ready()`): write a ready byte to the parent's
    /// pipe, then poll its wake pipe, sleeping until the parent writes "go".
    ReadyPoll,
    /// usemem's `synchronize_tasks()`, in the parent: read `n` ready bytes
    /// (sleeping until the last child has written its own), ...
    ReadyRead {
        n: u64,
    },
    /// ... then write "go": every child polling the wake pipe wakes, in the
    /// order it began to poll.
    Go,
    /// A barrier of `tasks` tasks (`pthread_barrier_wait`, a futex wait):
    /// the caller sleeps until the `tasks`-th arrives, which wakes the others
    /// in the order they arrived. `id` names the barrier; it may be used again
    /// once it has opened.
    Barrier {
        id: u32,
        tasks: u64,
    },
    /// `clock_gettime(CLOCK_MONOTONIC)`: `ret` is the simulated time in ns
    /// since the run started.
    ClockGettime,
    /// Start and end of a measured phase of the task (the workload
    /// language's access phases and loops): the report sums each phase's
    /// accesses, bytes and latencies over the tasks that ran it.
    PhaseBegin {
        id: u32,
    },
    /// `iterations`: loop iterations the program counted in the phase.
    PhaseEnd {
        id: u32,
        iterations: u64,
    },
    /// `madvise(start, len, MADV_DONTNEED)` of private anonymous memory: the
    /// range's pages are unmapped and freed (the next access faults in a
    /// zero-filled page); the mapping stays.
    MadviseDontneed {
        start: u64,
        len: u64,
    },
    /// `madvise(MADV_HUGEPAGE)` (`huge`) or `madvise(MADV_NOHUGEPAGE)` of
    /// the whole mapping that starts at `start`: sets `VM_HUGEPAGE` or
    /// `VM_NOHUGEPAGE` for its later faults (no khugepaged collapse of pages
    /// already there).
    MadviseHugepage {
        start: u64,
        huge: bool,
    },
    /// `mprotect(start, len, PROT_READ)` (`write` false) or
    /// `PROT_READ | PROT_WRITE` (true) of the whole private anonymous mapping
    /// that starts at `start`.
    Mprotect {
        start: u64,
        write: bool,
    },
    /// usemem's timing points: the task's own measured interval.
    MarkStart,
    MarkEnd,
    Exit,
    /// `mmap(addr, len, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|
    /// MAP_FIXED_NOREPLACE)`: an anonymous mapping at exactly `addr`. `ret`
    /// is `addr`, or `-EEXIST` (as u64) if it overlaps a mapping, `-EINVAL`
    /// if `addr` or `len` is not page-aligned, zero or past the user range.
    MmapFixed {
        addr: u64,
        len: u64,
    },
    /// A batch of recorded accesses, made in order through the access
    /// engine (sim/replay.rs): a trace of a real program replayed.
    Replay(Replay),
    /// The program cannot go on (its input failed): the run stops with this error.
    Fail(crate::error::Error),
}

/// One recorded data access of a replayed trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The virtual address accessed; the access is one line, the one holding it.
    pub addr: u64,
    /// Instructions the program executed since the previous access
    /// (the accessing instruction included).
    pub instrs: u32,
    pub write: bool,
    /// The trace's line the access came from, for the error of a fault
    /// outside every mapping.
    pub line: u64,
}

/// A batch of `Recorded` accesses and where they came from.
#[derive(Clone, Debug)]
pub struct Replay {
    pub records: Vec<Recorded>,
    /// A write stores `store_value(seed, vpn)` into its line, as `Access` does.
    pub seed: u64,
    /// The trace file, for errors.
    pub source: std::sync::Arc<str>,
    /// The config key of the mappings: an access outside all of them (a
    /// simulated SIGSEGV) is reported as their error, naming the line.
    pub segv_key: std::sync::Arc<str>,
}

#[derive(Clone, Copy, Debug)]
pub enum Expect {
    Zero,
    /// Written by `WriteSeq` with this seed.
    Written {
        seed: u64,
    },
    /// The first line of every `stride` bytes written by a one-line `WriteSeq`
    /// with this seed, everything else zero.
    FirstLineWritten {
        seed: u64,
        stride: u64,
    },
    /// Written whole by `WriteSeq` with `first`, then again with `then`.
    Overwritten {
        first: u64,
        then: u64,
    },
    /// Whatever the access engine's writes left (the mm's shadow of
    /// expected tags, kernel/mm.rs); pages it never wrote read as zeros.
    AccessWrites,
}

/// A user program. `Send`: a run may move between host threads.
pub trait Program: Send {
    fn next(&mut self, ret: u64) -> Op;
    /// Bytes the program will access in all, for progress reports (a forked
    /// copy's bytes are counted by the program that forks it).
    fn total_bytes(&self) -> u64;
    /// Bytes the program reports for its timed interval, given the bytes it wrote.
    fn reported_bytes(&self, written: u64) -> u64 {
        written
    }
    /// Whether the program reports the bytes it accessed between its
    /// timed interval's marks (`Op::MarkStart`, `Op::MarkEnd`) instead of
    /// `reported_bytes`.
    fn reports_timed_bytes(&self) -> bool {
        false
    }
    /// The child's copy of the program at `Op::Fork`; None if it cannot fork.
    fn fork(&self) -> Option<Box<dyn Program>> {
        None
    }
}

/// The value a `WriteSeq` with `seed` stores into the page at virtual page number `vpn`.
#[inline]
pub fn store_value(seed: u64, vpn: u64) -> u64 {
    seed ^ vpn.wrapping_mul(0xFF51_AFD7_ED55_8CCD)
}

/// Where the accesses of an `Access` go, over the lines of its range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    /// Every line in ascending order, wrapping at the end.
    Sequential,
    /// Every `stride`-th byte in ascending order, wrapping (offset by one line per pass).
    Strided { stride: u64 },
    /// A line drawn uniformly from the range (seeded).
    Uniform,
    /// Every word of the range once per pass, in a random order drawn
    /// afresh for each pass (seeded): a uniform draw without replacement.
    Permutation,
    /// A page drawn from a normal distribution over the range's pages (mean at
    /// the middle page, standard deviation `sigma_pages`, redrawn outside the
    /// range), then a uniform line in it (seeded).
    Normal { sigma_pages: f64 },
    /// A page drawn from a Zipf distribution of exponent `s` over the range's
    /// pages (page 0 the most frequent, the k-th page's weight `1/(k+1)^s`),
    /// then a uniform line in it (seeded).
    Zipf { s: f64 },
}

/// A run of `count` word accesses to [start, start+len).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Access {
    pub start: u64,
    pub len: u64,
    pub pattern: Pattern,
    pub count: u64,
    /// Writes per 1000 accesses; the rest are reads (seeded choice).
    pub write_permille: u32,
    /// Instructions per access of the workload's compiled loop (usemem's 24 per word is usemem's).
    pub instr_per_access: u64,
    /// Each access waits for the previous one's data (pointer chasing).
    pub dependent: bool,
    /// Seeds the pattern and the choice of reads and writes; a write stores
    /// `store_value(seed, vpn)` into its line.
    pub seed: u64,
    /// Stop once this many ns of simulated time have passed since the run
    /// started, even if fewer than `count` accesses were made: a benchmark
    /// loop that runs for a duration (pmbench). None: run `count` accesses.
    pub until_ns: Option<u64>,
}
