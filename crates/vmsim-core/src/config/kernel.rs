//! `[kernel]` of a run config: each policy by name (policy.rs), the boot
//! parameters and sysctls, and the NUMA scanner's tunables scaled with the run.

use super::fields::{cfg_err, Fields};
use super::preset::Preset;
use crate::error::Error;
use crate::kernel::config::KernelConfig;
use crate::kernel::locking::spinlock::SpinImpl;
use crate::kernel::policy::registry::{Hook, Policies, Registry};
use crate::kernel::policy::tlb::{BatchFlush, UnmapFlush};
use crate::kernel::sched::numa::ScanKnobs;
use crate::kernel::tunables::KernelTunables;
use crate::policy::{ClearPage, Policy, Preempt, Thp};
use std::path::Path;
use std::sync::Arc;

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

/// Hook policy `key`: a registered name, a name the registry's resolver
/// handles (a Python policy), or the hook's default when the key is left out.
fn hook<T: ?Sized>(
    k: &mut Fields,
    key: &'static str,
    reg: &Registry<T>,
    policies: &Policies,
    resolve: impl Fn(&dyn crate::kernel::policy::Resolver, &str) -> Option<Result<Arc<T>, String>>,
) -> Result<Hook<T>, Error> {
    let path = k.key(key);
    let Some(name) = k.str_opt(key)? else {
        return Ok(reg.default_hook());
    };
    if let Some(h) = reg.get(&name) {
        return Ok(h);
    }
    if let Some(r) = policies.resolver() {
        match resolve(r, &name) {
            Some(Ok(imp)) => return Ok(Hook::user(&name, imp)),
            Some(Err(message)) => return Err(cfg_err(path, message)),
            None => {}
        }
    }
    let more = policies
        .resolver()
        .map(|r| format!(", or {}", r.describe()))
        .unwrap_or_default();
    Err(cfg_err(
        path,
        format!(
            "{} is not accepted; accepted: {}{more}",
            super::fields::cut(&format!("{name:?}"), 60),
            super::fields::quote_list(&reg.names())
        ),
    ))
}

/// The keys `[kernel]` may hold: its own and every tunable's.
fn declare(k: &mut Fields) -> Result<(), Error> {
    let mut keys = vec![
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
        "hz",
        "skew_tick",
        "fault_around_bytes",
        "read_ahead_kb",
        "struct_pages",
        "spinlocks",
        "page_tables",
        "rwsems",
        "pte_locks",
        "wakeups",
    ];
    keys.extend(KernelTunables::ALL.iter().map(|t| t.key));
    k.declare(&keys)
}

