//! Replay of a real program's memory trace (`kind = "trace"`): the data
//! accesses valgrind's lackey tool recorded (`valgrind --tool=lackey
//! --trace-mem=yes --log-file=FILE prog`), made by simulated tasks under
//! the kernel model. Each `L` (load), `S` (store) and `M` (modify: a load
//! then a store) record becomes one access per cache line it covers, after
//! the instructions (`I` records) the thread executed since its previous
//! data access; lines starting `==` (valgrind's messages) and `--` (its
//! debug output) are skipped.
//!
//! Threads: with `--trace-sched=yes` valgrind also writes its scheduler's
//! `--pid--   SCHED[tid]:  acquired lock (...)` lines into the same file,
//! which say whose records follow. Each valgrind thread becomes a simulated
//! thread (`clone`, sharing the address space), started by the thread that
//! held the lock just before it first appeared, at that point of its own stream; a
//! thread ends at its `exiting VG_(scheduler)` line. Without these lines the
//! whole trace is one thread. valgrind ran the threads one at a time; the
//! replay runs them at once, each on its own CPU, with no ordering between
//! them but the clone (the trace has no record of locks or joins).
//!
//! Address space: the trace's addresses are the program's own. The replay
//! maps anonymous private memory at fixed addresses (`Op::MmapFixed`, as
//! `MAP_FIXED_NOREPLACE`) before the first access: either the regions the
//! config gives, or (`regions = "auto"`) every 2 MiB-aligned block a record
//! touches, adjacent blocks coalesced, found by a streaming pre-pass over the
//! file when the config is read (which also checks every line). Every page
//! is first touched by a fault; THP applies as configured. An access outside
//! every region is the simulated SIGSEGV: the run stops with an error keyed
//! `workload.regions` naming the trace's line.
//!
//! Streaming: the file is read in 64 KiB buffered chunks by one reader per
//! thread, each keeping its own position, and handed to the engine in
//! batches of `BATCH` accesses; host memory does not grow with the trace.
//! A malformed line is an error keyed `workload.trace` naming the file and
//! the line. At the end the main thread waits for the others and checks that
//! every page of every region holds what the replayed writes stored
//! (`Expect::AccessWrites`).
//!
//! What the replay leaves out: instruction fetches (the `I` records' own
//! addresses), the program's system calls (its `mmap`/`munmap`/`brk` and
//! file I/O: memory it freed stays mapped), the content of file-backed
//! pages (every page starts as zeros), and the instructions after a
//! thread's last data access.

use super::base::Workload;
use crate::error::Error;
use crate::kernel::mm::{MMAP_MIN_ADDR, TASK_SIZE};
use crate::kernel::uapi::{Expect, Recorded, Replay};
use crate::kernel::uapi::{Op, Program};
use crate::machine::ipi::CpuMask;
use crate::machine::topology::Topology;
use crate::sim::Sim;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;

fn cfg_err(key: &str, message: impl Into<String>) -> Error {
    Error::Config {
        key: key.into(),
        message: message.into(),
    }
}

/// The config key naming the trace file, and the one giving the mappings.
pub const TRACE_KEY: &str = "workload.trace";
pub const REGIONS_KEY: &str = "workload.regions";
/// Accesses handed to the engine at once: 64 Ki records of 24 bytes, so a
/// thread holds at most about 1.5 MiB of the trace.
pub const BATCH: usize = 1 << 16;
/// Longest line accepted: lackey's are under 40 bytes; a file that is not a
/// trace (or has no line breaks) fails at the first long line instead of
/// being gathered into memory.
pub const MAX_LINE: usize = 4096;
/// Largest access accepted: lackey reports an instruction's whole data
/// access (up to 512 bytes for XSAVE areas); more is not a lackey record.
pub const MAX_ACCESS: u64 = 4096;
/// Threads a trace may start.
pub const MAX_THREADS: usize = 256;
/// Bytes of regions in all: the mm keeps a shadow tag per 4 KiB page of a
/// written mapping (8 bytes), so 64 GiB costs 128 MiB of host memory.
pub const MAX_REGION_BYTES: u64 = 64 << 30;
const BLOCK_SHIFT: u32 = 21;

