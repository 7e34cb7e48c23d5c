//! What a Hugging Face `config.json` says beyond the dimensions: the RoPE settings, in both the
//! form transformers 5 writes (`rope_parameters`) and the older one (`rope_theta` and
//! `rope_scaling` at the top level), and the options that would change the arithmetic. An
//! option weft does not implement is an error naming the field, never a silent default.

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::ops::rope::RopeScaling;

/// transformers' default base where a config gives none.
const DEFAULT_ROPE_THETA: f32 = 10000.0;

/// An option of the file that weft cannot honour.
pub fn unsupported_field(field: &str, value: impl std::fmt::Display) -> Error {
    Error::UnsupportedModel {
        what: format!("config field '{field}' = {value}"),
        hint: "it changes the model's arithmetic and weft does not implement it".into(),
    }
}

fn bad(field: &str, problem: impl Into<String>) -> Error {
    Error::BadConfig { field: field.to_string(), problem: problem.into() }
}

/// The RoPE base and frequency scaling of a config.
#[derive(Clone, Debug, PartialEq)]
pub struct Rope {
    pub base: f32,
    pub scaling: RopeScaling,
}

fn number(map: &Map<String, Value>, section: &str, key: &str) -> Result<Option<f32>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_f64().map(|x| Some(x as f32)).ok_or_else(|| bad(&format!("{section}.{key}"), format!("= {v} is not a number"))),
    }
}

fn required(map: &Map<String, Value>, section: &str, key: &str) -> Result<f32> {
    let value = number(map, section, key)?.ok_or_else(|| bad(&format!("{section}.{key}"), "is missing"))?;
    if !(value.is_finite() && value > 0.0) {
        return Err(bad(&format!("{section}.{key}"), format!("= {value} is not a finite positive number")));
    }
    Ok(value)
}

