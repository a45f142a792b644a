//! Machine presets: the modeled hardware's parameters, each read from a
//! `{ value = …, source = "…" }` leaf. A preset without a source for a value
//! is rejected, so no number enters the model without provenance.

use super::fields::{cfg_err, Fields};
use crate::error::Error;
use crate::kernel::KernelCosts;
use crate::machine::cache::Replacement;
use crate::machine::ipi::IpiCosts;
use crate::machine::tlb::TlbConfig;
use crate::machine::topology::Topology;
use crate::machine::{
    CacheLevelParams, IdleState, InvlpgbCosts, MachineParams, NoRfoGrant, NocacheBy,
    PerfCacheEvents, PrefetchParams,
};
use std::collections::BTreeMap;
use toml::Value;

mod bounds;
pub mod params;
mod provenance;

use params::{Book, P};
pub use params::{
    Costs, Cpu, HwCosts, Idle, IdleStatePreset, L1d, Llc, Memory, NameOrNs, Numa, Param, Prefetch,
    Preset, StringParams, Tlb, L2, MAX_HOPS,
};
pub use provenance::{Provenance, CLASSES, RANGED};

/// One cache level in the model's units.
fn level(
    key: &str,
    (size_kib, ways, latency_cycles): (u64, u64, u64),
    replacement: &str,
    outstanding: u64,
    sustained_bytes_per_cycle: f64,
    writebacks_share_sustained: bool,
) -> Result<CacheLevelParams, Error> {
    let replacement: Replacement = replacement
        .parse()
        .map_err(|e: String| cfg_err(format!("{key}.replacement.value"), e))?;
    Ok(CacheLevelParams {
        bytes: size_kib * 1024,
        ways,
        latency_cycles,
        replacement,
        outstanding,
        sustained_bytes_per_cycle,
        writebacks_share_sustained,
    })
}

/// `range_with` against the values of a preset: each coupled key is one of
/// its values and, at the end that is the preset's own value, each coupled
/// value is the preset's own too (unless that one is a run's: class
/// `user`). Not a load-time check: a user's copy that changes one of the
/// values (its class kept) still loads; a test holds the built-in presets
/// to it.
pub fn check_couplings(provenance: &BTreeMap<String, Provenance>) -> Option<Error> {
    for (key, p) in provenance {
        let (Some(r), Some(with)) = (&p.range, &p.range_with) else {
            continue;
        };
        let own = r.iter().position(|v| *v == p.value);
        for (k, vs) in with {
            let Some(other) = provenance.get(k) else {
                return Some(cfg_err(
                    format!("{key}.range_with.{k}"),
                    "the preset has no such value",
                ));
            };
            // A value of the run's or the user's own is theirs to set.
            if other.class == "user" {
                continue;
            }
            if let Some(i) = own {
                if vs[i] != other.value {
                    return Some(cfg_err(
                        format!("{key}.range_with.{k}"),
                        format!(
                            "{} at the end that is the preset's own value, but {k} is {}",
                            super::fields::show(&vs[i]),
                            super::fields::show(&other.value)
                        ),
                    ));
                }
            }
        }
    }
    None
}

/// Reads section `name` of `top` with `read` (a section's generated reader).
fn section<T>(
    top: &mut Fields,
    name: &'static str,
    book: &mut Book,
    read: impl FnOnce(&mut P) -> Result<T, Error>,
) -> Result<T, Error> {
    let mut p = P {
        f: top.sub(name)?,
        book,
    };
    let v = read(&mut p)?;
    p.finish()?;
    Ok(v)
}

/// The run config key whose dotted keys set preset values.
pub const MACHINE_SET: &str = "machine_set";

