//! Trace replay (`kind = "trace"`) through a run config: a small C program
//! compiled and traced with valgrind's lackey at test time (into cargo's
//! temporary folder under target/, made again by each run), replayed with its data verified, counted
//! (accesses as recorded, one fault per page touched without THP) and
//! byte-identical on re-run; a threaded one traced with `--trace-sched=yes`
//! replayed as one simulated thread per valgrind thread; malformed lines,
//! accesses outside every region and bad regions refused with errors naming
//! the line or the key. The tests that need gcc and valgrind say so on
//! stderr and pass without them; the synthetic-trace tests always run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use vmsim_core::config::RunConfig;
use vmsim_core::error::Error;
use vmsim_core::experiment::simulate;

/// A folder of its own under the system's temporary folder, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("vmsim-trace-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const SINGLE: &str = r#"
#include <stdlib.h>
/* 4 MiB (past glibc's mmap threshold: a mapping of its own), one store
   per page, then one load per page. */
int main(void) {
    size_t n = 4u << 20;
    volatile char *a = malloc(n);
    for (size_t i = 0; i < n; i += 4096) a[i] = (char)(i >> 12);
    long s = 0;
    for (size_t i = 0; i < n; i += 4096) s += a[i];
    return (int)(s & 1);
}
"#;

const THREADED: &str = r#"
#include <pthread.h>
#include <stdlib.h>
static void *work(void *p) {
    size_t n = 256u << 10;
    volatile char *b = malloc(n);
    for (size_t i = 0; i < n; i += 64) b[i] = (char)i;
    long s = 0;
    for (size_t i = 0; i < n; i += 64) s += b[i];
    return (void *)s;
}
int main(void) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, work, 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    return 0;
}
"#;

/// The folder holding `single.lackey` and `threaded.lackey`, traced once
/// for all tests; None (said on stderr) without gcc or valgrind. It is
/// cargo's temporary folder for integration tests (under target/, made
/// again by each run): a static is never dropped, so a folder of the
/// system's would be left behind.
fn traces() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        for tool in ["gcc", "valgrind"] {
            if Command::new(tool).arg("--version").output().is_err() {
                eprintln!("skipped: {tool} is not installed (the test traces a C program with valgrind --tool=lackey)");
                return None;
            }
        }
        let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("trace-valgrind");
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for (name, src, extra) in [("single", SINGLE, &[][..]), ("threaded", THREADED, &["--trace-sched=yes"][..])] {
            let c = d.join(format!("{name}.c"));
            std::fs::write(&c, src).unwrap();
            let exe = d.join(name);
            let ok = Command::new("gcc")
                .args(["-O1", "-pthread", "-o"])
                .arg(&exe)
                .arg(&c)
                .status()
                .unwrap()
                .success();
            assert!(ok, "gcc failed on {name}.c");
            let log = d.join(format!("{name}.lackey"));
            let ok = Command::new("valgrind")
                .args(["--tool=lackey", "--trace-mem=yes"])
                .args(extra)
                .arg(format!("--log-file={}", log.display()))
                .arg(&exe)
                .status()
                .unwrap()
                .success();
            assert!(ok, "valgrind failed on {name}");
        }
        Some(d)
    })
    .as_deref()
}

fn config(trace: &Path, thp: &str, extra: &str) -> Result<RunConfig, Error> {
    let text = format!(
        r#"
machine = "xeon-e5-2699v3-2s"
seed = 1
[kernel]
thp = "{thp}"
[workload]
kind = "trace"
trace = "{}"
{extra}
"#,
        trace.display()
    );
    RunConfig::from_table(toml::from_str(&text).unwrap(), None, 1.0)
}

fn run(trace: &Path, thp: &str, extra: &str) -> Result<serde_json::Value, Error> {
    simulate(&config(trace, thp, extra)?, &mut |_| {})
}

fn n(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} missing: {v}"))
}

