//! `workload.kind = "will-it-scale"`: the page-fault tests of will-it-scale
//! (github.com/antonblanchard/will-it-scale, tests/page_fault*.c) as
//! programs of the workload language, run by its interpreter.
//!
//! Each task loops: `mmap()` MEMSIZE (128 MiB), touch one byte per 4 KiB
//! page in order (one "iteration" each), `munmap()`. `page_fault1` maps
//! private anonymous memory and writes; `page_fault4` maps a file of its
//! own (created sparse, `ftruncate`d) `MAP_PRIVATE` and reads. In
//! `process` mode each task is a process bound to its own CPU, in `thread`
//! mode a thread of one process (sharing its address space, so every
//! `munmap` shoots down the TLBs of the CPUs running its siblings). The
//! tasks meet at a barrier, then loop for `duration_s`.
//!
//! `page_fault2` (a private file mapping written: copy on write from the
//! page cache) and `page_fault3` (a shared file mapping written: dirty
//! page-cache pages) are refused: the kernel model maps files read-only.

use super::fields::{cfg_err, quote_list, Fields};
use super::program;
use crate::error::Error;
use crate::workload::program::{Benchmark, ProgramConfig};
use toml::{Table, Value};

pub const KEYS: &[&str] = &["test", "mode", "memsize_mib", "duration_s"];

/// Instructions per page of the tests' inner loop (`c[i] = 0;
/// (*iterations)++;` and the loop's add, compare and branch): 6, counted
/// with callgrind on page_fault1's loop compiled by gcc 12.2 -O2 (two runs
/// of 1 and 2 passes over 128 MiB, their difference over 32768 pages), on
/// the project's development host.
pub const WIS_INSTR_PER_PAGE: i64 = 6;

const TESTS: &[&str] = &["page_fault1", "page_fault2", "page_fault3", "page_fault4"];

fn table(pairs: &[(&str, Value)]) -> Value {
    let mut t = Table::new();
    for (k, v) in pairs {
        t.insert(k.to_string(), v.clone());
    }
    Value::Table(t)
}

fn s(x: &str) -> Value {
    Value::String(x.into())
}

pub fn parse(w: &mut Fields, scale: f64) -> Result<ProgramConfig, Error> {
    let test = w.choice_opt("test", TESTS)?.ok_or_else(|| {
        cfg_err(
            w.key("test"),
            format!("missing; accepted: {}", quote_list(TESTS)),
        )
    })?;
    if test == "page_fault2" || test == "page_fault3" {
        return Err(cfg_err(
            w.key("test"),
            format!("{test} writes a file mapping, which the kernel model does not have (file mappings are read-only); accepted: \"page_fault1\", \"page_fault4\""),
        ));
    }
    let mode = w
        .choice_opt("mode", &["process", "thread"])?
        .unwrap_or_else(|| "process".into());
    let nr_task = w.u64("nr_task")?;
    if nr_task == 0 || nr_task > 4096 {
        return Err(cfg_err(w.key("nr_task"), "must be from 1 to 4096"));
    }
    let mib = w.f64_opt("memsize_mib")?.unwrap_or(128.0);
    if !(mib.is_finite() && mib > 0.0 && mib <= 65536.0) {
        return Err(cfg_err(
            w.key("memsize_mib"),
            format!("must be above 0 and at most 65536, got {mib}"),
        ));
    }
    let secs = w.f64_opt("duration_s")?.unwrap_or(0.1);
    if !(secs.is_finite() && secs > 0.0 && secs <= 3600.0) {
        return Err(cfg_err(
            w.key("duration_s"),
            format!("must be above 0 and at most 3600, got {secs}"),
        ));
    }
    let file = test == "page_fault4";
    let bytes = ((mib * scale * (1 << 20) as f64) as u64) & !4095;
    let pages = (bytes / 4096).max(1) as i64;
    // The loop of one task; `k` names its file.
    let body = |k: u64| {
        let map = if file {
            table(&[
                ("op", s("mmap")),
                ("map", s("c")),
                ("backing", s("file")),
                ("file", s(&format!("f{k}"))),
            ])
        } else {
            table(&[
                ("op", s("mmap")),
                ("map", s("c")),
                ("size_kib", Value::Integer(pages * 4)),
            ])
        };
        let touch = table(&[
            ("op", s("access")),
            ("map", s("c")),
            ("pattern", s("strided")),
            ("stride", Value::Integer(4096)),
            ("count", Value::Integer(pages)),
            ("write_ratio", Value::Float(if file { 0.0 } else { 1.0 })),
            ("instr_per_access", Value::Integer(WIS_INSTR_PER_PAGE)),
            ("phase", s("testcase")),
        ]);
        let unmap = table(&[("op", s("munmap")), ("map", s("c"))]);
        vec![
            table(&[("op", s("barrier")), ("name", s("start"))]),
            table(&[
                ("op", s("repeat")),
                ("duration_ms", Value::Float(secs * scale * 1e3)),
                ("phase", s("loop")),
                ("steps", Value::Array(vec![map, touch, unmap])),
            ]),
        ]
    };
    let mut tasks = Vec::new();
    if mode == "process" {
        for k in 0..nr_task {
            // Task k starts on CPU k (modulo the CPUs), as will-it-scale binds it.
            tasks.push(table(&[
                ("name", s(&format!("task{k}"))),
                ("steps", Value::Array(body(k))),
            ]));
        }
    } else {
        let mut steps: Vec<Value> = (0..nr_task)
            .map(|k| table(&[("op", s("clone")), ("steps", Value::Array(body(k)))]))
            .collect();
        steps.push(table(&[("op", s("wait"))]));
        // The threads are placed round-robin from the main thread's CPU.
        tasks.push(table(&[
            ("name", s("main")),
            ("steps", Value::Array(steps)),
        ]));
    }
    let mut top = Table::new();
    if file {
        let files: Vec<Value> = (0..nr_task)
            .map(|k| {
                table(&[
                    ("name", s(&format!("f{k}"))),
                    ("size_kib", Value::Integer(pages * 4)),
                ])
            })
            .collect();
        top.insert("file".into(), Value::Array(files));
    }
    top.insert("task".into(), Value::Array(tasks));
    let mut f = Fields::new("workload", top);
    // Sizes and the duration are scaled above.
    let mut p = program::parse(&mut f, 1.0)?;
    f.finish()?;
    p.benchmark = Some(Benchmark {
        suite: "will-it-scale".into(),
        test,
        mode,
        nr_task,
        map_bytes: pages as u64 * 4096,
    });
    Ok(p)
}