/// A mapping the replay makes: [start, start + len).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Region {
    pub start: u64,
    pub len: u64,
}

/// What the pre-pass found in the file.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TraceScan {
    pub lines: u64,
    pub loads: u64,
    pub stores: u64,
    pub modifies: u64,
    pub instructions: u64,
    /// Line accesses the replay makes (a modify is two; an access crossing
    /// a line boundary one per line).
    pub accesses: u64,
    /// The same per thread, in the order the threads start.
    pub thread_accesses: Vec<u64>,
    /// Distinct 4 KiB pages and 2 MiB blocks the data records touch.
    pub pages: u64,
    pub blocks: u64,
    /// Data records while no thread held valgrind's lock (after the last
    /// thread's exit line): not replayed.
    pub unowned: u64,
    pub bytes: u64,
    /// The file's modification time when the pre-pass opened it (not in
    /// the result: the same trace elsewhere gives the same bytes).
    #[serde(skip)]
    pub modified: Option<std::time::SystemTime>,
    /// A hash of the file's content, so that a changed trace is a changed
    /// config (and a new key for the result cache).
    pub digest: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct TraceConfig {
    /// The file as the config names it, and as resolved (not in the
    /// result: the same trace elsewhere gives the same bytes).
    pub trace: String,
    #[serde(skip)]
    pub path: PathBuf,
    /// `regions = "auto"` (found by the pre-pass) or given.
    pub regions_auto: bool,
    pub regions: Vec<Region>,
    /// `taskset -c`: the CPUs the process may run on (None: any); the main
    /// thread starts on the first.
    pub cpus: Option<Vec<u64>>,
    pub scan: TraceScan,
}

/// One parsed line.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Line {
    Skip,
    Instr,
    Data { kind: u8, addr: u64, size: u64 },
    Sched(Sched),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Sched {
    /// `SCHED[tid]:  acquired lock (...)`; `starting` for a new thread's
    /// first (`thread_wrapper(starting new thread)`).
    Acquire {
        tid: u32,
        starting: bool,
    },
    /// `SCHED[tid]: exiting VG_(scheduler)`.
    Exit {
        tid: u32,
    },
    Other,
}

fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &c| {
        let d = (c as char).to_digit(16)?;
        Some(acc << 4 | u64::from(d))
    })
}

fn parse_dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + u64::from(c - b'0'))
    })
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t' | b'\r', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t' | b'\r'] = s {
        s = rest;
    }
    s
}

const EXPECTED: &str = "expected a lackey record (` L addr,size`, ` S addr,size`, ` M addr,size`, `I  addr,size`; addr in hex, size in bytes) or a valgrind line (`==pid== ...`, `--pid-- ...`)";

/// Parses one line of a lackey trace; the error says what is wrong.
fn parse_line(raw: &[u8]) -> Result<Line, String> {
    let s = trim(raw);
    if s.is_empty() || s.starts_with(b"==") {
        return Ok(Line::Skip);
    }
    if s.starts_with(b"--") {
        return Ok(parse_sched(s).map_or(Line::Skip, Line::Sched));
    }
    let kind = s[0];
    if !matches!(kind, b'I' | b'L' | b'S' | b'M') || s.len() < 2 || !matches!(s[1], b' ' | b'\t') {
        return Err(EXPECTED.into());
    }
    let rest = trim(&s[1..]);
    let Some(comma) = rest.iter().position(|&c| c == b',') else {
        return Err(format!("no `,size` after the address; {EXPECTED}"));
    };
    let addr = parse_hex(&rest[..comma])
        .ok_or_else(|| format!("the address is not a hexadecimal number; {EXPECTED}"))?;
    let size = parse_dec(&rest[comma + 1..])
        .ok_or_else(|| format!("the size is not a decimal number; {EXPECTED}"))?;
    if kind == b'I' {
        return Ok(Line::Instr);
    }
    if size == 0 || size > MAX_ACCESS {
        return Err(format!(
            "an access of {size} bytes; accepted: 1 to {MAX_ACCESS}"
        ));
    }
    if addr.checked_add(size).is_none() {
        return Err(format!(
            "the access at {addr:#x} of {size} bytes wraps the address space"
        ));
    }
    Ok(Line::Data { kind, addr, size })
}

