//! GGUF metadata values and the typed accessors model code reads its configuration through.

use serde::Serialize;

use crate::format::FormatError;

/// One metadata value. Integer widths are kept as stored so that a file round-trips.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum GgufValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(GgufArray),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A metadata array. Elements share one type; each is stored unboxed so that an array costs
/// about as much memory as its bytes in the file.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum GgufArray {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    Array(Vec<GgufArray>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl GgufValue {
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::U8(_) => "u8",
            Self::I8(_) => "i8",
            Self::U16(_) => "u16",
            Self::I16(_) => "i16",
            Self::U32(_) => "u32",
            Self::I32(_) => "i32",
            Self::F32(_) => "f32",
            Self::Bool(_) => "bool",
            Self::String(_) => "string",
            Self::Array(_) => "array",
            Self::U64(_) => "u64",
            Self::I64(_) => "i64",
            Self::F64(_) => "f64",
        }
    }

    /// The value as a signed 128-bit integer, for any integer type (so every width converts
    /// losslessly and range checks happen once, in the caller).
    pub fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            Self::U8(v) => v.into(),
            Self::I8(v) => v.into(),
            Self::U16(v) => v.into(),
            Self::I16(v) => v.into(),
            Self::U32(v) => v.into(),
            Self::I32(v) => v.into(),
            Self::U64(v) => v.into(),
            Self::I64(v) => v.into(),
            _ => return None,
        })
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Self::F32(v) => Some(v.into()),
            Self::F64(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&GgufArray> {
        match self {
            Self::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A short description for error messages: the type, and the length for arrays.
    pub fn describe(&self) -> String {
        match self {
            Self::Array(a) => format!("array of {} {}", a.len(), a.element_type_name()),
            other => other.type_name().to_string(),
        }
    }
}

impl GgufArray {
    pub fn len(&self) -> usize {
        match self {
            Self::U8(v) => v.len(),
            Self::I8(v) => v.len(),
            Self::U16(v) => v.len(),
            Self::I16(v) => v.len(),
            Self::U32(v) => v.len(),
            Self::I32(v) => v.len(),
            Self::F32(v) => v.len(),
            Self::Bool(v) => v.len(),
            Self::String(v) => v.len(),
            Self::Array(v) => v.len(),
            Self::U64(v) => v.len(),
            Self::I64(v) => v.len(),
            Self::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn element_type_name(&self) -> &'static str {
        match self {
            Self::U8(_) => "u8",
            Self::I8(_) => "i8",
            Self::U16(_) => "u16",
            Self::I16(_) => "i16",
            Self::U32(_) => "u32",
            Self::I32(_) => "i32",
            Self::F32(_) => "f32",
            Self::Bool(_) => "bool",
            Self::String(_) => "string",
            Self::Array(_) => "array",
            Self::U64(_) => "u64",
            Self::I64(_) => "i64",
            Self::F64(_) => "f64",
        }
    }

    /// Element `index` as a scalar value (nested arrays are cloned).
    pub fn get(&self, index: usize) -> Option<GgufValue> {
        Some(match self {
            Self::U8(v) => GgufValue::U8(*v.get(index)?),
            Self::I8(v) => GgufValue::I8(*v.get(index)?),
            Self::U16(v) => GgufValue::U16(*v.get(index)?),
            Self::I16(v) => GgufValue::I16(*v.get(index)?),
            Self::U32(v) => GgufValue::U32(*v.get(index)?),
            Self::I32(v) => GgufValue::I32(*v.get(index)?),
            Self::F32(v) => GgufValue::F32(*v.get(index)?),
            Self::Bool(v) => GgufValue::Bool(*v.get(index)?),
            Self::String(v) => GgufValue::String(v.get(index)?.clone()),
            Self::Array(v) => GgufValue::Array(v.get(index)?.clone()),
            Self::U64(v) => GgufValue::U64(*v.get(index)?),
            Self::I64(v) => GgufValue::I64(*v.get(index)?),
            Self::F64(v) => GgufValue::F64(*v.get(index)?),
        })
    }
}

/// GGUF key/value metadata in file order, with typed accessors that name the key on failure.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GgufMetadata {
    pub entries: Vec<(String, GgufValue)>,
}

impl GgufMetadata {
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value under `key`, or [`FormatError::MissingKey`].
    pub fn value(&self, key: &str) -> Result<&GgufValue, FormatError> {
        self.get(key).ok_or_else(|| FormatError::MissingKey { key: key.to_string() })
    }

    pub fn get_str(&self, key: &str) -> Result<&str, FormatError> {
        let value = self.value(key)?;
        value.as_str().ok_or_else(|| wrong_type(key, "string", value))
    }

    pub fn get_bool(&self, key: &str) -> Result<bool, FormatError> {
        match self.value(key)? {
            GgufValue::Bool(b) => Ok(*b),
            other => Err(wrong_type(key, "bool", other)),
        }
    }

    /// Any integer type whose value fits in u32 (writers differ in the widths they use).
    pub fn get_u32(&self, key: &str) -> Result<u32, FormatError> {
        let value = self.value(key)?;
        value
            .as_integer()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| wrong_type(key, "an integer in u32 range", value))
    }

    /// Any integer type whose value fits in u64.
    pub fn get_u64(&self, key: &str) -> Result<u64, FormatError> {
        let value = self.value(key)?;
        value
            .as_integer()
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| wrong_type(key, "an integer in u64 range", value))
    }

    /// Any integer type whose value fits in i64.
    pub fn get_i64(&self, key: &str) -> Result<i64, FormatError> {
        let value = self.value(key)?;
        value
            .as_integer()
            .and_then(|v| i64::try_from(v).ok())
            .ok_or_else(|| wrong_type(key, "an integer in i64 range", value))
    }

    /// An f32, or an f64 narrowed to f32.
    pub fn get_f32(&self, key: &str) -> Result<f32, FormatError> {
        let value = self.value(key)?;
        value.as_f64().map(|v| v as f32).ok_or_else(|| wrong_type(key, "a float", value))
    }

    pub fn get_array(&self, key: &str) -> Result<&GgufArray, FormatError> {
        let value = self.value(key)?;
        value.as_array().ok_or_else(|| wrong_type(key, "an array", value))
    }

    pub fn get_str_array(&self, key: &str) -> Result<&[String], FormatError> {
        match self.get_array(key)? {
            GgufArray::String(v) => Ok(v),
            other => Err(FormatError::WrongType {
                key: key.to_string(),
                expected: "an array of strings",
                found: format!("array of {}", other.element_type_name()),
            }),
        }
    }

    pub fn get_f32_array(&self, key: &str) -> Result<&[f32], FormatError> {
        match self.get_array(key)? {
            GgufArray::F32(v) => Ok(v),
            other => Err(FormatError::WrongType {
                key: key.to_string(),
                expected: "an array of f32",
                found: format!("array of {}", other.element_type_name()),
            }),
        }
    }

    pub fn get_i32_array(&self, key: &str) -> Result<&[i32], FormatError> {
        match self.get_array(key)? {
            GgufArray::I32(v) => Ok(v),
            other => Err(FormatError::WrongType {
                key: key.to_string(),
                expected: "an array of i32",
                found: format!("array of {}", other.element_type_name()),
            }),
        }
    }
}

fn wrong_type(key: &str, expected: &'static str, found: &GgufValue) -> FormatError {
    FormatError::WrongType { key: key.to_string(), expected, found: found.describe() }
}
