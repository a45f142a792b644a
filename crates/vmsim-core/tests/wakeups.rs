//! `kernel.wakeups`: every wake-up is a `try_to_wake_up()` with its costs.
//! The waker pays `try_to_wake_up_cycles` in kernel mode, one wake after
//! another; a woken task whose CPU is idle runs only once that CPU has left
//! the idle state the menu governor chose for the period (no iowait
//! multiplier unless the task slept in `io_schedule()`); timers, `kswapd`'s
//! wake-up and new tasks alike. Off, wake-ups cost nothing, as before.

mod common;

use vmsim_core::config::KernelConfig;
use vmsim_core::sim::Sim;

fn sim(wakeups: bool) -> Sim {
    let cfg = KernelConfig {
        wakeups,
        ..Default::default()
    };
    common::sim("xeon-e5-2699v3-2s", cfg, 64 << 20, 0)
}

/// Task `pid` runs on `cpu` and goes to sleep; the CPU is idle since `since`.
fn sleeper(s: &mut Sim, pid: usize, cpu: usize, since: u64) {
    s.sched.add_task(pid, cpu);
    assert_eq!(s.sched.pick_next_task(cpu), Some(pid));
    s.sched.sleep_current(cpu);
    s.cpus[cpu].idle_since = since;
}

#[test]
fn a_timer_wake_pays_the_exit_of_the_state_the_whole_period_allowed() {
    let mut s = sim(true);
    let us = s.machine.freq_mhz;
    // hsw_cstates: C1 2/2, C1E 10/20, C3 33/100, C6 133/400 (exit/residency,
    // µs). Not in iowait, the exit may be as long as the period itself.
    for (pid, idle_us, exit_us) in [
        (0, 1, 0),      // under C1's residency: none
        (1, 15, 2),     // C1 (C1E needs 20 µs)
        (2, 50, 10),    // C1E (C3 needs 100 µs)
        (3, 300, 33),   // C3 (C6 needs 400 µs)
        (4, 1000, 133), // C6; with iowait (1000/11 µs) it would be C3
    ] {
        let cpu = 10 + pid;
        sleeper(&mut s, pid, cpu, 1000);
        let at = 1000 + idle_us * us;
        assert!(s.try_to_wake_up(None, pid, at, false));
        assert_eq!(
            s.sched.take_wakeups(),
            vec![(cpu, at + exit_us * us)],
            "{idle_us} µs"
        );
    }
    assert_eq!(s.idle_stats.exits, vec![1, 1, 1, 1]);
    // A task not asleep is not woken and costs nothing.
    assert!(!s.try_to_wake_up(None, 4, 99_999_999, false));
    assert_eq!(s.idle_stats.exits, vec![1, 1, 1, 1]);
}

#[test]
fn the_waker_pays_each_try_to_wake_up_in_turn_and_the_woken_cpus_their_exits() {
    let mut s = sim(true);
    let us = s.machine.freq_mhz;
    let ttwu = s.kernel.costs.try_to_wake_up_cycles;
    assert_eq!(ttwu, 1000, "the preset's estimate");
    // Three sleepers on CPUs 20..22, idle since 0; the waker runs on CPU 1.
    for (pid, cpu) in [(0, 20), (1, 21), (2, 22)] {
        sleeper(&mut s, pid, cpu, 0);
    }
    s.sched.add_task(3, 1);
    assert_eq!(s.sched.pick_next_task(1), Some(3));
    let now = 300 * us;
    s.machine.cpus[1].clock = now;
    let sys0 = s.machine.cpus[1].stats.sys_cycles;
    for pid in 0..3 {
        assert!(s.try_to_wake_up(Some(1), pid, now, false));
    }
    // Each wake ends ttwu later than the one before; each CPU was idle some
    // 300 µs: C3 (33 µs exit; C6 needs 400 µs of residency).
    let exit = 33 * us;
    assert_eq!(
        s.sched.take_wakeups(),
        vec![
            (20, now + ttwu + exit),
            (21, now + 2 * ttwu + exit),
            (22, now + 3 * ttwu + exit),
        ]
    );
    assert_eq!(s.machine.cpus[1].clock, now + 3 * ttwu);
    assert_eq!(s.machine.cpus[1].stats.sys_cycles - sys0, 3 * ttwu);
    // A woken task on a busy CPU runs at the waker's time: no exit.
    sleeper(&mut s, 4, 1, 0);
    s.sched.add_task(5, 1);
    assert!(s.try_to_wake_up(Some(2), 4, 0, false));
    assert_eq!(s.sched.take_wakeups(), vec![(1, s.machine.cpus[2].clock)]);
}