/// A valgrind `--trace-sched=yes` line, if this is one.
fn parse_sched(s: &[u8]) -> Option<Sched> {
    let text = std::str::from_utf8(s).ok()?;
    let at = text.find("SCHED[")? + 6;
    let close = text[at..].find(']')? + at;
    let tid: u32 = text[at..close].parse().ok()?;
    let rest = &text[close..];
    Some(if rest.contains("acquired lock") {
        Sched::Acquire {
            tid,
            starting: rest.contains("starting new thread"),
        }
    } else if rest.contains("exiting VG_(scheduler)") {
        Sched::Exit { tid }
    } else {
        Sched::Other
    })
}

/// Which thread's records follow, from the scheduler lines: the same state
/// machine runs in the pre-pass and in every thread's reader, so all agree
/// on the threads, their order and who starts whom.
#[derive(Clone, Debug)]
struct Threads {
    /// valgrind thread id -> the replay thread (stream) now using it
    /// (valgrind reuses an exited thread's id).
    live: BTreeMap<u32, usize>,
    /// The stream whose records follow; None after its exit line.
    owner: Option<usize>,
    streams: usize,
    /// Whether the main thread's valgrind id is known (the first scheduler line names it).
    main_named: bool,
}

enum Step {
    None,
    Start { stream: usize, parent: usize },
    End(usize),
}

impl Threads {
    fn new() -> Threads {
        Threads {
            live: BTreeMap::new(),
            owner: Some(0),
            streams: 1,
            main_named: false,
        }
    }

    fn is_live(&self, s: usize) -> bool {
        self.live.values().any(|&v| v == s) || (!self.main_named && s == 0)
    }

    fn sched(&mut self, ev: Sched) -> Result<Step, String> {
        match ev {
            Sched::Acquire { tid, .. } if !self.main_named => {
                self.main_named = true;
                self.live.insert(tid, 0);
                self.owner = Some(0);
                Ok(Step::None)
            }
            Sched::Acquire { tid, starting } if starting || !self.live.contains_key(&tid) => {
                // valgrind runs a new thread when its creator next gives up
                // the lock, usually soon after clone(): the last holder is
                // taken to have started it (if it has exited, the lowest
                // live thread, so that a live task makes the clone).
                let parent = match self.owner.filter(|&o| self.is_live(o)) {
                    Some(o) => o,
                    None => *self.live.values().min().ok_or_else(|| {
                        format!("thread {tid} starts after every thread has exited")
                    })?,
                };
                if self.streams >= MAX_THREADS {
                    return Err(format!("more than {MAX_THREADS} threads"));
                }
                let stream = self.streams;
                self.streams += 1;
                self.live.insert(tid, stream);
                self.owner = Some(stream);
                Ok(Step::Start { stream, parent })
            }
            Sched::Acquire { tid, .. } => {
                self.owner = self.live.get(&tid).copied();
                Ok(Step::None)
            }
            Sched::Exit { tid } => match self.live.remove(&tid) {
                Some(s) => {
                    if self.owner == Some(s) {
                        self.owner = None;
                    }
                    Ok(Step::End(s))
                }
                None => Ok(Step::None),
            },
            Sched::Other => Ok(Step::None),
        }
    }
}

/// A trace file read line by line in bounded memory, from a byte offset.
struct Lines {
    r: BufReader<File>,
    buf: Vec<u8>,
    /// The number of the line in `buf` (1-based).
    line: u64,
    /// The byte offset just past the line in `buf`.
    offset: u64,
    path: Arc<str>,
    /// For a replay's reader: the file's length and modification time when
    /// the pre-pass read it. At the end of the file both must still hold,
    /// else the replay read a file that changed under it (a trace cut
    /// short at a line boundary reads as a shorter, valid trace).
    expect: Option<(u64, Option<std::time::SystemTime>)>,
}

