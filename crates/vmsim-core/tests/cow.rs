//! fork and copy-on-write: semantics (each side sees its own data), reuse by
//! the last mapper, content tags carried by the copy, every folio freed
//! exactly once, injected defects detected, determinism.

mod common;

use vmsim_core::api::{self, Error, Format};
use vmsim_core::config::KernelConfig;
use vmsim_core::policy::{Thp, ThpCow};
use vmsim_core::sim::Sim;
use vmsim_core::workload::{Expect, Op, Program};

const MIB: u64 = 1 << 20;

/// A step of a scripted program; offsets are relative to the first mapping.
#[derive(Clone, Debug)]
enum S {
    Mmap(u64),
    Write(u64, u64, u64),
    Check(u64, u64, Expect),
    Fork,
    Wait,
    Exit,
}

#[derive(Clone)]
struct Script {
    parent: Vec<S>,
    child: Vec<S>,
    in_child: bool,
    i: usize,
    addr: u64,
    after_fork: bool,
}

impl Script {
    fn new(parent: Vec<S>, child: Vec<S>) -> Script {
        Script {
            parent,
            child,
            in_child: false,
            i: 0,
            addr: 0,
            after_fork: false,
        }
    }
}

impl Program for Script {
    fn next(&mut self, ret: u64) -> Op {
        if self.after_fork {
            self.after_fork = false;
            if ret == 0 {
                self.in_child = true;
                self.i = 0;
            }
        } else if self.addr == 0 && ret != 0 {
            self.addr = ret; // the first mmap's address
        }
        let list = if self.in_child {
            &self.child
        } else {
            &self.parent
        };
        let s = list.get(self.i).cloned().unwrap_or(S::Exit);
        self.i += 1;
        let a = self.addr;
        match s {
            S::Mmap(len) => Op::Mmap {
                len,
                populate: false,
            },
            S::Write(off, len, seed) => Op::WriteSeq {
                start: a + off,
                len,
                seed,
                instr_per_word: vmsim_core::workload::usemem::USEMEM_INSTR_PER_WORD,
            },
            S::Check(off, len, expect) => Op::Check {
                start: a + off,
                len,
                expect,
            },
            S::Fork => {
                self.after_fork = true;
                Op::Fork
            }
            S::Wait => Op::Wait,
            S::Exit => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        0
    }
    fn fork(&self) -> Option<Box<dyn Program>> {
        Some(Box::new(self.clone()))
    }
}

fn sim(thp: Thp, thp_cow: ThpCow) -> Sim {
    let cfg = KernelConfig {
        thp,
        thp_cow: thp_cow.into(),
        ..KernelConfig::default()
    };
    common::sim("xeon-e5-2699v3-2s", cfg, 64 * MIB, 1)
}

fn written(seed: u64) -> Expect {
    Expect::Written { seed }
}

/// Parent writes A over 4 MiB and forks. The child reads A, writes B over
/// one 4 KiB page, and checks it reads B there and A everywhere else. The
/// parent waits, checks A is intact, then writes C: by now it is the only
/// mapper, so its faults reuse its pages instead of copying.
fn cow_script() -> Script {
    let len = 4 * MIB;
    let (a, b, c) = (0xA, 0xB, 0xC);
    Script::new(
        vec![
            S::Mmap(len),
            S::Write(0, len, a),
            S::Fork,
            S::Wait,
            S::Check(0, len, written(a)),
            S::Write(0, len, c),
            S::Check(0, len, Expect::Overwritten { first: a, then: c }),
            S::Exit,
        ],
        vec![
            S::Check(0, len, written(a)),
            S::Write(8192, 4096, b),
            S::Check(8192, 4096, Expect::Overwritten { first: a, then: b }),
            S::Check(0, 8192, written(a)),
            S::Check(12288, len - 12288, written(a)),
            S::Exit,
        ],
    )
}

fn run_cow(thp: Thp, thp_cow: ThpCow) -> Sim {
    let mut s = sim(thp, thp_cow);
    let free0: Vec<u64> = s.kernel.mem.alloc.nr_free.clone();
    s.spawn(Box::new(cow_script()), 0);
    s.run(&mut |_| {}).unwrap();
    assert_eq!(s.tasks.len(), 2);
    for t in &s.tasks {
        assert!(t.exited, "task {} did not exit", t.pid);
        assert_eq!(t.bad_pages, 0, "task {}: {:?}", t.pid, t.first_bad);
        assert!(t.pages_checked > 0);
    }
    // Every folio freed exactly once: all memory is back on the free lists.
    assert_eq!(s.kernel.mem.alloc.nr_free, free0, "{thp:?} {thp_cow:?}");
    let v = &s.kernel.vmstat;
    assert_eq!(
        v.pgfault,
        v.pgfault_anon_4k + v.pgfault_thp + v.pgfault_cow_4k + v.pgfault_cow_thp
    );
    assert_eq!(v.pgalloc, v.pgfree);
    s
}

#[test]
fn cow_thp_copy() {
    let s = run_cow(Thp::Always, ThpCow::Copy);
    let v = &s.kernel.vmstat;
    assert_eq!(v.pgfault_thp, 2);
    assert_eq!(
        v.thp_cow_copies, 1,
        "the child copies the one huge page it writes"
    );
    assert_eq!(v.subpage_copies, 512);
    assert_eq!(v.thp_split_pmd, 0);
    assert_eq!(
        v.pgfault_cow_thp, 3,
        "one copy, then two reuses by the parent"
    );
    assert_eq!(v.cow_reuse, 2);
}

#[test]
fn cow_thp_split() {
    let s = run_cow(Thp::Always, ThpCow::Split);
    let v = &s.kernel.vmstat;
    assert_eq!(v.thp_cow_copies, 0);
    assert_eq!(v.thp_split_pmd, 1);
    assert_eq!(
        v.subpage_copies, 1,
        "5.8+: only the written 4 KiB page is copied"
    );
    assert_eq!(v.pgfault_cow_4k, 1);
    // The split was in the child's page table only: the parent's PMDs stay
    // huge and, once the child is gone, are reused whole.
    assert_eq!(v.pgfault_cow_thp, 2);
    assert_eq!(v.cow_reuse, 2);
}

#[test]
fn cow_4k() {
    let s = run_cow(Thp::Never, ThpCow::Copy);
    let v = &s.kernel.vmstat;
    assert_eq!(v.pgfault_anon_4k, 1024);
    assert_eq!(v.subpage_copies, 1);
    assert_eq!(v.pgfault_cow_4k, 1 + 1024);
    assert_eq!(
        v.cow_reuse, 1024,
        "after the child exits the parent reuses every page"
    );
}

#[test]
fn parent_writes_do_not_reach_a_live_child() {
    // The parent writes while the child still maps the pages: the parent copies,
    // the child keeps reading the original data.
    for (thp, mode) in [
        (Thp::Always, ThpCow::Copy),
        (Thp::Always, ThpCow::Split),
        (Thp::Never, ThpCow::Copy),
    ] {
        let len = 2 * MIB;
        let script = Script::new(
            vec![
                S::Mmap(len),
                S::Write(0, len, 1),
                S::Fork,
                S::Write(0, len, 2),
                S::Check(0, len, Expect::Overwritten { first: 1, then: 2 }),
                S::Wait,
                S::Exit,
            ],
            // The child's check runs after a long write loop of its own region copy.
            vec![
                S::Write(len - 4096, 4096, 3),
                S::Check(0, len - 4096, written(1)),
                S::Check(len - 4096, 4096, Expect::Overwritten { first: 1, then: 3 }),
                S::Exit,
            ],
        );
        let mut s = sim(thp, mode);
        s.spawn(Box::new(script), 0);
        s.run(&mut |_| {}).unwrap();
        for t in &s.tasks {
            assert_eq!(
                t.bad_pages, 0,
                "{thp:?} {mode:?} task {}: {:?}",
                t.pid, t.first_bad
            );
        }
    }
}

fn usemem_cow(extra: &str) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\nthp_cow = \"copy\"\n\
         [workload]\nkind = \"usemem\"\nnr_task = 3\nsize_per_task_mib = 4\nprealloc = true\nprefault = true\n{extra}"
    )
}

