//! Runs a config file and prints the JSON metrics (a development aid).
//! usage: runcfg CONFIG.toml [SCALE]; `VMSIM_RUN_THREADS=N`: host threads
//! of a windowed run (`sim.window_cycles`), 1 by default.
fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: runcfg CONFIG.toml [SCALE]");
    let scale: f64 = std::env::args()
        .nth(2)
        .map(|s| s.parse().expect("a number"))
        .unwrap_or(1.0);
    let text = std::fs::read_to_string(&path).unwrap();
    let t = std::time::Instant::now();
    let cfg =
        vmsim_core::config::RunConfig::from_table(toml::from_str(&text).unwrap(), None, scale)
            .unwrap_or_else(|e| {
                eprintln!("error: {e}");
                std::process::exit(2)
            });
    let threads = std::env::var("VMSIM_RUN_THREADS")
        .ok()
        .map_or(1, |v| v.parse().expect("a number of threads"));
    match vmsim_core::experiment::simulate_on(&cfg, threads, &mut |_| {}) {
        Ok(v) => println!("{v}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2)
        }
    }
    eprintln!("host time {:.2} s", t.elapsed().as_secs_f64());
}
