//! `weft caps`: the adapter, its features and the limits weft requested.

pub fn run(json: bool) -> anyhow::Result<()> {
    let ctx = crate::cli::context()?;
    let caps = ctx.capabilities();
    if json {
        println!("{}", serde_json::to_string_pretty(caps)?);
    } else {
        let value = serde_json::to_value(caps)?;
        print_table(&value, "");
    }
    Ok(())
}

fn print_table(value: &serde_json::Value, prefix: &str) {
    if let Some(map) = value.as_object() {
        for (k, v) in map {
            if v.is_object() {
                print_table(v, &format!("{prefix}{k}."));
            } else {
                println!("{:<44} {}", format!("{prefix}{k}"), v);
            }
        }
    }
}