fn metrics(cfg: &str) -> serde_json::Value {
    let out = api::run_config(cfg, Format::Toml, None, &mut |_, _| {}).unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["metrics"].clone()
}

#[test]
fn usemem_prealloc_prefault_verifies_and_counts() {
    let m = metrics(&usemem_cow(""));
    assert_eq!(m["data_verified"], true, "{}", m["data_errors"]);
    assert_eq!(
        m["pgfault_thp"], 2,
        "MAP_POPULATE faults the two huge pages in"
    );
    assert_eq!(m["thp_cow_copies"], 6, "3 children x 2 huge pages");
    assert_eq!(m["pgfault_by_kind"]["cow_thp"], 6);
    assert!(m["throughput_bytes_per_s"].as_f64().unwrap() > 0.0);
    let split = metrics(&usemem_cow("").replace("thp_cow = \"copy\"", "thp_cow = \"split\""));
    assert_eq!(split["data_verified"], true, "{}", split["data_errors"]);
    assert_eq!(split["thp_split_pmd"], 6);
    assert_eq!(split["pgfault_cow_4k"], 3 * 1024);
}

#[test]
fn skipped_copy_subpage_is_detected() {
    let m = metrics(&usemem_cow(
        "[sim.fault_injection]\nskip_copy_subpage = 77\n",
    ));
    assert_eq!(m["data_verified"], false);
    let errs = m["data_errors"].as_array().unwrap();
    assert_eq!(
        errs.len(),
        1,
        "only the child whose copy was defective: {errs:?}"
    );
}