impl Lines {
    fn open(path: &std::path::Path, offset: u64, line: u64) -> Result<Lines, Error> {
        let shown: Arc<str> = path.display().to_string().into();
        let mut f = File::open(path).map_err(|e| cfg_err(TRACE_KEY, format!("{shown}: {e}")))?;
        if offset > 0 {
            f.seek(SeekFrom::Start(offset))
                .map_err(|e| cfg_err(TRACE_KEY, format!("{shown}: {e}")))?;
        }
        Ok(Lines {
            r: BufReader::with_capacity(64 << 10, f),
            buf: Vec::with_capacity(128),
            line,
            offset,
            path: shown,
            expect: None,
        })
    }

    /// This reader of a replay ends at the file's end as the pre-pass
    /// read it (`scan`).
    fn expecting(mut self, scan: &TraceScan) -> Lines {
        self.expect = Some((scan.bytes, scan.modified));
        self
    }

    /// At the end of the file: whether it is the file the pre-pass read.
    fn check_unchanged(&self) -> Result<(), Error> {
        self.unchanged(self.offset == self.expect.map_or(0, |(len, _)| len))
    }

    /// Whether the file is still as the pre-pass read it (`at_end`: and
    /// this reader ended where it did).
    fn unchanged(&self, at_end: bool) -> Result<(), Error> {
        let Some((len, modified)) = self.expect else {
            return Ok(());
        };
        let meta = self.r.get_ref().metadata().ok();
        let now_len = meta.as_ref().map(|m| m.len());
        let now_modified = meta.and_then(|m| m.modified().ok());
        if !at_end || now_len != Some(len) || now_modified != modified {
            return Err(cfg_err(
                TRACE_KEY,
                format!(
                    "{} changed while it was replayed ({len} bytes when it was read first, {} now{}): a replay needs the file to stay as it is",
                    self.path,
                    now_len.map_or("unknown".to_string(), |n| format!("{n} bytes")),
                    if now_modified != modified { ", modified since" } else { "" }
                ),
            ));
        }
        Ok(())
    }

    fn err(&self, what: impl std::fmt::Display) -> Error {
        // A line the pre-pass read whole but the replay cannot: the file
        // was rewritten under it, and that is what to say.
        if let Err(changed) = self.unchanged(true) {
            return changed;
        }
        cfg_err(
            TRACE_KEY,
            format!("{} line {}: {what}", self.path, self.line),
        )
    }

    /// The next line (without its line break), or None at the end.
    fn next(&mut self) -> Result<Option<&[u8]>, Error> {
        self.buf.clear();
        loop {
            let avail = match self.r.fill_buf() {
                Ok(a) => a,
                Err(e) => {
                    self.line += 1;
                    return Err(self.err(e));
                }
            };
            if avail.is_empty() {
                if self.buf.is_empty() {
                    self.check_unchanged()?;
                    return Ok(None);
                }
                break;
            }
            match avail.iter().position(|&c| c == b'\n') {
                Some(i) => {
                    self.buf.extend_from_slice(&avail[..i]);
                    self.r.consume(i + 1);
                    self.offset += i as u64 + 1;
                    break;
                }
                None => {
                    let n = avail.len();
                    self.buf.extend_from_slice(avail);
                    self.r.consume(n);
                    self.offset += n as u64;
                }
            }
            if self.buf.len() > MAX_LINE {
                self.line += 1;
                return Err(self.err(format!(
                    "a line longer than {MAX_LINE} bytes: not a lackey trace"
                )));
            }
        }
        self.line += 1;
        if self.buf.len() > MAX_LINE {
            return Err(self.err(format!(
                "a line longer than {MAX_LINE} bytes: not a lackey trace"
            )));
        }
        Ok(Some(&self.buf))
    }
}

/// The cache lines [first, last] an access covers.
fn lines_of(addr: u64, size: u64) -> (u64, u64) {
    (addr >> 6, (addr + size - 1) >> 6)
}

