//! Size-dependent cache bypass of string stores (`string.nocache_threshold_kib`,
//! `string.nocache_by`): below the threshold a string store allocates; above
//! it either the whole call bypasses (a step in the call's length) or only
//! its lines stored while more than the threshold remains (the bypassed share
//! ramps with the length, the call's tail stays cached).

use vmsim_core::api::{Format, Lib, Policies};
use vmsim_core::config::{embedded_machines, Preset};
use vmsim_core::kernel::policy::clear::{ClearCtx, ClearPlan, ClearStep};
use vmsim_core::kernel::StoreHow;
use vmsim_core::machine::Machine;

fn milan_text() -> &'static str {
    embedded_machines()
        .iter()
        .find(|(n, _)| *n == "epyc-7j13-milan")
        .unwrap()
        .1
}

/// Milan's preset with the bypass set to `by` above `kib`.
fn milan_with(by: &str, kib: u64) -> String {
    milan_text()
        .lines()
        .map(|l| {
            if l.starts_with("nocache_by =") {
                format!("nocache_by = {{ value = \"{by}\", source = \"test\" }}")
            } else if l.starts_with("nocache_threshold_kib =") {
                format!("nocache_threshold_kib = {{ value = {kib}, source = \"test\" }}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn machine(by: &str, kib: u64) -> Machine {
    let p = Preset::parse(&milan_with(by, kib), "test")
        .unwrap()
        .machine_params()
        .unwrap();
    Machine::new(&p, 1 << 30, 0).unwrap()
}

#[test]
fn the_bypassed_lines_of_one_call_by_length() {
    let mib = 1024 * 1024 / 64; // lines per MiB
                                // A step: nothing up to the threshold, the whole call beyond it.
    let m = machine("call", 16 * 1024);
    assert_eq!(m.string_bypass_lines(16 * mib), 0);
    assert_eq!(m.string_bypass_lines(16 * mib + 1), 16 * mib + 1);
    assert_eq!(m.string_bypass_lines(1024 * mib), 1024 * mib);
    // A ramp: all but the last 16 MiB, so the share grows with the length.
    let m = machine("remaining", 16 * 1024);
    assert_eq!(m.string_bypass_lines(16 * mib), 0);
    assert_eq!(m.string_bypass_lines(16 * mib + 1), 1);
    assert_eq!(m.string_bypass_lines(32 * mib), 16 * mib);
    assert_eq!(m.string_bypass_lines(1024 * mib), 1008 * mib);
    // No threshold: never.
    let m = machine("remaining", 0);
    assert_eq!(m.string_bypass_lines(1024 * mib), 0);
}

/// Each 2 MiB page in one `rep stosb` over the whole of it.
struct Whole;
impl ClearPlan for Whole {
    fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
        out.push(ClearStep::Region {
            start: 0,
            len: ctx.nr_pages,
            how: StoreHow::String,
        });
        Ok(())
    }
}

/// pf-test over 8 MiB of 2 MiB pages, each cleared in one string call, on
/// Milan with the bypass as given: (non-temporal lines, string-stored lines).
fn clear_4_pages(by: &str, kib: u64) -> (u64, u64) {
    let dir = std::env::temp_dir().join(format!("vmsim-bypass-{}-{by}-{kib}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let preset = dir.join("milan.toml");
    std::fs::write(&preset, milan_with(by, kib)).unwrap();
    let cfg = format!(
        "machine = {:?}\n[kernel]\nclear_huge_page = \"whole\"\n\
         [workload]\nkind = \"pf-test\"\npage_size = \"2m\"\nsize_mib = 8\ncpu = 0\n",
        preset.to_str().unwrap()
    );
    let lib = Lib::new(Policies::builtin().register_clear("whole", Whole).unwrap());
    let out = lib
        .run_config(&cfg, Format::Toml, None, 1, &mut |_, _| {})
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["metrics"]["data_verified"], true);
    let c = &v["metrics"]["counters"]["cpu"]["cache"];
    let nt = c["nt_stores"].as_u64().unwrap();
    (nt, c["l1d_stores"].as_u64().unwrap() - nt)
}

#[test]
fn a_clear_call_bypasses_all_of_it_or_all_but_its_tail() {
    let page = 2 * 1024 * 1024 / 64;
    // 2 MiB calls over a 1 MiB threshold: the whole call, or its first half.
    let (nt, _) = clear_4_pages("call", 1024);
    assert_eq!(nt, 4 * page);
    let (nt, _) = clear_4_pages("remaining", 1024);
    assert_eq!(nt, 4 * page / 2);
    // At the threshold nothing bypasses.
    let (nt, _) = clear_4_pages("remaining", 2048);
    assert_eq!(nt, 0);
}

#[test]
fn the_bypass_mode_names_its_choices() {
    match Preset::parse(&milan_with("tail", 1024), "test") {
        Err(vmsim_core::error::Error::Config { key, message }) => {
            assert_eq!(key, "string.nocache_by.value");
            assert!(message.contains("\"call\"") && message.contains("\"remaining\""));
        }
        other => panic!("{other:?}"),
    }
}
