//! `workload.kind = "program"`: reads and checks a program of the workload
//! language (docs/workloads.md). Every error names the step's dotted key
//! (`workload.task[0].steps[2].size_mib`). Checked here, before anything
//! runs: each mapping is made before it is used and not made twice, no
//! access or madvise leaves its mapping, a file mapping is not written, a
//! loop leaves the mappings as it found them, names are unique. Sizes,
//! access counts and durations are multiplied by the run's scale; sleeps
//! and loop counts are not.

use super::fields::{cfg_err, quote_list, Fields};
use crate::error::Error;
use crate::kernel::uapi::Pattern;
use crate::workload::base::MIB;
use crate::workload::program::spec::{
    AccessCount, AccessStep, Backing, FileSpec, Mark, ProgramConfig, Step, TaskSpec,
};
use std::collections::BTreeMap;
use toml::Value;

pub const KEYS: &[&str] = &["task", "file"];

const OPS: &[&str] = &[
    "mmap", "munmap", "madvise", "access", "fork", "clone", "wait", "barrier", "sleep", "repeat",
    "clock", "roi", "mprotect",
];
const PATTERNS: &[&str] = &[
    "sequential",
    "strided",
    "uniform",
    "permutation",
    "normal",
    "zipf",
];

/// The widest normal spread accepted, in widths of the accessed range.
pub const MAX_SIGMA_RANGES: u64 = 10;
const MAX_INSTANCES: u64 = 4096;
const MAX_DEPTH: usize = 8;
const MAX_BYTES: u64 = 256 << 30;

/// What the checker knows of one mapping at a point of the program.
#[derive(Clone, PartialEq)]
struct Mapped {
    size: u64,
    file: bool,
    hugetlb: bool,
    /// False after `mprotect(PROT_READ)`: a write would be a SIGSEGV.
    writable: bool,
}

struct Ctx {
    scale: f64,
    maps: Vec<String>,
    files: Vec<FileSpec>,
    phases: Vec<String>,
    barriers: BTreeMap<String, (u32, u64)>,
    roi_tasks: u64,
    instances: u64,
}

impl Ctx {
    fn slot(&mut self, name: &str) -> usize {
        match self.maps.iter().position(|m| m == name) {
            Some(i) => i,
            None => {
                self.maps.push(name.to_string());
                self.maps.len() - 1
            }
        }
    }

    fn phase(&mut self, name: &str) -> u32 {
        match self.phases.iter().position(|m| m == name) {
            Some(i) => i as u32,
            None => {
                self.phases.push(name.to_string());
                (self.phases.len() - 1) as u32
            }
        }
    }
}

fn name_ok(key: &str, s: &str) -> Result<(), Error> {
    if s.is_empty()
        || s.len() > 64
        || !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(cfg_err(
            key,
            format!("{s:?} is not a name: 1 to 64 letters, digits, '_' or '-'"),
        ));
    }
    Ok(())
}

fn array(key: &str, v: Value) -> Result<Vec<Value>, Error> {
    match v {
        Value::Array(a) => Ok(a),
        other => Err(cfg_err(
            key,
            format!("expected an array of tables, got {}", other.type_str()),
        )),
    }
}

/// Bytes from `<name>_mib` or `<name>_kib` (at most one), times `scale` when
/// `scaled`, rounded down to 4 KiB.
fn size(
    f: &mut Fields,
    mib: &'static str,
    kib: &'static str,
    scale: f64,
) -> Result<Option<u64>, Error> {
    let (m, k) = (f.f64_opt(mib)?, f.f64_opt(kib)?);
    let (key, x, unit) = match (m, k) {
        (Some(_), Some(_)) => {
            return Err(cfg_err(
                f.key(kib),
                format!("give {mib} or {kib}, not both"),
            ))
        }
        (Some(x), None) => (f.key(mib), x, MIB as f64),
        (None, Some(x)) => (f.key(kib), x, 1024.0),
        (None, None) => return Ok(None),
    };
    if !(x.is_finite() && x > 0.0) {
        return Err(cfg_err(key, format!("must be a positive size, got {x}")));
    }
    let b = ((x * unit * scale) as u64) & !4095;
    if b < 4096 {
        return Err(cfg_err(
            key,
            format!("must give at least 4 KiB after scaling (got {x} x scale {scale})"),
        ));
    }
    if b > MAX_BYTES {
        return Err(cfg_err(key, "at most 256 GiB after scaling"));
    }
    Ok(Some(b))
}