/// Reads the RoPE settings of `config` (a parsed config.json) in either form.
pub fn rope(config: &Value) -> Result<Rope> {
    let top_theta = match config.get("rope_theta") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_f64().ok_or_else(|| bad("rope_theta", format!("= {v} is not a number")))? as f32),
    };
    let section = |key: &str| -> Result<Option<&Map<String, Value>>> {
        match config.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(v) => Err(bad(key, format!("= {v} is not an object"))),
        }
    };
    let (name, params) = match (section("rope_parameters")?, section("rope_scaling")?) {
        (Some(_), Some(_)) => return Err(bad("rope_scaling", "is given together with rope_parameters")),
        (Some(p), None) => ("rope_parameters", Some(p)),
        (None, Some(p)) => ("rope_scaling", Some(p)),
        (None, None) => ("rope_parameters", None),
    };
    let empty = Map::new();
    let p = params.unwrap_or(&empty);
    // Per-layer-type settings (`{"full_attention": {...}, "sliding_attention": {...}}`).
    if let Some((key, _)) = p.iter().find(|(_, v)| v.is_object()) {
        return Err(unsupported_field(&format!("{name}.{key}"), "(RoPE settings per layer type)"));
    }
    let base = match (number(p, name, "rope_theta")?, top_theta) {
        (Some(a), Some(b)) if a != b => {
            return Err(bad("rope_theta", format!("= {b} disagrees with {name}.rope_theta = {a}")));
        }
        (Some(a), _) | (None, Some(a)) => a,
        (None, None) => DEFAULT_ROPE_THETA,
    };
    let kind = match (p.get("rope_type"), p.get("type")) {
        (Some(Value::String(a)), _) | (None, Some(Value::String(a))) => a.as_str(),
        (None, None) => "default",
        (Some(v), _) | (_, Some(v)) => return Err(bad(&format!("{name}.rope_type"), format!("= {v} is not a string"))),
    };
    let (scaling, known): (RopeScaling, &[&str]) = match kind {
        "default" => (RopeScaling::None, &[]),
        "linear" => (RopeScaling::Linear { factor: required(p, name, "factor")? }, &["factor"]),
        "llama3" => {
            let s = RopeScaling::Llama3 {
                factor: required(p, name, "factor")?,
                low_freq_factor: required(p, name, "low_freq_factor")?,
                high_freq_factor: required(p, name, "high_freq_factor")?,
                original_context: required(p, name, "original_max_position_embeddings")?,
            };
            if let RopeScaling::Llama3 { low_freq_factor, high_freq_factor, .. } = s {
                if low_freq_factor >= high_freq_factor {
                    return Err(bad(&format!("{name}.low_freq_factor"), "is not below high_freq_factor"));
                }
            }
            (s, &["factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"])
        }
        // Phi-3's LongRoPE (`su` in older files). transformers takes the factor for the
        // default attention scaling from max_position_embeddings / original_max_position_embeddings.
        "longrope" | "su" => {
            let factors = |key: &str| -> Result<Vec<f32>> {
                let list = p.get(key).and_then(Value::as_array).ok_or_else(|| bad(&format!("{name}.{key}"), "is not a list"))?;
                list.iter().map(|v| v.as_f64().map(|x| x as f32).ok_or_else(|| bad(&format!("{name}.{key}"), "holds a non-number"))).collect()
            };
            let top = |key: &str| config.get(key).and_then(Value::as_f64).map(|x| x as f32);
            let original = match number(p, name, "original_max_position_embeddings")? {
                Some(o) => o,
                None => top("original_max_position_embeddings")
                    .ok_or_else(|| bad("original_max_position_embeddings", "is missing (LongRoPE needs it)"))?,
            };
            let factor = match (number(p, name, "factor")?, top("max_position_embeddings")) {
                (Some(f), _) => f,
                (None, Some(max)) => max / original,
                (None, None) => 1.0,
            };
            let attention_factor = match number(p, name, "attention_factor")? {
                Some(a) => a,
                None if factor <= 1.0 => 1.0,
                None => (1.0 + (factor as f64).ln() / (original as f64).ln()).sqrt() as f32,
            };
            let s = RopeScaling::LongRope { short: factors("short_factor")?, long: factors("long_factor")?, original_context: original, attention_factor };
            (s, &["short_factor", "long_factor", "factor", "attention_factor", "original_max_position_embeddings"])
        }
        other => return Err(unsupported_field(&format!("{name}.rope_type"), format!("\"{other}\""))),
    };
    for (key, value) in p {
        let harmless = matches!(key.as_str(), "rope_type" | "type" | "rope_theta") || known.contains(&key.as_str());
        if harmless || (key == "partial_rotary_factor" && value.as_f64() == Some(1.0)) {
            continue;
        }
        return Err(unsupported_field(&format!("{name}.{key}"), value));
    }
    Ok(Rope { base, scaling })
}

/// Options of a Llama-family config (Llama, Mistral, Qwen2, Qwen3) that change the arithmetic
/// and that weft does not implement: each is an error naming it, unless it has the value weft
/// computes with.
pub fn check_options(config: &Value) -> Result<()> {
    let get = |key: &str| config.get(key).filter(|v| !v.is_null());
    if let Some(act) = get("hidden_act") {
        if act.as_str() != Some("silu") {
            return Err(unsupported_field("hidden_act", act));
        }
    }
    for flag in ["mlp_bias", "use_sliding_window"] {
        if let Some(v) = get(flag) {
            if v.as_bool() != Some(false) {
                return Err(unsupported_field(flag, v));
            }
        }
    }
    if let Some(v) = get("partial_rotary_factor") {
        if v.as_f64() != Some(1.0) {
            return Err(unsupported_field("partial_rotary_factor", v));
        }
    }
    for softcap in ["attn_logit_softcapping", "final_logit_softcapping"] {
        if let Some(v) = get(softcap) {
            return Err(unsupported_field(softcap, v));
        }
    }
    if let Some(types) = get("layer_types") {
        let layers = types.as_array().ok_or_else(|| bad("layer_types", "is not a list"))?;
        if let Some(other) = layers.iter().find(|t| t.as_str() != Some("full_attention")) {
            return Err(unsupported_field("layer_types", other));
        }
    }
    Ok(())
}

