//! `clzero` as a clear plan's region kind (`StoreHow::Clzero`): a region
//! stored with it zeroes every line without a read and without allocating,
//! costs its loop's instructions, and a plan that asks for it on a machine
//! whose CPUs lack it (`string.clzero = false`) stops with `Error::Policy`.

use vmsim_core::api::{Error, Format, Lib, Policies};
use vmsim_core::kernel::policy::clear::{ClearCtx, ClearPlan, ClearStep};
use vmsim_core::kernel::StoreHow;

/// The whole folio in one region stored `how`, then a fence.
struct Whole(StoreHow);
impl ClearPlan for Whole {
    fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
        out.push(ClearStep::Region {
            start: 0,
            len: ctx.nr_pages,
            how: self.0,
        });
        out.push(ClearStep::Fence);
        Ok(())
    }
}

fn lib() -> Lib {
    let p = Policies::builtin()
        .register_clear("clzero-whole", Whole(StoreHow::Clzero))
        .and_then(|p| p.register_clear("movnti-whole", Whole(StoreHow::NonTemporal)))
        .unwrap();
    Lib::new(p)
}

/// pf-test: one task faulting in 8 MiB of 2 MiB hugetlb pages.
fn pf_test(machine: &str, clear: &str) -> String {
    format!(
        "machine = \"{machine}\"\n[kernel]\nclear_huge_page = \"{clear}\"\n\
         [workload]\nkind = \"pf-test\"\npage_size = \"2m\"\nsize_mib = 8\ncpu = 0\n"
    )
}

fn run(lib: &Lib, text: &str) -> Result<serde_json::Value, Error> {
    lib.run_config(text, Format::Toml, None, 1, &mut |_, _| {})
        .map(|s| serde_json::from_str(&s).unwrap())
}

#[test]
fn a_clzero_region_zeroes_its_lines_as_non_temporal_stores() {
    let lib = lib();
    let cz = run(&lib, &pf_test("epyc-7j13-milan", "clzero-whole")).unwrap();
    let nt = run(&lib, &pf_test("epyc-7j13-milan", "movnti-whole")).unwrap();
    let lines = 8 * 1024 * 1024 / 64;
    let m = &cz["metrics"];
    assert_eq!(m["data_verified"], true);
    let cache = &m["counters"]["cpu"]["cache"];
    assert_eq!(cache["nt_stores"], lines);
    // No line is read for ownership: the only misses are the task's own
    // touch of each huge page after its fault (4), the lines the clear left
    // in no cache.
    assert_eq!(m["counters"]["vmstat"]["hugetlb_faults"], 4);
    assert_eq!(cache["l1d_misses"], 4);
    assert_eq!(m["counters"]["dram"]["bytes_written"], lines * 64);
    // The same lines as movnti's, timed alike; only the loop differs: 4
    // instructions per line against movnti's 11.
    let ins = |r: &serde_json::Value| r["metrics"]["counters"]["cpu"]["sys_instructions"].as_u64();
    assert_eq!(ins(&nt).unwrap() - ins(&cz).unwrap(), (11 - 4) * lines);
    assert_eq!(
        nt["metrics"]["counters"]["dram"]["bytes_written"],
        lines * 64
    );
}

#[test]
fn a_clzero_plan_on_a_cpu_without_it_stops_naming_the_step() {
    match run(&lib(), &pf_test("xeon-8358-icx", "clzero-whole")) {
        Err(Error::Policy {
            key,
            policy,
            message,
        }) => {
            assert_eq!(key, "kernel.clear_huge_page");
            assert_eq!(policy, "clzero-whole");
            assert!(
                message.contains("step 0") && message.contains("string.clzero = false"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn only_the_amd_preset_has_clzero() {
    use vmsim_core::config::{embedded_machines, Preset};
    for (name, text) in embedded_machines() {
        let p = Preset::parse(text, name).unwrap().machine_params().unwrap();
        assert_eq!(p.clzero, name.starts_with("epyc"), "{name}");
    }
}