#[test]
fn a_traced_c_program_replays_counted_verified_and_deterministic() {
    let Some(d) = traces() else { return };
    let t = d.join("single.lackey");
    let a = run(&t, "never", "").unwrap();
    assert_eq!(a["data_verified"], true, "{}", a["data_errors"]);
    // Every recorded access is made: a modify is two, an access across
    // a line boundary one per line.
    let recorded = n(&a, "trace_loads") + n(&a, "trace_stores") + 2 * n(&a, "trace_modifies");
    let made = n(&a, "trace_accesses");
    assert!(
        made >= recorded && made < recorded + recorded / 100,
        "{made} of {recorded}"
    );
    // One store and one load per page of the 4 MiB buffer, beside the loader's and libc's.
    assert!(n(&a, "trace_stores") >= 1024 && n(&a, "trace_loads") >= 1024);
    // Without THP, each page touched faults once: the first touch.
    assert_eq!(n(&a, "pgfault"), n(&a, "trace_pages"));
    assert!(n(&a, "trace_pages") > 1024, "the buffer's pages and more");
    assert!(n(&a, "trace_instructions") > 10_000);
    let b = run(&t, "never", "").unwrap();
    assert_eq!(a.to_string(), b.to_string(), "not deterministic");
    // With THP the buffer's 2 MiB blocks are huge pages: far fewer faults.
    let h = run(&t, "always", "").unwrap();
    assert_eq!(h["data_verified"], true, "{}", h["data_errors"]);
    assert!(n(&h, "thp_fault_alloc") >= 2, "{}", h["thp_fault_alloc"]);
    assert!(n(&h, "pgfault") < n(&a, "pgfault") / 10);
    assert_eq!(n(&h, "trace_accesses"), made);
}

#[test]
fn a_threaded_program_replays_one_thread_per_valgrind_thread() {
    let Some(d) = traces() else { return };
    let t = d.join("threaded.lackey");
    let a = run(&t, "never", "").unwrap();
    assert_eq!(a["data_verified"], true, "{}", a["data_errors"]);
    assert_eq!(n(&a, "trace_threads"), 3);
    let tasks = a["task_accesses"].as_array().unwrap();
    assert_eq!(tasks.len(), 3, "{tasks:?}");
    // Each worker stores to and loads from 4096 lines of its own buffer.
    for w in &tasks[1..] {
        assert!(n(w, "writes") >= 4096 && n(w, "reads") >= 4096, "{w}");
    }
    let b = run(&t, "never", "").unwrap();
    assert_eq!(a.to_string(), b.to_string(), "not deterministic");
    // Bound to two CPUs (taskset -c 2,3), the threads share them.
    let c = run(&t, "never", "cpus = [2, 3]").unwrap();
    assert_eq!(c["data_verified"], true);
    assert_eq!(n(&c, "trace_accesses"), n(&a, "trace_accesses"));
}

#[test]
fn a_malformed_line_is_an_error_naming_the_file_and_line() {
    let Some(d) = traces() else { return };
    let text = std::fs::read_to_string(d.join("single.lackey")).unwrap();
    let dir = TempDir::new("malformed");
    let mut lines: Vec<&str> = text.lines().collect();
    lines[99] = " L 1fff00zz08,8";
    let bad = dir.0.join("bad.lackey");
    std::fs::write(&bad, lines.join("\n")).unwrap();
    let Err(Error::Config { key, message }) = config(&bad, "never", "") else {
        panic!("accepted")
    };
    assert_eq!(key, "workload.trace");
    assert!(message.contains("bad.lackey line 100:"), "{message}");
    assert!(message.contains("hexadecimal"), "{message}");
}

#[test]
fn an_access_outside_the_regions_is_a_simulated_sigsegv() {
    let Some(d) = traces() else { return };
    // Map the program's low mappings only: its stack (valgrind puts it
    // near 0x1fff000000) is left out.
    let e = run(
        &d.join("single.lackey"),
        "never",
        "regions = [{ start = 0x10000, len = 0x100000000 }]",
    )
    .unwrap_err();
    let Error::Config { key, message } = e else {
        panic!("{e}")
    };
    assert_eq!(key, "workload.regions");
    assert!(message.starts_with("simulated SIGSEGV: "), "{message}");
    assert!(message.contains("single.lackey line "), "{message}");
    assert!(message.contains("outside every mapping"), "{message}");
}

