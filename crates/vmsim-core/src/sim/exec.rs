//! Executing the hardware work the kernel queued on a CPU (kernel/mod.rs
//! `Work`): fixed costs, bulk clears and copies as line accesses (resumable
//! at a quantum boundary, a string instruction's start-up paid once), and the
//! steps that must follow them (installing mappings, freeing, flushing).

use super::*;
use crate::kernel::huge_memory_wp::WpLockStep;
use crate::kernel::locking::rwsem::SemRef;

impl Sim {
    pub(super) fn exec_work(&mut self, cpu: usize, deadline: u64) {
        let item = self.cpus[cpu].work.front().cloned().expect("non-empty");
        match item {
            Work::Cycles {
                cycles,
                instructions,
                ..
            } => {
                self.machine.advance(cpu, cycles, instructions);
            }
            Work::Sfence { .. } => self.machine.sfence(cpu),
            Work::Clear { line, nlines, how } => {
                let mut i = self.begin_bulk(cpu, how);
                let (kind, issue) = match how {
                    StoreHow::String => (AccessKind::StringStore, self.string_issue),
                    StoreHow::MovLoop => (AccessKind::Store, self.movq_issue),
                    StoreHow::NonTemporal => (AccessKind::NtStore, self.movnti_issue),
                    StoreHow::Clzero => (AccessKind::NtStore, self.clzero_issue),
                };
                let per_line = match how {
                    StoreHow::String => 0,
                    StoreHow::MovLoop => crate::kernel::instr::CLEAR_PAGE_ORIG_PER_LINE,
                    StoreHow::NonTemporal => crate::kernel::instr::CLEAR_NT_PER_LINE,
                    StoreHow::Clzero => crate::kernel::instr::CLEAR_CLZERO_PER_LINE,
                };
                let n = nlines.min(self.bulk_limit);
                self.machine.set_line_stores(cpu, how.stores_per_line());
                // A string store over more bytes than the chip's threshold elides
                // cache allocation for its first `bypass` lines.
                let bypass = match how {
                    StoreHow::String => self.machine.string_bypass_lines(nlines),
                    _ => 0,
                };
                if i < bypass {
                    let to = bypass.min(n);
                    i = self.machine.bulk_run(
                        cpu,
                        line,
                        None,
                        i,
                        to,
                        AccessKind::NtStore,
                        issue,
                        per_line,
                        deadline,
                    );
                }
                if i >= bypass {
                    i = self
                        .machine
                        .bulk_run(cpu, line, None, i, n, kind, issue, per_line, deadline);
                }
                self.machine.set_line_stores(cpu, 1);
                if !self.end_bulk(cpu, i, nlines) {
                    return;
                }
            }
            Work::Copy {
                src_line,
                dst_line,
                nlines,
                how,
            } => {
                let i = self.begin_bulk(cpu, how);
                let (kind, issue) = match how {
                    StoreHow::String => (AccessKind::StringStore, self.string_issue),
                    StoreHow::MovLoop => (AccessKind::Store, self.copy_issue),
                    // No copy plan stores with clzero (it only zeroes); taken as movnti.
                    StoreHow::NonTemporal | StoreHow::Clzero => {
                        (AccessKind::NtStore, self.copy_issue)
                    }
                };
                let per_line = match how {
                    StoreHow::MovLoop => crate::kernel::instr::COPY_PAGE_REGS_PER_LINE,
                    _ => 0,
                };
                // The load's issue slots are covered by the store's: the
                // copy is bound by one store (string width) per line.
                let n = nlines.min(self.bulk_limit);
                self.machine.set_line_stores(cpu, how.stores_per_line());
                let i = self.machine.bulk_run(
                    cpu,
                    dst_line,
                    Some(src_line),
                    i,
                    n,
                    kind,
                    issue,
                    per_line,
                    deadline,
                );
                self.machine.set_line_stores(cpu, 1);
                if !self.end_bulk(cpu, i, nlines) {
                    return;
                }
            }
            Work::FlushTlbRange {
                mm,
                start,
                end,
                stride_shift,
            } => {
                let k = &mut self.kernel;
                flush_tlb_mm_range_stride(
                    &mut self.machine,
                    &mut k.vmstat,
                    cpu,
                    &mut k.mms[mm],
                    &mut self.tlbstate,
                    start,
                    end,
                    stride_shift,
                    k.cfg.tlb_single_page_flush_ceiling,
                );
            }
            Work::PutPage { pfn } => {
                if self.kernel.mem.vmemmap.is_some() {
                    let (k, mut hw) = self.kernel_hw(cpu);
                    k.put_page_struct_page(&mut hw, pfn);
                }
                if self.kernel.put_page(pfn) > 0 {
                    let c = self.kernel.costs.page_free_cycles;
                    self.machine.advance(cpu, c, c);
                }
            }
            Work::InstallPmd {
                mm,
                haddr,
                pfn,
                orig,
            } => {
                if self.kernel.install_pmd(mm, haddr, pfn, orig) {
                    self.set_entry_at(cpu, mm, haddr);
                } else {
                    self.drop_put_of_replaced(cpu);
                }
            }
            Work::InstallPte {
                mm,
                addr,
                pfn,
                writable,
                orig,
            } => {
                if self.kernel.install_pte(mm, addr, pfn, writable, orig) {
                    self.set_entry_at(cpu, mm, addr);
                } else {
                    self.drop_put_of_replaced(cpu);
                }
            }
            Work::InstallFilePte {
                mm,
                addr,
                ino,
                index,
                pfn,
            } => {
                if self.kernel.install_file_pte(mm, addr, ino, index, pfn) {
                    self.set_entry_at(cpu, mm, addr);
                }
            }
            Work::InstallPud { mm, haddr, pfn } => {
                if self.kernel.install_pud(mm, haddr, pfn) {
                    self.set_entry_at(cpu, mm, haddr);
                }
            }
            Work::ReturnToUser => self.machine.set_mode(cpu, Mode::User),
            Work::ShrinkNode { node, kswapd } => {
                let (k, mut hw) = self.kernel_hw(cpu);
                k.shrink_node(&mut hw, node, kswapd);
            }
            Work::MmapReadLock { mm } => {
                let (k, mut hw) = self.kernel_hw(cpu);
                k.down_read(&mut hw, SemRef::Mmap(mm));
            }
            Work::MmapReadUnlock { mm } => {
                let (k, mut hw) = self.kernel_hw(cpu);
                k.up_read(&mut hw, SemRef::Mmap(mm));
            }
            Work::EntryRmw { mm, entries, what } => {
                let (k, mut hw) = self.kernel_hw(cpu);
                k.entry_rmws(&mut hw, mm, &entries, what);
            }
            Work::PtlCycles {
                mm,
                va,
                cycles,
                what,
            } => {
                let (k, mut hw) = self.kernel_hw(cpu);
                k.ptl_cycles(&mut hw, mm, va, cycles, what);
            }
            Work::SpinSection { lock, instr, what } => {
                let (k, mut hw) = self.kernel_hw(cpu);
                k.spin_section(&mut hw, lock, &[], instr, what);
            }
            Work::WakeupKswapd { node, .. } => {
                let (k, mut hw) = self.kernel_hw(cpu);
                k.wakeup_kswapd_now(&mut hw, node);
            }
            Work::MigrateUnmap { mm, addr, old, new } => {
                let (k, mut hw) = self.kernel_hw(cpu);
                if !k.try_to_migrate(&mut hw, mm, addr, old, new) {
                    // Abandoned: the copy and the remap that follow go too.
                    self.cpus[cpu].work.pop_front();
                    self.cpus[cpu].work.retain(|w| {
                        !matches!(w, Work::Copy { src_line, .. } if *src_line == old << 6)
                            && !matches!(w, Work::MigrateRemap { old: o, .. } if *o == old)
                    });
                    return;
                }
            }
            Work::DecTlbFlushPending { mm } => {
                let p = &mut self.kernel.mms[mm].tlb_flush_pending;
                *p = p.saturating_sub(1);
            }
            Work::MigrateRemap { mm, addr, old, new } => {
                // remove_migration_ptes(): rmap_walk() under anon_vma_lock_read().
                let (k, mut hw) = self.kernel_hw(cpu);
                k.down_read(&mut hw, SemRef::AnonVma(mm));
                k.migrate_remap(&mut hw, mm, addr, old, new);
                let moved = k.entry_store(&mut hw, mm, addr, KFn::MigratePages);
                k.up_read(&mut hw, SemRef::AnonVma(mm));
                let c = self.kernel.costs.rmap_pte_cycles.saturating_sub(moved)
                    + self.kernel.costs.page_free_cycles;
                self.machine.advance(cpu, c, c);
            }
            Work::WpHugePageLocked {
                mm,
                addr,
                pfn,
                node,
            } => {
                let t = self
                    .sched
                    .current(cpu)
                    .expect("a fault is handled for a task");
                let mut more = VecDeque::new();
                let (k, mut hw) = self.kernel_hw(cpu);
                let step = k.wp_huge_page_trylock(&mut hw, t, (mm, addr, pfn, node), &mut more);
                let w = &mut self.cpus[cpu].work;
                w.pop_front();
                for item in more.into_iter().rev() {
                    w.push_front(item);
                }
                if step == WpLockStep::Sleep {
                    // lock_page() → io_schedule(): the task sleeps inside the
                    // fault; its kernel work waits with it, this item first
                    // again, and comes back when it is switched in.
                    w.push_front(item);
                    self.account_runtime(cpu, t);
                    self.sched.sleep_current(cpu);
                    self.tasks[t].kernel_work = std::mem::take(&mut self.cpus[cpu].work);
                }
                return;
            }
            Work::ReuseSwapPage { pfn } => {
                let from = self.cpus[cpu].pos;
                let (k, mut hw) = self.kernel_hw(cpu);
                let i = k.reuse_swap_page_scan(&mut hw, pfn, from, deadline);
                if i < crate::kernel::page_alloc::HPAGE_PMD_NR {
                    self.cpus[cpu].pos = i;
                    return;
                }
                self.cpus[cpu].pos = 0;
            }
            Work::WpHugePageUnlock {
                mm,
                addr,
                pfn,
                node,
            } => {
                let mut more = VecDeque::new();
                let (k, mut hw) = self.kernel_hw(cpu);
                let r = k.wp_huge_page_unlock(&mut hw, (mm, addr, pfn, node), &mut more);
                let w = &mut self.cpus[cpu].work;
                w.pop_front();
                for item in more.into_iter().rev() {
                    w.push_front(item);
                }
                if let Err(e) = r {
                    let t = self.sched.current(cpu).unwrap_or(0);
                    self.error = Some(crate::kernel::memory::fault_error(t, e));
                    self.cpus[cpu].work.clear();
                }
                return;
            }
            Work::WaitMigration { mm, addr, pfn } => {
                let still = self.kernel.mms[mm]
                    .entry(addr)
                    .is_some_and(|p| p.migration && p.pfn == pfn);
                if let (true, Some(t)) = (still, self.sched.current(cpu)) {
                    self.cpus[cpu].work.pop_front();
                    // The rest of this fault (its return to user) is done when it retries.
                    let w = &mut self.cpus[cpu].work;
                    if let Some(i) = w.iter().position(|w| matches!(w, Work::ReturnToUser)) {
                        w.remove(i);
                    }
                    // The fault returns to retry: its mmap_lock goes now.
                    if let Some(i) = w
                        .iter()
                        .position(|w| matches!(w, Work::MmapReadUnlock { .. }))
                    {
                        if let Some(Work::MmapReadUnlock { mm }) = w.remove(i) {
                            let (k, mut hw) = self.kernel_hw(cpu);
                            k.up_read(&mut hw, SemRef::Mmap(mm));
                        }
                    }
                    self.account_runtime(cpu, t);
                    self.sched.sleep_current(cpu);
                    let q = self.kernel.folio_waitqueue(pfn);
                    self.kernel.sched.waitq.wait(q, t);
                    self.machine.set_mode(cpu, Mode::User);
                    return;
                }
            }
        }
        self.cpus[cpu].work.pop_front();
    }