fn map_name(f: &mut Fields) -> Result<String, Error> {
    let key = f.key("map");
    let m = f.string("map")?;
    name_ok(&key, &m)?;
    Ok(m)
}

fn mapped<'a>(
    f: &Fields,
    state: &'a [Option<Mapped>],
    slot: usize,
    name: &str,
) -> Result<&'a Mapped, Error> {
    state.get(slot).and_then(|m| m.as_ref()).ok_or_else(|| {
        cfg_err(
            f.key("map"),
            format!("mapping {name:?} is not mapped at this step (an earlier `mmap` of this task, or of its parent before a fork or clone, must make it)"),
        )
    })
}

/// The count keys of a step: at most one of them.
fn one_of(f: &Fields, keys: &[&'static str]) -> Result<(), Error> {
    let given: Vec<&str> = keys.iter().copied().filter(|k| f.has(k)).collect();
    if given.len() > 1 {
        return Err(cfg_err(
            f.key(given[1]),
            format!("give one of {}, not several", quote_list(keys)),
        ));
    }
    Ok(())
}

/// Where a list of steps sits: the task instances that run it (a fork
/// body's are its parent's times the children), the task's name, the list's
/// position (for default phase names) and its nesting depth.
struct At<'a> {
    inst: u64,
    task: &'a str,
    path: &'a str,
    depth: usize,
}

fn steps(
    ctx: &mut Ctx,
    key: &str,
    v: Value,
    state: &mut Vec<Option<Mapped>>,
    at: &At,
) -> Result<Vec<Step>, Error> {
    if at.depth > MAX_DEPTH {
        return Err(cfg_err(
            key,
            format!("steps nested more than {MAX_DEPTH} deep"),
        ));
    }
    let mut out = Vec::new();
    for (i, v) in array(key, v)?.into_iter().enumerate() {
        let skey = format!("{key}[{i}]");
        let mut f = Fields::from_value(&skey, v)?;
        let op = f.choice_opt("op", OPS)?.ok_or_else(|| {
            cfg_err(
                f.key("op"),
                format!("missing; accepted: {}", quote_list(OPS)),
            )
        })?;
        let here = format!("{}_{i}", at.path);
        let step = match op.as_str() {
            "mprotect" => mprotect(ctx, &mut f, state)?,
            "mmap" => mmap(ctx, &mut f, state)?,
            "munmap" => munmap(ctx, &mut f, state)?,
            "madvise" => madvise(ctx, &mut f, state)?,
            "access" => access(ctx, &mut f, state, at.task, &here)?,
            "fork" | "clone" => fork(ctx, &mut f, state, at, &here, op == "fork")?,
            "wait" => {
                f.declare(&["op"])?;
                Step::Wait
            }
            "barrier" => barrier(ctx, &mut f, at.inst)?,
            "sleep" => sleep(&mut f)?,
            "repeat" => repeat(ctx, &mut f, state, at, &here)?,
            "clock" | "roi" => mark(ctx, &mut f, op == "clock", at.inst)?,
            _ => unreachable!("choice_opt accepted only OPS"),
        };
        f.finish()?;
        out.push(step);
    }
    Ok(out)
}