/// Sets the preset value at `key` (`l2.superqueue`) to `v` in the preset's
/// table, as the run's own: class `user`, no range, a source saying what
/// it replaced.
fn set_value(table: &mut toml::Table, key: &str, v: &Value) -> Result<(), Error> {
    let shown = format!("{MACHINE_SET}.{key}");
    let name = table
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("the preset")
        .to_string();
    let not_found = || {
        cfg_err(
            super::fields::cut(&shown, 80),
            format!("not a value of the machine preset {name} (vmsim machines --show {name} lists its values, e.g. l2.superqueue)"),
        )
    };
    let mut t = &mut *table;
    let parts: Vec<&str> = key.split('.').collect();
    for part in &parts[..parts.len() - 1] {
        match t.get_mut(*part) {
            Some(Value::Table(sub)) if !sub.contains_key("value") => t = sub,
            _ => return Err(not_found()),
        }
    }
    let Some(Value::Table(leaf)) = t.get_mut(parts[parts.len() - 1]) else {
        return Err(not_found());
    };
    let Some(old) = leaf.get("value").cloned() else {
        return Err(cfg_err(
            super::fields::cut(&shown, 80),
            "is a section of the preset, not one value; set its values one by one",
        ));
    };
    let class = leaf
        .get("class")
        .and_then(Value::as_str)
        .unwrap_or("user")
        .to_string();
    let source = leaf
        .get("source")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    leaf.insert("value".into(), v.clone());
    leaf.insert(
        "source".into(),
        Value::String(format!(
            "set by the run ({shown} = {}); the preset's value {} ({class}): {source}",
            super::fields::show(v),
            super::fields::show(&old)
        )),
    );
    leaf.insert("class".into(), Value::String("user".into()));
    leaf.remove("range");
    leaf.remove("range_reason");
    leaf.remove("range_with");
    Ok(())
}

impl Preset {
    pub fn parse(text: &str, origin: &str) -> Result<Preset, Error> {
        Self::parse_with(text, origin, &[])
    }

