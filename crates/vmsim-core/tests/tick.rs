//! The scheduler tick: busy CPUs take one local timer interrupt per
//! 1/`CONFIG_HZ` on a grid whose phase the seed chooses, idle CPUs take none
//! (NO_HZ_IDLE), a time slice ends at the first tick after it has run out,
//! and the seed moves timing results while the same seed repeats them.

mod common;

use vmsim_core::api::{run_config, Format};
use vmsim_core::config::{KernelConfig, Preset};
use vmsim_core::kernel::KFn;
use vmsim_core::sim::Sim;
use vmsim_core::workload::usemem::Usemem;

const NODE_BYTES: u64 = 256 << 20;

fn preset() -> Preset {
    common::preset("xeon-e5-2699v3-2s")
}

fn sim(hz: u64) -> Sim {
    let p = preset();
    let cfg = KernelConfig {
        hz,
        ..KernelConfig::default()
    };
    common::sim(&p.name, cfg, NODE_BYTES, 0)
}

fn tick_cost() -> u64 {
    let c = preset().kernel_costs();
    c.exception_entry_exit_cycles + c.tick_handler_cycles
}

/// One task alone on CPU 5 of 72: the ticks it takes are those of the grid
/// within its run, each charged in full to `tick`; the 71 idle CPUs take none.
#[test]
fn a_busy_cpu_takes_one_tick_per_period_and_idle_cpus_none() {
    for hz in [1000, 250] {
        let mut s = sim(hz);
        s.spawn(Box::new(Usemem::new(48 << 20, 1)), 5);
        s.run(&mut |_| {}).unwrap();
        let period = preset().cpu.freq_mhz * 1_000_000 / hz;
        let busy = s.machine.cpus[5].clock;
        let ticks = s.sched.stats.nr_ticks;
        // Grid from 0 (no seed given): ticks at period, 2 period, ... up to the end.
        assert!(
            ticks == busy / period || ticks + 1 == busy / period,
            "hz {hz}: {ticks} ticks in {busy} cycles of period {period}"
        );
        assert!(ticks >= 2, "hz {hz}: the run must span ticks, got {ticks}");
        assert_eq!(s.kfn_cycles[KFn::Tick as usize], ticks * tick_cost());
        for (c, cpu) in s.machine.cpus.iter().enumerate() {
            if c != 5 {
                assert_eq!(cpu.stats.sys_cycles, 0, "idle CPU {c} did kernel work");
            }
        }
    }
}

/// Two tasks on one CPU with HZ=300: the tick period (7.67 M cycles at
/// 2.3 GHz) is longer than the 3 ms slice (6.9 M cycles), so the switch
/// waits for the first tick after the slice has run out, as
/// `check_preempt_tick` does.
#[test]
fn a_slice_ends_at_the_first_tick_after_it_runs_out() {
    let mut s = sim(300);
    let a = s.spawn(Box::new(Usemem::new(64 << 20, 1)), 3);
    let b = s.spawn(Box::new(Usemem::new(4 << 20, 1)), 3);
    s.run(&mut |_| {}).unwrap();
    let p = preset();
    let period = p.cpu.freq_mhz * 1_000_000 / 300;
    let slice = 3 * p.cpu.freq_mhz * 1000;
    assert!(period > slice);
    let start_a = s.tasks[a].start.unwrap();
    let start_b = s.tasks[b].start.unwrap();
    assert!(start_a < 100_000, "a starts at once: {start_a}");
    // b is switched in after the tick at `period`: that tick, the rest of
    // any fault a was handling (the kernel is not preemptible), the switch.
    let c = p.kernel_costs();
    assert!(
        start_b >= period + tick_cost() + c.context_switch_cycles && start_b < period + period / 10,
        "b started at {start_b}; tick at {period}, slice end at {slice}"
    );
}

fn cfg(seed: u64) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\nseed = {seed}\n[kernel]\nthp = \"always\"\n[workload]\nkind = \"usemem\"\nnr_task = 8\nsize_per_task_mib = 8\n"
    )
}

/// Where the run starts within a jiffy is the seed's: two seeds give other
/// timings, one seed the same bytes.
#[test]
fn the_seed_places_the_tick_grid_and_moves_timing() {
    let run = |seed: u64| run_config(&cfg(seed), Format::Toml, None, &mut |_, _| {}).unwrap();
    let a = run(0);
    assert_eq!(a, run(0), "same seed, different bytes");
    let metric = |out: &str, key: &str| -> f64 {
        let v: serde_json::Value = serde_json::from_str(out).unwrap();
        v["metrics"][key].as_f64().unwrap()
    };
    let seeds: Vec<String> = (1..4).map(run).collect();
    assert!(
        seeds
            .iter()
            .any(|b| metric(b, "elapsed_s") != metric(&a, "elapsed_s")),
        "four seeds gave one elapsed time"
    );
    for b in &seeds {
        assert_eq!(metric(b, "instructions"), metric(&a, "instructions"));
    }
}

#[test]
fn hz_accepts_only_config_hz_values() {
    let bad = cfg(0).replace("thp = \"always\"", "thp = \"always\"\nhz = 500");
    let e = run_config(&bad, Format::Toml, None, &mut |_, _| {}).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("kernel.hz") && text.contains("100, 250, 300, 1000"),
        "{text}"
    );
}