fn mprotect(ctx: &mut Ctx, f: &mut Fields, state: &mut [Option<Mapped>]) -> Result<Step, Error> {
    f.declare(&["op", "map", "prot"])?;
    let map = map_name(f)?;
    let slot = ctx.slot(&map);
    let m = mapped(f, state, slot, &map)?.clone();
    if m.file || m.hugetlb {
        return Err(cfg_err(
            f.key("map"),
            "mprotect is modelled for private anonymous mappings only",
        ));
    }
    let k = f.key("prot");
    let write = match f.choice_opt("prot", &["read", "read-write"])?.as_deref() {
        Some("read") => false,
        Some(_) => true,
        None => {
            return Err(cfg_err(
                k,
                "missing; accepted: \"read\", \"read-write\" (PROT_NONE is not modelled)",
            ))
        }
    };
    state[slot] = Some(Mapped {
        writable: write,
        ..m
    });
    Ok(Step::Mprotect { map, slot, write })
}

fn mmap(ctx: &mut Ctx, f: &mut Fields, state: &mut Vec<Option<Mapped>>) -> Result<Step, Error> {
    f.declare(&[
        "op", "map", "size_mib", "size_kib", "backing", "file", "populate",
    ])?;
    let map = map_name(f)?;
    let slot = ctx.slot(&map);
    if state.len() <= slot {
        state.resize(slot + 1, None);
    }
    if state[slot].is_some() {
        return Err(cfg_err(
            f.key("map"),
            format!("mapping {map:?} is already mapped here; `munmap` it first"),
        ));
    }
    let backing = backing(f, &ctx.files)?;
    let size = match size(f, "size_mib", "size_kib", ctx.scale)? {
        Some(s) => s,
        None => match &backing {
            Backing::File { index, .. } => ctx.files[*index].size,
            _ => return Err(cfg_err(f.key("size_mib"), "missing (or size_kib)")),
        },
    };
    if let Backing::File { index, .. } = &backing {
        if size > ctx.files[*index].size {
            return Err(cfg_err(
                f.key("size_mib"),
                format!(
                    "{size} bytes is more than the file's {}",
                    ctx.files[*index].size
                ),
            ));
        }
    }
    let populate = f.bool_opt("populate")?.unwrap_or(false);
    if populate && backing != Backing::Anon {
        return Err(cfg_err(
            f.key("populate"),
            "MAP_POPULATE is modelled for anonymous mappings only",
        ));
    }
    let size = match backing {
        // The mapping is whole huge pages, as mmap(MAP_HUGETLB) rounds it.
        Backing::Hugetlb { shift } => size.div_ceil(1 << shift) << shift,
        _ => size,
    };
    state[slot] = Some(Mapped {
        size,
        file: matches!(backing, Backing::File { .. }),
        hugetlb: matches!(backing, Backing::Hugetlb { .. }),
        writable: !matches!(backing, Backing::File { .. }),
    });
    Ok(Step::Mmap {
        map,
        slot,
        size,
        backing,
        populate,
    })
}

/// An `mmap` step's `backing`, and for a file mapping its `file` among
/// `files`.
fn backing(f: &mut Fields, files: &[FileSpec]) -> Result<Backing, Error> {
    let backing = match f
        .choice_opt("backing", &["anon", "hugetlb-2m", "hugetlb-1g", "file"])?
        .as_deref()
    {
        None | Some("anon") => Backing::Anon,
        Some("hugetlb-2m") => Backing::Hugetlb { shift: 21 },
        Some("hugetlb-1g") => Backing::Hugetlb { shift: 30 },
        _ => {
            let fkey = f.key("file");
            let file = f
                .str_opt("file")?
                .ok_or_else(|| cfg_err(&fkey, "a file mapping names one of workload.file"))?;
            let index = files.iter().position(|x| x.name == file).ok_or_else(|| {
                let names: Vec<&str> = files.iter().map(|x| x.name.as_str()).collect();
                let have = if names.is_empty() {
                    "there are none".to_string()
                } else {
                    format!("files: {}", quote_list(&names))
                };
                cfg_err(&fkey, format!("no file {file:?} in workload.file ({have})"))
            })?;
            Backing::File { file, index }
        }
    };
    if !matches!(backing, Backing::File { .. }) && f.has("file") {
        return Err(cfg_err(
            f.key("file"),
            "only a mapping with backing = \"file\" names a file",
        ));
    }
    Ok(backing)
}

