//! The forward pass as it was before the speed work (commit 207284d),
//! kept verbatim for tests only: the optimised encoder must give the same
//! embeddings (see `tests` in `mod.rs`).
//!
//! Original description: a BERT encoder forward pass on the CPU, for
//! sentence-embedding models such as all-MiniLM-L6-v2: weights from a
//! safetensors file, matrix products through `gemm`, attention and
//! normalisation written out here.
//!
//! Sequences of a batch are concatenated token by token rather than
//! padded: every layer but attention works on tokens independently, and
//! attention runs per sequence, so no work is spent on padding and no mask
//! is needed. The output is the mean of each sequence's last hidden
//! states (mean pooling), L2-normalised.

use std::path::Path;

use super::bert::BertConfig;
use super::tensors::{LayerNorm, Tensors};
use crate::MemoryError;

/// A linear layer: `y = x Wᵀ + b`, `W` stored `[out, in]` row-major.
struct Linear {
    weight: Vec<f32>,
    bias: Vec<f32>,
    out_dim: usize,
    in_dim: usize,
}

struct Layer {
    /// Query, key and value projections fused into one `[3h, h]` layer.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// The loaded encoder.
pub(crate) struct Bert {
    config: BertConfig,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
}

/// A linear layer from its stored weight and bias.
fn linear_layer(
    tensors: &mut Tensors,
    name: &str,
    out_dim: usize,
    in_dim: usize,
) -> Result<Linear, String> {
    let (weight, bias) = tensors.linear(name, out_dim, in_dim)?;
    Ok(Linear {
        weight,
        bias,
        out_dim,
        in_dim,
    })
}

impl Bert {
    /// Loads the weights at `weights` for the architecture in `config`.
    pub(crate) fn load(weights: &Path, config: BertConfig) -> Result<Bert, MemoryError> {
        let bad = |reason: String| MemoryError::Model {
            path: weights.to_path_buf(),
            reason,
        };
        if config.hidden_act != "gelu" {
            return Err(bad(format!(
                "activation `{}` is not supported (only gelu)",
                config.hidden_act
            )));
        }
        if config.num_attention_heads == 0
            || !config
                .hidden_size
                .is_multiple_of(config.num_attention_heads)
        {
            return Err(bad("hidden_size is not a multiple of the heads".into()));
        }
        let mut tensors = Tensors::read(weights)?;
        let h = config.hidden_size;
        let load = |tensors: &mut Tensors| -> Result<Bert, String> {
            let word =
                tensors.take("embeddings.word_embeddings.weight", &[config.vocab_size, h])?;
            let position = tensors.take(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, h],
            )?;
            let token_type = tensors.first_row("embeddings.token_type_embeddings.weight", h)?;
            let embedding_norm = tensors.norm("embeddings.LayerNorm", h)?;
            let mut layers = Vec::with_capacity(config.num_hidden_layers);
            for index in 0..config.num_hidden_layers {
                let name = |part: &str| format!("encoder.layer.{index}.{part}");
                let query = linear_layer(tensors, &name("attention.self.query"), h, h)?;
                let key = linear_layer(tensors, &name("attention.self.key"), h, h)?;
                let value = linear_layer(tensors, &name("attention.self.value"), h, h)?;
                let qkv = Linear {
                    weight: [query.weight, key.weight, value.weight].concat(),
                    bias: [query.bias, key.bias, value.bias].concat(),
                    out_dim: 3 * h,
                    in_dim: h,
                };
                layers.push(Layer {
                    qkv,
                    attention_out: linear_layer(tensors, &name("attention.output.dense"), h, h)?,
                    attention_norm: tensors.norm(&name("attention.output.LayerNorm"), h)?,
                    intermediate: linear_layer(
                        tensors,
                        &name("intermediate.dense"),
                        config.intermediate_size,
                        h,
                    )?,
                    output: linear_layer(
                        tensors,
                        &name("output.dense"),
                        h,
                        config.intermediate_size,
                    )?,
                    output_norm: tensors.norm(&name("output.LayerNorm"), h)?,
                });
            }
            Ok(Bert {
                config: config.clone(),
                word,
                position,
                token_type,
                embedding_norm,
                layers,
            })
        };
        load(&mut tensors).map_err(bad)
    }

