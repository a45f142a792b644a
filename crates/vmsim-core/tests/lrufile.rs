//! The lru-file-mmap-read workload through a run config: every reader's
//! data verified, reclaim throughout, and byte-identical results from the
//! same config and seed, under both flush policies.

use vmsim_core::config::RunConfig;
use vmsim_core::experiment::simulate;

fn run(flush: &str, nr_task: u64) -> serde_json::Value {
    let text = format!(
        r#"
machine = "xeon-e5-2699v3-2s"
seed = 3
[kernel]
tlb_flush_on_unmap = "{flush}"
[workload]
kind = "lru-file-mmap-read"
nr_task = {nr_task}
ram_mib = 16
"#
    );
    let cfg = RunConfig::from_table(toml::from_str(&text).unwrap(), None, 1.0).unwrap();
    simulate(&cfg, &mut |_| {}).unwrap()
}

#[test]
fn readers_verify_their_data_under_reclaim_and_runs_are_deterministic() {
    for flush in ["per-page", "batched"] {
        let a = run(flush, 48);
        assert_eq!(a["data_verified"], true, "{flush}: {}", a["data_errors"]);
        assert_eq!(a["reader_elapsed_s"].as_array().unwrap().len(), 48);
        assert!(
            a["pgsteal_kswapd"].as_u64().unwrap() + a["pgsteal_direct"].as_u64().unwrap() > 30_000,
            "{flush}: 160 MiB of files through 16 MiB"
        );
        assert!(a["nr_tlb_remote_flush"].as_u64().unwrap() > 0, "{flush}");
        let b = run(flush, 48);
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap(),
            "{flush}: not deterministic"
        );
    }
}

#[test]
fn bad_config_names_the_field() {
    let text = r#"
machine = "xeon-e5-2699v3-2s"
[workload]
kind = "lru-file-mmap-read"
nr_task = 500
ram_mib = 16
"#;
    let e = RunConfig::from_table(toml::from_str(text).unwrap(), None, 1.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("workload.nr_task"), "{e}");
    let text = text
        .replace("nr_task = 500", "nr_task = 4")
        .replace("ram_mib = 16", "ram_mib = 16\nbogus = 1");
    let e = RunConfig::from_table(toml::from_str(&text).unwrap(), None, 1.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("bogus"), "{e}");
}

/// The kernel's tunables as config keys: fault-around, readahead and the
/// range-flush ceiling change what the kernel does, and bad values are refused.
#[test]
fn fault_around_readahead_and_the_flush_ceiling_are_tunables() {
    let sim = |kernel: &str| {
        let text = format!(
            "machine = \"xeon-e5-2699v3-2s\"\nseed = 3\n[kernel]\n{kernel}\n[workload]\nkind = \"lru-file-mmap-read\"\nnr_task = 4\nram_mib = 16\n"
        );
        let cfg = RunConfig::from_table(toml::from_str(&text).unwrap(), None, 1.0)?;
        let mut s = vmsim_core::experiment::build(&cfg).unwrap();
        s.run(&mut |_| {}).unwrap();
        Ok::<_, vmsim_core::api::Error>(s)
    };
    let d = sim("").unwrap();
    assert!(
        d.kernel.pagecache.stat.fault_around_mapped > 0
            && d.kernel.pagecache.stat.readahead_sync > 0
    );
    let off = sim("fault_around_bytes = 4096\nread_ahead_kb = 0").unwrap();
    assert_eq!(off.kernel.pagecache.stat.fault_around_mapped, 0);
    assert_eq!(
        off.kernel.pagecache.stat.readahead_sync + off.kernel.pagecache.stat.readahead_async,
        0
    );
    assert!(off.kernel.pagecache.stat.pgmajfault > d.kernel.pagecache.stat.pgmajfault);
    let same =
        sim("fault_around_bytes = 65536\nread_ahead_kb = 128\ntlb_single_page_flush_ceiling = 33")
            .unwrap();
    assert_eq!(
        same.kernel.pagecache.stat.pgmajfault,
        d.kernel.pagecache.stat.pgmajfault
    );
    assert_eq!(
        same.kernel.vmstat.nr_tlb_local_flush_all,
        d.kernel.vmstat.nr_tlb_local_flush_all
    );
    for (bad, key) in [
        ("fault_around_bytes = 12288", "kernel.fault_around_bytes"),
        ("fault_around_bytes = 4194304", "kernel.fault_around_bytes"),
        ("read_ahead_kb = 6", "kernel.read_ahead_kb"),
        (
            "tlb_single_page_flush_ceiling = 2000000",
            "kernel.tlb_single_page_flush_ceiling",
        ),
    ] {
        match sim(bad) {
            Err(vmsim_core::api::Error::Config { key: k, .. }) => assert_eq!(k, key, "{bad}"),
            r => panic!("{bad}: {:?}", r.map(|_| ())),
        }
    }
}