fn munmap(ctx: &mut Ctx, f: &mut Fields, state: &mut [Option<Mapped>]) -> Result<Step, Error> {
    f.declare(&["op", "map"])?;
    let map = map_name(f)?;
    let slot = ctx.slot(&map);
    mapped(f, state, slot, &map)?;
    state[slot] = None;
    Ok(Step::Munmap { map, slot })
}

fn madvise(ctx: &mut Ctx, f: &mut Fields, state: &[Option<Mapped>]) -> Result<Step, Error> {
    f.declare(&["op", "map", "advice", "offset_mib", "len_mib"])?;
    let map = map_name(f)?;
    let slot = ctx.slot(&map);
    let m = mapped(f, state, slot, &map)?.clone();
    let akey = f.key("advice");
    let advice = f.string("advice")?;
    match advice.as_str() {
        "dontneed" | "hugepage" | "nohugepage" => {}
        "free" | "cold" | "pageout" => {
            return Err(cfg_err(
                akey,
                format!("{advice:?} is not modelled (the kernel model has no lazy free or proactive reclaim of anonymous memory); accepted: \"dontneed\", \"hugepage\", \"nohugepage\""),
            ))
        }
        _ => {
            return Err(cfg_err(
                akey,
                format!("{advice:?} is not accepted; accepted: \"dontneed\", \"hugepage\", \"nohugepage\""),
            ))
        }
    }
    if m.file {
        return Err(cfg_err(
            f.key("map"),
            "madvise is modelled for anonymous memory only",
        ));
    }
    let (offset, len) = range(f, ctx.scale, m.size)?;
    if advice == "dontneed" {
        let huge = 2 * MIB;
        if offset % huge != 0 || (len % huge != 0 && offset + len != m.size) {
            return Err(cfg_err(
                f.key("offset_mib"),
                "the range must be whole 2 MiB units (or run to the mapping's end): cutting a huge page needs a split, which is not modelled",
            ));
        }
    } else if offset != 0 || len != m.size {
        return Err(cfg_err(
            f.key("offset_mib"),
            "MADV_HUGEPAGE and MADV_NOHUGEPAGE apply to the whole mapping here (splitting a VMA is not modelled)",
        ));
    }
    Ok(Step::Madvise {
        map,
        slot,
        advice,
        offset,
        len,
    })
}

fn access(
    ctx: &mut Ctx,
    f: &mut Fields,
    state: &[Option<Mapped>],
    task: &str,
    here: &str,
) -> Result<Step, Error> {
    f.declare(&[
        "op",
        "map",
        "offset_mib",
        "len_mib",
        "pattern",
        "stride",
        "sigma_pages",
        "zipf_s",
        "write_ratio",
        "instr_per_access",
        "dependent",
        "passes",
        "count",
        "duration_ms",
        "phase",
    ])?;
    let map = map_name(f)?;
    let slot = ctx.slot(&map);
    let m = mapped(f, state, slot, &map)?.clone();
    let (offset, len) = range(f, ctx.scale, m.size)?;
    let (pattern, how) = pattern(f, len)?;
    let wr = write_ratio(f, &m)?;
    let ikey = f.key("instr_per_access");
    let instr = f.u64_opt("instr_per_access")?.unwrap_or(1);
    if instr == 0 || instr > 1_000_000 {
        return Err(cfg_err(ikey, "must be from 1 to 1000000"));
    }
    let dependent = f.bool_opt("dependent")?.unwrap_or(false);
    let count = access_count(f, ctx.scale)?;
    let phase = phase_name(f, task, here)?;
    let phase_id = ctx.phase(&phase);
    Ok(Step::Access(AccessStep {
        map,
        slot,
        offset,
        len,
        pattern,
        how,
        count,
        write_permille: (wr * 1000.0).round() as u32,
        instr_per_access: instr,
        dependent,
        phase,
        phase_id,
    }))
}

