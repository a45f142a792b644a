//! Embeds every machine preset (`machines/*.toml`) and experiment
//! (`experiments/*.toml`) of the repository into the library, so an
//! installed package needs no data files beside it.
use std::{env, fs, path::Path};

fn embed(dir: &Path, out: &mut String, konst: &str) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<_> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().map(|x| x == "toml").unwrap_or(false))
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    out.push_str(&format!("pub const {konst}: &[(&str, &str)] = &[\n"));
    for p in names {
        println!("cargo:rerun-if-changed={}", p.display());
        let stem = p.file_stem().unwrap().to_string_lossy().to_string();
        let abs = fs::canonicalize(&p).unwrap();
        out.push_str(&format!(
            "    ({:?}, include_str!({:?})),\n",
            stem,
            abs.display().to_string()
        ));
    }
    out.push_str("];\n");
}

fn main() {
    // Read at run time, not baked in with env!(): a build script compiled in one checkout
    // and reused from a copied target directory must still embed this checkout's files.
    let manifest = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("../..");
    let mut out = String::new();
    embed(&root.join("machines"), &mut out, "MACHINES");
    embed(&root.join("experiments"), &mut out, "EXPERIMENTS");
    let dest = Path::new(&env::var("OUT_DIR").unwrap()).join("embedded.rs");
    fs::write(dest, out).unwrap();
}