    /// The preset of `text` with some of its values set by a run (its
    /// `machine_set`): each `(dotted key, value)` replaces that value before
    /// the preset is read, so the field's own checks judge it, and the value
    /// becomes the run's (class `user`, its source naming what it replaced).
    pub fn parse_with(text: &str, origin: &str, sets: &[(String, Value)]) -> Result<Preset, Error> {
        let mut table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| super::fields::toml_error(text, &e, origin))?;
        for (key, v) in sets {
            set_value(&mut table, key, v)?;
        }
        // A set value a field refuses is the run's key's fault, not the preset's.
        Self::read(table).map_err(|e| match e {
            Error::Config { key, message } => {
                match sets
                    .iter()
                    .find(|(k, _)| key == *k || key.starts_with(&format!("{k}.")))
                {
                    Some((k, _)) => cfg_err(
                        super::fields::cut(&format!("{MACHINE_SET}.{k}"), 80),
                        message,
                    ),
                    None => Error::Config { key, message },
                }
            }
            e => e,
        })
    }

    fn read(table: toml::Table) -> Result<Preset, Error> {
        let mut top = Fields::new("", table);
        let name = top.string("name")?;
        let description = top.string("description")?;
        let mut book = Book::default();
        let b = &mut book;

        let mut model = String::new();
        let cpu = section(&mut top, "cpu", b, |p| {
            model = p.f.string("model")?;
            Cpu::read(p)
        })?;
        let l1d = section(&mut top, "l1d", b, L1d::read)?;
        let l2 = section(&mut top, "l2", b, L2::read)?;
        let llc = section(&mut top, "llc", b, Llc::read)?;
        let tlb = section(&mut top, "tlb", b, Tlb::read)?;
        let memory = section(&mut top, "memory", b, Memory::read)?;
        let string = section(&mut top, "string", b, StringParams::read)?;
        let prefetch = section(&mut top, "prefetch", b, Prefetch::read)?;
        let costs = section(&mut top, "costs", b, |p| {
            Ok(Costs {
                kernel: KernelCosts::read(|name| {
                    let d = params::kernel_param(name);
                    <u64 as params::Leaf>::read(p, d)
                })?,
                hw: HwCosts::read(p)?,
            })
        })?;
        let numa = match top.sub_opt("numa")? {
            None => None,
            Some(f) => {
                let mut p = P { f, book: b };
                let n = Numa::read(&mut p)?;
                p.finish()?;
                Some(n)
            }
        };
        let idle_states = match top.sub_opt("idle")? {
            None => Vec::new(),
            Some(f) => {
                let mut p = P { f, book: b };
                let i = Idle::read(&mut p)?;
                p.finish()?;
                i.states
            }
        };
        top.finish()?;

        let preset = Preset {
            name,
            description,
            model,
            cpu,
            l1d,
            l2,
            llc,
            tlb,
            memory,
            string,
            prefetch,
            costs,
            numa,
            idle_states,
            sources: book.sources,
            provenance: book.provenance,
        };
        bounds::check(&preset)?;
        if let Some(e) = book.provenance_err {
            return Err(e);
        }
        Ok(preset)
    }

    pub fn nr_cpus(&self) -> usize {
        (self.cpu.sockets * self.cpu.cores_per_socket * self.cpu.threads_per_core) as usize
    }

    pub fn ns_to_cycles(&self, ns: f64) -> u64 {
        (ns * self.cpu.freq_mhz as f64 / 1000.0).round() as u64
    }

    /// The machine's parameters in the model's units: sizes in bytes, times in
    /// cycles at `cpu.freq_mhz`, bandwidths in bytes per cycle, policies typed.
    pub fn machine_params(&self) -> Result<MachineParams, Error> {
        let cyc = |ns: f64| self.ns_to_cycles(ns);
        let bpc = |gbs: f64| gbs * 1e9 / (self.cpu.freq_mhz as f64 * 1e6);
        let m = &self.memory;
        let s = &self.string;
        let no_rfo_grant = match &s.no_rfo_grant {
            NameOrNs::Ns(ns) => NoRfoGrant::Cycles(cyc(*ns)),
            NameOrNs::Named(n) if n == "llc" => NoRfoGrant::Llc,
            NameOrNs::Named(n) if n == "memory" => NoRfoGrant::Memory,
            NameOrNs::Named(o) => {
                return Err(cfg_err(
                    "string.no_rfo_grant.value",
                    format!(
                        "{o:?} is not accepted; accepted: {}",
                        bounds::declared("string.no_rfo_grant").accepted()
                    ),
                ))
            }
        };
        // A time in cycles where measured; None: the key's one name (`off`).
        let ns_or = |v: &NameOrNs, key: &str, off: &str| match v {
            NameOrNs::Ns(ns) => Ok(Some(cyc(*ns))),
            NameOrNs::Named(n) if n == off => Ok(None),
            NameOrNs::Named(o) => Err(cfg_err(
                format!("string.{key}.value"),
                format!("{o:?} is not accepted; accepted: \"{off}\", or a time in ns"),
            )),
        };
        let string_bypass_hold_cycles = ns_or(&s.bypass_hold_ns, "bypass_hold_ns", "posted")?;
        let clzero_hold_cycles = ns_or(&s.clzero_hold_ns, "clzero_hold_ns", "posted")?;
        let sfence_drain_cycles = ns_or(&s.sfence_drain_ns, "sfence_drain_ns", "none")?;
        let nocache_by = match s.nocache_by.as_str() {
            "call" => NocacheBy::Call,
            "remaining" => NocacheBy::Remaining,
            o => {
                return Err(cfg_err(
                    "string.nocache_by.value",
                    format!(
                        "{o:?} is not accepted; accepted: {}",
                        bounds::declared("string.nocache_by").accepted()
                    ),
                ))
            }
        };
        let tlb = &self.tlb;
        let (l1, l2, llc) = (&self.l1d, &self.l2, &self.llc);
        let t = |entries: u64, ways: u64| (entries as u32, ways as u32);
        Ok(MachineParams {
            topo: Topology {
                sockets: self.cpu.sockets as usize,
                cores_per_socket: self.cpu.cores_per_socket as usize,
                threads_per_core: self.cpu.threads_per_core as usize,
                nodes_per_socket: m.nodes_per_socket as usize,
                llc_per_socket: self.llc.instances_per_socket as usize,
            },
            freq_mhz: self.cpu.freq_mhz,
            issue_width: self.cpu.issue_width,
            store_bytes_per_cycle: self.cpu.store_bytes_per_cycle,
            scalar_stores_per_cycle: self.cpu.scalar_stores_per_cycle,
            movnti_line_cycles: self.cpu.movnti_line_cycles,
            store_queue_entries: self.cpu.store_queue_entries,
            l1d: level(
                "l1d",
                (l1.size_kib, l1.ways, l1.latency_cycles),
                &l1.replacement,
                l1.fill_buffers,
                0.0,
                false,
            )?,
            l2: level(
                "l2",
                (l2.size_kib, l2.ways, l2.latency_cycles),
                &l2.replacement,
                l2.superqueue,
                l2.sustained_bytes_per_cycle,
                l2.writebacks_share_sustained,
            )?,
            llc: level(
                "llc",
                (llc.size_kib, llc.ways, llc.latency_cycles),
                &llc.replacement,
                0,
                llc.sustained_bytes_per_cycle,
                llc.writebacks_share_sustained,
            )?,
            llc_inclusive: llc.inclusive,
            tlb: TlbConfig {
                l1_4k: t(tlb.l1_4k_entries, tlb.l1_4k_ways),
                l1_2m: t(tlb.l1_2m_entries, tlb.l1_2m_ways),
                l1_1g: t(tlb.l1_1g_entries, tlb.l1_1g_ways),
                stlb: t(tlb.stlb_entries, tlb.stlb_ways),
                stlb_holds_2m: tlb.stlb_holds_2m,
                stlb_holds_pde: tlb.stlb_holds_pde,
            },
            stlb_latency_cycles: tlb.stlb_latency_cycles,
            walk_cycles: tlb.walk_cycles,
            dram_local_cycles: cyc(m.local_latency_ns),
            dram_remote_cycles: cyc(m.remote_latency_ns),
            remote_cache_cycles: cyc(m.remote_cache_latency_ns),
            numa_hops: self
                .numa
                .as_ref()
                .map(|n| {
                    n.hops
                        .iter()
                        .map(|r| r.iter().map(|&h| h as u8).collect())
                        .collect()
                })
                .unwrap_or_default(),
            extra_hop_cycles: self
                .numa
                .as_ref()
                .map_or(0, |n| cyc(n.extra_hop_latency_ns)),
            posted_write_cycles: cyc(m.posted_write_ns),
            l2_writeback_holds_superqueue: l2.writeback_holds_superqueue,
            dram_bytes_per_cycle: bpc(m.sustained_bandwidth_gbs / m.nodes_per_socket as f64),
            link_bytes_per_cycle: bpc(m.interconnect_bandwidth_gbs.max(0.001)),
            string_startup_cycles: s.startup_cycles,
            string_drain: s.drain_at_boundary,
            no_rfo_full_lines: s.no_rfo_full_lines,
            no_rfo_grant,
            string_bypass_hold_cycles,
            clzero_hold_cycles,
            sfence_drain_cycles,
            nocache_threshold_bytes: s.nocache_threshold_kib * 1024,
            nocache_by,
            clzero: s.clzero,
            prefetch: self.prefetch_params(),
            perf_cache_events: if self.cpu.perf_cache_events == "l2" {
                PerfCacheEvents::L2
            } else {
                PerfCacheEvents::Llc
            },
            ipi: IpiCosts {
                send_cycles: self.costs.hw.ipi_send_cycles,
                latency_cycles: cyc(self.costs.hw.ipi_latency_ns),
                handle_cycles: self.costs.hw.ipi_handle_cycles,
            },
            tlb_flush_full_cycles: self.costs.hw.tlb_flush_full_cycles,
            invlpg_cycles: self.costs.hw.invlpg_cycles,
            invlpgb: match (
                self.tlb.invlpgb,
                self.costs.hw.invlpgb_cycles,
                self.costs.hw.tlbsync_latency_ns,
            ) {
                (true, Some(invlpgb_cycles), Some(ns)) => Some(InvlpgbCosts {
                    invlpgb_cycles,
                    tlbsync_cycles: cyc(ns),
                }),
                _ => None,
            },
            idle_states: self
                .idle_states
                .iter()
                .map(|s| IdleState {
                    name: s.name.clone(),
                    exit_cycles: cyc(s.exit_latency_us as f64 * 1000.0),
                    target_residency_cycles: cyc(s.target_residency_us as f64 * 1000.0),
                })
                .collect(),
        })
    }

    /// The prefetchers as the model runs them: all off unless `prefetch.enabled`.
    pub fn prefetch_params(&self) -> PrefetchParams {
        let p = &self.prefetch;
        if !p.enabled {
            return PrefetchParams::off();
        }
        PrefetchParams {
            l1_next_line: p.l1_next_line,
            l2_streamer: p.l2_streamer,
            l2_streams: p.l2_streams as usize,
            l2_distance_lines: p.l2_distance_lines,
            l2_degree: p.l2_degree,
            l2_cross_page: p.l2_cross_page,
        }
    }

    /// The kernel's software costs (the hardware's IPI and TLB-flush costs go
    /// to [`Preset::machine_params`]).
    pub fn kernel_costs(&self) -> KernelCosts {
        self.costs.kernel.clone()
    }

    pub fn summary(&self) -> String {
        format!(
            "{}: {} socket(s) x {} cores x {} threads, {} MHz, L1d {} KiB/{}w, L2 {} KiB/{}w, LLC {} MiB/{}w per socket ({}), DRAM {} ch DDR-{} {:.1} GB/s sustained per node",
            self.model,
            self.cpu.sockets,
            self.cpu.cores_per_socket,
            self.cpu.threads_per_core,
            self.cpu.freq_mhz,
            self.l1d.size_kib,
            self.l1d.ways,
            self.l2.size_kib,
            self.l2.ways,
            self.llc.size_kib * self.llc.instances_per_socket / 1024,
            self.llc.ways,
            if self.llc.inclusive { "inclusive" } else { "non-inclusive" },
            self.memory.channels_per_node,
            self.memory.dram_mts,
            self.memory.sustained_bandwidth_gbs,
        )
    }
}