/// An access step's `pattern` (its name and what it draws) over a range of
/// `len` bytes, with the keys of its pattern; a key of another pattern is
/// an error.
fn pattern(f: &mut Fields, len: u64) -> Result<(String, Pattern), Error> {
    let pattern = f
        .choice_opt("pattern", PATTERNS)?
        .unwrap_or_else(|| "sequential".into());
    let how = match pattern.as_str() {
        "sequential" => Pattern::Sequential,
        "strided" => {
            let k = f.key("stride");
            let stride = f
                .u64_opt("stride")?
                .ok_or_else(|| cfg_err(&k, "a strided pattern needs its stride in bytes"))?;
            if stride < 8 || stride > len {
                return Err(cfg_err(
                    k,
                    format!("must be from 8 bytes to the range's {len}"),
                ));
            }
            Pattern::Strided { stride }
        }
        "uniform" => Pattern::Uniform,
        "permutation" => Pattern::Permutation,
        "normal" => {
            let k = f.key("sigma_pages");
            let s = f.f64_opt("sigma_pages")?.ok_or_else(|| {
                cfg_err(&k, "a normal pattern needs its standard deviation in pages")
            })?;
            if !(s.is_finite() && s > 0.0) {
                return Err(cfg_err(
                    k,
                    format!("must be a positive number of pages, got {s}"),
                ));
            }
            // Draws outside the range are redrawn: at 10 range
            // widths about 1 draw in 25 lands, beyond that the
            // run spins on draws (pmbench's stdev_fraction has
            // the same bound).
            let pages = len.div_ceil(4096);
            let most = (MAX_SIGMA_RANGES * pages) as f64;
            if s > most {
                return Err(cfg_err(
                    k,
                    format!(
                        "at most {MAX_SIGMA_RANGES} times the range's {pages} \
                         pages ({most}), got {s}: a wider spread lands almost \
                         no draw in the range"
                    ),
                ));
            }
            Pattern::Normal { sigma_pages: s }
        }
        _ => {
            let k = f.key("zipf_s");
            let s = f.f64_opt("zipf_s")?.unwrap_or(0.99);
            if !(s.is_finite() && s > 0.0 && s <= 10.0) {
                return Err(cfg_err(
                    k,
                    format!("must be above 0 and at most 10, got {s}"),
                ));
            }
            Pattern::Zipf { s }
        }
    };
    for (k, p) in [
        ("stride", "strided"),
        ("sigma_pages", "normal"),
        ("zipf_s", "zipf"),
    ] {
        if f.has(k) && pattern != p {
            return Err(cfg_err(f.key(k), format!("belongs to pattern = \"{p}\"")));
        }
    }
    Ok((pattern, how))
}

/// An access step's `write_ratio`, which only a writable mapping takes
/// above 0.
fn write_ratio(f: &mut Fields, m: &Mapped) -> Result<f64, Error> {
    let wkey = f.key("write_ratio");
    let wr = f.f64_opt("write_ratio")?.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&wr) {
        return Err(cfg_err(wkey, format!("must be from 0 to 1, got {wr}")));
    }
    if wr > 0.0 && m.file {
        return Err(cfg_err(
            wkey,
            "file mappings are read-only (MAP_SHARED, PROT_READ) in the model",
        ));
    }
    if wr > 0.0 && !m.writable {
        return Err(cfg_err(
            wkey,
            "the mapping is read-only here (an earlier mprotect prot = \"read\"): the write would be a SIGSEGV",
        ));
    }
    Ok(wr)
}