    /// Embeds sequences of token ids (each non-empty, at most `max_len`):
    /// mean-pooled, L2-normalised, one row of `dim()` per sequence.
    pub(crate) fn embed(&self, sequences: &[Vec<u32>]) -> Vec<Vec<f32>> {
        let h = self.config.hidden_size;
        let lengths: Vec<usize> = sequences.iter().map(Vec::len).collect();
        let tokens: usize = lengths.iter().sum();
        if tokens == 0 {
            return sequences.iter().map(|_| vec![0.0; h]).collect();
        }
        let mut x = vec![0.0f32; tokens * h];
        let mut row = 0;
        for sequence in sequences {
            for (position, &id) in sequence.iter().enumerate() {
                let id = (id as usize).min(self.config.vocab_size - 1);
                let position = position.min(self.config.max_position_embeddings - 1);
                let out = &mut x[row * h..(row + 1) * h];
                let word = &self.word[id * h..(id + 1) * h];
                let pos = &self.position[position * h..(position + 1) * h];
                for i in 0..h {
                    out[i] = word[i] + pos[i] + self.token_type[i];
                }
                row += 1;
            }
        }
        layer_norm(&mut x, &self.embedding_norm, self.config.layer_norm_eps);

        let mut qkv = vec![0.0f32; tokens * 3 * h];
        let mut context = vec![0.0f32; tokens * h];
        let mut projected = vec![0.0f32; tokens * h];
        let mut inner = vec![0.0f32; tokens * self.config.intermediate_size];
        let max_len = lengths.iter().copied().max().unwrap_or(0);
        let mut scores = vec![0.0f32; max_len];
        for layer in &self.layers {
            linear(&x, tokens, &layer.qkv, &mut qkv);
            self.attention(&qkv, &lengths, &mut context, &mut scores);
            linear(&context, tokens, &layer.attention_out, &mut projected);
            add_in_place(&mut x, &projected);
            layer_norm(&mut x, &layer.attention_norm, self.config.layer_norm_eps);
            linear(&x, tokens, &layer.intermediate, &mut inner);
            inner.iter_mut().for_each(|v| *v = gelu(*v));
            linear(&inner, tokens, &layer.output, &mut projected);
            add_in_place(&mut x, &projected);
            layer_norm(&mut x, &layer.output_norm, self.config.layer_norm_eps);
        }

        let mut out = Vec::with_capacity(sequences.len());
        let mut start = 0;
        for &len in &lengths {
            let mut pooled = vec![0.0f32; h];
            for t in start..start + len {
                for (acc, v) in pooled.iter_mut().zip(&x[t * h..(t + 1) * h]) {
                    *acc += v;
                }
            }
            let norm = pooled.iter().map(|v| v * v).sum::<f32>().sqrt();
            if norm > 0.0 {
                pooled.iter_mut().for_each(|v| *v /= norm);
            }
            out.push(pooled);
            start += len;
        }
        out
    }

    /// Scaled dot-product attention of every head, each sequence on its own.
    fn attention(&self, qkv: &[f32], lengths: &[usize], context: &mut [f32], scores: &mut [f32]) {
        let h = self.config.hidden_size;
        let heads = self.config.num_attention_heads;
        let d = h / heads;
        let scale = 1.0 / (d as f32).sqrt();
        let stride = 3 * h;
        let mut start = 0;
        for &len in lengths {
            for head in 0..heads {
                let offset = head * d;
                for i in 0..len {
                    let q = &qkv[(start + i) * stride + offset..][..d];
                    let mut max = f32::NEG_INFINITY;
                    for j in 0..len {
                        let k = &qkv[(start + j) * stride + h + offset..][..d];
                        let s = dot(q, k) * scale;
                        scores[j] = s;
                        max = max.max(s);
                    }
                    let mut sum = 0.0;
                    for s in &mut scores[..len] {
                        *s = (*s - max).exp();
                        sum += *s;
                    }
                    let out = &mut context[(start + i) * h + offset..][..d];
                    out.iter_mut().for_each(|v| *v = 0.0);
                    for j in 0..len {
                        let weight = scores[j] / sum;
                        let v = &qkv[(start + j) * stride + 2 * h + offset..][..d];
                        for (o, value) in out.iter_mut().zip(v) {
                            *o += weight * value;
                        }
                    }
                }
            }
            start += len;
        }
    }
}

/// A dot product in eight lanes, so the compiler can vectorise it.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (chunks_a, chunks_b) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = chunks_a
        .remainder()
        .iter()
        .zip(chunks_b.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in chunks_a.zip(chunks_b) {
        for lane in 0..8 {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// `out[rows, W.out] = x[rows, W.in] Wᵀ + b`.
fn linear(x: &[f32], rows: usize, layer: &Linear, out: &mut [f32]) {
    let (n, k) = (layer.out_dim, layer.in_dim);
    if x.len() < rows * k || out.len() < rows * n || layer.weight.len() != n * k {
        // Unreachable with buffers sized by `embed`; never read out of bounds.
        return;
    }
    for r in 0..rows {
        out[r * n..(r + 1) * n].copy_from_slice(&layer.bias);
    }
    // SAFETY: the three matrices lie within their slices, checked above:
    // dst is rows×n row-major (row stride n, column stride 1), lhs rows×k
    // row-major, and rhs = Wᵀ is k×n read from W (n×k row-major), so its
    // element (i, j) is W[j*k + i]: row stride 1, column stride k. The
    // slices do not overlap (out is borrowed mutably).
    unsafe {
        gemm::gemm(
            rows,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            true,
            x.as_ptr(),
            1,
            k as isize,
            layer.weight.as_ptr(),
            k as isize,
            1,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

fn layer_norm(x: &mut [f32], norm: &LayerNorm, eps: f32) {
    let h = norm.gamma.len();
    for row in x.chunks_exact_mut(h) {
        let mean = row.iter().sum::<f32>() / h as f32;
        let variance = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h as f32;
        let inv = 1.0 / (variance + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}

/// The exact (erf) GELU that BERT uses.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// The error function (Abramowitz and Stegun 7.1.26, |error| < 1.5e-7).
fn erf(x: f32) -> f32 {
    let sign = if x < 0.0 { -1.0 } else { 1.0 };
    let x = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_72 + t * (1.421_413_8 + t * (-1.453_152_1 + t * 1.061_405_4))));
    sign * (1.0 - poly * (-x * x).exp())
}