pub(super) fn parse(
    top: &mut Fields,
    preset: &Preset,
    scale: f64,
    policies: &Policies,
    base_dir: Option<&Path>,
) -> Result<KernelConfig, Error> {
    let mut k = top
        .sub_opt("kernel")?
        .unwrap_or_else(|| Fields::new("kernel", toml::Table::new()));
    declare(&mut k)?;
    let thp = policy::<Thp>(&mut k, "thp")?;
    let p = policies;
    let clear_huge_page = hook(&mut k, "clear_huge_page", &p.clear, p, |r, n| {
        r.clear(n, base_dir)
    })?;
    let clear_page = clear_page(&mut k, preset)?;
    let preempt = policy::<Preempt>(&mut k, "preempt")?;
    let copy_huge_page = hook(&mut k, "copy_huge_page", &p.copy, p, |r, n| {
        r.copy(n, base_dir)
    })?;
    let thp_cow = hook(&mut k, "thp_cow", &p.thp_cow, p, |r, n| {
        r.thp_cow(n, base_dir)
    })?;
    let page_alloc_shuffle = k.bool_opt("page_alloc_shuffle")?.unwrap_or(false);
    let tlb_flush_on_unmap = hook(&mut k, "tlb_flush_on_unmap", &p.reclaim_flush, p, |r, n| {
        r.unmap_flush(n, base_dir)
    })?;
    let numa_balancing = k.bool_opt("numa_balancing")?.unwrap_or(false);
    let numa_hint_fault = hook(&mut k, "numa_hint_fault", &p.numa_hint, p, |r, n| {
        r.numa_hint(n, base_dir)
    })?;
    let migrate_tlb_flush = hook(&mut k, "migrate_tlb_flush", &p.migrate_flush, p, |r, n| {
        r.unmap_flush(n, base_dir)
    })?;
    let (tunables, numa_scan) = tunables(&mut k, scale)?;
    check_unmap_flush(
        &tlb_flush_on_unmap,
        "kernel.tlb_flush_on_unmap",
        &p.reclaim_flush,
        preset,
    )?;
    check_unmap_flush(
        &migrate_tlb_flush,
        "kernel.migrate_tlb_flush",
        &p.migrate_flush,
        preset,
    )?;
    let hz = hz(&mut k)?;
    let skew_tick = k.bool_opt("skew_tick")?.unwrap_or(false);
    let d = KernelConfig::default();
    let ceiling = tunables.tlb_single_page_flush_ceiling;
    let fault_around_bytes = fault_around_bytes(&mut k, d.fault_around_bytes)?;
    let read_ahead_kb = read_ahead_kb(&mut k, d.read_ahead_kb)?;
    let struct_pages = k.bool_opt("struct_pages")?.unwrap_or(false);
    let spinlocks = spinlocks(&mut k)?;
    let page_tables = k.bool_opt("page_tables")?.unwrap_or(false);
    let rwsems = k.bool_opt("rwsems")?.unwrap_or(false);
    let pte_locks = k.bool_opt("pte_locks")?.unwrap_or(false);
    if pte_locks && !(struct_pages && spinlocks.is_some() && page_tables) {
        // The lock's word lives in the table's struct page and is a spinlock
        // of the kind kernel.spinlocks names.
        return Err(cfg_err(
            "kernel.pte_locks",
            "true needs kernel.struct_pages = true, kernel.spinlocks = \"ticket\" or \"queued\" and kernel.page_tables = true (the lock is a spinlock in the page-table page's struct page)".to_string(),
        ));
    }
    let wakeups = k.bool_opt("wakeups")?.unwrap_or(false);
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
        tlb_single_page_flush_ceiling: ceiling,
        fault_around_bytes,
        read_ahead_kb,
        skew_tick,
        struct_pages,
        spinlocks,
        page_tables,
        rwsems,
        pte_locks,
        wakeups,
        tunables,
    })
}

/// `kernel.clear_page`: a machine without ERMS has no `rep stosb` worth
/// using, so its default is `orig` and `erms` is refused there.
fn clear_page(k: &mut Fields, preset: &Preset) -> Result<ClearPage, Error> {
    let default_cp = if preset.string.erms {
        ClearPage::DEFAULT
    } else {
        ClearPage::Orig
    };
    let clear_page = policy_or(k, "clear_page", default_cp)?;
    if clear_page == ClearPage::Erms && !preset.string.erms {
        return Err(cfg_err(
            "kernel.clear_page",
            format!(
                "\"erms\" needs a machine with ERMS; {} has none; accepted here: \"orig\"",
                preset.name
            ),
        ));
    }
    Ok(clear_page)
}

/// The tunables, each within its range and the per-CPU lists' and the NUMA
/// scanner's consistent with each other, and the scanner's knobs at the
/// run's scale.
fn tunables(k: &mut Fields, scale: f64) -> Result<(KernelTunables, ScanKnobs), Error> {
    let tunables = KernelTunables::read(|t| {
        let v = k.u64_opt(t.key)?;
        match v {
            Some(x) if !(t.low..=t.high).contains(&x) => Err(cfg_err(
                format!("kernel.{}", t.key),
                format!("{x} is out of range; accepted: {} to {}", t.low, t.high),
            )),
            v => Ok(v),
        }
    })?;
    let numa_scan = ScanKnobs {
        scan_delay_ms: tunables.numa_balancing_scan_delay_ms,
        scan_period_min_ms: tunables.numa_balancing_scan_period_min_ms,
        scan_period_max_ms: tunables.numa_balancing_scan_period_max_ms,
        scan_size_mb: tunables.numa_balancing_scan_size_mb,
        scale,
    };
    if tunables.pcp_high < tunables.pcp_batch {
        return Err(cfg_err(
            "kernel.pcp_high",
            format!(
                "{} is below kernel.pcp_batch ({}): the list gives back a batch once it holds high pages",
                tunables.pcp_high, tunables.pcp_batch
            ),
        ));
    }
    if numa_scan.scan_period_max_ms < numa_scan.scan_period_min_ms {
        return Err(cfg_err(
            "kernel.numa_balancing_scan_period_max_ms",
            "must not be below numa_balancing_scan_period_min_ms",
        ));
    }
    Ok((tunables, numa_scan))
}