/// How long an access step runs: `passes`, `count` or `duration_ms` (one
/// pass when none is given).
fn access_count(f: &mut Fields, scale: f64) -> Result<AccessCount, Error> {
    one_of(f, &["passes", "count", "duration_ms"])?;
    Ok(if let Some(p) = f.u64_opt("passes")? {
        if p == 0 || p > 1_000_000 {
            return Err(cfg_err(f.key("passes"), "must be from 1 to 1000000"));
        }
        AccessCount::Passes(p)
    } else if let Some(c) = f.u64_opt("count")? {
        if c == 0 {
            return Err(cfg_err(f.key("count"), "must be at least 1"));
        }
        AccessCount::Accesses(((c as f64 * scale) as u64).max(1))
    } else if let Some(ms) = f.f64_opt("duration_ms")? {
        AccessCount::DurationNs(duration(f, "duration_ms", ms, scale)?)
    } else {
        AccessCount::Passes(1)
    })
}

/// A `fork` (or, when not `is_fork`, a `clone`) step: its body starts from
/// the parent's mappings, and what it maps or unmaps stays its own.
fn fork(
    ctx: &mut Ctx,
    f: &mut Fields,
    state: &[Option<Mapped>],
    at: &At,
    here: &str,
    is_fork: bool,
) -> Result<Step, Error> {
    f.declare(&["op", "count", "steps"])?;
    let count = f.u64_opt("count")?.unwrap_or(1);
    let n = at.inst.saturating_mul(count);
    ctx.instances = ctx.instances.saturating_add(n);
    if count == 0 || ctx.instances > MAX_INSTANCES {
        return Err(cfg_err(
            f.key("count"),
            format!("must be at least 1, with at most {MAX_INSTANCES} tasks in all"),
        ));
    }
    let bkey = f.key("steps");
    let body = f.req("steps")?;
    let mut inner = state.to_vec();
    let at = At {
        inst: n,
        task: at.task,
        path: here,
        depth: at.depth + 1,
    };
    let body = steps(ctx, &bkey, body, &mut inner, &at)?;
    Ok(if is_fork {
        Step::Fork { count, steps: body }
    } else {
        Step::Clone { count, steps: body }
    })
}

/// A `barrier` step, run by `inst` more task instances.
fn barrier(ctx: &mut Ctx, f: &mut Fields, inst: u64) -> Result<Step, Error> {
    f.declare(&["op", "name"])?;
    let k = f.key("name");
    let name = f.string("name")?;
    name_ok(&k, &name)?;
    let next = ctx.barriers.len() as u32;
    let e = ctx.barriers.entry(name.clone()).or_insert((next, 0));
    e.1 += inst;
    Ok(Step::Barrier {
        name,
        id: e.0,
        tasks: 0,
    })
}

fn sleep(f: &mut Fields) -> Result<Step, Error> {
    f.declare(&["op", "ns", "us", "ms"])?;
    one_of(f, &["ns", "us", "ms"])?;
    let ns = if let Some(x) = f.u64_opt("ns")? {
        x
    } else if let Some(x) = f.f64_opt("us")? {
        duration(f, "us", x / 1000.0, 1.0)?
    } else if let Some(x) = f.f64_opt("ms")? {
        duration(f, "ms", x, 1.0)?
    } else {
        return Err(cfg_err(f.key("ms"), "missing (or ns, us)"));
    };
    if ns > 3_600_000_000_000 {
        return Err(cfg_err(f.key("ns"), "at most an hour"));
    }
    Ok(Step::Sleep { ns })
}

