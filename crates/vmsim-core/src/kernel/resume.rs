//! The kernel's one entry for its continuations: a path that must go on
//! after hardware work it queued (install a mapping once the clear is done,
//! free the old page after the copy, take a lock when the CPU gets there)
//! queues a `KStep`; when the CPU reaches it, the engine hands it back here
//! with the CPU's queue and says nothing about what it is. What the engine
//! must do next, which only it can (put a task to sleep, return to user
//! mode, stop the run), comes back as a `Resumed`.
//!
//! Invariant: a step either finishes (`Done`, and the engine takes it off
//! the queue) or arranges the queue itself before it returns anything else.

use super::huge_memory_wp::WpLockStep;
use super::hw::Hw;
use super::locking::rwsem::SemRef;
use super::mm::PMD_SHIFT;
use super::page_alloc::HPAGE_PMD_NR;
use super::timeline::{ThpEvent, ThpMapped};
use super::tlbflush::flush_tlb_mm_range_stride;
use super::{KFn, KStep, Kernel, Work};
use crate::error::Error;
use std::collections::VecDeque;

/// What a resumed step may see and change of the CPU it runs on.
pub struct ResumeCtx<'a> {
    /// The CPU's queue, the step at its front.
    pub queue: &'a mut VecDeque<Work>,
    /// How far a step that runs over several quanta has come.
    pub pos: &'a mut u64,
    /// The task the CPU runs (`current`), if any.
    pub task: Option<usize>,
    /// The end of the CPU's quantum.
    pub deadline: u64,
}

/// What the engine does once a step returns.
#[derive(Debug)]
pub enum Resumed {
    /// The step is done: the engine takes it off the queue.
    Done,
    /// The step reached the deadline and stays at the front, its progress
    /// in `pos`; or it arranged the queue itself. The engine leaves it.
    Left,
    /// The task sleeps inside its fault (`lock_page` → `io_schedule`): its
    /// kernel work, the step first again, goes with it and comes back when
    /// it is switched in.
    SleepInFault(usize),
    /// The task sleeps on a wait queue and retries its fault when woken:
    /// the CPU returns to user mode.
    SleepToRetry(usize),
    /// The fault failed; the run stops with this error.
    Failed(Error),
}

