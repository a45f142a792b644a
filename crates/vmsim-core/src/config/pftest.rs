//! `workload.kind = "pf-test"`: one task faulting in a `MAP_HUGETLB` region.

use super::fields::{cfg_err, Fields};
use super::preset::Preset;
use crate::error::Error;
use crate::workload::base::MIB;
pub use crate::workload::pftest::PfTestConfig;

pub const KEYS: &[&str] = &["size_mib", "page_size", "cpu"];

pub fn parse(w: &mut Fields, preset: &Preset, scale: f64) -> Result<PfTestConfig, Error> {
    let page_size = w
        .choice_opt("page_size", &["2m", "1g"])?
        .unwrap_or_else(|| "2m".into());
    let page_shift = if page_size == "1g" { 30 } else { 21 };
    let mib = w
        .f64_opt("size_mib")?
        .ok_or_else(|| cfg_err(w.key("size_mib"), "missing required key"))?;
    if !(mib > 0.0 && mib * scale <= 65536.0) {
        let shown = super::fields::show_f64(mib);
        return Err(cfg_err(w.key("size_mib"), format!("{shown} MiB (x scale {scale}) is out of range; accepted: more than 0, at most 65536 MiB after scaling")));
    }
    let page = 1u64 << page_shift;
    let size = ((mib * scale * MIB as f64) as u64).div_ceil(page).max(1) * page;
    if size > (64u64 << 30) {
        return Err(cfg_err(w.key("size_mib"), "at most 65536 MiB"));
    }
    let nr_cpus = preset.cpu.sockets * preset.cpu.cores_per_socket * preset.cpu.threads_per_core;
    let cpu = w.u64_opt("cpu")?.unwrap_or(0);
    if cpu >= nr_cpus {
        return Err(cfg_err(
            w.key("cpu"),
            format!(
                "{cpu} is not a CPU of {}; accepted: 0..{}",
                preset.name,
                nr_cpus - 1
            ),
        ));
    }
    Ok(PfTestConfig {
        size,
        size_mib: size as f64 / MIB as f64,
        page_size,
        page_shift,
        cpu,
    })
}