#[test]
fn deterministic() {
    let cfg = usemem_cow("");
    let a = api::run_config(&cfg, Format::Toml, None, &mut |_, _| {}).unwrap();
    let b = api::run_config(&cfg, Format::Toml, None, &mut |_, _| {}).unwrap();
    assert_eq!(a, b);
}

#[test]
fn config_errors_name_the_key() {
    let bad = usemem_cow("").replace("thp_cow = \"copy\"", "thp_cow = \"huge\"");
    match api::run_config(&bad, Format::Toml, None, &mut |_, _| {}) {
        Err(Error::Config { key, message }) => {
            assert_eq!(key, "kernel.thp_cow");
            assert!(message.contains("\"copy\", \"split\""), "{message}");
        }
        r => panic!("{:?}", r.map(|_| ())),
    }
    let bad = usemem_cow("[sim.fault_injection]\nskip_copy_subpage = 512\n");
    match api::run_config(&bad, Format::Toml, None, &mut |_, _| {}) {
        Err(Error::Config { key, .. }) => assert_eq!(key, "sim.fault_injection.skip_copy_subpage"),
        r => panic!("{:?}", r.map(|_| ())),
    }
    let bad = usemem_cow("").replace("prefault = true", "prefault = 1");
    match api::run_config(&bad, Format::Toml, None, &mut |_, _| {}) {
        Err(Error::Config { key, .. }) => assert_eq!(key, "workload.prefault"),
        r => panic!("{:?}", r.map(|_| ())),
    }
    let bad = usemem_cow("").replace("kind = \"usemem\"", "kind = \"usemem\"\npre_alloc = true");
    match api::run_config(&bad, Format::Toml, None, &mut |_, _| {}) {
        Err(Error::Config { key, .. }) => assert_eq!(key, "workload.pre_alloc"),
        r => panic!("{:?}", r.map(|_| ())),
    }
}

/// The diagnostic start skew: child k wakes k x skew after fork and times
/// itself from there; the data is still verified, and skew 0 is usemem.
#[test]
fn child_start_skew_staggers_the_children_and_keeps_their_data() {
    let cfg = |skew: u64| {
        format!(
            "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\nthp_cow = \"copy\"\n[workload]\nkind = \"usemem\"\nnr_task = 4\nsize_per_task_mib = 4\nprealloc = true\nprefault = true\nchild_start_skew_us = {skew}\n"
        )
    };
    let run = |skew: u64| -> serde_json::Value {
        let out = api::run_config(&cfg(skew), Format::Toml, None, &mut |_, _| {}).unwrap();
        serde_json::from_str(&out).unwrap()
    };
    let plain = api::run_config(
        &cfg(0).replace("child_start_skew_us = 0\n", ""),
        Format::Toml,
        None,
        &mut |_, _| {},
    )
    .unwrap();
    let zero = run(0);
    let plain: serde_json::Value = serde_json::from_str(&plain).unwrap();
    assert_eq!(zero["metrics"], plain["metrics"], "skew 0 is usemem");
    let skewed = run(500);
    assert_eq!(skewed["metrics"]["data_verified"], true);
    // The last child wakes 3 x 500 us after fork; alone at the end it runs
    // faster than in the crowd, so the run grows by most of that, not all.
    let e0 = zero["metrics"]["elapsed_s"].as_f64().unwrap();
    let e1 = skewed["metrics"]["elapsed_s"].as_f64().unwrap();
    assert!(e1 > e0 + 1.0e-3, "{e0} -> {e1}");
}

/// usemem's start pipes: the children wait for the parent's "go", which
/// comes after the last fork, and all wake at that instant. With a start skew
/// of 1 us, child k then starts exactly k us after child 0, where forking
/// alone would put each a fork later than the one before.
#[test]
fn the_children_start_together_on_the_parents_go() {
    use vmsim_core::workload::usemem::Usemem;
    let mut s = sim(Thp::Always, ThpCow::Copy);
    s.spawn(
        Box::new(Usemem::with_flags(4 * MIB, 1, true, true, 4).with_child_start_skew(1000)),
        0,
    );
    s.run(&mut |_| {}).unwrap();
    let starts: Vec<u64> = s.tasks[1..].iter().map(|t| t.start.unwrap()).collect();
    let us = s.machine.freq_mhz;
    for (k, st) in starts.iter().enumerate() {
        assert_eq!(st - starts[0], k as u64 * us, "{starts:?}");
    }
    for t in &s.tasks {
        assert!(t.exited);
        assert_eq!(t.bad_pages, 0, "task {}: {:?}", t.pid, t.first_bad);
    }
    // The parent's go came after its last fork, and after each child was ready.
    assert_eq!(s.tasks[0].nr_forked, 4);
}
