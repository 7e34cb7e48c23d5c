//! `weft shaders FILE`: every shader variant weft may compile (`ops::shader_variants`), as a
//! browser is handed it (`gpu::shader::browser_source`), into one JSON file, so that other WGSL
//! compilers can check them. `cargo test` validates each with naga; browsers compile with their
//! own (Chrome's and Dawn's is Tint), which is stricter on some of the grammar (a shift beside
//! another binary operator needs parentheses): tests/tint/check.mjs compiles the file with Dawn.

pub fn run(out: &str) -> anyhow::Result<()> {
    let mut list = Vec::new();
    for (shader, defines) in weft::ops::shader_variants() {
        let wgsl = weft::gpu::shader::browser_source(&shader, &defines)?;
        list.push(serde_json::json!({ "name": format!("{}[{}]", shader.name, defines.key()), "wgsl": wgsl }));
    }
    std::fs::write(out, serde_json::to_string(&list)?)?;
    println!("{} shader variants written to {out}", list.len());
    Ok(())
}