/// The streaming pre-pass: checks every line and counts what the replay
/// will do; with `auto`, the 2 MiB blocks touched give the regions.
pub fn scan(path: &std::path::Path) -> Result<(TraceScan, Vec<Region>), Error> {
    let mut l = Lines::open(path, 0, 0)?;
    let mut s = TraceScan {
        thread_accesses: vec![0],
        modified: l.r.get_ref().metadata().and_then(|m| m.modified()).ok(),
        ..TraceScan::default()
    };
    let mut th = Threads::new();
    // Per touched 2 MiB block, a bitmap of its 512 pages: 64 bytes a block,
    // so even a 1 GiB footprint is 32 KiB of pre-pass state.
    let mut blocks: BTreeMap<u64, [u64; 8]> = BTreeMap::new();
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    while let Some(raw) = l.next()? {
        for c in raw.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(0x5851_F42D_4C95_7F2D);
        }
        h = (h ^ 0x0A).wrapping_mul(0x5851_F42D_4C95_7F2D);
        match parse_line(raw).map_err(|m| l.err(m))? {
            Line::Skip => {}
            Line::Instr => s.instructions += 1,
            Line::Sched(ev) => {
                if let Step::Start { .. } = th.sched(ev).map_err(|m| l.err(m))? {
                    s.thread_accesses.push(0);
                }
            }
            Line::Data { kind, addr, size } => {
                match kind {
                    b'L' => s.loads += 1,
                    b'S' => s.stores += 1,
                    _ => s.modifies += 1,
                }
                let Some(owner) = th.owner else {
                    s.unowned += 1;
                    continue;
                };
                let (first, last) = lines_of(addr, size);
                let n = (last - first + 1) * if kind == b'M' { 2 } else { 1 };
                s.accesses += n;
                s.thread_accesses[owner] += n;
                let mut page = addr >> 12;
                while page <= (addr + size - 1) >> 12 {
                    let b = blocks.entry(page >> 9).or_default();
                    b[(page as usize >> 6) & 7] |= 1 << (page & 63);
                    page += 1;
                }
            }
        }
    }
    s.lines = l.line;
    s.bytes = l.offset;
    s.digest = format!("{h:016x}");
    s.blocks = blocks.len() as u64;
    s.pages = blocks
        .values()
        .map(|b| b.iter().map(|w| u64::from(w.count_ones())).sum::<u64>())
        .sum();
    // Adjacent blocks coalesce into one mapping, as the program's own
    // mappings would be one VMA; the first 64 KiB stay unmapped
    // (vm.mmap_min_addr), so a null-page access faults.
    let mut regions: Vec<Region> = Vec::new();
    for &b in blocks.keys() {
        let start = (b << BLOCK_SHIFT).max(MMAP_MIN_ADDR);
        let end = ((b + 1) << BLOCK_SHIFT).min(TASK_SIZE);
        if start >= end {
            continue;
        }
        match regions.last_mut() {
            Some(r) if r.start + r.len == start => r.len = end - r.start,
            _ => regions.push(Region {
                start,
                len: end - start,
            }),
        }
    }
    Ok((s, regions))
}

/// A thread about to be started: where its reader starts.
#[derive(Clone, Debug)]
struct ChildStart {
    stream: usize,
    threads: Threads,
    offset: u64,
    line: u64,
}

enum Chunk {
    Records(Vec<Recorded>),
    Clone(ChildStart),
    End,
}

/// One thread's reader: its own records, in order, in batches.
struct Reader {
    lines: Lines,
    stream: usize,
    threads: Threads,
    /// Instructions since this thread's previous data access.
    instrs: u64,
    /// An event met while gathering a batch, handed out after it.
    stashed: Option<Chunk>,
    ended: bool,
}

