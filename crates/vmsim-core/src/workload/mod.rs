//! Workloads: programs of simulated tasks. A program yields system-call-like
//! operations and memory-access runs; it never sees frames or caches.

pub mod pftest;
pub mod usemem;

/// What a task asks of the system next. `ret` of the following `next()` call
/// carries the result (the address for `Mmap`; for `Fork`, the child's pid in
/// the parent and 0 in the child; 0 otherwise).
#[derive(Clone, Debug)]
pub enum Op {
    /// Anonymous private mapping of `len` bytes, read-write; with `populate`
    /// (MAP_POPULATE) the kernel faults every page in for writing before returning.
    Mmap { len: u64, populate: bool },
    /// fork(): a child process with a copy-on-write copy of the address space,
    /// running a copy of the program (`Program::fork`).
    Fork,
    /// Wait until every child has exited (the task sleeps meanwhile).
    Wait,
    /// Store every 8-byte word of [start, start+len) in ascending order (modeled per line: 8 stores).
    WriteSeq { start: u64, len: u64, seed: u64 },
    /// Check (untimed) that every 4 KiB page of the range holds what `expect` says.
    Check { start: u64, len: u64, expect: Expect },
    Munmap { start: u64 },
    /// `mmap(MAP_HUGETLB)` of `len` bytes with pages of `1 << page_shift` (21 or 30), read-write.
    MmapHugetlb { len: u64, page_shift: u32 },
    /// `nanosleep()`: sleep for `ns` nanoseconds of simulated time.
    Nanosleep { ns: u64 },
    /// `clock_nanosleep(TIMER_ABSTIME)`: sleep until simulated time `ns` (from the start of the run).
    ClockNanosleepAbs { ns: u64 },
    /// `clone(CLONE_VM | CLONE_THREAD)`: a thread sharing the caller's address
    /// space, running a copy of the program (`Program::fork`); `ret` as for `Fork`.
    Clone,
    /// usemem's timing points: the task's own measured interval.
    MarkStart,
    MarkEnd,
    Exit,
}

#[derive(Clone, Copy, Debug)]
pub enum Expect {
    Zero,
    /// Written by `WriteSeq` with this seed.
    Written { seed: u64 },
    /// The first line of every `stride` bytes written by a one-line `WriteSeq`
    /// with this seed, everything else zero.
    FirstLineWritten { seed: u64, stride: u64 },
    /// Written whole by `WriteSeq` with `first`, then again with `then`.
    Overwritten { first: u64, then: u64 },
}

pub trait Program {
    fn next(&mut self, ret: u64) -> Op;
    /// Bytes the program will access in all, for progress reports (a forked
    /// copy's bytes are counted by the program that forks it).
    fn total_bytes(&self) -> u64;
    /// Bytes the program reports for its timed interval, given the bytes it wrote.
    fn reported_bytes(&self, written: u64) -> u64 {
        written
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
