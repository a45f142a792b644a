//! Runs an experiment and prints the headline metrics (a development aid).
//! Experiments with `[[cases]]` print one table per case.
fn main() {
    let name = std::env::args().nth(1).expect("usage: compare NAME [SCALE]");
    let scale = std::env::args().nth(2).map(|s| s.parse().unwrap());
    let t = std::time::Instant::now();
    let out = vmsim_core::api::compare(&name, scale, 0, &mut |_, _| {}).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    match v.get("cases") {
        None => table(&v),
        Some(cases) => {
            for c in v["case_order"].as_array().unwrap() {
                let c = c.as_str().unwrap();
                println!("== {c} ({})", cases[c]["scale"].as_str().unwrap_or(""));
                table(&cases[c]);
            }
        }
    }
    eprintln!("host time {:.1} s", t.elapsed().as_secs_f64());
}

fn table(v: &serde_json::Value) {
    let mut keys = vec!["throughput_bytes_per_s", "elapsed_s", "user_s", "sys_s", "instructions", "ipc", "l1d_loads", "l1d_misses", "llc_miss_rate", "llc_misses", "l2_misses", "dram_bytes_read", "dram_bytes_written", "stall_cycles", "data_verified"];
    if v["baseline"].get("fault_bytes_per_s").is_some() {
        keys.insert(0, "fault_bytes_per_s");
    }
    let b = &v["baseline"];
    print!("{:28} {:>16}", "", v["baseline_name"].as_str().unwrap_or("baseline"));
    let order: Vec<String> = match v["variant_order"].as_array() {
        Some(a) => a.iter().map(|x| x.as_str().unwrap().to_string()).collect(),
        None => v["variants"].as_object().unwrap().keys().cloned().collect(),
    };
    for n in &order {
        print!(" {:>26}", n);
    }
    println!();
    for k in keys {
        print!("{k:28} {:>16}", b[k].to_string());
        for n in &order {
            let r = &v["variants"][n];
            let (x, y) = (b[k].as_f64().unwrap_or(0.0), r[k].as_f64().unwrap_or(0.0));
            print!(" {:>16} ({:+6.1}%)", r[k].to_string(), if x != 0.0 { (y - x) / x * 100.0 } else { 0.0 });
        }
        println!();
    }
}