impl Reader {
    fn next(&mut self) -> Result<Chunk, Error> {
        if let Some(c) = self.stashed.take() {
            return Ok(c);
        }
        if self.ended {
            return Ok(Chunk::End);
        }
        let mut recs = Vec::new();
        loop {
            let Some(raw) = self.lines.next()? else {
                self.ended = true;
                break;
            };
            let mine = self.threads.owner == Some(self.stream);
            // Another thread's records are skipped unparsed (the pre-pass
            // checked them); scheduler lines matter to every reader.
            let first = trim(raw).first().copied();
            if !mine && matches!(first, Some(b'I' | b'L' | b'S' | b'M')) {
                continue;
            }
            let parsed = parse_line(raw).map_err(|m| self.lines.err(m))?;
            match parsed {
                Line::Skip => {}
                Line::Instr => self.instrs += 1,
                Line::Data { kind, addr, size } => {
                    let (first, last) = lines_of(addr, size);
                    for l in first..=last {
                        // The line's first byte, or the access's own address in its first line.
                        let a = if l == first { addr } else { l << 6 };
                        let writes: &[bool] = match kind {
                            b'L' => &[false],
                            b'S' => &[true],
                            _ => &[false, true],
                        };
                        for &write in writes {
                            // More than 2^32 - 1 instructions between two
                            // accesses carry over to the next one.
                            let n = self.instrs.min(u64::from(u32::MAX));
                            self.instrs -= n;
                            recs.push(Recorded {
                                addr: a,
                                instrs: n as u32,
                                write,
                                line: self.lines.line,
                            });
                        }
                    }
                    if recs.len() >= BATCH {
                        break;
                    }
                }
                Line::Sched(ev) => match self.threads.sched(ev).map_err(|m| self.lines.err(m))? {
                    Step::Start { stream, parent } if parent == self.stream => {
                        let mut threads = self.threads.clone();
                        threads.owner = Some(stream);
                        let c = Chunk::Clone(ChildStart {
                            stream,
                            threads,
                            offset: self.lines.offset,
                            line: self.lines.line,
                        });
                        if recs.is_empty() {
                            return Ok(c);
                        }
                        self.stashed = Some(c);
                        break;
                    }
                    Step::End(s) if s == self.stream => {
                        self.ended = true;
                        break;
                    }
                    _ => {}
                },
            }
        }
        if recs.is_empty() {
            Ok(Chunk::End)
        } else {
            Ok(Chunk::Records(recs))
        }
    }
}

/// One replayed thread. The main one maps the regions first; each, at its
/// end, waits for the threads it started and checks every region.
struct TraceProgram {
    cfg: Arc<TraceConfig>,
    reader: Option<Reader>,
    main: bool,
    phase: Phase,
    seed: u64,
    /// The thread to start at the `Op::Clone` just issued.
    child: Option<ChildStart>,
    source: Arc<str>,
}

/// Where a thread is: what its next op is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// The main thread maps region `i` (having asked for region `i - 1`).
    Map(usize),
    /// The replay proper, after the start mark.
    Start,
    Replay,
    /// The stream has ended: wait for the threads this one started.
    Wait,
    /// Check region `i`.
    Check(usize),
    Exit,
}

impl TraceProgram {
    fn fail(&mut self, e: Error) -> Op {
        self.phase = Phase::Exit;
        Op::Fail(e)
    }

    /// The next op of the replay proper.
    fn replay(&mut self) -> Op {
        let Some(r) = self.reader.as_mut() else {
            self.phase = Phase::Wait;
            return Op::MarkEnd;
        };
        match r.next() {
            Ok(Chunk::Records(records)) => Op::Replay(Replay {
                records,
                seed: self.seed,
                source: self.source.clone(),
                segv_key: REGIONS_KEY.into(),
            }),
            Ok(Chunk::Clone(c)) => {
                // The child's reader is opened in `fork`; a file gone since
                // is this thread's error, not a clone the program cannot make.
                if let Err(e) = Lines::open(&self.cfg.path, c.offset, c.line) {
                    return self.fail(e);
                }
                self.child = Some(c);
                Op::Clone
            }
            Ok(Chunk::End) => {
                self.reader = None;
                self.phase = Phase::Wait;
                Op::MarkEnd
            }
            Err(e) => self.fail(e),
        }
    }
}

