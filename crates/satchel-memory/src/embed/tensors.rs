//! Reading a safetensors file (an 8-byte little-endian header length, a
//! JSON header, then the raw data) into named `f32` tensors checked
//! against the shapes the encoder expects. Shared by the encoder and the
//! reference forward pass its tests compare with.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use crate::MemoryError;

/// A layer norm's scale and shift.
pub(super) struct LayerNorm {
    pub(super) gamma: Vec<f32>,
    pub(super) beta: Vec<f32>,
}

/// The tensors of a safetensors file, as `f32`.
pub(super) struct Tensors {
    by_name: HashMap<String, (Vec<usize>, Vec<f32>)>,
    prefix: &'static str,
}

#[derive(Deserialize)]
struct TensorInfo {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [usize; 2],
}

impl Tensors {
    /// Parses a safetensors file: an 8-byte little-endian header length,
    /// a JSON header, then the raw data. Only `F32` tensors are kept.
    pub(super) fn read(path: &Path) -> Result<Tensors, MemoryError> {
        let bad = |reason: String| MemoryError::Model {
            path: path.to_path_buf(),
            reason,
        };
        let bytes = std::fs::read(path).map_err(|error| bad(error.to_string()))?;
        let header_len = bytes
            .get(..8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| bad("too short to be a safetensors file".into()))?;
        let header = bytes
            .get(8..8usize.saturating_add(header_len))
            .ok_or_else(|| bad("the safetensors header runs past the end".into()))?;
        let infos: HashMap<String, serde_json::Value> = serde_json::from_slice(header)
            .map_err(|error| bad(format!("unreadable safetensors header: {error}")))?;
        let data = &bytes[8 + header_len..];
        let mut by_name = HashMap::new();
        for (name, value) in infos {
            if name == "__metadata__" {
                continue;
            }
            let info: TensorInfo = serde_json::from_value(value)
                .map_err(|error| bad(format!("tensor `{name}`: {error}")))?;
            if info.dtype != "F32" {
                continue;
            }
            let [start, end] = info.data_offsets;
            let raw = data
                .get(start..end)
                .ok_or_else(|| bad(format!("tensor `{name}` runs past the end of the file")))?;
            let count: usize = info.shape.iter().product();
            if raw.len() != count * 4 {
                return Err(bad(format!(
                    "tensor `{name}` has {} bytes for shape {:?}",
                    raw.len(),
                    info.shape
                )));
            }
            let values = raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            by_name.insert(name, (info.shape, values));
        }
        // Exported with or without the `bert.` prefix.
        let prefix = if by_name.contains_key("bert.embeddings.word_embeddings.weight") {
            "bert."
        } else {
            ""
        };
        Ok(Tensors { by_name, prefix })
    }

    /// The first `width` values of tensor `name` (its first row), whatever
    /// its shape: BERT's single token type.
    pub(super) fn first_row(&self, name: &str, width: usize) -> Result<Vec<f32>, String> {
        let full = format!("{}{name}", self.prefix);
        self.by_name
            .get(&full)
            .and_then(|(_, values)| values.get(..width))
            .map(<[f32]>::to_vec)
            .ok_or_else(|| format!("tensor `{full}` is missing"))
    }

    pub(super) fn take(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let full = format!("{}{name}", self.prefix);
        let (found, values) = self
            .by_name
            .remove(&full)
            .ok_or_else(|| format!("tensor `{full}` is missing"))?;
        if found != shape {
            return Err(format!(
                "tensor `{full}` has shape {found:?}, expected {shape:?}"
            ));
        }
        Ok(values)
    }

    /// A linear layer's weight (`[out, in]`, as stored) and bias.
    pub(super) fn linear(
        &mut self,
        name: &str,
        out_dim: usize,
        in_dim: usize,
    ) -> Result<(Vec<f32>, Vec<f32>), String> {
        Ok((
            self.take(&format!("{name}.weight"), &[out_dim, in_dim])?,
            self.take(&format!("{name}.bias"), &[out_dim])?,
        ))
    }

    pub(super) fn norm(&mut self, name: &str, dim: usize) -> Result<LayerNorm, String> {
        Ok(LayerNorm {
            gamma: self.take(&format!("{name}.weight"), &[dim])?,
            beta: self.take(&format!("{name}.bias"), &[dim])?,
        })
    }
}
