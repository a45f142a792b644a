//! `[kernel]` of a run config: each policy by name (policy.rs), the boot
//! parameters and sysctls, and the NUMA scanner's tunables scaled with the run.

use super::fields::{cfg_err, Fields};
use super::{KernelConfig, Preset};
use crate::error::Error;
use crate::kernel::sched::numa::ScanKnobs;
use crate::policy::{
    ClearHugePage, ClearPage, CopyHugePage, MigrateTlbFlush, NumaHintFault, Policy, Preempt, Thp,
    ThpCow, TlbFlushOnUnmap,
};

/// Policy `key`: one of its names, or `default` when the key is left out.
fn policy_or<P: Policy>(k: &mut Fields, key: &'static str, default: P) -> Result<P, Error> {
    Ok(match k.choice_opt(key, P::NAMES)? {
        Some(name) => P::parse(&name).expect("an accepted name parses"),
        None => default,
    })
}

/// Policy `key`: one of its names, or its declared default.
fn policy<P: Policy>(k: &mut Fields, key: &'static str) -> Result<P, Error> {
    policy_or(k, key, P::DEFAULT)
}

pub(super) fn parse(top: &mut Fields, preset: &Preset, scale: f64) -> Result<KernelConfig, Error> {
    let mut k = top
        .sub_opt("kernel")?
        .unwrap_or_else(|| Fields::new("kernel", toml::Table::new()));
    k.declare(&[
        "thp",
        "clear_huge_page",
        "clear_page",
        "preempt",
        "copy_huge_page",
        "thp_cow",
        "page_alloc_shuffle",
        "tlb_flush_on_unmap",
        "numa_balancing",
        "numa_hint_fault",
        "migrate_tlb_flush",
        "numa_balancing_scan_delay_ms",
        "numa_balancing_scan_period_min_ms",
        "numa_balancing_scan_period_max_ms",
        "numa_balancing_scan_size_mb",
        "hz",
        "skew_tick",
        "struct_pages",
    ])?;
    let thp = policy::<Thp>(&mut k, "thp")?;
    let clear_huge_page = policy::<ClearHugePage>(&mut k, "clear_huge_page")?;
    let default_cp = if preset.string.erms {
        ClearPage::DEFAULT
    } else {
        ClearPage::Orig
    };
    let clear_page = policy_or(&mut k, "clear_page", default_cp)?;
    if clear_page == ClearPage::Erms && !preset.string.erms {
        return Err(cfg_err(
            "kernel.clear_page",
            format!(
                "\"erms\" needs a machine with ERMS; {} has none; accepted here: \"orig\"",
                preset.name
            ),
        ));
    }
    let preempt = policy::<Preempt>(&mut k, "preempt")?;
    let copy_huge_page = policy::<CopyHugePage>(&mut k, "copy_huge_page")?;
    let thp_cow = policy::<ThpCow>(&mut k, "thp_cow")?;
    let page_alloc_shuffle = k.bool_opt("page_alloc_shuffle")?.unwrap_or(false);
    let tlb_flush_on_unmap = policy::<TlbFlushOnUnmap>(&mut k, "tlb_flush_on_unmap")?;
    let numa_balancing = k.bool_opt("numa_balancing")?.unwrap_or(false);
    let numa_hint_fault = policy::<NumaHintFault>(&mut k, "numa_hint_fault")?;
    let migrate_tlb_flush = policy::<MigrateTlbFlush>(&mut k, "migrate_tlb_flush")?;
    let d = ScanKnobs::default();
    let mut knob = |key: &'static str, default: u64, lo: u64, hi: u64| -> Result<u64, Error> {
        let v = k.u64_opt(key)?.unwrap_or(default);
        if !(lo..=hi).contains(&v) {
            return Err(cfg_err(
                format!("kernel.{key}"),
                format!("{v} is out of range; accepted: {lo} to {hi}"),
            ));
        }
        Ok(v)
    };
    let numa_scan = ScanKnobs {
        scan_delay_ms: knob(
            "numa_balancing_scan_delay_ms",
            d.scan_delay_ms,
            0,
            3_600_000,
        )?,
        scan_period_min_ms: knob(
            "numa_balancing_scan_period_min_ms",
            d.scan_period_min_ms,
            1,
            3_600_000,
        )?,
        scan_period_max_ms: knob(
            "numa_balancing_scan_period_max_ms",
            d.scan_period_max_ms,
            1,
            3_600_000,
        )?,
        scan_size_mb: knob("numa_balancing_scan_size_mb", d.scan_size_mb, 1, 1 << 20)?,
        scale,
    };
    if numa_scan.scan_period_max_ms < numa_scan.scan_period_min_ms {
        return Err(cfg_err(
            "kernel.numa_balancing_scan_period_max_ms",
            "must not be below numa_balancing_scan_period_min_ms",
        ));
    }
    if tlb_flush_on_unmap == TlbFlushOnUnmap::Broadcast && !preset.tlb.invlpgb {
        return Err(cfg_err(
            "kernel.tlb_flush_on_unmap",
            format!(
                "\"broadcast\" needs a CPU with INVLPGB; the {} preset's CPU ({}) has none (tlb.invlpgb = false); accepted here: \"per-page\", \"batched\"",
                preset.name, preset.model
            ),
        ));
    }
    // CONFIG_HZ's choices (kernel/Kconfig.hz).
    let hz = k.u64_opt("hz")?.unwrap_or(1000);
    if ![100, 250, 300, 1000].contains(&hz) {
        return Err(cfg_err(
            "kernel.hz",
            format!("{hz} is not a CONFIG_HZ value; accepted: 100, 250, 300, 1000"),
        ));
    }
    let skew_tick = k.bool_opt("skew_tick")?.unwrap_or(false);
    let struct_pages = k.bool_opt("struct_pages")?.unwrap_or(false);
    k.finish()?;
    Ok(KernelConfig {
        thp,
        clear_huge_page,
        clear_page,
        preempt,
        copy_huge_page,
        thp_cow,
        page_alloc_shuffle,
        tlb_flush_on_unmap,
        numa_balancing,
        numa_hint_fault,
        migrate_tlb_flush,
        numa_scan,
        hz,
        skew_tick,
        struct_pages,
    })
}