impl Program for TraceProgram {
    fn next(&mut self, ret: u64) -> Op {
        let regions = &self.cfg.regions;
        match self.phase {
            Phase::Map(i) => {
                if i > 0 && ret != regions[i - 1].start {
                    let r = regions[i - 1];
                    return self.fail(cfg_err(
                        REGIONS_KEY,
                        format!(
                            "mmap(MAP_FIXED_NOREPLACE) of [{:#x}, {:#x}) failed with errno {}",
                            r.start,
                            r.start + r.len,
                            ret.wrapping_neg()
                        ),
                    ));
                }
                match regions.get(i) {
                    Some(r) => {
                        let op = Op::MmapFixed {
                            addr: r.start,
                            len: r.len,
                        };
                        self.phase = Phase::Map(i + 1);
                        op
                    }
                    None => {
                        self.phase = Phase::Replay;
                        Op::MarkStart
                    }
                }
            }
            Phase::Start => {
                self.phase = Phase::Replay;
                Op::MarkStart
            }
            Phase::Replay => self.replay(),
            Phase::Wait => {
                self.phase = Phase::Check(0);
                Op::Wait
            }
            // Each task checks every region, as every workload's tasks do;
            // the check is untimed, so one made while other threads still
            // write finds frames and shadow in agreement all the same.
            Phase::Check(i) => match regions.get(i) {
                Some(r) => {
                    let op = Op::Check {
                        start: r.start,
                        len: r.len,
                        expect: Expect::AccessWrites,
                    };
                    self.phase = Phase::Check(i + 1);
                    op
                }
                None => {
                    self.phase = Phase::Exit;
                    Op::Exit
                }
            },
            Phase::Exit => Op::Exit,
        }
    }

    fn total_bytes(&self) -> u64 {
        // Every thread's accesses (threads are counted by the program that starts them).
        if self.main {
            self.cfg.scan.accesses * 8
        } else {
            0
        }
    }

    fn fork(&self) -> Option<Box<dyn Program>> {
        let c = self.child.clone()?;
        let lines = Lines::open(&self.cfg.path, c.offset, c.line)
            .ok()?
            .expecting(&self.cfg.scan);
        Some(Box::new(TraceProgram {
            cfg: self.cfg.clone(),
            reader: Some(Reader {
                lines,
                stream: c.stream,
                threads: c.threads,
                instrs: 0,
                stashed: None,
                ended: false,
            }),
            main: false,
            phase: Phase::Start,
            seed: self.seed,
            child: None,
            source: self.source.clone(),
        }))
    }
}

/// The workload as configured (`kind = "trace"`).
pub struct TraceWorkload<'a>(pub &'a TraceConfig);

