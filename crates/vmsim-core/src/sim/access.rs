//! The access engine: runs a task's `Op::Access` (kernel/uapi.rs) — `count`
//! word accesses over a range in a pattern (sequential, strided, uniform with
//! or without replacement, Zipf or normal over pages; seeded), a read/write
//! mix, the workload's own instruction cost per access, dependent or not.
//! Each access walks the page table when it leaves the page it is on
//! (setting accessed/dirty bits),
//! goes through the TLB (checked against the page table), takes a fault
//! where the entry does not allow it (the fault's work runs, then the same
//! access is retried), and is one line access to the machine. Per task it
//! counts reads and writes and keeps a log2 histogram of access latencies
//! (cycles from issue to the core moving on: the full miss latency for a
//! dependent access, the issue and any stall otherwise).
//!
//! The hardware model treats every load that is not part of a sequential
//! stream as dependent, so independent random loads are timed as dependent
//! ones. A read of a never-touched anonymous page allocates and zeroes a
//! page (the shared zero page is not modelled).

use super::access_run::{AccessRun, NONE};
use super::translate::Xlate;
use super::*;
use crate::kernel::uapi::Pattern;

impl Sim {
    pub(crate) fn exec_access(&mut self, cpu: usize, t: usize, deadline: u64, mut r: AccessRun) {
        let mm = self.tasks[t].user_mm();
        let asid = self.kernel.mms[mm].asid;
        let issue =
            r.a.instr_per_access
                .div_ceil(self.machine.issue_width)
                .max(1);
        let stream = r.a.pattern == Pattern::Sequential && !r.a.dependent;
        if r.until.is_none() {
            let now = self.machine.cpus[cpu].clock;
            r.until = Some(
                r.a.until_ns
                    .map_or(u64::MAX, |ns| now + ns * self.machine.freq_mhz / 1000),
            );
        }
        let until = r.until.unwrap_or(u64::MAX);
        while r.done < r.a.count && self.machine.cpus[cpu].clock < deadline {
            if self.machine.cpus[cpu].clock >= until {
                r.done = r.a.count;
                break;
            }
            let (va, write) = if r.pending_va != NONE {
                (r.pending_va, r.pending_write)
            } else {
                let (va, write) = r.next_access();
                (r.pending_va, r.pending_write) = (va, write);
                (va, write)
            };
            let vpage = va >> 12;
            if vpage != r.page || r.gen != self.kernel.mms[mm].generation || (write && !r.writable)
            {
                if self.win_part.is_some() && vpage != r.page && !write && self.is_file_page(mm, va)
                {
                    // The reader's check of a file page reads the page cache: not in phase 1.
                    self.tasks[t].cur = Some(Cur::Access(r));
                    self.parked = Some(window_stats::Park::FilePage);
                    return;
                }
                match self.translate(cpu, t, mm, asid, va, write) {
                    Xlate::Stale => return,
                    Xlate::Mapped(tr) => {
                        if vpage != r.page && !write {
                            self.check_file_page(t, mm, va, tr.pfn);
                        }
                        (r.pfn, r.page, r.gen, r.writable) =
                            (tr.pfn, vpage, self.kernel.mms[mm].generation, tr.writable);
                    }
                    Xlate::Fault => {
                        r.page = u64::MAX;
                        self.tasks[t].cur = Some(Cur::Access(r));
                        if self.win_part.is_some() {
                            self.parked = Some(window_stats::Park::Fault);
                            return;
                        }
                        self.fault(cpu, t, va, write);
                        return;
                    }
                }
            }
            let lip = (va >> 6) & 63;
            if self.win_part.is_some() && !self.machine.is_local(cpu, (r.pfn << 6) | lip) {
                self.tasks[t].cur = Some(Cur::Access(r));
                self.parked = Some(window_stats::Park::RemoteLine);
                return;
            }
            let t0 = self.machine.cpus[cpu].clock;
            let kind = if write {
                AccessKind::Store
            } else {
                AccessKind::Load
            };
            self.machine
                .access(cpu, (r.pfn << 6) | lip, kind, stream, issue);
            self.machine.advance(cpu, 0, r.a.instr_per_access);
            let st = &mut self.tasks[t].access;
            st.latency.record(self.machine.cpus[cpu].clock - t0);
            if write {
                st.writes += 1;
                let v = store_value(r.a.seed, vpage);
                self.kernel.mem.alloc.store_line(r.pfn, lip, v);
                self.kernel.mms[mm].shadow_store(va, lip, v);
            } else {
                st.reads += 1;
            }
            self.tasks[t].bytes += 8;
            r.done += 1;
            r.pending_va = NONE;
        }
        if r.done < r.a.count {
            self.tasks[t].cur = Some(Cur::Access(r));
        }
    }
}

impl Sim {
    /// Whether `va` lies in a file mapping of `mm`.
    fn is_file_page(&self, mm: usize, va: u64) -> bool {
        self.kernel.mms[mm]
            .find_vma(va)
            .is_some_and(|v| matches!(v.kind, crate::kernel::mm::VmaKind::FileShared { .. }))
    }

    /// The reader's check of a page of a file mapping as it starts reading
    /// it: the frame must be the page cache's folio for (file, index) and
    /// hold that page's content (`file_page_tag`). Untimed bookkeeping.
    fn check_file_page(&mut self, t: usize, mm: usize, va: u64, pfn: u64) {
        let Some(vma) = self.kernel.mms[mm].find_vma(va) else {
            return;
        };
        let crate::kernel::mm::VmaKind::FileShared { ino, pgoff } = vma.kind else {
            return;
        };
        let index = pgoff + ((va - vma.start) >> 12);
        let want = crate::kernel::filemap::file_page_tag(ino, index);
        let cached = self.kernel.find_get_page(ino, index);
        let got = self.kernel.mem.alloc.tag(pfn);
        let task = &mut self.tasks[t];
        task.pages_checked += 1;
        if cached != Some(pfn) || got != want {
            task.bad_pages += 1;
            if task.first_bad.is_none() {
                task.first_bad = Some(format!(
                    "file {ino} page {index} at {va:#x}: frame {pfn:#x} with tag {got:#018x}; the page cache holds {cached:?}, the file reads {want:#018x}"
                ));
            }
        }
    }
}
