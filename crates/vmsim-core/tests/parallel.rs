//! An experiment's arms run on several host threads: the result is the same
//! for any number of threads, errors are those of a run one arm after
//! another, and a failing progress hook stops every arm.

use vmsim_core::api::compare_with;
use vmsim_core::error::Error;

fn experiment(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("vmsim-parallel-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

const CASES: &str = r#"
name = "small-cases"
description = "two machines, three clearing orders"
reference = "none"

[config]
machine = "xeon-8358-icx"

[config.workload]
kind = "pf-test"
page_size = "2m"
size_mib = 8
cpu = 0

[[cases]]
name = "icx"
set = { "machine" = "xeon-8358-icx" }

[[cases]]
name = "milan"
set = { "machine" = "epyc-7j13-milan" }

[baseline]
name = "sequential"
set = { "kernel.clear_huge_page" = "sequential" }

[[variants]]
name = "target-last"
set = { "kernel.clear_huge_page" = "target-last" }

[[variants]]
name = "multipage-2023"
set = { "kernel.clear_huge_page" = "multipage-2023" }
"#;

#[test]
fn the_result_does_not_depend_on_the_number_of_threads() {
    let p = experiment("cases", CASES);
    let p = p.to_str().unwrap();
    let run = |threads| compare_with(p, None, 3, None, threads, &mut |_, _| {}).unwrap();
    let one = run(1);
    for threads in [2, 4, 16] {
        assert!(run(threads) == one, "{threads} threads");
    }
    let v: serde_json::Value = serde_json::from_str(&one).unwrap();
    assert_eq!(v["case_order"], serde_json::json!(["icx", "milan"]));
    assert_eq!(
        v["cases"]["milan"]["variant_order"],
        serde_json::json!(["target-last", "multipage-2023"])
    );
    // Each arm's own configuration is the one it ran with.
    let c = &v["cases"]["milan"];
    assert_eq!(
        c["arm_configs"]["multipage-2023"]["machine"],
        "epyc-7j13-milan"
    );
    assert_eq!(
        c["arm_configs"]["multipage-2023"]["kernel"]["clear_huge_page"],
        "multipage-2023"
    );
    for arm in ["target-last", "multipage-2023"] {
        assert_eq!(c["variants"][arm]["data_verified"], true, "{arm}");
    }
    // A built-in experiment without cases.
    let a = compare_with(
        "clear-target-last",
        Some(1.0 / 64.0),
        1,
        None,
        1,
        &mut |_, _| {},
    );
    let b = compare_with(
        "clear-target-last",
        Some(1.0 / 64.0),
        1,
        None,
        2,
        &mut |_, _| {},
    );
    assert!(a.unwrap() == b.unwrap());
}

/// Arms whose memory is refused when their simulation is built, on a host
/// thread: the first of them in the experiment's order is the error.
const FAILING: &str = r#"
name = "failing"
description = "the second and third arm ask for more memory than is supported"
reference = "none"

[config]
machine = "xeon-e5-2699v3-2s"

[config.workload]
kind = "usemem"
nr_task = 1
size_per_task_mib = 2

[baseline]
name = "fits"

[[variants]]
name = "too-big"
set = { "sim.node_memory_mib" = 200000 }

[[variants]]
name = "far-too-big"
set = { "sim.node_memory_mib" = 250000 }
"#;

#[test]
fn the_error_is_the_first_failing_arms() {
    let p = experiment("failing", FAILING);
    let p = p.to_str().unwrap();
    for threads in [1, 2, 3] {
        match compare_with(p, None, 0, None, threads, &mut |_, _| {}) {
            Err(Error::Config { key, message }) => {
                assert_eq!(key, "sim.node_memory_mib", "{threads} threads");
                assert!(message.contains("390 GiB"), "{threads} threads: {message}");
            }
            other => panic!("{threads} threads: {other:?}"),
        }
    }
}

#[test]
fn zero_threads_is_refused() {
    match compare_with("clear-target-last", None, 0, None, 0, &mut |_, _| {}) {
        Err(Error::Config { key, .. }) => assert_eq!(key, "threads"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn progress_is_reported_and_a_failing_hook_stops_every_arm() {
    let p = experiment("progress", CASES);
    let p = p.to_str().unwrap();
    let mut seen = Vec::new();
    compare_with(p, None, 0, None, 2, &mut |label, f| {
        seen.push((label.to_string(), f))
    })
    .unwrap();
    assert!(seen
        .iter()
        .all(|(l, f)| l == "small-cases (6 runs, up to 2 at once)" && (0.0..=1.0).contains(f)));
    assert_eq!(seen.last().map(|s| s.1), Some(1.0));

    // The hook fails at its first call: the call returns by unwinding, with
    // the hook's payload, once every arm has stopped.
    let t = std::time::Instant::now();
    let r = std::panic::catch_unwind(|| {
        compare_with("clear-target-last", None, 0, None, 2, &mut |_, _| {
            std::panic::resume_unwind(Box::new("stop"))
        })
    });
    let payload = r.expect_err("the hook's unwind reaches the caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"stop"));
    // Each arm at full size takes minutes; stopping takes a fraction of a second.
    assert!(t.elapsed().as_secs() < 60, "{:?}", t.elapsed());
}

/// The runs a caller skips (their metrics from a cache) are null in the
/// result, and the rest is the full result's, byte for byte, whichever runs
/// are skipped and on any number of threads.
#[test]
fn skipped_runs_leave_the_others_as_they_are() {
    use serde_json::Value;
    use vmsim_core::api::Lib;

    let p = experiment("skip", CASES);
    let p = p.to_str().unwrap();
    let lib = Lib::builtin();
    let run = |skip: &[usize], threads| {
        let text = lib
            .compare_except(p, None, 1, None, threads, skip, &mut |_, _| {})
            .unwrap();
        serde_json::from_str::<Value>(&text).unwrap()
    };
    // Compared as parsed values: serde_json's default float parsing is not
    // exact to the last bit, so text parsed and written again may differ
    // from the core's (the Python layer, whose parsing is exact, checks the
    // bytes: tests/python/test_cache.py).
    let full = run(&[], 2);
    assert_eq!(
        full,
        serde_json::from_str::<Value>(&compare_with(p, None, 1, None, 1, &mut |_, _| {}).unwrap())
            .unwrap()
    );
    // The plan's order: case by case, the baseline first.
    let slot = |v: &Value, i: usize| -> Value {
        let case = &v["cases"][["icx", "milan"][i / 3]];
        match i % 3 {
            0 => case["baseline"].clone(),
            n => case["variants"][["target-last", "multipage-2023"][n - 1]].clone(),
        }
    };
    for (skip, threads) in [(vec![0], 1), (vec![1, 5], 2), (vec![0, 1, 2, 3, 4, 5], 2)] {
        let part = run(&skip, threads);
        for i in 0..6 {
            if skip.contains(&i) {
                assert_eq!(slot(&part, i), Value::Null, "{skip:?}: run {i}");
            } else {
                assert_eq!(slot(&part, i), slot(&full, i), "{skip:?}: run {i}");
            }
        }
        // Filled in, it is the full result.
        let mut filled = part.clone();
        for &i in &skip {
            let case = &mut filled["cases"][["icx", "milan"][i / 3]];
            let m = slot(&full, i);
            match i % 3 {
                0 => case["baseline"] = m,
                n => case["variants"][["target-last", "multipage-2023"][n - 1]] = m,
            }
        }
        assert!(filled == full, "{skip:?}");
    }
    let err = lib
        .compare_except(p, None, 1, None, 1, &[6], &mut |_, _| {})
        .unwrap_err();
    assert!(
        matches!(err, Error::Config { ref key, .. } if key == "skip"),
        "{err}"
    );
}
