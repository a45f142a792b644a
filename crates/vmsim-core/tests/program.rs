//! The workload language (`workload.kind = "program"`): a program that is
//! usemem gives usemem's figures; loops, forks, threads, barriers and
//! madvise do what they say, with the faults and pages they should; the
//! data check runs; bad programs are refused with the step named.

use serde_json::Value;
use vmsim_core::api::{self, Format};
use vmsim_core::error::Error;

fn run(text: &str) -> Value {
    let out =
        api::run_config(text, Format::Toml, None, &mut |_, _| {}).unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&out).unwrap()
}

fn m<'a>(v: &'a Value, k: &str) -> &'a Value {
    &v["metrics"][k]
}

fn u(v: &Value, k: &str) -> u64 {
    m(v, k)
        .as_u64()
        .unwrap_or_else(|| panic!("{k}: {}", m(v, k)))
}

fn err(text: &str) -> (String, String) {
    match api::run_config(text, Format::Toml, None, &mut |_, _| {}) {
        Err(Error::Config { key, message }) => (key, message),
        other => panic!("expected a config error, got {other:?}"),
    }
}

const HEAD: &str = "machine = \"xeon-e5-2699v3-2s\"\nseed = 1\n";

fn program(kernel: &str, body: &str) -> String {
    format!("{HEAD}[kernel]\n{kernel}\n[workload]\nkind = \"program\"\n{body}")
}

/// examples/workloads/anon-w-seq.toml is usemem's case-anon-w-seq: every
/// figure of the built-in usemem with the same sizes, except usemem's
/// allocation credit of bytes/8 in its throughput.
#[test]
fn program_writes_usemem_anon_w_seq() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/workloads/");
    let shrink = |t: String| {
        t.replace("size_mib = 64", "size_mib = 8")
            .replace("size_per_task_mib = 64", "size_per_task_mib = 8")
    };
    let p = run(&shrink(
        std::fs::read_to_string(format!("{root}anon-w-seq.toml")).unwrap(),
    ));
    let b = run(&shrink(
        std::fs::read_to_string(format!("{root}usemem.toml")).unwrap(),
    ));
    let (pm, bm) = (
        p["metrics"].as_object().unwrap(),
        b["metrics"].as_object().unwrap(),
    );
    let mut shared = 0;
    for (k, v) in bm {
        if k == "throughput_bytes_per_s" {
            let (x, y) = (v.as_f64().unwrap(), pm[k].as_f64().unwrap());
            assert!((x / y - 9.0 / 8.0).abs() < 1e-9, "{x} vs {y}");
            continue;
        }
        assert_eq!(pm.get(k), Some(v), "{k}");
        shared += 1;
    }
    assert!(shared > 50, "{shared} metrics compared");
    assert_eq!(u(&p, "phase.write.runs"), 4);
    assert_eq!(u(&p, "phase.write.writes"), 4 * (8 << 20) / 8);
    assert_eq!(m(&p, "data_verified"), &Value::Bool(true));
}

/// will-it-scale's page_fault1 loop: map, touch one word per 4 KiB page,
/// unmap; one fault per page without THP, one per 2 MiB with it.
#[test]
fn page_fault_loop_counts_faults_and_pages() {
    let body = r#"
[[workload.task]]
name = "pf"
count = 2
steps = [
  { op = "repeat", count = 3, phase = "loop", steps = [
    { op = "mmap", map = "c", size_mib = 8 },
    { op = "access", map = "c", pattern = "strided", stride = 4096, count = 2048, write_ratio = 1.0, phase = "touch" },
    { op = "munmap", map = "c" },
  ] },
]
"#;
    let small = run(&program("thp = \"never\"", body));
    assert_eq!(u(&small, "phase.loop.iterations"), 6);
    assert_eq!(u(&small, "phase.touch.runs"), 6);
    assert_eq!(u(&small, "phase.touch.writes"), 6 * 2048);
    assert_eq!(u(&small, "pgfault"), 6 * 2048);
    assert_eq!(m(&small, "data_verified"), &Value::Bool(true));
    let huge = run(&program("thp = \"always\"", body));
    assert_eq!(u(&huge, "thp_fault_alloc"), 6 * 4);
    assert_eq!(u(&huge, "pgfault"), 6 * 4);
    assert_eq!(u(&huge, "phase.touch.writes"), 6 * 2048);
}