impl Kernel {
    /// Resumes `step`, the front of `ctx.queue`, on `hw.cpu`.
    pub fn resume(&mut self, hw: &mut Hw, step: &KStep, ctx: &mut ResumeCtx) -> Resumed {
        match *step {
            KStep::FlushTlbRange {
                mm,
                start,
                end,
                stride_shift,
            } => {
                flush_tlb_mm_range_stride(
                    hw.machine,
                    &mut self.vmstat,
                    hw.cpu,
                    &mut self.mms[mm],
                    hw.tlbstate,
                    start,
                    end,
                    stride_shift,
                    self.cfg.tlb_single_page_flush_ceiling,
                );
            }
            KStep::PutPage { pfn } => {
                if self.mem.vmemmap.is_some() {
                    self.put_page_struct_page(hw, pfn);
                }
                if self.put_page(pfn) > 0 {
                    hw.charge(self.costs.page_free_cycles);
                }
            }
            KStep::InstallPmd {
                mm,
                haddr,
                pfn,
                orig,
            } => {
                if self.install_pmd(mm, haddr, pfn, orig) {
                    self.set_entry_installed(hw, mm, haddr);
                    self.record_thp_mapped(hw, ctx.task, mm, haddr, orig.is_some());
                } else {
                    drop_put_of_replaced(ctx.queue);
                }
            }
            KStep::InstallPte {
                mm,
                addr,
                pfn,
                writable,
                orig,
            } => {
                if self.install_pte(mm, addr, pfn, writable, orig) {
                    self.set_entry_installed(hw, mm, addr);
                } else {
                    drop_put_of_replaced(ctx.queue);
                }
            }
            KStep::InstallFilePte {
                mm,
                addr,
                ino,
                index,
                pfn,
            } => {
                if self.install_file_pte(mm, addr, ino, index, pfn) {
                    self.set_entry_installed(hw, mm, addr);
                }
            }
            KStep::InstallPud { mm, haddr, pfn } => {
                if self.install_pud(mm, haddr, pfn) {
                    self.set_entry_installed(hw, mm, haddr);
                }
            }
            KStep::ShrinkNode { node, kswapd } => {
                self.shrink_node(hw, node, kswapd);
            }
            KStep::MmapReadLock { mm } => self.down_read(hw, SemRef::Mmap(mm)),
            KStep::MmapReadUnlock { mm } => self.up_read(hw, SemRef::Mmap(mm)),
            KStep::EntryRmw {
                mm,
                ref entries,
                what,
            } => self.entry_rmws(hw, mm, entries, what),
            KStep::PtlCycles {
                mm,
                va,
                cycles,
                what,
            } => self.ptl_cycles(hw, mm, va, cycles, what),
            KStep::SpinSection { lock, instr, what } => {
                self.spin_section(hw, lock, &[], instr, what)
            }
            KStep::WakeupKswapd { node, .. } => self.wakeup_kswapd_now(hw, node),
            KStep::MigrateUnmap { mm, addr, old, new } => {
                if !self.try_to_migrate(hw, mm, addr, old, new) {
                    // Abandoned: the copy and the remap that follow go too.
                    ctx.queue.pop_front();
                    ctx.queue.retain(|w| {
                        !matches!(w, Work::Copy { src_line, .. } if *src_line == old << 6)
                            && !matches!(w, Work::Kernel(KStep::MigrateRemap { old: o, .. }) if *o == old)
                    });
                    return Resumed::Left;
                }
            }
            KStep::DecTlbFlushPending { mm } => {
                let p = &mut self.mms[mm].tlb_flush_pending;
                *p = p.saturating_sub(1);
            }
            KStep::MigrateRemap { mm, addr, old, new } => {
                // remove_migration_ptes(): rmap_walk() under anon_vma_lock_read().
                self.down_read(hw, SemRef::AnonVma(mm));
                self.migrate_remap(hw, mm, addr, old, new);
                let moved = self.entry_store(hw, mm, addr, KFn::MigratePages);
                self.up_read(hw, SemRef::AnonVma(mm));
                let c =
                    self.costs.rmap_pte_cycles.saturating_sub(moved) + self.costs.page_free_cycles;
                hw.charge(c);
            }
            KStep::WpHugePageLocked {
                mm,
                addr,
                pfn,
                node,
            } => {
                let t = ctx.task.expect("a fault is handled for a task");
                let mut more = VecDeque::new();
                let r = self.wp_huge_page_trylock(hw, t, (mm, addr, pfn, node), &mut more);
                put_in_front(ctx.queue, more);
                if r == WpLockStep::Sleep {
                    ctx.queue.push_front(Work::Kernel(step.clone()));
                    return Resumed::SleepInFault(t);
                }
                return Resumed::Left;
            }
            KStep::ReuseSwapPage { pfn } => {
                let i = self.reuse_swap_page_scan(hw, pfn, *ctx.pos, ctx.deadline);
                if i < HPAGE_PMD_NR {
                    *ctx.pos = i;
                    return Resumed::Left;
                }
                *ctx.pos = 0;
            }
            KStep::WpHugePageUnlock {
                mm,
                addr,
                pfn,
                node,
            } => {
                let mut more = VecDeque::new();
                let r = self.wp_huge_page_unlock(hw, (mm, addr, pfn, node), &mut more);
                put_in_front(ctx.queue, more);
                if let Err(e) = r {
                    let t = ctx.task.unwrap_or(0);
                    ctx.queue.clear();
                    return Resumed::Failed(super::memory::fault_error(t, e));
                }
                return Resumed::Left;
            }
            KStep::WaitMigration { mm, addr, pfn } => {
                let still = self.mms[mm]
                    .entry(addr)
                    .is_some_and(|p| p.migration && p.pfn == pfn);
                if let (true, Some(t)) = (still, ctx.task) {
                    let w = &mut *ctx.queue;
                    w.pop_front();
                    // The rest of this fault (its return to user) is done when it retries.
                    if let Some(i) = w.iter().position(|w| matches!(w, Work::ReturnToUser)) {
                        w.remove(i);
                    }
                    // The fault returns to retry: its mmap_lock goes now.
                    if let Some(i) = w
                        .iter()
                        .position(|w| matches!(w, Work::Kernel(KStep::MmapReadUnlock { .. })))
                    {
                        if let Some(Work::Kernel(KStep::MmapReadUnlock { mm })) = w.remove(i) {
                            self.up_read(hw, SemRef::Mmap(mm));
                        }
                    }
                    let q = self.folio_waitqueue(pfn);
                    self.sched.waitq.wait(q, t);
                    return Resumed::SleepToRetry(t);
                }
            }
        }
        Resumed::Done
    }

    /// The entry just installed at `va` of `mm` stored through the caches,
    /// its tables allocated first (`kernel.page_tables`; nothing otherwise).
    fn set_entry_installed(&mut self, hw: &mut Hw, mm: usize, va: u64) {
        if self.page_tables() {
            self.set_entry_at(hw, mm, va, true);
        }
    }
}

/// The step's follow-on work, in order, at the front of the queue, in
/// place of the step.
fn put_in_front(queue: &mut VecDeque<Work>, more: VecDeque<Work>) {
    queue.pop_front();
    for item in more.into_iter().rev() {
        queue.push_front(item);
    }
}

/// A copy-on-write install that lost the race also keeps its mapping of
/// the old page: the `PutPage` queued right after the install goes.
fn drop_put_of_replaced(queue: &mut VecDeque<Work>) {
    if let Some(Work::Kernel(KStep::PutPage { .. })) = queue.get(1) {
        queue.remove(1);
    }
}

impl Kernel {
    /// Records the PMD of `mm` at `haddr` just installed by `task` (the
    /// task whose work this is; the fault's current task without one), a
    /// copy-on-write's (`cow`) or a new huge page's, when the run keeps
    /// the timeline.
    pub(crate) fn record_thp_mapped(
        &mut self,
        hw: &Hw,
        task: Option<usize>,
        mm: usize,
        haddr: u64,
        cow: bool,
    ) {
        if !self.thp_timeline.is_on() {
            return;
        }
        let start = self.mms[mm].find_vma(haddr).map_or(0, |v| v.start);
        self.thp_timeline.record(ThpMapped {
            cycle: hw.machine.cpus[hw.cpu].clock,
            pid: task.unwrap_or(self.sched.current.pid),
            event: if cow { ThpEvent::Cow } else { ThpEvent::Fault },
            index: (haddr - start) >> PMD_SHIFT,
        });
    }
}
