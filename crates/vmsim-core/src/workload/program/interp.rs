//! The interpreter of the workload language: the program compiled once to a
//! flat list of instructions (`Code`), shared by every task, and one task's
//! position in it (`Interp`, a `Program`).
//!
//! Invariants: an operation whose result the program needs (an mmap's
//! address, fork's pid, the clock) is always the last one handed out before
//! that result arrives, so `pending` names what the next `ret` is; a fork
//! body and each task's steps end in `End`, which checks the task's own
//! mappings and exits; a loop's body leaves the mappings as it found them
//! (config/program.rs checks this), so the mapped slots at `LoopEnd` are
//! those at `LoopBegin`.

use super::spec::{AccessCount, Backing, Mark, ProgramConfig, Step};
use crate::kernel::uapi::{Access, Expect, Op, Program};
use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Clone, Debug)]
enum Ins {
    Mmap {
        slot: usize,
        len: u64,
        backing: Kind,
        populate: bool,
    },
    Munmap {
        slot: usize,
    },
    Dontneed {
        slot: usize,
        offset: u64,
        len: u64,
    },
    Hugepage {
        slot: usize,
        huge: bool,
    },
    Mprotect {
        slot: usize,
        write: bool,
    },
    Access {
        slot: usize,
        offset: u64,
        access: Access,
        passes: Option<u64>,
        phase: u32,
    },
    Fork {
        count: u64,
        thread: bool,
        body: usize,
    },
    Wait,
    Barrier {
        id: u32,
        tasks: u64,
    },
    Sleep {
        ns: u64,
    },
    LoopBegin {
        end: usize,
        count: Option<u64>,
        duration_ns: Option<u64>,
        phase: u32,
    },
    LoopEnd,
    Clock(Mark),
    Roi(Mark, u64),
    End,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Anon,
    Hugetlb(u32),
    File(usize),
}

/// The compiled program: every task's steps, then every fork body.
pub struct Code {
    ins: Vec<Ins>,
    /// Where each task's steps begin.
    entry: Vec<usize>,
    /// Whether each task marks its own timed interval (else it is timed from
    /// its first step to its last).
    clocked: Vec<bool>,
    nr_slots: usize,
    /// Inode of each of the program's files.
    inos: Vec<usize>,
    /// Bytes each task's instance and its children access (progress).
    bytes: Vec<u64>,
}

impl Code {
    pub fn compile(p: &ProgramConfig, inos: Vec<usize>) -> Code {
        let mut c = Code {
            ins: Vec::new(),
            entry: Vec::new(),
            clocked: Vec::new(),
            nr_slots: p.maps.len(),
            inos,
            bytes: p
                .tasks
                .iter()
                .map(|t| super::spec::work(&t.steps, 1).0)
                .collect(),
        };
        let mut bodies: Vec<(usize, Vec<Step>)> = Vec::new();
        for t in &p.tasks {
            c.entry.push(c.ins.len());
            let mut clocked = false;
            super::spec::walk(&t.steps, &mut |s| {
                clocked |= matches!(s, Step::Clock { .. })
            });
            c.clocked.push(clocked);
            c.list(&t.steps, &mut bodies);
            c.ins.push(Ins::End);
        }
        // Fork bodies go after the tasks, each patched into its Fork.
        while let Some((at, steps)) = bodies.pop() {
            let body = c.ins.len();
            if let Ins::Fork { body: b, .. } = &mut c.ins[at] {
                *b = body;
            }
            c.list(&steps, &mut bodies);
            c.ins.push(Ins::End);
        }
        c
    }