    /// The entry just installed at `va` of `mm` stored through the caches,
    /// its tables allocated first (`kernel.page_tables`; nothing otherwise).
    fn set_entry_at(&mut self, cpu: usize, mm: usize, va: u64) {
        if self.kernel.page_tables() {
            let (k, mut hw) = self.kernel_hw(cpu);
            k.set_entry_at(&mut hw, mm, va, true);
        }
    }

    /// Where the front bulk work item (a clear or copy of many lines) resumes;
    /// its string instruction's start-up is paid once, however often it is resumed.
    fn begin_bulk(&mut self, cpu: usize, how: StoreHow) -> u64 {
        if !self.cpus[cpu].started {
            self.cpus[cpu].started = true;
            match how {
                StoreHow::String => self.machine.string_start(cpu),
                StoreHow::Clzero => self.machine.set_clzero(cpu, true),
                _ => {}
            }
        }
        self.cpus[cpu].pos
    }

    /// Records progress `i` of `nlines`; true when the item is done.
    fn end_bulk(&mut self, cpu: usize, i: u64, nlines: u64) -> bool {
        if i < nlines {
            self.cpus[cpu].pos = i;
            return false;
        }
        self.cpus[cpu].pos = 0;
        self.cpus[cpu].started = false;
        // A string instruction's stores have all issued, a clzero loop's
        // too (no-op for other kinds).
        self.machine.string_end(cpu);
        self.machine.set_clzero(cpu, false);
        true
    }

    /// A copy-on-write install that lost the race also keeps its mapping of
    /// the old page: the `PutPage` queued right after the install goes.
    fn drop_put_of_replaced(&mut self, cpu: usize) {
        if let Some(Work::PutPage { .. }) = self.cpus[cpu].work.get(1) {
            self.cpus[cpu].work.remove(1);
        }
    }
}