#[test]
fn off_a_wake_up_is_free_and_immediate() {
    let mut s = sim(false);
    sleeper(&mut s, 0, 20, 0);
    s.sched.add_task(1, 1);
    assert_eq!(s.sched.pick_next_task(1), Some(1));
    s.machine.cpus[1].clock = 5_000_000;
    assert!(s.try_to_wake_up(Some(1), 0, 5_000_000, false));
    assert_eq!(s.sched.take_wakeups(), vec![(20, 5_000_000)]);
    assert_eq!(s.machine.cpus[1].clock, 5_000_000);
    assert_eq!(s.idle_stats.exits, vec![0, 0, 0, 0]);
}

#[test]
fn kswapds_wake_up_is_free_without_wakeups_and_left_to_its_waker_with_them() {
    for wakeups in [false, true] {
        let mut s = sim(wakeups);
        let us = s.machine.freq_mhz;
        let pid = s.kswapd_run(0);
        let cpu = s.sched.task_cpu(pid);
        // kswapd sleeps on its wait queue (kswapd_try_to_sleep), its CPU idle.
        assert_eq!(s.sched.pick_next_task(cpu), Some(pid));
        s.sched.sleep_current(cpu);
        let q = s.kernel.mem.pgdat[0].kswapd_wait;
        s.kernel.sched.waitq.wait(q, pid);
        s.cpus[cpu].idle_since = 0;
        s.kernel.wakeup_kswapd(0);
        let at = 2000 * us;
        s.wake_woken(at);
        if wakeups {
            // The allocating path makes it and pays for it (kernel/mmzone.rs).
            assert_eq!(s.kernel.reclaim.pending_wakes, vec![0]);
            assert!(s.sched.take_wakeups().is_empty());
        } else {
            assert_eq!(s.sched.take_wakeups(), vec![(cpu, at)]);
        }
    }
}

fn lru_file_mmap_read(wakeups: bool) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\nseed = 3\n[kernel]\nwakeups = {wakeups}\npage_tables = true\n\
         [workload]\nkind = \"lru-file-mmap-read\"\nnr_task = 8\nram_mib = 16\n"
    )
}

#[test]
fn in_reclaim_every_kswapd_wake_up_is_made_by_the_allocating_path() {
    // A wake-up an allocation left pending on a path that queues none would
    // stop the run with an internal error (sim/, `Sim::wake_stray_pending`):
    // file faults, readahead and page-table allocations all wake kswapd here.
    let on = common::run_json(&lru_file_mmap_read(true));
    let again = common::run_json(&lru_file_mmap_read(true));
    let off = common::run_json(&lru_file_mmap_read(false));
    let kswapd = |v: &serde_json::Value| {
        v["metrics"]["counters"]["events"]["kswapd_wakeups"]
            .as_u64()
            .unwrap()
    };
    assert!(kswapd(&on) > 0 && kswapd(&off) > 0);
    for v in [&on, &off] {
        assert!(v["metrics"]["data_verified"].as_bool().unwrap());
    }
    assert_eq!(common::strip_volatile(&on), common::strip_volatile(&again));
}

fn usemem(wakeups: bool) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\nwakeups = {wakeups}\n\
         [workload]\nkind = \"usemem\"\nnr_task = 8\nsize_per_task_mib = 2\n\
         prealloc = true\nprefault = true\n"
    )
}

#[test]
fn a_run_with_wakeups_counts_its_idle_exits_and_is_deterministic() {
    let on = common::run_json(&usemem(true));
    let off = common::run_json(&usemem(false));
    let exits = |v: &serde_json::Value| {
        let e = &v["metrics"]["counters"]["idle"]["exits"];
        ["C1", "C1E", "C3", "C6"]
            .iter()
            .map(|s| e[s].as_u64().unwrap())
            .sum::<u64>()
    };
    // anon-cow-seq: the children forked onto idle CPUs leave their idle
    // states, and so do the CPUs of the children the parent's "go" wakes.
    assert!(exits(&on) >= 8, "{}", exits(&on));
    let wakes = |v: &serde_json::Value| v["metrics"]["counters"]["sched"]["nr_wakeups"].as_u64();
    assert_eq!(wakes(&on), wakes(&off));
    assert_eq!(exits(&off), 0);
    // Idle time counts every ended idle period, its exit included.
    let idle =
        |v: &serde_json::Value, k: &str| v["metrics"]["counters"]["idle"][k].as_u64().unwrap();
    assert!(idle(&on, "exit_cycles") > 0);
    assert!(idle(&on, "idle_cycles") >= idle(&on, "exit_cycles"));
    assert!(
        idle(&off, "idle_cycles") > 0,
        "the CPUs waiting for the parent idle"
    );
    assert_eq!(
        common::strip_volatile(&on),
        common::strip_volatile(&common::run_json(&usemem(true)))
    );
}

#[test]
fn a_wakeups_key_that_is_not_a_boolean_is_refused_by_name() {
    let text = usemem(true).replace("wakeups = true", "wakeups = 1");
    let err =
        vmsim_core::api::run_config(&text, vmsim_core::api::Format::Toml, None, &mut |_, _| {})
            .unwrap_err()
            .to_string();
    assert!(err.contains("kernel.wakeups"), "{err}");
}
