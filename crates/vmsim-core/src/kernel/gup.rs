//! `__get_user_pages()` / `populate_vma_page_range()` (mm/gup.c): MAP_POPULATE
//! faults every page of a new mapping in, from the kernel, one page (or huge
//! page) at a time; each fault's work runs before the next is taken.

use super::memory::{fault_error, Mapped};
use super::mm::PMD_SIZE;
use crate::machine::Mode;
use crate::sim::{Cur, Sim};

impl Sim {
    /// MAP_POPULATE: faults in the next missing page of [start, start+len)
    /// (the fault's work runs before the task continues), or returns to user
    /// mode when every page is present.
    pub(crate) fn populate(&mut self, cpu: usize, t: usize, start: u64, len: u64, mut pos: u64) {
        let mm = self.tasks[t].user_mm();
        self.m.set_mode(cpu, Mode::Kernel);
        while pos < len {
            let va = start + pos;
            let mapped = match self.k.mms[mm].lookup(va) {
                Some(tr) => {
                    if tr.huge {
                        Mapped::Huge
                    } else {
                        Mapped::Small
                    }
                }
                None => {
                    let node = self.m.topo.node_of(cpu);
                    let mut work = std::mem::take(&mut self.cpus[cpu].work);
                    let r = self.k.faultin_page(mm, va, true, node, &mut work);
                    self.cpus[cpu].work = work;
                    match r {
                        Ok(m) => {
                            pos = next_page(start, pos, m);
                            self.tasks[t].cur = Some(Cur::Populate { start, len, pos });
                        }
                        Err(e) => self.error = Some(fault_error(t, e)),
                    }
                    return;
                }
            };
            pos = next_page(start, pos, mapped);
        }
        self.m.set_mode(cpu, Mode::User);
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
