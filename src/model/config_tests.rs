//! Tests of `config.rs`, in a file of their own to keep config.rs short.

use super::*;

#[test]
fn hf_config_for_a_qwen2_shape() {
    let json = r#"{"model_type":"qwen2","vocab_size":151936,"hidden_size":896,
        "intermediate_size":4864,"num_hidden_layers":24,"num_attention_heads":14,
        "num_key_value_heads":2,"rms_norm_eps":1e-6,"rope_theta":1000000.0,
        "max_position_embeddings":32768,"tie_word_embeddings":true}"#;
    let c = LlamaConfig::from_hf_json(json).unwrap();
    assert_eq!((c.arch, c.head_dim, c.kv_dim(), c.rope_style), (Arch::Qwen2, 64, 128, RopeStyle::Neox));
    assert!(c.attn_bias);
}

#[test]
fn transformers_5_rope_parameters_are_read() {
    // What a Qwen2 folder saved by transformers 5 holds: the base only in rope_parameters.
    let json = r#"{"model_type":"qwen2","vocab_size":100,"hidden_size":64,"intermediate_size":128,
        "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"rms_norm_eps":1e-6,
        "layer_types":["full_attention","full_attention"],"use_sliding_window":false,"sliding_window":null,
        "rope_parameters":{"rope_theta":1000000.0,"rope_type":"default"}}"#;
    let c = LlamaConfig::from_hf_json(json).unwrap();
    assert_eq!((c.rope_base, &c.rope_scaling), (1e6, &RopeScaling::None));
    let yarn = json.replace(r#""rope_type":"default""#, r#""rope_type":"yarn","factor":4.0"#);
    assert!(matches!(LlamaConfig::from_hf_json(&yarn), Err(Error::UnsupportedModel { what, .. }) if what.contains("rope_type")));
    let qwen3 = json.replace("qwen2", "qwen3");
    let c = LlamaConfig::from_hf_json(&qwen3).unwrap();
    assert!(c.qk_norm && !c.attn_bias);
}

#[test]
fn mistral_windows_bound_the_kv_cache() {
    let json = r#"{"model_type":"mistral","vocab_size":100,"hidden_size":64,"intermediate_size":128,
        "num_hidden_layers":2,"num_attention_heads":4,"rms_norm_eps":1e-6,"max_position_embeddings":4096,
        "sliding_window":SW}"#;
    let none = LlamaConfig::from_hf_json(&json.replace("SW", "null")).unwrap();
    assert_eq!((none.sliding_window, none.kv_window(2048, 4)), (None, (2048, 4)));
    let window = LlamaConfig::from_hf_json(&json.replace("SW", "1024")).unwrap();
    assert_eq!((window.sliding_window, window.kv_window(2048, 4), window.kv_window(512, 4)), (Some(1024), (1024, 0), (512, 0)));
    assert!(matches!(LlamaConfig::from_hf_json(&json.replace("SW", "0")), Err(Error::BadConfig { .. })));
    // Qwen2's window is off unless use_sliding_window says otherwise.
    let qwen2 = json.replace("mistral", "qwen2").replace("SW", "1024");
    assert_eq!(LlamaConfig::from_hf_json(&qwen2).unwrap().sliding_window, None);
}

#[test]
fn inconsistent_configs_are_errors() {
    let json = r#"{"model_type":"llama","vocab_size":10,"hidden_size":64,"intermediate_size":128,
        "num_hidden_layers":2,"num_attention_heads":3,"num_key_value_heads":2,"rms_norm_eps":1e-5}"#;
    assert!(LlamaConfig::from_hf_json(json).is_err());
    assert!(LlamaConfig::from_hf_json(r#"{"model_type":"gpt2"}"#).is_err());
}

fn with_layers(layers: u64) -> Result<LlamaConfig> {
    LlamaConfig::from_hf_json(&format!(
        r#"{{"model_type":"llama","vocab_size":10,"hidden_size":64,"intermediate_size":128,
        "num_hidden_layers":{layers},"num_attention_heads":4,"rms_norm_eps":1e-5}}"#
    ))
}

#[test]
fn limits_are_inclusive_and_errors_typed() {
    assert_eq!(with_layers(limits::MAX_LAYERS).unwrap().n_layers, 1024);
    for layers in [0, limits::MAX_LAYERS + 1, u64::MAX] {
        assert!(matches!(with_layers(layers), Err(Error::BadConfig { .. })), "{layers}");
    }
    assert!(matches!(
        LlamaConfig::from_hf_json(r#"{"model_type":"gpt2"}"#),
        Err(Error::UnsupportedModel { .. })
    ));
}

/// A weft file's config goes through the same checks as the formats it was made from.
#[test]
fn weft_configs_are_validated() {
    let good = with_layers(2).unwrap();
    let json = serde_json::to_string(&good).unwrap();
    assert_eq!(LlamaConfig::from_weft_json(&json).unwrap(), good);
    let bad = json.replace(r#""n_layers":2"#, r#""n_layers":4294967295"#);
    assert!(matches!(LlamaConfig::from_weft_json(&bad), Err(Error::BadConfig { .. })));
    assert!(matches!(LlamaConfig::from_weft_json("{"), Err(Error::BadConfig { .. })));
}
