//! Timed wake-ups (a sleeping lock's): the woken CPU leaves its idle state
//! first, the state as the menu governor picks it for a task in iowait;
//! an unlock wakes the waiters one at a time, in the order they slept.

mod common;

use vmsim_core::config::KernelConfig;
use vmsim_core::sim::Sim;

fn sim() -> Sim {
    let cfg = KernelConfig {
        struct_pages: true,
        ..Default::default()
    };
    common::sim("xeon-e5-2699v3-2s", cfg, 64 << 20, 0)
}

/// Task `pid` sleeps on CPU `cpu`, idle since `since`, as a waiter for page `key`.
fn sleeper(s: &mut Sim, pid: usize, cpu: usize, since: u64, key: u64) {
    s.sched.add_task(pid, cpu);
    assert_eq!(s.sched.pick_next_task(cpu), Some(pid));
    s.sched.sleep_current(cpu);
    s.cpus[cpu].idle_since = since;
    let q = s.kernel.folio_waitqueue(key);
    s.kernel.sched.waitq.wait_exclusive(q, pid, key);
}

#[test]
fn a_woken_cpu_pays_the_exit_of_the_state_its_idle_period_allowed() {
    let mut s = sim();
    let us = s.machine.freq_mhz; // cycles per µs
                                 // hsw_cstates: C1 2/2, C1E 10/20, C3 33/100, C6 133/400 (exit/residency,
                                 // µs); the exit may be at most a 1/11 of the period.
    for (pid, idle_us, exit_us) in [
        (0, 10, 0),    // C1's exit, 2 µs, is more than 10/11: none
        (1, 30, 2),    // C1 (C1E's 10 µs exit is more than 30/11)
        (2, 150, 10),  // C1E (C3's 33 µs is more than 150/11)
        (3, 1000, 33), // C3 (C6's 133 µs is more than 1000/11)
        (4, 2000, 133),
    ] {
        let cpu = 10 + pid;
        sleeper(&mut s, pid, cpu, 1000, 77);
        let at = 1000 + idle_us * us;
        let q = s.kernel.folio_waitqueue(77);
        assert_eq!(s.kernel.sched.waitq.wake_up_key(q, 77, at), vec![pid]);
        s.wake_woken(0);
        assert_eq!(
            s.sched.take_wakeups(),
            vec![(cpu, at + exit_us * us)],
            "{idle_us} µs"
        );
    }
    assert_eq!(s.idle_stats.exits, vec![1, 1, 1, 1]);
    assert_eq!(s.idle_stats.exit_cycles, (2 + 10 + 33 + 133) * us);
}

#[test]
fn unlocks_wake_the_waiters_one_at_a_time_in_the_order_they_slept() {
    let mut s = sim();
    let us = s.machine.freq_mhz;
    // Three tasks sleep for page 512 on CPUs 20, 21, 22, idle since 0.
    for (pid, cpu) in [(0, 20), (1, 21), (2, 22)] {
        sleeper(&mut s, pid, cpu, 0, 512);
    }
    let q = s.kernel.folio_waitqueue(512);
    // Each unlock wakes the next in line, and only it; each CPU pays C1E
    // (idle 200 µs then 300 µs: C1E's exit 10 ≤ 200/11 and C3's 33 > 300/11).
    for (k, at_us) in [(0, 200), (1, 300)] {
        let at = at_us * us;
        assert_eq!(s.kernel.sched.waitq.wake_up_key(q, 512, at), vec![k]);
        s.wake_woken(0);
        assert_eq!(s.sched.take_wakeups(), vec![(20 + k, at + 10 * us)]);
    }
    assert_eq!(s.kernel.sched.waitq.waiters_of(q, 512), vec![2]);
    // A busy CPU pays nothing.
    s.sched.wake_up_new_task(3, 22, 0);
    s.sched.take_wakeups();
    assert_eq!(s.kernel.sched.waitq.wake_up_key(q, 512, 5000), vec![2]);
    s.wake_woken(0);
    assert_eq!(s.sched.take_wakeups(), vec![(22, 5000)]);
}