    fn list(&mut self, steps: &[Step], bodies: &mut Vec<(usize, Vec<Step>)>) {
        for s in steps {
            match s {
                Step::Mmap {
                    slot,
                    size,
                    backing,
                    populate,
                    ..
                } => self.ins.push(Ins::Mmap {
                    slot: *slot,
                    len: *size,
                    backing: match backing {
                        Backing::Anon => Kind::Anon,
                        Backing::Hugetlb { shift } => Kind::Hugetlb(*shift),
                        Backing::File { index, .. } => Kind::File(*index),
                    },
                    populate: *populate,
                }),
                Step::Munmap { slot, .. } => self.ins.push(Ins::Munmap { slot: *slot }),
                Step::Mprotect { slot, write, .. } => self.ins.push(Ins::Mprotect {
                    slot: *slot,
                    write: *write,
                }),
                Step::Madvise {
                    slot,
                    offset,
                    len,
                    advice,
                    ..
                } => self.ins.push(match advice.as_str() {
                    "dontneed" => Ins::Dontneed {
                        slot: *slot,
                        offset: *offset,
                        len: *len,
                    },
                    a => Ins::Hugepage {
                        slot: *slot,
                        huge: a == "hugepage",
                    },
                }),
                Step::Access(a) => {
                    let (count, until_ns, passes) = match a.count {
                        AccessCount::Passes(n) => (n * (a.len / 8).max(1), None, Some(n)),
                        AccessCount::Accesses(n) => (n, None, None),
                        AccessCount::DurationNs(ns) => (u64::MAX, Some(ns), None),
                    };
                    self.ins.push(Ins::Access {
                        slot: a.slot,
                        offset: a.offset,
                        access: Access {
                            start: 0,
                            len: a.len,
                            pattern: a.how,
                            count,
                            write_permille: a.write_permille,
                            instr_per_access: a.instr_per_access,
                            dependent: a.dependent,
                            seed: 0,
                            until_ns,
                        },
                        passes: if a.is_write_pass() { passes } else { None },
                        phase: a.phase_id,
                    })
                }
                Step::Fork { count, steps } | Step::Clone { count, steps } => {
                    bodies.push((self.ins.len(), steps.clone()));
                    self.ins.push(Ins::Fork {
                        count: *count,
                        thread: matches!(s, Step::Clone { .. }),
                        body: 0,
                    });
                }
                Step::Wait => self.ins.push(Ins::Wait),
                Step::Barrier { id, tasks, .. } => self.ins.push(Ins::Barrier {
                    id: *id,
                    tasks: *tasks,
                }),
                Step::Sleep { ns } => self.ins.push(Ins::Sleep { ns: *ns }),
                Step::Repeat {
                    count,
                    duration_ns,
                    phase_id,
                    steps,
                    ..
                } => {
                    let begin = self.ins.len();
                    self.ins.push(Ins::LoopBegin {
                        end: 0,
                        count: *count,
                        duration_ns: *duration_ns,
                        phase: *phase_id,
                    });
                    self.list(steps, bodies);
                    self.ins.push(Ins::LoopEnd);
                    let end = self.ins.len();
                    if let Ins::LoopBegin { end: e, .. } = &mut self.ins[begin] {
                        *e = end;
                    }
                }
                Step::Clock { at } => self.ins.push(Ins::Clock(*at)),
                Step::Roi { at, tasks } => self.ins.push(Ins::Roi(*at, *tasks)),
            }
        }
    }
}

/// A loop being run.
#[derive(Clone, Debug)]
struct Loop {
    begin: usize,
    end: usize,
    left: Option<u64>,
    until_ns: Option<u64>,
    duration_ns: Option<u64>,
    iterations: u64,
    phase: u32,
    /// A timed loop: the clock at its last check, and how many checks in a
    /// row have read it unchanged.
    last_ns: u64,
    still: u64,
}

/// Checks in a row that a timed loop may read the same clock: its body
/// takes no simulated time, so its duration would never pass.
pub const MAX_TIMELESS_ITERATIONS: u64 = 1_000_000;

/// What the next `ret` answers.
#[derive(Clone, Debug)]
enum Pending {
    None,
    Mapped(usize, u64),
    Forked {
        count: u64,
        thread: bool,
        body: usize,
    },
    LoopStart,
    LoopCheck,
}

/// One task's run of the program.
#[derive(Clone)]
pub struct Interp {
    code: Arc<Code>,
    task: usize,
    pc: usize,
    /// Each slot's address and length while mapped (0: not mapped).
    addr: Vec<u64>,
    len: Vec<u64>,
    kind: Vec<Option<Kind>>,
    /// Slots this task checks: mapped by it, or inherited at fork or clone.
    own: Vec<bool>,
    loops: Vec<Loop>,
    queue: VecDeque<Op>,
    pending: Pending,
    forked: u64,
    seed: u64,
    ops: u64,
    /// This copy times itself from its first step (no `clock` steps).
    auto_clock: bool,
    started: bool,
    ended: bool,
}

impl Interp {
    pub fn new(code: Arc<Code>, task: usize, seed: u64) -> Interp {
        let n = code.nr_slots;
        Interp {
            pc: code.entry[task],
            auto_clock: !code.clocked[task],
            code,
            task,
            addr: vec![0; n],
            len: vec![0; n],
            kind: vec![None; n],
            own: vec![false; n],
            loops: Vec::new(),
            queue: VecDeque::new(),
            pending: Pending::None,
            forked: 0,
            seed,
            ops: 0,
            started: false,
            ended: false,
        }
    }

