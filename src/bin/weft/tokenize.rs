//! `weft tokenize MODEL --text FILE`: the token ids weft feeds the model for a text (no BOS),
//! so that other tools can score exactly the same tokens.

use anyhow::Context;

pub fn run(model: &str, text_file: &str, json: bool) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(text_file).with_context(|| text_file.to_string())?;
    let ids = crate::backend::open_tokenizer(model)?.encode(&text, false);
    if json {
        println!("{}", serde_json::to_string(&ids)?);
    } else {
        let list: Vec<String> = ids.iter().map(u32::to_string).collect();
        println!("{}", list.join(","));
    }
    Ok(())
}
