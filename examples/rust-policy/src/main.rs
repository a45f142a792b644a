//! `cargo run -p vmsim-example-policy`: compares target-last with this
//! crate's target-first and prints the headline figures.

fn main() {
    let dir = std::env::temp_dir().join("vmsim-example-policy");
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let path = dir.join("target-first.toml");
    std::fs::write(&path, vmsim_example_policy::EXPERIMENT).expect("the experiment file");
    let lib = vmsim_example_policy::lib().expect("the policy registers");
    let opts = vmsim_core::api::CompareOptions::default().threads(2);
    let v = lib
        .compare_value(path.to_str().unwrap(), &opts, &mut |_, _| {})
        .unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(1)
        });
    for (name, m) in [
        ("target-last", &v["baseline"]),
        ("target-first", &v["variants"]["target-first"]),
    ] {
        println!(
            "{name:>13}: {:.2} GB/s, elapsed {:.3} ms, data verified: {}",
            m["throughput_bytes_per_s"].as_f64().unwrap_or(0.0) / 1e9,
            m["elapsed_s"].as_f64().unwrap_or(0.0) * 1e3,
            m["data_verified"]
        );
    }
}
