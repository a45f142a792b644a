//! A random-read workload in the manner of pmbench's read-only runs: one
//! task maps a region with MAP_POPULATE (zero-filled), then, timed, makes
//! `count` 8-byte reads at addresses drawn from a pattern over it (uniform,
//! or normal over pages; seeded). Each read costs the instructions per
//! access its caller states (pmbench's loop was not measured for the model;
//! callers give the figure of the loop they model). The region is checked
//! (untimed) to still read as zeros, then unmapped.

use crate::kernel::uapi::{Access, Expect, Op, Pattern, Program};

pub struct RandRead {
    size: u64,
    access: Access,
    step: u32,
    addr: u64,
}

impl RandRead {
    pub fn new(
        size: u64,
        count: u64,
        pattern: Pattern,
        instr_per_access: u64,
        dependent: bool,
        seed: u64,
    ) -> RandRead {
        let access = Access {
            start: 0,
            len: size,
            pattern,
            count,
            write_permille: 0,
            instr_per_access,
            dependent,
            seed,
            until_ns: None,
        };
        RandRead {
            size,
            access,
            step: 0,
            addr: 0,
        }
    }
}

impl Program for RandRead {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Mmap {
                len: self.size,
                populate: true,
            },
            2 => {
                self.addr = ret;
                Op::MarkStart
            }
            3 => Op::Access(Access {
                start: self.addr,
                ..self.access
            }),
            4 => Op::MarkEnd,
            5 => Op::Check {
                start: self.addr,
                len: self.size,
                expect: Expect::Zero,
            },
            6 => Op::Munmap { start: self.addr },
            _ => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        self.access.count * 8
    }
}