/// Gemma's options from a config.json, read as transformers reads them.
#[derive(Debug, Default)]
pub struct GemmaOptions {
    pub local_layers: Vec<bool>,
    pub attn_scale: Option<f32>,
    pub attn_softcap: Option<f32>,
    pub final_softcap: Option<f32>,
    /// Gemma 3: the global layers' RoPE and the local layers' base.
    pub global_rope: Option<Rope>,
    pub rope_local_base: Option<f32>,
}

fn opt_f32(config: &Value, key: &str) -> Result<Option<f32>> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_f64().map(|x| Some(x as f32)).ok_or_else(|| bad(key, format!("= {v} is not a number"))),
    }
}

/// Gemma 3's RoPE: per layer type in `rope_parameters` (transformers 5), or the global settings
/// at the top level with `rope_local_base_freq` (older files). Local layers take no scaling.
fn gemma3_rope(config: &Value) -> Result<(Rope, f32)> {
    let per_type = config.get("rope_parameters").and_then(|p| p.get("full_attention")).is_some();
    if !per_type {
        let local = opt_f32(config, "rope_local_base_freq")?.ok_or_else(|| bad("rope_local_base_freq", "is missing"))?;
        return Ok((rope(config)?, local));
    }
    let params = config.get("rope_parameters").and_then(Value::as_object).ok_or_else(|| bad("rope_parameters", "is not an object"))?;
    let of = |kind: &str| -> Result<Rope> {
        let section = params.get(kind).ok_or_else(|| bad(&format!("rope_parameters.{kind}"), "is missing"))?;
        rope(&serde_json::json!({ "rope_parameters": section }))
    };
    if let Some(other) = params.keys().find(|k| !matches!(k.as_str(), "full_attention" | "sliding_attention")) {
        return Err(unsupported_field(&format!("rope_parameters.{other}"), "(a layer type weft does not know)"));
    }
    let local = of("sliding_attention")?;
    if local.scaling != RopeScaling::None {
        return Err(unsupported_field("rope_parameters.sliding_attention.rope_type", "(scaled local RoPE)"));
    }
    Ok((of("full_attention")?, local.base))
}