fn repeat(
    ctx: &mut Ctx,
    f: &mut Fields,
    state: &mut Vec<Option<Mapped>>,
    at: &At,
    here: &str,
) -> Result<Step, Error> {
    f.declare(&["op", "count", "duration_ms", "phase", "steps"])?;
    one_of(f, &["count", "duration_ms"])?;
    let count = f.u64_opt("count")?;
    if count.is_some_and(|c| c > 1_000_000_000) {
        return Err(cfg_err(f.key("count"), "at most 1000000000"));
    }
    let duration_ns = match f.f64_opt("duration_ms")? {
        Some(ms) => Some(duration(f, "duration_ms", ms, ctx.scale)?),
        None => None,
    };
    if count.is_none() && duration_ns.is_none() {
        return Err(cfg_err(f.key("count"), "missing (or duration_ms)"));
    }
    let phase = phase_name(f, at.task, here)?;
    let phase_id = ctx.phase(&phase);
    let bkey = f.key("steps");
    let body = f.req("steps")?;
    let before = state.clone();
    let at = At {
        inst: at.inst,
        task: at.task,
        path: here,
        depth: at.depth + 1,
    };
    let body = steps(ctx, &bkey, body, state, &at)?;
    let trim = |s: &Vec<Option<Mapped>>| {
        let mut s = s.clone();
        while s.last() == Some(&None) {
            s.pop();
        }
        s
    };
    if trim(state) != trim(&before) {
        return Err(cfg_err(
            bkey,
            "a loop's steps must leave the mappings as they found them (unmap what they map, map nothing they unmap)",
        ));
    }
    Ok(Step::Repeat {
        count,
        duration_ns,
        phase,
        phase_id,
        steps: body,
    })
}

/// A `clock` (when `is_clock`) or `roi` step; a region of interest starts
/// for `inst` more task instances.
fn mark(ctx: &mut Ctx, f: &mut Fields, is_clock: bool, inst: u64) -> Result<Step, Error> {
    f.declare(&["op", "at"])?;
    let k = f.key("at");
    let at = match f.choice_opt("at", &["start", "end"])?.as_deref() {
        Some("start") => Mark::Start,
        Some(_) => Mark::End,
        None => return Err(cfg_err(k, "missing; accepted: \"start\", \"end\"")),
    };
    Ok(if is_clock {
        Step::Clock { at }
    } else {
        if at == Mark::Start {
            ctx.roi_tasks += inst;
        }
        Step::Roi { at, tasks: 0 }
    })
}

/// `offset_mib` and `len_mib` of a step within a mapping of `size` bytes
/// (default: all of it from the offset).
fn range(f: &mut Fields, scale: f64, size: u64) -> Result<(u64, u64), Error> {
    let okey = f.key("offset_mib");
    let offset = match f.f64_opt("offset_mib")? {
        None => 0,
        Some(x) if x.is_finite() && x >= 0.0 => ((x * scale * MIB as f64) as u64) & !4095,
        Some(x) => {
            return Err(cfg_err(
                okey,
                format!("must be a size of 0 or more, got {x}"),
            ))
        }
    };
    if offset >= size {
        return Err(cfg_err(
            okey,
            format!("{offset} bytes is at or past the mapping's end ({size} bytes)"),
        ));
    }
    let lkey = f.key("len_mib");
    let len = match f.f64_opt("len_mib")? {
        None => size - offset,
        Some(x) if x.is_finite() && x > 0.0 => {
            (((x * scale * MIB as f64) as u64) & !4095).max(4096)
        }
        Some(x) => return Err(cfg_err(lkey, format!("must be a positive size, got {x}"))),
    };
    if offset + len > size {
        return Err(cfg_err(
            lkey,
            format!("[{offset}, {}) runs past the mapping's {size} bytes: the access would fault (SIGSEGV)", offset + len),
        ));
    }
    Ok((offset, len))
}

fn duration(f: &Fields, key: &'static str, ms: f64, scale: f64) -> Result<u64, Error> {
    if !(ms.is_finite() && ms > 0.0 && ms <= 3_600_000.0) {
        return Err(cfg_err(
            f.key(key),
            format!("must be above 0 and at most an hour, got {ms}"),
        ));
    }
    Ok(((ms * scale * 1e6) as u64).max(1))
}

fn phase_name(f: &mut Fields, task: &str, here: &str) -> Result<String, Error> {
    let k = f.key("phase");
    match f.str_opt("phase")? {
        Some(p) => {
            name_ok(&k, &p)?;
            Ok(p)
        }
        None => Ok(format!("{task}{here}")),
    }
}