/// A broadcast flush on unmap (reclaim's or migration's, `key`) needs
/// INVLPGB; without it the error lists the flushes this machine can run.
fn check_unmap_flush(
    flush: &Hook<dyn UnmapFlush>,
    key: &str,
    reg: &Registry<dyn UnmapFlush>,
    preset: &Preset,
) -> Result<(), Error> {
    if flush.batch_flush() == BatchFlush::Broadcast && !preset.tlb.invlpgb {
        let others: Vec<&str> = reg
            .hooks()
            .iter()
            .filter(|h| h.batch_flush() != BatchFlush::Broadcast)
            .map(|h| h.name())
            .collect();
        return Err(cfg_err(
            key,
            format!(
                "{:?} needs a CPU with INVLPGB; the {} preset's CPU ({}) has none (tlb.invlpgb = false); accepted here: {}",
                flush.name(),
                preset.name,
                preset.model,
                super::fields::quote_list(&others)
            ),
        ));
    }
    Ok(())
}

/// `kernel.hz`: CONFIG_HZ's choices (kernel/Kconfig.hz).
fn hz(k: &mut Fields) -> Result<u64, Error> {
    let hz = k.u64_opt("hz")?.unwrap_or(1000);
    if ![100, 250, 300, 1000].contains(&hz) {
        return Err(cfg_err(
            "kernel.hz",
            format!("{hz} is not a CONFIG_HZ value; accepted: 100, 250, 300, 1000"),
        ));
    }
    Ok(hz)
}

fn fault_around_bytes(k: &mut Fields, default: u64) -> Result<u64, Error> {
    let fault_around_bytes = k.u64_opt("fault_around_bytes")?.unwrap_or(default);
    // fault_around_bytes_set(): whole pages, a power of two of them, at most one PTE table.
    if !(4096..=2 << 20).contains(&fault_around_bytes)
        || !(fault_around_bytes >> 12).is_power_of_two()
        || fault_around_bytes % 4096 != 0
    {
        return Err(cfg_err(
            "kernel.fault_around_bytes",
            format!("{fault_around_bytes} is not accepted; accepted: a power of two of 4 KiB pages from 4096 (off) to 2097152"),
        ));
    }
    Ok(fault_around_bytes)
}

fn read_ahead_kb(k: &mut Fields, default: u64) -> Result<u64, Error> {
    let read_ahead_kb = k.u64_opt("read_ahead_kb")?.unwrap_or(default);
    if read_ahead_kb > 65536 || read_ahead_kb % 4 != 0 {
        return Err(cfg_err(
            "kernel.read_ahead_kb",
            format!("{read_ahead_kb} is not accepted; accepted: a multiple of 4 from 0 to 65536"),
        ));
    }
    Ok(read_ahead_kb)
}

fn spinlocks(k: &mut Fields) -> Result<Option<SpinImpl>, Error> {
    Ok(match k.str_opt("spinlocks")?.as_deref() {
        None | Some("off") => None,
        Some("ticket") => Some(SpinImpl::Ticket),
        Some("queued") => Some(SpinImpl::Queued),
        Some(other) => {
            return Err(cfg_err(
                "kernel.spinlocks",
                format!("{other:?} is not accepted; accepted: \"off\", \"ticket\" (x86 before 4.2), \"queued\" (qspinlock, 4.2+)"),
            ))
        }
    })
}
