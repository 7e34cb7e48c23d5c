//! Storage types of tensors in model files: safetensors dtypes and GGML block types. Shared by
//! the parsers (sizes and validation), the CPU decoders and the GPU kernels.

use serde::Serialize;

/// Element types a safetensors header may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum SafeDtype {
    F64,
    F32,
    F16,
    BF16,
    /// FP8 E4M3 (finite-only "fn" variant: no infinities, NaN = S.1111.111).
    F8E4M3,
    /// FP8 E5M2 (IEEE-like: infinities and NaNs).
    F8E5M2,
    /// FP4 E2M1, two values per byte, low nibble first.
    F4,
    I64,
    I32,
    I16,
    I8,
    U64,
    U32,
    U16,
    U8,
    Bool,
}

impl SafeDtype {
    pub const ALL: [SafeDtype; 16] = [
        Self::F64,
        Self::F32,
        Self::F16,
        Self::BF16,
        Self::F8E4M3,
        Self::F8E5M2,
        Self::F4,
        Self::I64,
        Self::I32,
        Self::I16,
        Self::I8,
        Self::U64,
        Self::U32,
        Self::U16,
        Self::U8,
        Self::Bool,
    ];

    /// The name used in safetensors headers.
    pub fn name(self) -> &'static str {
        match self {
            Self::F64 => "F64",
            Self::F32 => "F32",
            Self::F16 => "F16",
            Self::BF16 => "BF16",
            Self::F8E4M3 => "F8_E4M3",
            Self::F8E5M2 => "F8_E5M2",
            Self::F4 => "F4",
            Self::I64 => "I64",
            Self::I32 => "I32",
            Self::I16 => "I16",
            Self::I8 => "I8",
            Self::U64 => "U64",
            Self::U32 => "U32",
            Self::U16 => "U16",
            Self::U8 => "U8",
            Self::Bool => "BOOL",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Size of one element in bits (4 for F4).
    pub fn bits(self) -> u64 {
        match self {
            Self::F64 | Self::I64 | Self::U64 => 64,
            Self::F32 | Self::I32 | Self::U32 => 32,
            Self::F16 | Self::BF16 | Self::I16 | Self::U16 => 16,
            Self::F8E4M3 | Self::F8E5M2 | Self::I8 | Self::U8 | Self::Bool => 8,
            Self::F4 => 4,
        }
    }

    /// Bytes that `elements` values occupy, or None on overflow or a half byte (odd F4 count).
    pub fn bytes_for(self, elements: u64) -> Option<u64> {
        let bits = elements.checked_mul(self.bits())?;
        (bits % 8 == 0).then_some(bits / 8)
    }
}

/// GGML tensor types weft reads from GGUF files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[allow(non_camel_case_types)]
pub enum GgmlType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
}

impl GgmlType {
    pub const ALL: [GgmlType; 13] = [
        Self::F32,
        Self::F16,
        Self::BF16,
        Self::Q4_0,
        Self::Q4_1,
        Self::Q5_0,
        Self::Q5_1,
        Self::Q8_0,
        Self::Q2_K,
        Self::Q3_K,
        Self::Q4_K,
        Self::Q5_K,
        Self::Q6_K,
    ];

    /// The type id stored in GGUF tensor infos.
    pub fn id(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q4_1 => 3,
            Self::Q5_0 => 6,
            Self::Q5_1 => 7,
            Self::Q8_0 => 8,
            Self::Q2_K => 10,
            Self::Q3_K => 11,
            Self::Q4_K => 12,
            Self::Q5_K => 13,
            Self::Q6_K => 14,
            Self::BF16 => 30,
        }
    }

    pub fn from_id(id: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.id() == id)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "F32",
            Self::F16 => "F16",
            Self::BF16 => "BF16",
            Self::Q4_0 => "Q4_0",
            Self::Q4_1 => "Q4_1",
            Self::Q5_0 => "Q5_0",
            Self::Q5_1 => "Q5_1",
            Self::Q8_0 => "Q8_0",
            Self::Q2_K => "Q2_K",
            Self::Q3_K => "Q3_K",
            Self::Q4_K => "Q4_K",
            Self::Q5_K => "Q5_K",
            Self::Q6_K => "Q6_K",
        }
    }

    /// Elements per block.
    pub fn block_elements(self) -> u64 {
        match self {
            Self::F32 | Self::F16 | Self::BF16 => 1,
            Self::Q4_0 | Self::Q4_1 | Self::Q5_0 | Self::Q5_1 | Self::Q8_0 => 32,
            Self::Q2_K | Self::Q3_K | Self::Q4_K | Self::Q5_K | Self::Q6_K => 256,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> u64 {
        match self {
            Self::F32 => 4,
            Self::F16 | Self::BF16 => 2,
            Self::Q4_0 => 18,
            Self::Q4_1 => 20,
            Self::Q5_0 => 22,
            Self::Q5_1 => 24,
            Self::Q8_0 => 34,
            Self::Q2_K => 84,
            Self::Q3_K => 110,
            Self::Q4_K => 144,
            Self::Q5_K => 176,
            Self::Q6_K => 210,
        }
    }

    /// Bytes that `elements` values occupy, or None on overflow or a partial block.
    pub fn bytes_for(self, elements: u64) -> Option<u64> {
        let block = self.block_elements();
        elements.is_multiple_of(block).then_some(())?;
        (elements / block).checked_mul(self.block_bytes())
    }

    /// Storage cost in bits per weight.
    pub fn bits_per_weight(self) -> f64 {
        self.block_bytes() as f64 * 8.0 / self.block_elements() as f64
    }
}

/// How one tensor is stored: the model code sees this, never the bytes' layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum StorageType {
    Safe(SafeDtype),
    Ggml(GgmlType),
}

impl StorageType {
    pub fn name(self) -> &'static str {
        match self {
            Self::Safe(d) => d.name(),
            Self::Ggml(t) => t.name(),
        }
    }

    pub fn bytes_for(self, elements: u64) -> Option<u64> {
        match self {
            Self::Safe(d) => d.bytes_for(elements),
            Self::Ggml(t) => t.bytes_for(elements),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_round_trip() {
        for d in SafeDtype::ALL {
            assert_eq!(SafeDtype::from_name(d.name()), Some(d));
        }
        for t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
        }
        assert_eq!(GgmlType::from_id(9), None); // Q8_1 exists in GGML but is not a storage type here
    }

    #[test]
    fn sizes() {
        assert_eq!(SafeDtype::F4.bytes_for(6), Some(3));
        assert_eq!(SafeDtype::F4.bytes_for(5), None);
        assert_eq!(SafeDtype::F64.bytes_for(u64::MAX), None);
        assert_eq!(GgmlType::Q4_1.bytes_for(64), Some(40));
        assert_eq!(GgmlType::Q6_K.bytes_for(255), None);
        assert_eq!(GgmlType::Q4_0.bits_per_weight(), 4.5);
        assert_eq!(GgmlType::Q2_K.bits_per_weight(), 2.625);
    }
}