/// A trace written by the test: no valgrind needed.
fn synthetic(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.0.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_synthetic_trace_counts_instructions_lines_and_threads() {
    let dir = TempDir::new("synthetic");
    let t = synthetic(
        &dir,
        "s.lackey",
        "==1== Lackey\n\
         I  00400000,4\n\
         I  00400004,4\n \
         S 10000000,8\n\
         I  00400008,4\n \
         M 1000003c,8\n \
         L 10001000,4\n\
         --1--   SCHED[1]:  acquired lock (thread_wrapper(starting new thread))\n\
         I  0040000c,4\n \
         S 10002000,8\n\
         --1--   SCHED[1]: releasing lock\n\
         --1--   SCHED[2]:  acquired lock (thread_wrapper(starting new thread))\n\
         I  00400010,4\n \
         S 10003000,8\n \
         S 10003008,8\n\
         --1--   SCHED[2]: exiting VG_(scheduler)\n\
         --1--   SCHED[1]:  acquired lock (x)\n \
         L 10002000,8\n",
    );
    let a = run(&t, "never", "").unwrap();
    assert_eq!(a["data_verified"], true, "{}", a["data_errors"]);
    // S, M across a line (2 lines x load+store), L; S; thread 2: S, S; L.
    assert_eq!(n(&a, "trace_accesses"), 1 + 4 + 1 + 1 + 2 + 1);
    assert_eq!(n(&a, "trace_threads"), 2);
    assert_eq!(n(&a, "trace_instructions"), 5);
    assert_eq!(n(&a, "trace_pages"), 4);
    assert_eq!(n(&a, "pgfault"), 4);
    let tasks = a["task_accesses"].as_array().unwrap();
    assert_eq!((n(&tasks[0], "reads"), n(&tasks[0], "writes")), (4, 4));
    assert_eq!((n(&tasks[1], "reads"), n(&tasks[1], "writes")), (0, 2));
    // The auto region is the one 2 MiB block at 0x10000000.
    let cfg = config(&t, "never", "").unwrap();
    let vmsim_core::config::WorkloadConfig::Trace(tc) = &cfg.workload else {
        panic!()
    };
    assert_eq!(tc.regions.len(), 1);
    assert_eq!(
        (tc.regions[0].start, tc.regions[0].len),
        (0x1000_0000, 2 << 20)
    );
}

#[test]
fn bad_traces_and_regions_get_errors_naming_the_line_or_key() {
    let dir = TempDir::new("bad");
    let cases: &[(&str, &str)] = &[
        (" S 1000,8\n X 1000,8\n", "line 2: expected a lackey record"),
        (" S 1000\n", "line 1: no `,size`"),
        (" S 1000,abc\n", "line 1: the size is not a decimal number"),
        (" S 1000,0\n", "line 1: an access of 0 bytes"),
        (
            " L ffffffffffffffff,8\n",
            "line 1: the access at 0xffffffffffffffff of 8 bytes wraps",
        ),
        ("hello world\n", "line 1: expected a lackey record"),
        ("==1== Lackey\nI  00400000,4\n", "no data access records"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let t = synthetic(&dir, &format!("b{i}.lackey"), text);
        let e = config(&t, "never", "").map(|_| ()).unwrap_err().to_string();
        assert!(
            e.starts_with("workload.trace: ") && e.contains(want),
            "{text:?}: {e}"
        );
    }
    // A file without line breaks fails at the line bound, not by reading it whole.
    let t = synthetic(&dir, "long.lackey", &"L".repeat(100_000));
    let e = config(&t, "never", "").map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("line 1: a line longer than 4096 bytes"), "{e}");
    let e = config(&dir.0.join("none.lackey"), "never", "")
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("workload.trace: "), "{e}");
    let ok = synthetic(&dir, "ok.lackey", " S 10000000,8\n");
    for (extra, key, want) in [
        ("regions = [{ start = 0x1000, len = 4096 }]", "workload.regions[0].start", "mmap_min_addr"),
        ("regions = [{ start = 0x10001, len = 4096 }]", "workload.regions[0].start", "multiple of 4096"),
        ("regions = [{ start = 0x10000, len = 0 }]", "workload.regions[0].len", "positive multiple"),
        ("regions = [{ start = 0x7ffffffff000, len = 0x2000 }]", "workload.regions[0].len", "47-bit"),
        ("regions = [{ start = 0x10000000, len = 0x2000 }, { start = 0x10001000, len = 0x1000 }]", "workload.regions", "overlap"),
        ("regions = [{ start = 0x10000000, len = 0x2000, prot = 1 }]", "workload.regions[0].prot", "unknown key"),
        ("regions = [{ start = \"0xzz\", len = 4096 }]", "workload.regions[0].start", "not an address"),
        ("regions = [{ start = 0x10000, len = 0x1000000000000 }]", "workload.regions[0].len", "47-bit"),
        ("regions = [{ start = 0x10000, len = 0x7f0000000000 }]", "workload.regions", "at most 65536 MiB"),
        ("regions = []", "workload.regions", "0 regions"),
        ("regions = \"all\"", "workload.regions", "accepted: \"auto\""),
        ("cpus = [99]", "workload.cpus[0]", "not a CPU"),
        ("cpus = [1, 1]", "workload.cpus[1]", "given twice"),
        ("cpus = []", "workload.cpus", "non-empty list"),
        ("bogus = 1", "workload.bogus", "unknown key"),
    ] {
        let Err(Error::Config { key: k, message }) = config(&ok, "never", extra) else {
            panic!("{extra}: accepted")
        };
        assert_eq!(k, key, "{extra}: {message}");
        assert!(message.contains(want), "{extra}: {message}");
    }
    // Many given regions: all mapped, all checked.
    let many: Vec<String> = (0..600u64)
        .map(|i| format!("{{ start = {}, len = 4096 }}", 0x1000_0000 + i * 0x2000))
        .collect();
    let r = run(&ok, "never", &format!("regions = [{}]", many.join(", "))).unwrap();
    assert_eq!(r["data_verified"], true, "{}", r["data_errors"]);
    assert_eq!(n(&r, "pgfault"), 1);
    // A region given as a hexadecimal string (JSON has no hex numbers) is taken.
    let c = config(
        &ok,
        "never",
        "regions = [{ start = \"0x10000000\", len = 4096 }]",
    )
    .unwrap();
    let r = run(
        &ok,
        "never",
        "regions = [{ start = \"0x10000000\", len = 4096 }]",
    )
    .unwrap();
    assert_eq!(r["data_verified"], true);
    drop(c);
    // Nothing in a trace scales.
    let text = format!(
        "machine = \"xeon-e5-2699v3-2s\"\n[workload]\nkind = \"trace\"\ntrace = \"{}\"\n",
        ok.display()
    );
    let e = RunConfig::from_table(toml::from_str(&text).unwrap(), None, 0.5)
        .map(|_| ())
        .unwrap_err();
    assert!(e.to_string().starts_with("scale: "), "{e}");
}

