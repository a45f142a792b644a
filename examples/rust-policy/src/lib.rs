//! A huge-page clear plan of one's own, outside vmsim's crate: clear the
//! faulting sub-page first, then the rest ascending. Registering it is one
//! line (`register_clear`); running an experiment with it is the library API.

use vmsim_core::api::{Error, Lib, Policies};
use vmsim_core::kernel::policy::clear::{ClearCtx, ClearPlan, ClearStep};

/// The plan: decided from the context alone.
pub struct TargetFirst;

impl ClearPlan for TargetFirst {
    fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
        out.push(ClearStep::Subpage(ctx.target));
        out.extend(
            (0..ctx.nr_pages)
                .filter(|&i| i != ctx.target)
                .map(ClearStep::Subpage),
        );
        Ok(())
    }
}

/// vmsim with this crate's policy registered as `target-first`.
pub fn lib() -> Result<Lib, Error> {
    Ok(Lib::new(
        Policies::builtin().register_clear("target-first", TargetFirst)?,
    ))
}

/// An experiment comparing the kernel's target-last with target-first.
pub const EXPERIMENT: &str = r#"
name = "target-first"
description = "anon-w-seq with THP: target sub-page last (4.14+) vs first"
reference = "clear-target-last's machine and 72 tasks at its smallest valid scale (one 2 MiB huge page each)"

[config]
machine = "xeon-e5-2699v3-2s"
[config.kernel]
thp = "always"
[config.workload]
kind = "usemem"
nr_task = 72
size_per_task_mib = 2
warmup = true

[baseline]
name = "target-last"
set = { "kernel.clear_huge_page" = "target-last" }

[[variants]]
name = "target-first"
set = { "kernel.clear_huge_page" = "target-first" }
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use vmsim_core::api::CompareOptions;

    #[test]
    fn the_registered_plan_runs_in_an_experiment_and_keeps_the_data() {
        let dir = std::env::temp_dir().join(format!("vmsim-example-policy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("target-first.toml");
        std::fs::write(&path, EXPERIMENT).unwrap();
        let lib = lib().unwrap();
        let v = lib
            .compare_value(
                path.to_str().unwrap(),
                &CompareOptions::default(),
                &mut |_, _| {},
            )
            .unwrap();
        // The typed call gives what the text one does.
        let text = lib
            .compare(path.to_str().unwrap(), None, 0, None, 1, &mut |_, _| {})
            .unwrap();
        assert_eq!(v, serde_json::from_str::<serde_json::Value>(&text).unwrap());
        // Settings for every arm, as `vmsim compare --set`: an unknown key is
        // refused naming it.
        let bad = CompareOptions::default().set("kernel.no_such_key", true);
        let err = lib
            .compare_value(path.to_str().unwrap(), &bad, &mut |_, _| {})
            .unwrap_err();
        assert!(err.to_string().contains("no_such_key"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
        let first = &v["variants"]["target-first"];
        assert_eq!(first["data_verified"], true);
        assert_eq!(v["baseline"]["data_verified"], true);
        // Each task faults on sub-page 0 first: target-first clears it first,
        // target-last last, and the two orders leave different lines cached.
        assert_ne!(first["llc_misses"], v["baseline"]["llc_misses"]);
    }
}
