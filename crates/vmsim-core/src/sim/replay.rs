//! Replay of recorded accesses: runs a task's `Op::Replay` batch (a trace of
//! a real program, workload/trace.rs) through the same steps as the access
//! engine (sim/access.rs): each access walks the page table when it leaves
//! the page it is on, goes through the TLB (checked against the page
//! table), takes a fault where the entry does not allow it (the fault's
//! work runs, then the same access is retried) and is one line access to
//! the machine, after the instructions the program executed since its
//! previous access. It is kept apart from the pattern engine because each
//! record brings its own address, kind and instruction count, and its
//! source line for errors, where an `Access` is a seeded description.
//!
//! Invariants: records run in order, each exactly once (a faulting one is
//! retried, not skipped); a write stores `store_value(seed, vpn)` into its
//! line and into the mm's shadow, so the untimed `Expect::AccessWrites`
//! check holds the frames to what was written. An access outside every
//! mapping is the simulated SIGSEGV: the run stops with a config error
//! keyed by the batch's `segv_key`, naming the trace's file and line.
//! Loads are timed as dependent ones (the trace does not say which loads
//! wait for earlier ones; the hardware model treats loads outside a
//! sequential stream so, as for the access engine).

use super::replay_run::ReplayRun;
use super::translate::Xlate;
use super::*;

impl Sim {
    pub(crate) fn exec_replay(&mut self, cpu: usize, t: usize, deadline: u64, mut r: ReplayRun) {
        if self.win_part.is_some() {
            // The windowed loop's parallel phase runs the pattern loops
            // only (window.rs `phase1_task`); a replay waits for the serial phase.
            self.tasks[t].cur = Some(Cur::Replay(r));
            self.parked = Some(window_stats::Park::Schedule);
            return;
        }
        let mm = self.tasks[t].user_mm();
        let asid = self.kernel.mms[mm].asid;
        let width = self.machine.issue_width;
        while r.done < r.b.records.len() && self.machine.cpus[cpu].clock < deadline {
            let rec = r.b.records[r.done];
            let (va, write) = (rec.addr, rec.write);
            let vpage = va >> 12;
            if vpage != r.page || r.gen != self.kernel.mms[mm].generation || (write && !r.writable)
            {
                match self.translate(cpu, t, mm, asid, va, write) {
                    Xlate::Stale => return,
                    Xlate::Mapped(tr) => {
                        (r.pfn, r.page, r.gen, r.writable) =
                            (tr.pfn, vpage, self.kernel.mms[mm].generation, tr.writable);
                    }
                    Xlate::Fault => {
                        r.page = u64::MAX;
                        let outside = self.kernel.mms[mm].find_vma(va).is_none();
                        let (line, source, key) =
                            (rec.line, r.b.source.clone(), r.b.segv_key.clone());
                        self.tasks[t].cur = Some(Cur::Replay(r));
                        if !self.fault(cpu, t, va, write) && outside {
                            // The kernel found no VMA (do_user_addr_fault's
                            // bad_area): the program would get SIGSEGV.
                            self.error = Some(Error::Config {
                                key: key.to_string(),
                                message: format!(
                                    "simulated SIGSEGV: {source} line {line}: the {} at {va:#x} is outside every mapping",
                                    if write { "store" } else { "load" }
                                ),
                            });
                        }
                        return;
                    }
                }
            }
            let lip = (va >> 6) & 63;
            let t0 = self.machine.cpus[cpu].clock;
            let kind = if write {
                AccessKind::Store
            } else {
                AccessKind::Load
            };
            let instrs = u64::from(rec.instrs);
            let issue = instrs.div_ceil(width).max(1);
            self.machine
                .access(cpu, (r.pfn << 6) | lip, kind, false, issue);
            self.machine.advance(cpu, 0, instrs);
            let st = &mut self.tasks[t].access;
            st.latency.record(self.machine.cpus[cpu].clock - t0);
            if write {
                st.writes += 1;
                let v = store_value(r.b.seed, vpage);
                self.kernel.mem.alloc.store_line(r.pfn, lip, v);
                self.kernel.mms[mm].shadow_store(va, lip, v);
            } else {
                st.reads += 1;
            }
            self.tasks[t].bytes += 8;
            r.done += 1;
        }
        if r.done < r.b.records.len() {
            self.tasks[t].cur = Some(Cur::Replay(r));
        }
    }
}