#[test]
fn a_windowed_run_replays_the_same_accesses_verified() {
    // The windowed loop runs a replay in its serial phase (window.rs runs
    // only the pattern loops in parallel): same accesses, data verified.
    let dir = TempDir::new("window");
    let mut text = String::new();
    for i in 0..4000u64 {
        text += &format!(
            "I  00400000,4\n S {:x},8\n L {:x},8\n",
            0x1000_0000 + i * 512,
            0x2000_0000 + i * 64
        );
    }
    let t = synthetic(&dir, "w.lackey", &text);
    let plain = run(&t, "always", "").unwrap();
    let cfg_text = format!(
        "machine = \"xeon-e5-2699v3-2s\"\n[workload]\nkind = \"trace\"\ntrace = \"{}\"\n[sim]\nwindow_cycles = \"auto\"\n",
        t.display()
    );
    let cfg = RunConfig::from_table(toml::from_str(&cfg_text).unwrap(), None, 1.0).unwrap();
    let w = simulate(&cfg, &mut |_| {}).unwrap();
    assert_eq!(w["data_verified"], true, "{}", w["data_errors"]);
    assert_eq!(n(&w, "trace_accesses"), 8000);
    assert_eq!(n(&w, "trace_accesses"), n(&plain, "trace_accesses"));
}

#[test]
fn a_trace_rewritten_at_once_is_scanned_again() {
    // Same length, same coarse modification time: the pre-pass must not
    // take the first content's counts for the second's.
    let dir = TempDir::new("rewrite");
    let t = synthetic(&dir, "r.lackey", " S 10000000,8\n");
    let scan = |c: RunConfig| match c.workload {
        vmsim_core::config::WorkloadConfig::Trace(t) => (t.scan.loads, t.scan.stores),
        _ => unreachable!(),
    };
    assert_eq!(scan(config(&t, "never", "").unwrap()), (0, 1));
    std::fs::write(&t, " L 10000000,8\n").unwrap();
    assert_eq!(scan(config(&t, "never", "").unwrap()), (1, 0));
}

#[test]
fn a_trace_that_changes_between_its_reading_and_its_replay_is_refused() {
    let dir = TempDir::new("changed");
    let lines: String = (0..64)
        .map(|i| format!("I  0040{i:04x},4\n S 1000{:04x},8\n", i * 64))
        .collect();
    let cut = lines.len() / 2;
    let cut = cut + lines[cut..].find('\n').unwrap() + 1;
    for (what, after) in [
        ("cut short at a line boundary", lines[..cut].to_string()),
        ("grown", format!("{lines} L 10000000,8\n")),
        // Read as a line the pre-pass never saw: the change, not the text,
        // is what the error names.
        ("rewritten with other text", "x".repeat(lines.len())),
    ] {
        let t = synthetic(&dir, "t.lackey", &lines);
        // The config reads the file (its pre-pass); the replay reads it again.
        let cfg = config(&t, "never", "").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&t, &after).unwrap();
        match simulate(&cfg, &mut |_| {}) {
            Err(Error::Config { key, message }) => {
                assert_eq!(key, "workload.trace", "{what}: {message}");
                assert!(
                    message.contains("changed while it was replayed"),
                    "{what}: {message}"
                );
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    // The file as it was read replays.
    let t = synthetic(&dir, "t.lackey", &lines);
    let cfg = config(&t, "never", "").unwrap();
    assert_eq!(simulate(&cfg, &mut |_| {}).unwrap()["data_verified"], true);
}