/// A loop for a duration stops once the time has passed, and counts its iterations.
#[test]
fn repeat_for_a_duration_stops_on_time() {
    let body = |ms: f64| {
        format!(
            r#"
[[workload.task]]
steps = [
  {{ op = "mmap", map = "a", size_mib = 2 }},
  {{ op = "access", map = "a", write_ratio = 1.0 }},
  {{ op = "repeat", duration_ms = {ms}, phase = "spin", steps = [
    {{ op = "access", map = "a", pattern = "uniform", count = 1000 }},
  ] }},
]
"#
        )
    };
    let short = run(&program("thp = \"always\"", &body(0.1)));
    let long = run(&program("thp = \"always\"", &body(0.4)));
    let (a, b) = (
        u(&short, "phase.spin.iterations"),
        u(&long, "phase.spin.iterations"),
    );
    assert!(a >= 1 && b > 2 * a, "{a} then {b}");
    let secs = m(&long, "phase.spin.elapsed_s").as_f64().unwrap();
    // It stops at the first iteration to end after the duration.
    let per = secs / b as f64;
    assert!(
        secs >= 0.0004 && secs < 0.0004 + 2.0 * per,
        "{secs} s, {b} iterations"
    );
}

/// Forked children write their copies (copy on write), threads share one
/// mapping, a barrier lines them up, MADV_DONTNEED zeroes a range: every
/// page is checked, and a re-run gives the same bytes.
#[test]
fn fork_clone_barrier_madvise_verify_and_repeat_exactly() {
    let body = r#"
[[workload.file]]
name = "data"
size_mib = 4

[[workload.task]]
name = "main"
cpus = [0, 1, 2, 3]
steps = [
  { op = "mmap", map = "heap", size_mib = 8 },
  { op = "access", map = "heap", pattern = "zipf", zipf_s = 1.2, write_ratio = 0.5, count = 20000, phase = "warm" },
  { op = "fork", count = 2, steps = [
    { op = "barrier", name = "go" },
    { op = "access", map = "heap", pattern = "uniform", write_ratio = 0.5, count = 4000, phase = "child" },
    { op = "madvise", map = "heap", advice = "dontneed", offset_mib = 2, len_mib = 4 },
    { op = "access", map = "heap", pattern = "normal", sigma_pages = 200, write_ratio = 0.3, count = 4000, phase = "child" },
  ] },
  { op = "clone", count = 2, steps = [
    { op = "barrier", name = "go" },
    { op = "access", map = "heap", pattern = "sequential", write_ratio = 1.0, phase = "thread" },
  ] },
  { op = "mmap", map = "f", backing = "file", file = "data" },
  { op = "access", map = "f", phase = "read" },
  { op = "wait" },
]
"#;
    let text = program("thp = \"always\"", body);
    let a = run(&text);
    assert_eq!(m(&a, "data_verified"), &Value::Bool(true));
    assert_eq!(u(&a, "phase.child.runs"), 4);
    assert_eq!(u(&a, "phase.thread.runs"), 2);
    assert_eq!(u(&a, "phase.thread.writes"), 2 * (8 << 20) / 8);
    assert_eq!(u(&a, "phase.read.reads"), (4 << 20) / 8);
    assert!(u(&a, "thp_fault_alloc") >= 4);
    let b = run(&text);
    assert_eq!(
        serde_json::to_string(&a["metrics"]).unwrap(),
        serde_json::to_string(&b["metrics"]).unwrap()
    );
}

/// The data check catches a lost clear: the injected skipped sub-page of
/// the first huge page cleared is found by the mapping's check.
#[test]
fn the_data_check_runs_on_program_mappings() {
    let body = |inject: &str| {
        format!(
            r#"
[[workload.task]]
steps = [
  {{ op = "mmap", map = "a", size_mib = 4 }},
  {{ op = "access", map = "a", pattern = "uniform", write_ratio = 1.0, count = 100 }},
  {{ op = "munmap", map = "a" }},
]
{inject}"#
        )
    };
    let good = run(&program("thp = \"always\"", &body("")));
    assert_eq!(m(&good, "data_verified"), &Value::Bool(true));
    let bad = run(&program(
        "thp = \"always\"",
        &body("[sim.fault_injection]\nskip_clear_subpage = 5"),
    ));
    assert_eq!(m(&bad, "data_verified"), &Value::Bool(false));
    let e = m(&bad, "data_errors")[0].as_str().unwrap();
    assert!(
        e.contains("bad page") && e.contains("0x7f0000005000"),
        "{e}"
    );
}

