//! WGSL sources and a tiny preprocessor.
//!
//! Syntax, one directive per line: `#ifdef NAME`, `#ifndef NAME`, `#else`, `#endif`; and `${NAME}`
//! anywhere in a line is replaced by the define's value. An unknown `${NAME}` or an unbalanced
//! block is an error rather than silently wrong WGSL.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// A WGSL file compiled into the binary with `include_str!`, followed by the shared fragments it
/// uses (each fragment a `const` of its own, so the binary holds one copy however many kernels
/// concatenate it: in the wasm module that is tens of kilobytes).
#[derive(Clone, Copy, Debug)]
pub struct ShaderSource {
    pub name: &'static str,
    /// The parts, in order; each ends with a newline.
    pub source: &'static [&'static str],
}

/// Defines for one shader variant; ordered so that its key is stable.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Defines(BTreeMap<String, String>);

impl Defines {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn set(mut self, name: &str, value: impl ToString) -> Self {
        self.0.insert(name.to_string(), value.to_string());
        self
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// `NAME=value,NAME=value`, used in pipeline labels and cache keys.
    pub fn key(&self) -> String {
        self.0.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }
}

/// The text a browser compiles for this variant: the preprocessed source with the `subgroups`
/// extension named where the kernel uses the builtins. Browsers compile WGSL themselves and want
/// the extension named; naga, natively, refuses the directive and takes the builtins under the
/// device feature. On the first line, so that compiler messages keep the file's line numbers.
pub fn browser_source(shader: &ShaderSource, defines: &Defines) -> Result<String> {
    let mut wgsl = preprocess(shader, defines)?;
    if defines.get("SG").is_some() && defines.get("SG_EMU").is_none() {
        wgsl.insert_str(0, "enable subgroups; ");
    }
    Ok(wgsl)
}

/// Applies `defines` to `shader`, returning plain WGSL.
pub fn preprocess(shader: &ShaderSource, defines: &Defines) -> Result<String> {
    let fail = |line: usize, message: String| Error::ShaderPreprocess {
        shader: shader.name.to_string(),
        message: format!("line {}: {message}", line + 1),
    };
    // One condition per open block; a line is emitted only when all of them hold.
    let mut stack: Vec<bool> = Vec::new();
    let mut out = String::with_capacity(shader.source.iter().map(|p| p.len()).sum());
    for (n, line) in shader.source.iter().flat_map(|p| p.lines()).enumerate() {
        let active = stack.iter().all(|&cond| cond);
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix('#') {
            let mut words = rest.split_whitespace();
            let directive = words.next().unwrap_or("");
            let arg = words.next();
            match (directive, arg) {
                ("ifdef", Some(name)) => stack.push(defines.get(name).is_some()),
                ("ifndef", Some(name)) => stack.push(defines.get(name).is_none()),
                ("else", None) => match stack.last_mut() {
                    Some(top) => *top = !*top,
                    None => return Err(fail(n, "#else without #ifdef".into())),
                },
                ("endif", None) => {
                    if stack.pop().is_none() {
                        return Err(fail(n, "#endif without #ifdef".into()));
                    }
                }
                _ => return Err(fail(n, format!("unknown directive '{trimmed}'"))),
            }
            out.push('\n'); // keep line numbers of compiler messages aligned with the file
            continue;
        }
        if active {
            out.push_str(&substitute(line, defines).map_err(|m| fail(n, m))?);
        }
        out.push('\n');
    }
    if !stack.is_empty() {
        return Err(fail(shader.source.iter().map(|p| p.lines().count()).sum(), "missing #endif".into()));
    }
    Ok(out)
}

fn substitute(line: &str, defines: &Defines) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| "unterminated ${".to_string())?;
        let name = &after[..end];
        let value = defines.get(name).ok_or_else(|| format!("define '{name}' is not set"))?;
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: ShaderSource = ShaderSource {
        name: "t",
        source: &["a\n#ifdef F16\nenable f16;\n#else\nno\n#endif\nalias T = ${ELEM};\n"],
    };

    #[test]
    fn branches_and_substitution() {
        let d = Defines::new().set("ELEM", "f32");
        assert_eq!(preprocess(&SRC, &d).unwrap(), "a\n\n\n\nno\n\nalias T = f32;\n");
        let d = d.set("F16", 1);
        assert_eq!(preprocess(&SRC, &d).unwrap(), "a\n\nenable f16;\n\n\n\nalias T = f32;\n");
    }

    #[test]
    fn nested_inactive_blocks_stay_inactive() {
        let src = ShaderSource { name: "n", source: &["#ifdef A\n#ifdef B\nx\n", "#else\ny\n#endif\n#endif\n"] };
        let out = preprocess(&src, &Defines::new().set("B", 1)).unwrap();
        assert!(!out.contains('x') && !out.contains('y'), "{out:?}");
    }

    #[test]
    fn errors_name_shader_and_line() {
        let err = preprocess(&SRC, &Defines::new()).unwrap_err().to_string();
        assert!(err.contains("'t'") && err.contains("line 7") && err.contains("ELEM"), "{err}");
        let src = ShaderSource { name: "u", source: &["#ifdef A\n"] };
        assert!(preprocess(&src, &Defines::new()).unwrap_err().to_string().contains("#endif"));
    }
}
