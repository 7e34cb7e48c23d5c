//! The Jinja side of weft's chat templates: a template rendered with `minijinja` the way
//! transformers' `apply_chat_template` renders it (trim_blocks, lstrip_blocks,
//! `raise_exception`, `strftime_now`, Python's string methods).
//!
//! A crate of its own so that the browser loads it only when a chat is first rendered: it is a
//! third of the size of the rest of weft's wasm. Natively weft links it directly
//! (`weft::tokenizer::chat`, which also keeps message content apart from template text); in the
//! browser it is a second wasm module whose `render(template, messages_json, options_json)` the
//! main module calls.
//!
//! Templates come from model files, so rendering is bounded: a fuel budget (instructions
//! executed), a cap on the output's size and minijinja's recursion limit; the environment has no
//! loader, so `include` and `import` find nothing, and no function reads files, the clock or the
//! network (the date comes in the options).

use minijinja::value::Value;
use minijinja::{context, Environment, ErrorKind};
use serde::{Deserialize, Serialize};

/// One message as the template sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// What a template sees beside the messages.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Options {
    /// Open the assistant's turn at the end.
    pub add_generation_prompt: bool,
    /// `bos_token` and `eos_token` as text (empty when the model has none).
    pub bos_token: String,
    pub eos_token: String,
    /// Today's date for `strftime_now` as (year, month 1-12, day 1-31).
    pub today: (i32, u32, u32),
}

/// Instructions a render may execute: real templates use a few thousand for a long chat.
const FUEL: u64 = 2_000_000;
/// Largest rendered prompt, bytes (far above any context weft holds).
pub const MAX_OUTPUT: usize = 4 << 20;
/// Longest template accepted (real ones are a few KB; GGUF strings are capped alike).
pub const MAX_TEMPLATE: usize = 256 << 10;

/// Renders `template` for `messages`. The error is a sentence for the user, starting with
/// "chat template".
pub fn render(template: &str, messages: &[Message], options: &Options) -> Result<String, String> {
    if template.len() > MAX_TEMPLATE {
        return Err(format!("chat template of {} bytes (at most {MAX_TEMPLATE})", template.len()));
    }
    let messages: Vec<Value> =
        messages.iter().map(|m| context! { role => m.role.clone(), content => m.content.clone() }).collect();
    let env = environment(options.today)?;
    let tmpl = env.template_from_str(template).map_err(|e| format!("chat template: {e:#}"))?;
    let ctx = context! {
        messages => Value::from(messages),
        add_generation_prompt => options.add_generation_prompt,
        bos_token => options.bos_token.clone(),
        eos_token => options.eos_token.clone(),
        tools => Value::from(()),
        documents => Value::from(()),
    };
    let mut out = Bounded(Vec::new());
    tmpl.render_captured_to(ctx, &mut out).map_err(|e| match e.kind() {
        ErrorKind::OutOfFuel => "chat template: ran out of fuel (a runaway loop?)".to_string(),
        ErrorKind::WriteFailure => format!("chat template: the prompt exceeds {MAX_OUTPUT} bytes"),
        _ => format!("chat template: {e:#}"),
    })?;
    String::from_utf8(out.0).map_err(|_| "chat template wrote invalid UTF-8".to_string())
}

/// The browser's entry point: messages `[{role, content}]` and [`Options`] as JSON; the rendered
/// prompt, or an exception carrying the error's sentence.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen(js_name = render)]
pub fn render_json(template: &str, messages_json: &str, options_json: &str) -> Result<String, wasm_bindgen::JsValue> {
    let messages: Vec<Message> =
        serde_json::from_str(messages_json).map_err(|e| wasm_bindgen::JsValue::from_str(&format!("chat messages: {e}")))?;
    let options: Options =
        serde_json::from_str(options_json).map_err(|e| wasm_bindgen::JsValue::from_str(&format!("chat options: {e}")))?;
    render(template, &messages, &options).map_err(|e| wasm_bindgen::JsValue::from_str(&e))
}

/// A writer that refuses to grow past [`MAX_OUTPUT`].
struct Bounded(Vec<u8>);

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + buf.len() > MAX_OUTPUT {
            return Err(std::io::Error::other("chat prompt too long"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// transformers' environment: blocks trim their newline and the whitespace before them; the
/// functions its templates call; Python's str and dict methods.
fn environment(today: (i32, u32, u32)) -> Result<Environment<'static>, String> {
    let mut env = Environment::new();
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
        .map_err(|e| format!("chat template syntax: {e}"))?;
    env.set_syntax(syntax);
    env.set_fuel(Some(FUEL));
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |message: String| -> Result<Value, minijinja::Error> {
        Err(minijinja::Error::new(ErrorKind::InvalidOperation, format!("the template refused the chat: {message}")))
    });
    env.add_function("strftime_now", move |format: String| -> Result<String, minijinja::Error> {
        let (y, m, d) = today;
        strftime(&format, y, m, d).map_err(|e| minijinja::Error::new(ErrorKind::InvalidOperation, e))
    });
    Ok(env)
}

/// The date directives of Python's `strftime` that chat templates use; others are an error,
/// not a guess.
fn strftime(format: &str, y: i32, m: u32, d: u32) -> Result<String, String> {
    const MONTHS: [&str; 12] =
        ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
    let month = MONTHS[(m as usize).clamp(1, 12) - 1];
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('Y') => out.push_str(&y.to_string()),
            Some('y') => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Some('b') => out.push_str(&month[..3]),
            Some('B') => out.push_str(month),
            Some('%') => out.push('%'),
            other => return Err(format!("strftime_now: the directive %{} is not supported", other.unwrap_or(' '))),
        }
    }
    Ok(out)
}