impl Workload for TraceWorkload<'_> {
    fn node_bytes(&self, _topo: &Topology, _nr_cpus: usize) -> u64 {
        // Each thread's memory comes from its CPU's node; any node may have
        // to hold all of it, as huge pages (whole touched blocks) at worst.
        super::base::with_headroom(&[self.0.scan.blocks << BLOCK_SHIFT])
    }

    fn spawn(&self, sim: &mut Sim, seed: u64) -> Result<(), Error> {
        let c = self.0;
        let lines = Lines::open(&c.path, 0, 0)?.expecting(&c.scan);
        let source: Arc<str> = c.path.display().to_string().into();
        let prog = TraceProgram {
            cfg: Arc::new(c.clone()),
            reader: Some(Reader {
                lines,
                stream: 0,
                threads: Threads::new(),
                instrs: 0,
                stashed: None,
                ended: false,
            }),
            main: true,
            phase: Phase::Map(0),
            seed: seed ^ 0x7452_6163_6552_6570,
            child: None,
            source,
        };
        match &c.cpus {
            Some(cpus) => {
                let mut mask = CpuMask::empty();
                for &cpu in cpus {
                    mask.set(cpu as usize);
                }
                sim.spawn_bound(Box::new(prog), cpus[0] as usize, mask);
            }
            None => {
                sim.spawn(Box::new(prog), 0);
            }
        }
        Ok(())
    }

    fn scale_text(&self) -> String {
        let c = self.0;
        let s = &c.scan;
        format!(
            "trace: {} ({} lines, {} data records, {} line accesses, {} instructions, {} thread(s)), {} pages touched in {} region(s) of {:.1} MiB",
            c.trace,
            s.lines,
            s.loads + s.stores + s.modifies,
            s.accesses,
            s.instructions,
            s.thread_accesses.len(),
            s.pages,
            c.regions.len(),
            c.regions.iter().map(|r| r.len).sum::<u64>() as f64 / (1u64 << 20) as f64
        )
    }

    /// What was replayed, per thread, and the main thread's elapsed time.
    fn report(&self, sim: &Sim, r: &mut Value) {
        let s = &self.0.scan;
        let hz = sim.machine.freq_mhz as f64 * 1e6;
        let replayed: u64 = sim
            .tasks
            .iter()
            .filter(|t| !t.is_kthread())
            .map(|t| t.access.reads + t.access.writes)
            .sum();
        r["trace_accesses"] = json!(replayed);
        r["trace_loads"] = json!(s.loads);
        r["trace_stores"] = json!(s.stores);
        r["trace_modifies"] = json!(s.modifies);
        r["trace_instructions"] = json!(s.instructions);
        r["trace_pages"] = json!(s.pages);
        r["trace_threads"] = json!(s.thread_accesses.len());
        let main = sim.tasks.iter().find(|t| !t.is_kthread());
        let elapsed = main
            .and_then(|t| Some(t.end? - t.start?))
            .map_or(0.0, |c| c as f64 / hz);
        r["trace_elapsed_s"] = json!(elapsed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_as_lackey_writes_them() {
        assert_eq!(parse_line(b"I  0401b771,7"), Ok(Line::Instr));
        assert_eq!(
            parse_line(b" L 1fff000770,8\r"),
            Ok(Line::Data {
                kind: b'L',
                addr: 0x1f_ff00_0770,
                size: 8
            })
        );
        assert_eq!(parse_line(b"==8845== Lackey"), Ok(Line::Skip));
        assert_eq!(parse_line(b""), Ok(Line::Skip));
        assert_eq!(
            parse_line(
                b"--8845--   SCHED[2]:  acquired lock (thread_wrapper(starting new thread))"
            ),
            Ok(Line::Sched(Sched::Acquire {
                tid: 2,
                starting: true
            }))
        );
        assert_eq!(
            parse_line(b"--8845--   SCHED[3]: exiting VG_(scheduler)"),
            Ok(Line::Sched(Sched::Exit { tid: 3 }))
        );
        assert_eq!(parse_line(b"--8845-- a debug line"), Ok(Line::Skip));
        for bad in [
            &b" Q 10,8"[..],
            b" L10,8",
            b" L 10",
            b" L 10,",
            b" L ,8",
            b" L 12345678901234567,8",
            b" L 10,9999",
        ] {
            assert!(
                parse_line(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn threads_start_from_the_lock_holder_and_ids_are_reused() {
        let mut th = Threads::new();
        let acq = |tid, starting| Sched::Acquire { tid, starting };
        assert!(matches!(th.sched(acq(1, true)), Ok(Step::None)));
        assert!(matches!(
            th.sched(acq(2, true)),
            Ok(Step::Start {
                stream: 1,
                parent: 0
            })
        ));
        // Thread 2 (stream 1) holds the lock and starts thread 3.
        assert!(matches!(
            th.sched(acq(3, true)),
            Ok(Step::Start {
                stream: 2,
                parent: 1
            })
        ));
        assert!(matches!(th.sched(Sched::Exit { tid: 2 }), Ok(Step::End(1))));
        assert_eq!(th.owner, Some(2));
        assert!(matches!(th.sched(Sched::Exit { tid: 3 }), Ok(Step::End(2))));
        // The holder has exited: the lowest live thread starts the next,
        // which reuses id 2 as a new stream.
        assert!(matches!(
            th.sched(acq(2, true)),
            Ok(Step::Start {
                stream: 3,
                parent: 0
            })
        ));
        assert!(matches!(th.sched(Sched::Exit { tid: 1 }), Ok(Step::End(0))));
        assert!(matches!(th.sched(Sched::Exit { tid: 2 }), Ok(Step::End(3))));
        assert!(
            th.sched(acq(4, true)).is_err(),
            "no thread left to start it"
        );
    }
}
