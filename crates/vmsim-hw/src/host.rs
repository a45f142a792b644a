//! What the host is: CPU model and flags, cache geometry from sysfs, kernel, THP mode.

use crate::sys::read_trim;
use serde_json::{json, Value};

#[derive(Clone, Debug, Default)]
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
    caches()
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
