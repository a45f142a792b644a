//! What the host is: CPU model and flags, cache geometry from sysfs, kernel, THP mode.
//!
//! [`HostFacts`] holds every fact about the host that the calibration's
//! preset and the microbenchmarks' sizes are derived from, read once
//! ([`HostFacts::detect`]) and recorded beside the measurements, so that
//! the derivations run the same on a recorded host as on the live one.
//!
//! Invariant: nothing that derives a preset or a size reads sysfs, cpuid or
//! /proc itself; it reads a `HostFacts`.

use crate::sys::read_trim;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheLevel {
    pub level: u32,
    pub kind: String,
    pub size_kib: u64,
    pub ways: u64,
    pub line: u64,
    pub shared_cpu_list: String,
}

/// Data/unified caches of cpu0 from /sys/devices/system/cpu/cpu0/cache/index*.
pub fn caches() -> Vec<CacheLevel> {
    let mut out = Vec::new();
    for i in 0..8 {
        let d = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let Some(level) = read_trim(&format!("{d}/level")).and_then(|s| s.parse().ok()) else {
            break;
        };
        let kind = read_trim(&format!("{d}/type")).unwrap_or_default();
        if kind == "Instruction" {
            continue;
        }
        out.push(CacheLevel {
            level,
            kind,
            size_kib: read_trim(&format!("{d}/size"))
                .map(|s| parse_size_kib(&s))
                .unwrap_or(0),
            ways: read_trim(&format!("{d}/ways_of_associativity"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
            line: read_trim(&format!("{d}/coherency_line_size"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(64),
            shared_cpu_list: read_trim(&format!("{d}/shared_cpu_list")).unwrap_or_default(),
        });
    }
    out
}

pub fn cache(level: u32) -> Option<CacheLevel> {
    caches().into_iter().find(|c| c.level == level)
}

/// The last-level cache size in bytes, with a conservative 32 MiB if sysfs has none.
pub fn llc_bytes() -> u64 {
    llc_of(&caches())
}

/// The largest of `caches` in bytes, 32 MiB if none has a size.
fn llc_of(caches: &[CacheLevel]) -> u64 {
    caches
        .iter()
        .map(|c| c.size_kib)
        .max()
        .filter(|&k| k > 0)
        .unwrap_or(32 * 1024)
        * 1024
}

fn parse_size_kib(s: &str) -> u64 {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('K') => (&s[..s.len() - 1], 1),
        Some('M') => (&s[..s.len() - 1], 1024),
        Some('G') => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>().map(|n| n * mult).unwrap_or(0)
}

/// First value of `key` in /proc/cpuinfo.
pub fn cpuinfo(key: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

pub fn has_flag(flag: &str) -> bool {
    cpuinfo("flags").is_some_and(|f| f.split_whitespace().any(|x| x == flag))
}

pub fn hostname() -> String {
    read_trim("/proc/sys/kernel/hostname").unwrap_or_else(|| "unknown".into())
}

/// The bracketed choice in a sysfs mode file such as "always [madvise] never".
pub fn sysfs_choice(path: &str) -> Option<String> {
    let s = read_trim(path)?;
    let a = s.find('[')?;
    let b = s[a..].find(']')?;
    Some(s[a + 1..a + b].to_string())
}

pub fn thp_mode() -> Option<String> {
    sysfs_choice("/sys/kernel/mm/transparent_hugepage/enabled")
}

/// (sockets, cores per socket, threads per core) from sysfs topology.
pub fn topology() -> (u64, u64, u64) {
    let mut pkgs = std::collections::BTreeSet::new();
    let mut cores = std::collections::BTreeSet::new();
    let mut cpus = 0u64;
    for cpu in 0..4096 {
        let d = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        let Some(pkg) = read_trim(&format!("{d}/physical_package_id")) else {
            if cpu > 0
                && !std::path::Path::new(&format!("/sys/devices/system/cpu/cpu{cpu}")).exists()
            {
                break;
            }
            continue;
        };
        let core = read_trim(&format!("{d}/core_id")).unwrap_or_default();
        cpus += 1;
        pkgs.insert(pkg.clone());
        cores.insert((pkg, core));
    }
    let sockets = pkgs.len().max(1) as u64;
    let cores_total = cores.len().max(1) as u64;
    (sockets, cores_total / sockets, (cpus / cores_total).max(1))
}

pub fn numa_nodes() -> u64 {
    (0..1024)
        .filter(|n| std::path::Path::new(&format!("/sys/devices/system/node/node{n}")).exists())
        .count()
        .max(1) as u64
}

/// The flags of /proc/cpuinfo that anything here reads.
pub const FLAGS: [&str; 10] = [
    "erms",
    "fsrm",
    "clzero",
    "avx2",
    "avx512f",
    "rdtscp",
    "constant_tsc",
    "hypervisor",
    "invlpgb",
    "topoext",
];

/// AMD extended cpuid TLB geometry: (l1 4k, l1 2m, l1 1g, l2 4k, l2 2m) as (entries, ways).
pub type Tlb = [(u32, u32); 5];

/// What the host is, as the calibration and the microbenchmarks read it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    pub hostname: String,
    /// /proc/cpuinfo "model name".
    pub cpu_model: String,
    /// cpuid leaf 0's vendor string ("GenuineIntel", "AuthenticAMD", ...).
    pub vendor: String,
    /// cpuid family and model (display values), for the record.
    pub family: u32,
    pub model: u32,
    /// Data and unified caches of CPU 0, from sysfs.
    pub caches: Vec<CacheLevel>,
    pub sockets: u64,
    pub cores_per_socket: u64,
    pub threads_per_core: u64,
    pub online_cpus: u64,
    pub numa_nodes: u64,
    /// Distinct LLC instances (index3 `shared_cpu_list`s) over the online CPUs.
    pub llc_instances: u64,
    /// Which of [`FLAGS`] /proc/cpuinfo has.
    pub flags: Vec<String>,
    /// AMD's cpuid TLB geometry (None on other vendors).
    pub amd_tlb: Option<Tlb>,
    /// /proc/meminfo MemAvailable when the facts were read.
    pub mem_available_bytes: Option<u64>,
    pub kernel: Option<String>,
}

impl HostFacts {
    /// Reads the live host.
    pub fn detect() -> HostFacts {
        let (sockets, cores_per_socket, threads_per_core) = topology();
        let online = crate::sys::online_cpus();
        let llc_sets: std::collections::BTreeSet<String> = (0..online)
            .filter_map(|c| {
                read_trim(&format!(
                    "/sys/devices/system/cpu/cpu{c}/cache/index3/shared_cpu_list"
                ))
            })
            .collect();
        let flags = cpuinfo("flags").unwrap_or_default();
        let flags: Vec<String> = FLAGS
            .iter()
            .filter(|f| flags.split_whitespace().any(|x| x == **f))
            .map(|f| f.to_string())
            .collect();
        let (family, model) = family_model();
        let vendor = vendor();
        HostFacts {
            hostname: hostname(),
            cpu_model: cpuinfo("model name").unwrap_or_else(|| "unknown".into()),
            amd_tlb: if is_amd(&vendor) { amd_tlb() } else { None },
            vendor,
            family,
            model,
            caches: caches(),
            sockets,
            cores_per_socket,
            threads_per_core,
            online_cpus: online as u64,
            numa_nodes: numa_nodes(),
            llc_instances: llc_sets.len().max(1) as u64,
            flags,
            mem_available_bytes: crate::ctl::mem_available(),
            kernel: read_trim("/proc/sys/kernel/osrelease"),
        }
    }

    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// Whether the CPU is AMD's (or Hygon's, the same cores): the defaults
    /// "chosen by vendor" follow it.
    pub fn amd(&self) -> bool {
        is_amd(&self.vendor)
    }

    pub fn cache(&self, level: u32) -> Option<&CacheLevel> {
        self.caches.iter().find(|c| c.level == level)
    }

    /// A cache level's size in bytes (0 when sysfs has none).
    pub fn cache_bytes(&self, level: u32) -> u64 {
        self.cache(level).map_or(0, |c| c.size_kib * 1024)
    }

    /// The last-level cache size in bytes, with a conservative 32 MiB if sysfs has none.
    pub fn llc_bytes(&self) -> u64 {
        llc_of(&self.caches)
    }
}

fn is_amd(vendor: &str) -> bool {
    vendor == "AuthenticAMD" || vendor == "HygonGenuine"
}

fn vendor() -> String {
    let v = core::arch::x86_64::__cpuid(0);
    let bytes: Vec<u8> = [v.ebx, v.edx, v.ecx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// cpuid leaf 1's display family and model.
fn family_model() -> (u32, u32) {
    let a = core::arch::x86_64::__cpuid(1).eax;
    let base_family = (a >> 8) & 0xf;
    let base_model = (a >> 4) & 0xf;
    let family = if base_family == 0xf {
        base_family + ((a >> 20) & 0xff)
    } else {
        base_family
    };
    let model = if base_family == 0x6 || base_family == 0xf {
        base_model | (((a >> 16) & 0xf) << 4)
    } else {
        base_model
    };
    (family, model)
}

/// AMD's data TLB geometry from cpuid 0x80000005/0x80000006/0x80000019.
fn amd_tlb() -> Option<Tlb> {
    use core::arch::x86_64::__cpuid;
    // Leaves are checked against the maximum before use.
    let max = __cpuid(0x8000_0000).eax;
    if max < 0x8000_0006 {
        return None;
    }
    let l1 = __cpuid(0x8000_0005);
    let l2 = __cpuid(0x8000_0006);
    // L1 fields: ways are a plain count, 0xff = fully associative.
    let l1f = |r: u32| {
        let e = (r >> 16) & 0xff;
        let w = r >> 24;
        (e, if w == 0xff { e } else { w })
    };
    // L2 and 1 GiB fields use the encoded associativity of cpuid 0x80000006.
    let l2f = |r: u32| {
        let e = (r >> 16) & 0xfff;
        let w = match r >> 28 {
            0 => 0,
            x @ 1..=4 => x,
            5 => 6,
            6 => 8,
            8 => 16,
            0xa => 32,
            0xb => 48,
            0xc => 64,
            0xd => 96,
            0xe => 128,
            _ => e,
        };
        (e, w)
    };
    let g1 = if max >= 0x8000_0019 {
        l2f(__cpuid(0x8000_0019).eax)
    } else {
        (0, 0)
    };
    Some([l1f(l1.ebx), l1f(l1.eax), g1, l2f(l2.ebx), l2f(l2.eax)])
}

pub fn info() -> Value {
    let caches: Vec<Value> = caches()
        .iter()
        .map(|c| {
            json!({"level": c.level, "type": c.kind, "size_kib": c.size_kib, "ways": c.ways,
                        "line": c.line, "shared_cpu_list": c.shared_cpu_list})
        })
        .collect();
    let (sockets, cores, threads) = topology();
    json!({
        "hostname": hostname(),
        "cpu_model": cpuinfo("model name"),
        "cpu_mhz_cpuinfo": cpuinfo("cpu MHz").and_then(|s| s.parse::<f64>().ok()),
        "online_cpus": crate::sys::online_cpus(),
        "sockets": sockets, "cores_per_socket": cores, "threads_per_core": threads,
        "numa_nodes": numa_nodes(),
        "flags": {
            "erms": has_flag("erms"), "fsrm": has_flag("fsrm"), "clzero": has_flag("clzero"),
            "avx512f": has_flag("avx512f"), "rdtscp": has_flag("rdtscp"),
            "constant_tsc": has_flag("constant_tsc"), "hypervisor": has_flag("hypervisor"),
        },
        "caches": caches,
        "kernel": read_trim("/proc/sys/kernel/osrelease"),
        "thp_enabled": thp_mode(),
        "thp_defrag": sysfs_choice("/sys/kernel/mm/transparent_hugepage/defrag"),
    })
}
