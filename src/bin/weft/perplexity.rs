//! `weft perplexity MODEL --text FILE`: perplexity of a text under the model.

use std::time::Instant;

use weft::model::eval;

pub fn run(model: &str, text_file: &str, window: Option<usize>) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(text_file)?;
    let ctx = crate::cli::context()?;
    let reader = weft::loader::native::NativeSource::open(model)?;
    let ids = pollster::block_on(weft::model::open_tokenizer(&reader))?.encode(&text, false);
    // One window over the whole text unless asked otherwise; the cache is sized to fit it.
    let window = window.unwrap_or(ids.len()).max(2);
    let (mut llama, _) = crate::generate::open(&ctx, model, window)?;
    let window = window.min(llama.options.max_seq);
    let started = Instant::now();
    let result = pollster::block_on(eval::perplexity(&mut llama, &ctx, &ids, window))?;
    eprintln!(
        "{} tokens in {} window(s) of {window}, {:.1} s ({:.1} tok/s)",
        result.tokens,
        result.windows,
        started.elapsed().as_secs_f64(),
        result.tokens as f64 / started.elapsed().as_secs_f64()
    );
    println!("perplexity: {:.4}", result.perplexity);
    println!("tokens: {} (scored {})", result.tokens, result.scored);
    Ok(())
}
