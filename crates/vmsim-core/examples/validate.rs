//! Prints the microbenchmark tables of `vmsim validate` (optionally one preset).
fn main() {
    let only = std::env::args().nth(1);
    let rows = vmsim_core::validate::run(only.as_deref());
    print!("{}", vmsim_core::validate::format(&rows));
}