#[test]
fn bad_programs_are_refused_naming_the_step() {
    let cases: &[(&str, &str, &str)] = &[
        (
            r#"[[workload.task]]
steps = [ { op = "mmapp", map = "a" } ]"#,
            "workload.task[0].steps[0].op",
            "accepted",
        ),
        (
            r#"[[workload.task]]
steps = [ { op = "access", map = "a" } ]"#,
            "workload.task[0].steps[0].map",
            "not mapped",
        ),
        (
            r#"[[workload.task]]
steps = [ { op = "mmap", map = "a", size_mib = 2 }, { op = "access", map = "a", offset_mib = 1, len_mib = 2 } ]"#,
            "workload.task[0].steps[1].len_mib",
            "SIGSEGV",
        ),
        (
            r#"[[workload.task]]
steps = [ { op = "mmap", map = "a", size_mib = 2 }, { op = "mmap", map = "a", size_mib = 2 } ]"#,
            "workload.task[0].steps[1].map",
            "already mapped",
        ),
        (
            r#"[[workload.task]]
steps = [ { op = "repeat", count = 2, steps = [ { op = "mmap", map = "a", size_mib = 2 } ] } ]"#,
            "workload.task[0].steps[0].steps",
            "leave the mappings",
        ),
        (
            r#"[[workload.file]]
name = "f"
size_mib = 1
[[workload.task]]
steps = [ { op = "mmap", map = "a", backing = "file", file = "f" }, { op = "access", map = "a", write_ratio = 0.5 } ]"#,
            "workload.task[0].steps[1].write_ratio",
            "read-only",
        ),
        (
            r#"[[workload.task]]
steps = [ { op = "mmap", map = "a", size_mib = 2 }, { op = "madvise", map = "a", advice = "cold" } ]"#,
            "workload.task[0].steps[1].advice",
            "not modelled",
        ),
        (
            r#"[[workload.task]]
steps = [ { op = "mmap", map = "a", size_mib = 4 }, { op = "madvise", map = "a", advice = "hugepage", len_mib = 2 } ]"#,
            "workload.task[0].steps[1].offset_mib",
            "whole mapping",
        ),
        (
            r#"[[workload.task]]
steps = [ { op = "mmap", map = "a", size_mib = 2 }, { op = "mprotect", map = "a", prot = "read" }, { op = "access", map = "a", write_ratio = 0.1, count = 10 } ]"#,
            "workload.task[0].steps[2].write_ratio",
            "SIGSEGV",
        ),
        (
            r#"[[workload.task]]
steps = [ { op = "mmap", map = "a", size_mib = 2 }, { op = "mprotect", map = "a", prot = "none" } ]"#,
            "workload.task[0].steps[1].prot",
            "accepted",
        ),
        (
            r#"[[workload.task]]
steps = [ { op = "mmap", map = "a", size_mib = 2, colour = "red" } ]"#,
            "workload.task[0].steps[0].colour",
            "unknown key",
        ),
        (
            r#"[[workload.task]]
steps = [ { op = "mmap", map = "a", size_mib = 2 }, { op = "access", map = "a", pattern = "zipf", stride = 64 } ]"#,
            "workload.task[0].steps[1].stride",
            "strided",
        ),
        (
            r#"[[workload.task]]
count = 5000
steps = [ { op = "wait" } ]"#,
            "workload.task[0].count",
            "at most 4096",
        ),
    ];
    for (body, key, words) in cases {
        let (k, msg) = err(&program("", body));
        assert_eq!(&k, key, "{body}: {msg}");
        assert!(msg.contains(words), "{body}: {k}: {msg}");
    }
}

/// A barrier that fewer tasks reach than wait at it is an error naming the
/// task, not a run that ends early and reports success.
#[test]
fn a_program_that_cannot_finish_is_an_error() {
    let body = r#"
[[workload.task]]
name = "a"
steps = [ { op = "repeat", count = 2, steps = [ { op = "barrier", name = "b" } ] } ]
[[workload.task]]
name = "b"
steps = [ { op = "barrier", name = "b" } ]
"#;
    let (k, msg) = err(&program("", body));
    assert_eq!(k, "workload");
    assert!(
        msg.contains("barrier") && msg.contains("cannot finish"),
        "{msg}"
    );
}

fn wis(test: &str, mode: &str, thp: &str) -> Value {
    run(&format!(
        "{HEAD}[kernel]\nthp = \"{thp}\"\n[workload]\nkind = \"will-it-scale\"\ntest = \"{test}\"\nmode = \"{mode}\"\nnr_task = 3\nmemsize_mib = 4\nduration_s = 0.004\n"
    ))
}