    /// A fresh seed for the next access run of this task.
    fn next_seed(&mut self) -> u64 {
        self.ops += 1;
        crate::rng::mix64(self.seed ^ self.ops.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// The check of slot `s`'s data (file mappings are checked page by page
    /// as they are read, by the access engine).
    fn check(&self, s: usize) -> Option<Op> {
        match self.kind[s] {
            Some(Kind::File(_)) | None => None,
            Some(_) => Some(Op::Check {
                start: self.addr[s],
                len: self.len[s],
                expect: Expect::AccessWrites,
            }),
        }
    }

    /// Takes a `ret` the program waits for.
    fn answer(&mut self, ret: u64) -> Option<Op> {
        match std::mem::replace(&mut self.pending, Pending::None) {
            Pending::None => None,
            Pending::Mapped(s, len) => {
                self.addr[s] = ret;
                self.len[s] = len;
                self.own[s] = true;
                None
            }
            Pending::Forked {
                count,
                thread,
                body,
            } => {
                if ret == 0 {
                    let k = self.forked;
                    self.seed =
                        crate::rng::mix64(self.seed ^ (k + 1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F));
                    self.ops = 0;
                    // A forked child checks its own copies; a thread checks the
                    // shared mappings too (their tags and the shadow change
                    // together, so a check while another thread writes is sound).
                    for (s, o) in self.own.iter_mut().enumerate() {
                        *o = self.addr[s] != 0;
                    }
                    self.pc = body;
                    self.loops.clear();
                    self.forked = 0;
                    self.started = false;
                    return None;
                }
                self.forked += 1;
                if self.forked < count {
                    self.pending = Pending::Forked {
                        count,
                        thread,
                        body,
                    };
                    return Some(if thread { Op::Clone } else { Op::Fork });
                }
                self.forked = 0;
                None
            }
            Pending::LoopStart => {
                let l = self.loops.last_mut().expect("a loop is running");
                l.until_ns = l.duration_ns.map(|d| ret + d);
                None
            }
            Pending::LoopCheck => {
                let l = self.loops.last_mut().expect("a loop is running");
                if ret == l.last_ns {
                    l.still += 1;
                    if l.still >= MAX_TIMELESS_ITERATIONS {
                        return Some(Op::Fail(crate::error::Error::Config {
                            key: "workload".into(),
                            message: format!(
                                "task {}: a repeat with duration_ms ran {MAX_TIMELESS_ITERATIONS} iterations without simulated time passing: its steps take no time, so its duration never passes (give it steps that do, or a count)",
                                self.task
                            ),
                        }));
                    }
                } else {
                    l.last_ns = ret;
                    l.still = 0;
                }
                let l = self.loops.last().expect("a loop is running");
                if l.until_ns.is_some_and(|u| ret >= u) {
                    self.pc = l.end;
                    let l = self.loops.pop().expect("a loop is running");
                    self.queue.push_back(Op::PhaseEnd {
                        id: l.phase,
                        iterations: l.iterations,
                    });
                } else {
                    self.pc = l.begin + 1;
                }
                None
            }
        }
    }

    /// The instruction at `pc`, as the operations it makes (queued) or the
    /// one whose answer the program needs next (returned).
    fn step(&mut self) -> Option<Op> {
        let ins = self.code.ins[self.pc].clone();
        self.pc += 1;
        match ins {
            Ins::Mmap {
                slot,
                len,
                backing,
                populate,
            } => {
                self.kind[slot] = Some(backing);
                self.pending = Pending::Mapped(slot, len);
                return Some(match backing {
                    Kind::Anon => Op::Mmap { len, populate },
                    Kind::Hugetlb(page_shift) => Op::MmapHugetlb { len, page_shift },
                    Kind::File(i) => Op::MmapFile {
                        ino: self.code.inos[i],
                        len,
                    },
                });
            }
            Ins::Munmap { slot } => {
                if let Some(c) = self.check(slot) {
                    self.queue.push_back(c);
                }
                self.queue.push_back(Op::Munmap {
                    start: self.addr[slot],
                });
                self.addr[slot] = 0;
                self.own[slot] = false;
                self.kind[slot] = None;
            }
            Ins::Dontneed { slot, offset, len } => self.queue.push_back(Op::MadviseDontneed {
                start: self.addr[slot] + offset,
                len,
            }),
            Ins::Mprotect { slot, write } => self.queue.push_back(Op::Mprotect {
                start: self.addr[slot],
                write,
            }),
            Ins::Hugepage { slot, huge } => self.queue.push_back(Op::MadviseHugepage {
                start: self.addr[slot],
                huge,
            }),
            Ins::Access {
                slot,
                offset,
                mut access,
                passes,
                phase,
            } => {
                access.start = self.addr[slot] + offset;
                access.seed = self.next_seed();
                self.queue.push_back(Op::PhaseBegin { id: phase });
                match passes {
                    Some(n) => {
                        for _ in 0..n {
                            let seed = self.next_seed();
                            self.queue.push_back(Op::WriteSeqTracked {
                                start: access.start,
                                len: access.len,
                                seed,
                                instr_per_word: access.instr_per_access,
                            });
                        }
                    }
                    None => self.queue.push_back(Op::Access(access)),
                }
                self.queue.push_back(Op::PhaseEnd {
                    id: phase,
                    iterations: 0,
                });
            }
            Ins::Fork {
                count,
                thread,
                body,
            } => {
                if count > 0 {
                    self.forked = 0;
                    self.pending = Pending::Forked {
                        count,
                        thread,
                        body,
                    };
                    return Some(if thread { Op::Clone } else { Op::Fork });
                }
            }
            Ins::Wait => self.queue.push_back(Op::Wait),
            Ins::Barrier { id, tasks } => self.queue.push_back(Op::Barrier { id, tasks }),
            Ins::Sleep { ns } => self.queue.push_back(Op::Nanosleep { ns }),
            Ins::LoopBegin {
                end,
                count,
                duration_ns,
                phase,
            } => {
                self.queue.push_back(Op::PhaseBegin { id: phase });
                if count == Some(0) {
                    self.pc = end;
                    self.queue.push_back(Op::PhaseEnd {
                        id: phase,
                        iterations: 0,
                    });
                    return None;
                }
                self.loops.push(Loop {
                    begin: self.pc - 1,
                    end,
                    left: count,
                    until_ns: None,
                    duration_ns,
                    iterations: 0,
                    phase,
                    last_ns: 0,
                    still: 0,
                });
                if duration_ns.is_some() {
                    // Read after the phase begins; `next` marks it pending.
                    self.queue.push_back(Op::ClockGettime);
                }
            }
            Ins::LoopEnd => {
                let l = self.loops.last_mut().expect("a loop is running");
                l.iterations += 1;
                if let Some(left) = &mut l.left {
                    *left -= 1;
                    if *left == 0 {
                        let l = self.loops.pop().expect("a loop is running");
                        self.queue.push_back(Op::PhaseEnd {
                            id: l.phase,
                            iterations: l.iterations,
                        });
                        return None;
                    }
                }
                if l.until_ns.is_some() {
                    self.pending = Pending::LoopCheck;
                    return Some(Op::ClockGettime);
                }
                self.pc = l.begin + 1;
            }
            Ins::Clock(Mark::Start) => self.queue.push_back(Op::MarkStart),
            Ins::Clock(Mark::End) => self.queue.push_back(Op::MarkEnd),
            Ins::Roi(Mark::Start, tasks) => self.queue.push_back(Op::RoiJoin { tasks }),
            Ins::Roi(Mark::End, _) => self.queue.push_back(Op::RoiLeave),
            Ins::End => {
                self.pc -= 1;
                if self.auto_clock {
                    self.queue.push_back(Op::MarkEnd);
                }
                for s in 0..self.addr.len() {
                    if self.own[s] && self.addr[s] != 0 {
                        if let Some(c) = self.check(s) {
                            self.queue.push_back(c);
                        }
                    }
                }
                self.queue.push_back(Op::Exit);
                self.ended = true;
            }
        }
        None
    }
}

impl Program for Interp {
    fn next(&mut self, ret: u64) -> Op {
        if let Some(op) = self.answer(ret) {
            return op;
        }
        if !self.started {
            self.started = true;
            if self.auto_clock {
                return Op::MarkStart;
            }
        }
        loop {
            // Steps that make no operation (nested empty loops) never
            // return to the engine; a stopped run ends here (the engine
            // reports it interrupted, whatever the task did).
            if crate::interrupt::requested() {
                return Op::Exit;
            }
            if let Some(op) = self.queue.pop_front() {
                if matches!(op, Op::ClockGettime) {
                    // Only a loop's start reads the clock through the queue.
                    self.pending = Pending::LoopStart;
                }
                return op;
            }
            if self.ended {
                return Op::Exit;
            }
            if let Some(op) = self.step() {
                return op;
            }
        }
    }

    /// What this task and its children will access (the forked copies'
    /// share is counted here, by the program that forks them).
    fn total_bytes(&self) -> u64 {
        self.code.bytes[self.task]
    }

    fn fork(&self) -> Option<Box<dyn Program>> {
        Some(Box::new(self.clone()))
    }

    /// A program's rate counts what it accesses in its timed interval only
    /// (a warm-up before a `clock` step is not in it).
    fn reports_timed_bytes(&self) -> bool {
        true
    }
}
