//! vm-scalability's `usemem` (MECHANISMS.md §6.1) as case-anon-w-seq runs it:
//! each of `nr_task` processes maps its own private anonymous region, writes
//! every 8-byte word from start to end, then unmaps it. As in usemem's
//! `do_units()`/`output_statistics()`, the timed interval runs from the start
//! to the end of the writes (the unmap is timed apart, "usecs to free
//! memory"), and the bytes reported are those written plus a `bytes / 8`
//! credit for the allocation (`do_unit()`: `rw_bytes = bytes / 8`).
//! Before unmapping, the task checks every page holds what it wrote.

use super::{Expect, Op, Program};

pub struct Usemem {
    size: u64,
    seed: u64,
    step: u32,
    addr: u64,
}

impl Usemem {
    pub fn new(size: u64, seed: u64) -> Usemem {
        Usemem { size, seed, step: 0, addr: 0 }
    }
}

impl Program for Usemem {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::MarkStart,
            2 => Op::Mmap { len: self.size },
            3 => {
                self.addr = ret;
                Op::WriteSeq { start: self.addr, len: self.size, seed: self.seed }
            }
            4 => Op::MarkEnd,
            5 => Op::Check { start: self.addr, len: self.size, expect: Expect::Written { seed: self.seed } },
            6 => Op::Munmap { start: self.addr },
            _ => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        self.size
    }
    fn reported_bytes(&self, written: u64) -> u64 {
        written + self.size / 8
    }
}