/// will-it-scale's page_fault1 and page_fault4 in both modes: one iteration
/// per page, one fault per page (per 2 MiB with THP; per fault-around
/// window for the file), TLB shootdowns only between threads, data verified.
#[test]
fn will_it_scale_page_faults_count_iterations_and_faults() {
    for mode in ["process", "thread"] {
        let a = wis("page_fault1", mode, "never");
        let loops = u(&a, "phase.loop.iterations");
        assert!(loops >= 3, "{mode}: {loops} loops");
        assert_eq!(u(&a, "phase.testcase.accesses"), loops * 1024, "{mode}");
        assert_eq!(u(&a, "pgfault"), loops * 1024, "{mode}");
        assert_eq!(m(&a, "data_verified"), &Value::Bool(true));
        let ops = m(&a, &format!("will_it_scale_per_{mode}_ops"))
            .as_f64()
            .unwrap();
        let total = m(&a, "will_it_scale_workload").as_f64().unwrap();
        assert!(
            ops > 0.0 && (total / ops - 3.0).abs() < 1e-9,
            "{ops} {total}"
        );
        let shootdowns = u(&a, "ipis_tlb_shootdown");
        if mode == "process" {
            assert_eq!(
                shootdowns, 0,
                "a process's munmap has no other CPU to flush"
            );
        } else {
            assert!(
                shootdowns > 0,
                "threads' munmaps flush their siblings' TLBs"
            );
        }
        let h = wis("page_fault1", mode, "always");
        let loops = u(&h, "phase.loop.iterations");
        assert_eq!(u(&h, "pgfault"), loops * 2, "{mode}: two huge pages a loop");
        let f = wis("page_fault4", mode, "never");
        let loops = u(&f, "phase.loop.iterations");
        assert_eq!(u(&f, "phase.testcase.reads"), loops * 1024);
        // fault_around_bytes = 64 KiB: one fault maps 16 pages, once they
        // are in the page cache (the first pass over a file meets pages
        // still being read ahead, a few more faults).
        let faults = u(&f, "pgfault");
        assert!(
            (loops * 64..=loops * 64 + 3 * 4).contains(&faults),
            "{mode}: {faults} faults in {loops} loops"
        );
    }
    let (k, msg) = err(&format!(
        "{HEAD}[workload]\nkind = \"will-it-scale\"\ntest = \"page_fault2\"\nnr_task = 1\n"
    ));
    assert_eq!(k, "workload.test");
    assert!(msg.contains("read-only"), "{msg}");
}