pub fn parse(w: &mut Fields, scale: f64) -> Result<ProgramConfig, Error> {
    let mut ctx = Ctx {
        scale,
        maps: Vec::new(),
        files: Vec::new(),
        phases: Vec::new(),
        barriers: BTreeMap::new(),
        roi_tasks: 0,
        instances: 0,
    };
    if let Some(v) = w.take_value("file") {
        for (i, v) in array("workload.file", v)?.into_iter().enumerate() {
            let mut f = Fields::from_value(&format!("workload.file[{i}]"), v)?;
            f.declare(&["name", "size_mib", "size_kib"])?;
            let k = f.key("name");
            let name = f.string("name")?;
            name_ok(&k, &name)?;
            if ctx.files.iter().any(|x| x.name == name) {
                return Err(cfg_err(k, format!("a second file named {name:?}")));
            }
            let size = size(&mut f, "size_mib", "size_kib", scale)?
                .ok_or_else(|| cfg_err(f.key("size_mib"), "missing (or size_kib)"))?;
            f.finish()?;
            ctx.files.push(FileSpec { name, size });
        }
    }
    let tv = w.take_value("task").ok_or_else(|| {
        cfg_err(
            "workload.task",
            "missing: a program has at least one [[workload.task]]",
        )
    })?;
    let mut tasks = Vec::new();
    let list = array("workload.task", tv)?;
    if list.is_empty() {
        return Err(cfg_err("workload.task", "a program has at least one task"));
    }
    for (i, v) in list.into_iter().enumerate() {
        let tkey = format!("workload.task[{i}]");
        let mut f = Fields::from_value(&tkey, v)?;
        f.declare(&["name", "count", "cpus", "steps"])?;
        let nkey = f.key("name");
        let name = f.str_opt("name")?.unwrap_or_else(|| format!("task{i}"));
        name_ok(&nkey, &name)?;
        if tasks.iter().any(|t: &TaskSpec| t.name == name) {
            return Err(cfg_err(nkey, format!("a second task named {name:?}")));
        }
        let count = f.u64_opt("count")?.unwrap_or(1);
        ctx.instances = ctx.instances.saturating_add(count);
        if count == 0 || ctx.instances > MAX_INSTANCES {
            return Err(cfg_err(
                f.key("count"),
                format!("must be at least 1, with at most {MAX_INSTANCES} tasks in all"),
            ));
        }
        let ckey = f.key("cpus");
        let cpus = match f.take_value("cpus") {
            None => None,
            Some(Value::Array(a)) if !a.is_empty() => Some(
                a.iter()
                    .map(|x| super::fields::as_u64(&ckey, x))
                    .collect::<Result<Vec<u64>, Error>>()?,
            ),
            Some(_) => return Err(cfg_err(ckey, "expected a non-empty array of CPU numbers")),
        };
        let skey = f.key("steps");
        let sv = f.req("steps")?;
        let mut state = Vec::new();
        let at = At {
            inst: count,
            task: &name,
            path: "",
            depth: 0,
        };
        let steps = steps(&mut ctx, &skey, sv, &mut state, &at)?;
        f.finish()?;
        tasks.push(TaskSpec {
            name,
            count,
            cpus,
            steps,
        });
    }
    // Barriers and the region of interest wait for every instance that runs them.
    let barriers = ctx.barriers.clone();
    let roi = ctx.roi_tasks;
    for t in &mut tasks {
        fill(&mut t.steps, &barriers, roi);
    }
    Ok(ProgramConfig {
        tasks,
        files: ctx.files,
        phases: ctx.phases,
        maps: ctx.maps,
        benchmark: None,
    })
}

fn fill(steps: &mut [Step], barriers: &BTreeMap<String, (u32, u64)>, roi: u64) {
    for s in steps {
        match s {
            Step::Barrier { name, tasks, .. } => *tasks = barriers[name.as_str()].1,
            Step::Roi { tasks, .. } => *tasks = roi,
            Step::Fork { steps, .. } | Step::Clone { steps, .. } | Step::Repeat { steps, .. } => {
                fill(steps, barriers, roi)
            }
            _ => {}
        }
    }
}
