//! A page-fault test after Ankur Arora's `pf-test` (`taskset -c 15 bench/pf-test
//! --sz 64g --huge 1|2`) and its upstream successor `perf bench mem map -p
//! $pg -f demand` (MECHANISMS.md §6.3): one task maps a `MAP_HUGETLB` region
//! and touches it once per huge page, in ascending order, so each touch is a
//! demand fault that zeroes one huge page. The timed interval runs from before
//! the mmap to after the last touch; the rate reported is bytes faulted per
//! second. Before unmapping, the task checks (untimed) that every 4 KiB
//! sub-page is zero except the line it touched.

use super::{Expect, Op, Program};

pub struct PfTest {
    size: u64,
    page_shift: u32,
    seed: u64,
    step: u64,
    addr: u64,
}

impl PfTest {
    /// `size` bytes (a multiple of the huge page size) in pages of `1 << page_shift`.
    pub fn new(size: u64, page_shift: u32, seed: u64) -> PfTest {
        debug_assert_eq!(size % (1 << page_shift), 0);
        PfTest { size, page_shift, seed, step: 0, addr: 0 }
    }

    fn nr_pages(&self) -> u64 {
        self.size >> self.page_shift
    }
}

impl Program for PfTest {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let nr = self.nr_pages();
        match self.step {
            1 => Op::MarkStart,
            2 => Op::MmapHugetlb { len: self.size, page_shift: self.page_shift },
            s if s < 3 + nr => {
                if s == 3 {
                    self.addr = ret;
                }
                // One store to the first line of huge page s-3.
                Op::WriteSeq { start: self.addr + ((s - 3) << self.page_shift), len: 64, seed: self.seed }
            }
            s if s == 3 + nr => Op::MarkEnd,
            s if s == 4 + nr => Op::Check { start: self.addr, len: self.size, expect: Expect::FirstLineWritten { seed: self.seed, stride: 1 << self.page_shift } },
            s if s == 5 + nr => Op::Munmap { start: self.addr },
            _ => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        self.nr_pages() * 64
    }
    /// pf-test reports the bytes it made present (every huge page it faulted), not the bytes it stored.
    fn reported_bytes(&self, _written: u64) -> u64 {
        self.size
    }
}
