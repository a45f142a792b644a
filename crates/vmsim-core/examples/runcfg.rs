//! Runs a config file and prints the JSON (a development aid).
fn main() {
    let path = std::env::args().nth(1).expect("usage: runcfg CONFIG.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let t = std::time::Instant::now();
    match vmsim_core::api::run_config(&text, vmsim_core::api::Format::Toml, None, &mut |_, _| {}) {
        Ok(s) => println!("{s}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2)
        }
    }
    eprintln!("host time {:.2} s", t.elapsed().as_secs_f64());
}
