//! Writers for small model files built inside tests.

#![allow(dead_code)]

pub mod cli;
pub mod http;

/// Builds GGUF files byte by byte, so tests can also write malformed ones.
pub struct GgufWriter {
    pub bytes: Vec<u8>,
}

/// GGUF metadata value type ids.
pub mod ty {
    pub const U8: u32 = 0;
    pub const I8: u32 = 1;
    pub const U16: u32 = 2;
    pub const I16: u32 = 3;
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
    pub const I64: u32 = 11;
    pub const F64: u32 = 12;
}

impl GgufWriter {
    pub fn new(version: u32, tensor_count: u64, entry_count: u64) -> Self {
        let mut w = Self { bytes: b"GGUF".to_vec() };
        w.u32(version).u64(tensor_count).u64(entry_count);
        w
    }

    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(bytes);
        self
    }

    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.raw(&[v])
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    pub fn string(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64).raw(s.as_bytes())
    }

    /// A key followed by its value type; the caller writes the value.
    pub fn key(&mut self, key: &str, type_id: u32) -> &mut Self {
        self.string(key).u32(type_id)
    }

    pub fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.key(key, ty::U32).u32(v)
    }

    pub fn kv_str(&mut self, key: &str, v: &str) -> &mut Self {
        self.key(key, ty::STRING).string(v)
    }

    pub fn kv_str_array(&mut self, key: &str, items: &[&str]) -> &mut Self {
        self.key(key, ty::ARRAY).u32(ty::STRING).u64(items.len() as u64);
        for item in items {
            self.string(item);
        }
        self
    }

    /// A tensor info; `ggml_dims` innermost first, as GGUF stores them.
    pub fn tensor(&mut self, name: &str, ggml_dims: &[u64], type_id: u32, offset: u64) -> &mut Self {
        self.string(name).u32(ggml_dims.len() as u32);
        for &d in ggml_dims {
            self.u64(d);
        }
        self.u32(type_id).u64(offset)
    }

    /// Pads to `alignment` and appends `data_len` bytes of tensor data.
    pub fn finish(&mut self, alignment: usize, data_len: usize) -> Vec<u8> {
        while !self.bytes.len().is_multiple_of(alignment) {
            self.bytes.push(0);
        }
        self.bytes.extend(std::iter::repeat_n(0x5a, data_len));
        self.bytes.clone()
    }
}

/// A safetensors file from a literal JSON header and `data_len` data bytes.
pub fn safetensors_with_header(json: &str, data_len: usize) -> Vec<u8> {
    let mut bytes = (json.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(json.as_bytes());
    bytes.extend(std::iter::repeat_n(0x33, data_len));
    bytes
}