/// A Gemma 2 or Gemma 3 config.json: the activation must be tanh-approximate GELU; the layer
/// types default to transformers' patterns (Gemma 2 even layers local, Gemma 3 five local to
/// one global) where the file has none.
pub fn gemma(config: &Value, arch: crate::model::Arch, n_layers: u64) -> Result<GemmaOptions> {
    let gemma3 = arch == crate::model::Arch::Gemma3;
    for key in ["hidden_activation", "hidden_act"] {
        if let Some(act) = config.get(key).filter(|v| !v.is_null()) {
            if act.as_str() != Some("gelu_pytorch_tanh") {
                return Err(unsupported_field(key, act));
            }
        }
    }
    for key in ["use_bidirectional_attention", "attention_bias"] {
        if let Some(v) = config.get(key).filter(|v| !v.is_null()) {
            if v.as_bool() != Some(false) {
                return Err(unsupported_field(key, v));
            }
        }
    }
    let local_layers = match config.get("layer_types").filter(|v| !v.is_null()) {
        Some(types) => {
            let types = types.as_array().ok_or_else(|| bad("layer_types", "is not a list"))?;
            let kind = |t: &Value| match t.as_str() {
                Some("sliding_attention") => Ok(true),
                Some("full_attention") => Ok(false),
                _ => Err(unsupported_field("layer_types", t)),
            };
            types.iter().map(kind).collect::<Result<Vec<_>>>()?
        }
        None if gemma3 => (0..n_layers.min(crate::model::config::limits::MAX_LAYERS)).map(|i| (i + 1) % 6 != 0).collect(),
        None => (0..n_layers.min(crate::model::config::limits::MAX_LAYERS)).map(|i| i % 2 == 0).collect(),
    };
    let (global_rope, rope_local_base) = match gemma3 {
        true => {
            let (global, local) = gemma3_rope(config)?;
            (Some(global), Some(local))
        }
        false => (None, None),
    };
    let scalar = opt_f32(config, "query_pre_attn_scalar")?.ok_or_else(|| bad("query_pre_attn_scalar", "is missing"))?;
    Ok(GemmaOptions {
        local_layers,
        attn_scale: Some((scalar as f64).powf(-0.5) as f32),
        attn_softcap: opt_f32(config, "attn_logit_softcapping")?,
        final_softcap: opt_f32(config, "final_logit_softcapping")?,
        global_rope,
        rope_local_base,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rope_of(json: &str) -> Result<Rope> {
        rope(&serde_json::from_str(json).unwrap())
    }

    #[test]
    fn both_forms_give_the_same_rope() {
        let new = rope_of(r#"{"rope_parameters":{"rope_theta":500000.0,"rope_type":"default"}}"#).unwrap();
        let old = rope_of(r#"{"rope_theta":500000.0}"#).unwrap();
        assert_eq!(new, old);
        assert_eq!(new, Rope { base: 500000.0, scaling: RopeScaling::None });

        let llama3 = r#""factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":8192"#;
        let new = rope_of(&format!(r#"{{"rope_parameters":{{"rope_theta":500000.0,"rope_type":"llama3",{llama3}}}}}"#)).unwrap();
        let old = rope_of(&format!(r#"{{"rope_theta":500000.0,"rope_scaling":{{"rope_type":"llama3",{llama3}}}}}"#)).unwrap();
        assert_eq!(new, old);
        let expected = RopeScaling::Llama3 { factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_context: 8192.0 };
        assert_eq!(new.scaling, expected);

        let linear = rope_of(r#"{"rope_scaling":{"type":"linear","factor":2.0}}"#).unwrap();
        assert_eq!(linear, Rope { base: 10000.0, scaling: RopeScaling::Linear { factor: 2.0 } });
    }

    fn names(e: Error, field: &str) {
        match e {
            Error::UnsupportedModel { what, .. } => assert!(what.contains(&format!("'{field}'")), "{what} should name {field}"),
            other => panic!("expected an unsupported {field}, got {other}"),
        }
    }

    #[test]
    fn what_is_not_understood_is_an_error_naming_the_field() {
        names(rope_of(r#"{"rope_parameters":{"rope_type":"yarn","factor":4.0}}"#).unwrap_err(), "rope_parameters.rope_type");
        names(rope_of(r#"{"rope_scaling":{"type":"dynamic","factor":4.0}}"#).unwrap_err(), "rope_scaling.rope_type");
        names(rope_of(r#"{"rope_scaling":{"type":"linear","factor":2.0,"beta":1}}"#).unwrap_err(), "rope_scaling.beta");
        names(
            rope_of(r#"{"rope_parameters":{"full_attention":{"rope_theta":1e6},"sliding_attention":{"rope_theta":1e4}}}"#).unwrap_err(),
            "rope_parameters.full_attention",
        );
        names(rope_of(r#"{"rope_parameters":{"rope_theta":1e4,"partial_rotary_factor":0.5}}"#).unwrap_err(), "rope_parameters.partial_rotary_factor");
        // A missing scaling parameter is a damaged file, not a default.
        assert!(matches!(rope_of(r#"{"rope_parameters":{"rope_type":"llama3","factor":8.0}}"#), Err(Error::BadConfig { .. })));
        assert!(matches!(rope_of(r#"{"rope_theta":1e4,"rope_parameters":{"rope_theta":1e6}}"#), Err(Error::BadConfig { .. })));

        let check = |json: &str| check_options(&serde_json::from_str(json).unwrap());
        names(check(r#"{"hidden_act":"gelu"}"#).unwrap_err(), "hidden_act");
        names(check(r#"{"mlp_bias":true}"#).unwrap_err(), "mlp_bias");
        names(check(r#"{"use_sliding_window":true}"#).unwrap_err(), "use_sliding_window");
        names(check(r#"{"layer_types":["full_attention","sliding_attention"]}"#).unwrap_err(), "layer_types");
        names(check(r#"{"final_logit_softcapping":30.0}"#).unwrap_err(), "final_logit_softcapping");
        check(r#"{"hidden_act":"silu","mlp_bias":false,"use_sliding_window":false,"sliding_window":null,
            "layer_types":["full_attention"],"partial_rotary_factor":1.0}"#)
        .unwrap();
    }

    #[test]
    fn gemma2_options() {
        let parse = |json: &str| gemma(&serde_json::from_str(json).unwrap(), crate::model::Arch::Gemma2, 3);
        let g = parse(r#"{"query_pre_attn_scalar":256,"attn_logit_softcapping":50.0,"final_logit_softcapping":null}"#).unwrap();
        // transformers' default alternation where the file lists no layer types.
        assert_eq!(g.local_layers, vec![true, false, true]);
        assert_eq!((g.attn_scale, g.attn_softcap, g.final_softcap), (Some(1.0 / 16.0), Some(50.0), None));
        names(parse(r#"{"query_pre_attn_scalar":256,"hidden_activation":"gelu"}"#).unwrap_err(), "hidden_activation");
        names(parse(r#"{"query_pre_attn_scalar":256,"layer_types":["chunked_attention"]}"#).unwrap_err(), "layer_types");
        assert!(matches!(parse("{}"), Err(Error::BadConfig { .. })));
    }

    #[test]
    fn gemma3_rope_in_both_forms() {
        let parse = |json: &str| gemma(&serde_json::from_str(json).unwrap(), crate::model::Arch::Gemma3, 6);
        let old = parse(
            r#"{"query_pre_attn_scalar":256,"rope_theta":1000000.0,"rope_local_base_freq":10000.0,
                "rope_scaling":{"rope_type":"linear","factor":8.0}}"#,
        )
        .unwrap();
        let new = parse(
            r#"{"query_pre_attn_scalar":256,"rope_parameters":{
                "full_attention":{"rope_type":"linear","rope_theta":1000000.0,"factor":8.0},
                "sliding_attention":{"rope_type":"default","rope_theta":10000.0}}}"#,
        )
        .unwrap();
        for g in [&old, &new] {
            assert_eq!(g.global_rope, Some(Rope { base: 1e6, scaling: RopeScaling::Linear { factor: 8.0 } }));
            assert_eq!(g.rope_local_base, Some(1e4));
            assert_eq!(g.local_layers, vec![true, true, true, true, true, false]);
        }
        let yarn = r#"{"query_pre_attn_scalar":256,"rope_parameters":{
            "full_attention":{"rope_type":"yarn","rope_theta":1e6,"factor":8.0},"sliding_attention":{"rope_theta":1e4}}}"#;
        names(parse(yarn).unwrap_err(), "rope_parameters.rope_type");
    }

    #[test]
    fn longrope_in_both_forms() {
        let f = "[1.0,2.0]";
        let new = rope_of(&format!(
            r#"{{"max_position_embeddings":131072,"rope_parameters":{{"rope_type":"longrope","rope_theta":1e4,
                "short_factor":{f},"long_factor":[3.0,4.0],"original_max_position_embeddings":4096}}}}"#
        ))
        .unwrap();
        let old = rope_of(&format!(
            r#"{{"max_position_embeddings":131072,"original_max_position_embeddings":4096,"rope_theta":1e4,
                "rope_scaling":{{"type":"su","short_factor":{f},"long_factor":[3.0,4.0]}}}}"#
        ))
        .unwrap();
        assert_eq!(new, old);
        // Phi-3.5-mini's numbers: √(1 + ln 32 / ln 4096) = 1.1902.
        let RopeScaling::LongRope { short, long, original_context, attention_factor } = new.scaling else { panic!() };
        assert_eq!((short, long, original_context), (vec![1.0, 2.0], vec![3.0, 4.0], 4096.0));
        assert!((attention_factor - 1.190_239).abs() < 1e-6, "{attention_factor}");
        names(
            rope_of(r#"{"original_max_position_embeddings":4096,"rope_scaling":{"type":"su","short_factor":[1],"long_factor":[1],"mscale":2}}"#)
                .unwrap_err(),
            "rope_scaling.mscale",
        );
        assert!(matches!(rope_of(r#"{"rope_scaling":{"type":"longrope","short_factor":[1],"long_factor":[1]}}"#), Err(Error::BadConfig { .. })));
    }
}
