//! `__get_user_pages()` / `populate_vma_page_range()` (mm/gup.c): MAP_POPULATE
//! faults every page of a new mapping in, from the kernel, one page (or huge
//! page) at a time; each fault's work runs before the next is taken.

use super::hw::Hw;
use super::memory::{FaultError, Mapped};
use super::mm::PMD_SIZE;
use super::{Kernel, Work};
use crate::machine::Mode;
use std::collections::VecDeque;

impl Kernel {
    /// `populate_vma_page_range()` on `hw.cpu`, from offset `pos` of
    /// [start, start+len) of `mm`: queues the fault of the next missing page
    /// (or huge page) on `work` and returns the offset after it, or returns
    /// to user mode with None when every page is present.
    pub fn populate_vma_page_range(
        &mut self,
        hw: &mut Hw,
        mm: usize,
        start: u64,
        len: u64,
        mut pos: u64,
        work: &mut VecDeque<Work>,
    ) -> Result<Option<u64>, FaultError> {
        hw.machine.set_mode(hw.cpu, Mode::Kernel);
        while pos < len {
            let va = start + pos;
            let mapped = match self.mms[mm].lookup(va) {
                Some(tr) => {
                    if tr.huge {
                        Mapped::Huge
                    } else {
                        Mapped::Small
                    }
                }
                None => {
                    let node = hw.machine.topo.node_of(hw.cpu);
                    let m = self.faultin_page(mm, va, true, node, work)?;
                    return Ok(Some(next_page(start, pos, m)));
                }
            };
            pos = next_page(start, pos, mapped);
        }
        hw.machine.set_mode(hw.cpu, Mode::User);
        Ok(None)
    }
}

/// The offset after the page (or huge page) a fault at `start + pos` mapped.
fn next_page(start: u64, pos: u64, m: Mapped) -> u64 {
    let va = start + pos;
    match m {
        Mapped::Huge => (va & !(PMD_SIZE - 1)) + PMD_SIZE - start,
        Mapped::Small => (va & !4095) + 4096 - start,
    }
}