/// usemem --random (vm-scalability's case-anon-w-rand and, with --prealloc
/// --prefault, case-anon-cow-rand): size/8 writes at random words, the
/// pages they touch faulted, copied on write in the children, verified.
#[test]
fn usemem_random_writes_random_words_and_verifies() {
    let cfg = |extra: &str| {
        format!("{HEAD}[kernel]\nthp = \"never\"\n[workload]\nkind = \"usemem\"\nnr_task = 2\nsize_per_task_mib = 4\nrandom = true\n{extra}")
    };
    let w = run(&cfg(""));
    assert_eq!(m(&w, "data_verified"), &Value::Bool(true));
    // 2 x 4 MiB / 8 random words: nearly every one of the 2 x 1024 pages.
    let faults = u(&w, "pgfault");
    assert!((2000..=2048).contains(&faults), "{faults}");
    let writes: u64 = w["metrics"]["task_accesses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["writes"].as_u64().unwrap())
        .sum();
    assert_eq!(writes, 2 * (4 << 20) / 8);
    let c = run(&cfg("prealloc = true\nprefault = true"));
    assert_eq!(m(&c, "data_verified"), &Value::Bool(true));
    // The parent's populate (1024) and each child's copy of the pages it writes.
    let faults = u(&c, "pgfault");
    assert!(
        (1024 + 2 * 1000..=1024 + 2 * 1024).contains(&faults),
        "{faults}"
    );
}

/// A thread that unmaps what its siblings still use: the next access is a
/// simulated SIGSEGV, reported as the workload's error naming the address.
#[test]
fn an_access_to_an_unmapped_range_is_a_sigsegv_error() {
    let body = r#"
[[workload.task]]
steps = [
  { op = "mmap", map = "a", size_mib = 2 },
  { op = "clone", steps = [ { op = "munmap", map = "a" } ] },
  { op = "wait" },
  { op = "access", map = "a", count = 5 },
]
"#;
    let (k, msg) = err(&program("", body));
    assert_eq!(k, "workload");
    assert!(
        msg.contains("SIGSEGV") && msg.contains("0x7f0000000000"),
        "{msg}"
    );
}

/// `kernel.thp = "madvise"` gives huge pages only to mappings marked
/// MADV_HUGEPAGE, and MADV_NOHUGEPAGE keeps them out under "always".
#[test]
fn madvise_hugepage_and_nohugepage_choose_thp_per_mapping() {
    let body = |advice: &str| {
        format!(
            r#"
[[workload.task]]
steps = [
  {{ op = "mmap", map = "a", size_mib = 8 }},
  {advice}
  {{ op = "access", map = "a", write_ratio = 1.0 }},
]
"#
        )
    };
    let none = "";
    let huge = r#"{ op = "madvise", map = "a", advice = "hugepage" },"#;
    let nohuge = r#"{ op = "madvise", map = "a", advice = "nohugepage" },"#;
    let thp = |mode: &str, advice: &str| {
        let r = run(&program(&format!("thp = \"{mode}\""), &body(advice)));
        assert_eq!(m(&r, "data_verified"), &Value::Bool(true));
        (u(&r, "thp_fault_alloc"), u(&r, "pgfault"))
    };
    assert_eq!(thp("madvise", none), (0, 2048));
    assert_eq!(thp("madvise", huge), (4, 4));
    assert_eq!(thp("always", none), (4, 4));
    assert_eq!(thp("always", nohuge), (0, 2048));
    assert_eq!(thp("never", huge), (0, 2048));
}

/// mprotect(PROT_READ) write-protects every entry and shoots down the TLBs
/// of the threads' CPUs; back to PROT_READ|PROT_WRITE, each page's first
/// write faults and reuses the page; data verified throughout.
#[test]
fn mprotect_write_protects_and_write_faults_reuse() {
    let body = r#"
[[workload.task]]
steps = [
  { op = "mmap", map = "a", size_mib = 2 },
  { op = "access", map = "a", write_ratio = 1.0 },
  { op = "clone", count = 2, steps = [ { op = "barrier", name = "b" }, { op = "access", map = "a", pattern = "uniform", count = 20000 } ] },
  { op = "barrier", name = "b" },
  { op = "mprotect", map = "a", prot = "read" },
  { op = "access", map = "a", phase = "read" },
  { op = "mprotect", map = "a", prot = "read-write" },
  { op = "access", map = "a", write_ratio = 1.0, phase = "again" },
  { op = "wait" },
]
"#;
    let r = run(&program("thp = \"never\"", body));
    assert_eq!(m(&r, "data_verified"), &Value::Bool(true));
    // 512 first-touch faults, then one write fault per page after the upgrade.
    assert_eq!(u(&r, "pgfault"), 512 + 512);
    assert_eq!(u(&r, "cow_reuse"), 512);
    assert!(
        u(&r, "ipis_tlb_shootdown") > 0,
        "the threads' CPUs are flushed"
    );
    // A thread that write-protects what the main thread then writes: SIGSEGV.
    let body = r#"
[[workload.task]]
steps = [
  { op = "mmap", map = "a", size_mib = 2 },
  { op = "clone", steps = [ { op = "mprotect", map = "a", prot = "read" } ] },
  { op = "wait" },
  { op = "access", map = "a", write_ratio = 1.0, count = 5 },
]
"#;
    let (k, msg) = err(&program("", body));
    assert_eq!(k, "workload");
    assert!(
        msg.contains("SIGSEGV") && msg.contains("read-only"),
        "{msg}"
    );
}

/// A program reports its progress: rising fractions before the end, 1 at it.
#[test]
fn a_program_reports_progress() {
    let body = r#"
[[workload.task]]
count = 2
steps = [
  { op = "mmap", map = "a", size_mib = 16 },
  { op = "access", map = "a", write_ratio = 1.0, passes = 2 },
]
"#;
    let mut seen = Vec::new();
    api::run_config(
        &program("thp = \"always\"", body),
        Format::Toml,
        None,
        &mut |_, f| seen.push(f),
    )
    .unwrap();
    assert_eq!(seen.last(), Some(&1.0));
    let mid: Vec<f64> = seen
        .iter()
        .copied()
        .filter(|f| *f > 0.0 && *f < 1.0)
        .collect();
    assert!(!mid.is_empty(), "{seen:?}");
    assert!(mid.windows(2).all(|w| w[0] <= w[1]), "{mid:?}");
}

/// A program's rate counts only what its timed interval accessed: a
/// warm-up pass before the `clock` start adds nothing to it, and the
/// run's throughput is the timed phase's.
#[test]
fn a_warm_up_before_the_clock_is_not_in_the_rate() {
    let body = r#"
[[workload.task]]
steps = [
  { op = "mmap", map = "a", size_mib = 4 },
  { op = "access", map = "a", pattern = "sequential", write_ratio = 1.0, passes = 1, phase = "warm" },
  { op = "clock", at = "start" },
  { op = "access", map = "a", pattern = "sequential", write_ratio = 1.0, passes = 1, phase = "timed" },
  { op = "clock", at = "end" },
  { op = "munmap", map = "a" },
]
"#;
    let r = run(&program("thp = \"never\"", body));
    let rate = m(&r, "throughput_bytes_per_s").as_f64().unwrap();
    let timed = m(&r, "phase.timed.throughput_bytes_per_s")
        .as_f64()
        .unwrap();
    let warm = m(&r, "phase.warm.throughput_bytes_per_s").as_f64().unwrap();
    assert!(
        warm < timed,
        "the warm-up faults its pages: {warm} vs {timed}"
    );
    // The clock's marks are one step either side of the phase's own.
    assert!(
        (rate / timed - 1.0).abs() < 0.01,
        "{rate} vs the timed phase's {timed}"
    );
    // The timed interval wrote 4 MiB, against the two 45 MiB LLCs.
    assert_eq!(u(&r, "timed_bytes"), 4 << 20);
    let per_llc = m(&r, "timed_bytes_per_llc").as_f64().unwrap();
    assert!((per_llc - 4.0 / 90.0).abs() < 1e-9, "{per_llc}");
}

/// will-it-scale's scale line gives the size each loop maps, as given:
/// 1 MiB is 1 MiB (the run's RAM rounds mappings up to 2 MiB; the loop
/// does not), and a size that is not whole MiB is given in KiB.
#[test]
fn will_it_scale_says_the_size_it_maps() {
    let cfg = |mib: &str| {
        format!("{HEAD}[kernel]\nthp = \"never\"\n[workload]\nkind = \"will-it-scale\"\ntest = \"page_fault1\"\nnr_task = 1\nmemsize_mib = {mib}\nduration_s = 0.0005\n")
    };
    let one = run(&cfg("1"));
    assert!(
        one["scale"]
            .as_str()
            .unwrap()
            .contains("looping over 1 MiB"),
        "{}",
        one["scale"]
    );
    assert_eq!(u(&one, "phase.testcase.accesses") % 256, 0);
    let part = run(&cfg("0.5"));
    assert!(
        part["scale"]
            .as_str()
            .unwrap()
            .contains("looping over 512 KiB"),
        "{}",
        part["scale"]
    );
}

/// A program run with NUMA balancing reports its scanner's, hinting faults'
/// and migrations' counters as pmbench does; without it, none of them.
#[test]
fn numa_balancing_counters_are_reported_for_programs() {
    let body = r#"
[[workload.task]]
steps = [
  { op = "mmap", map = "a", size_mib = 4 },
  { op = "access", map = "a", write_ratio = 1.0 },
  { op = "repeat", duration_ms = 6, phase = "spin", steps = [
    { op = "access", map = "a", pattern = "uniform", count = 2000 },
  ] },
]
"#;
    let keys = [
        "numa_pte_updates",
        "numa_hint_faults",
        "numa_hint_faults_local",
        "numa_pages_migrated",
        "pgmigrate_success",
        "pgmigrate_fail",
        "task_numa_work_runs",
    ];
    let on = run(&program(
        "numa_balancing = true\nnuma_balancing_scan_delay_ms = 0\nnuma_balancing_scan_period_min_ms = 1\nnuma_balancing_scan_size_mb = 1",
        body,
    ));
    for k in keys {
        assert!(m(&on, k).is_u64(), "{k} missing: {}", m(&on, k));
    }
    assert!(u(&on, "task_numa_work_runs") > 0);
    assert!(u(&on, "numa_pte_updates") > 0);
    assert!(u(&on, "numa_hint_faults") > 0);
    let off = run(&program("numa_balancing = false", body));
    for k in keys {
        assert!(m(&off, k).is_null(), "{k} reported without NUMA balancing");
    }
}
