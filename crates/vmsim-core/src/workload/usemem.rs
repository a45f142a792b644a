//! vm-scalability's `usemem` (MECHANISMS.md §6.1) as case-anon-w-seq runs it:
//! each of `nr_task` processes maps its own private anonymous region, writes
//! every 8-byte word from start to end, then unmaps it. The timed interval
//! covers mmap, the writes and munmap; the reported rate is bytes/time.
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
            4 => Op::Check { start: self.addr, len: self.size, expect: Expect::Written { seed: self.seed } },
            5 => Op::Munmap { start: self.addr },
            6 => Op::MarkEnd,
            _ => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        self.size
    }
}
