//! A BERT encoder forward pass on the CPU, for sentence-embedding models
//! such as all-MiniLM-L6-v2: weights from a safetensors file, the linear
//! layers in integer arithmetic (`quantized`), attention through `gemm`,
//! normalisation and activations in `kernels`.
//!
//! Sequences of a batch are concatenated token by token rather than
//! padded: every layer but attention works on tokens independently, and
//! attention runs per sequence, so no work is spent on padding and no mask
//! is needed. The output is the mean of each sequence's last hidden
//! states (mean pooling), L2-normalised.

use std::ops::Range;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use serde::Deserialize;

use super::kernels;
use super::matmul::{View, product};
use super::quantized::{QuantizedRows, QuantizedWeights};
use super::tensors::{LayerNorm, Tensors};
use crate::MemoryError;

mod split;

/// The architecture numbers read from the model's `config.json`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct BertConfig {
    /// Width of hidden states (384 for MiniLM-L6).
    pub(crate) hidden_size: usize,
    /// Encoder layers.
    pub(crate) num_hidden_layers: usize,
    /// Attention heads per layer.
    pub(crate) num_attention_heads: usize,
    /// Width of the feed-forward layer.
    pub(crate) intermediate_size: usize,
    /// Longest sequence the position embeddings cover.
    pub(crate) max_position_embeddings: usize,
    /// Tokens in the vocabulary.
    pub(crate) vocab_size: usize,
    /// Layer-norm epsilon.
    #[serde(default = "default_eps")]
    pub(crate) layer_norm_eps: f32,
    /// `gelu` is the only activation supported.
    #[serde(default = "default_act")]
    pub(crate) hidden_act: String,
}

fn default_eps() -> f32 {
    1e-12
}

fn default_act() -> String {
    "gelu".into()
}

/// A linear layer: `y = x Wᵀ + b`. `Wᵀ` (`[in, out]`) is kept quantised
/// as two blocks of columns, `[in, split]` and `[in, out - split]`: the
/// halves the two threads of a split pass compute, each contiguous so each
/// thread streams its own memory.
struct Linear {
    halves: [QuantizedWeights; 2],
    split: usize,
    bias: Vec<f32>,
    out_dim: usize,
    in_dim: usize,
}

struct Layer {
    /// Query, key and value projections fused into one `[3h, h]` layer,
    /// its outputs ordered by head group (see `GroupLayout`).
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
    /// Buffers of finished passes, reused so a pass allocates nothing.
    spare: Mutex<Vec<Scratch>>,
}

/// The buffers of one forward pass, grown as needed and kept.
#[derive(Default)]
pub(crate) struct Scratch {
    /// Hidden states, `tokens × hidden`.
    x: Vec<f32>,
    /// Queries, keys and values, `tokens × 3·hidden`.
    qkv: Vec<f32>,
    /// Attention output, `tokens × hidden`.
    context: Vec<f32>,
    /// Feed-forward activations, `tokens × intermediate`.
    inner: Vec<f32>,
    /// A linear layer's input, quantised.
    quantized: QuantizedRows,
    /// One head's attention scores for one sequence, `len × len`.
    scores: Vec<f32>,
}

/// Scratch buffers kept between passes (about 10 MB each after a 512-token
/// pass): enough for a batch on two threads plus a split query.
const MAX_SPARE: usize = 4;

impl Linear {
    /// From the stored `[out, in]` `f32` weight: transposed, quantised and
    /// cut into two blocks of columns at `split`.
    fn new(weight: &[f32], bias: Vec<f32>, out_dim: usize, in_dim: usize, split: usize) -> Linear {
        let halves = [0..split, split..out_dim].map(|outputs| {
            QuantizedWeights::new(in_dim, outputs.len(), |i, j| {
                weight[(outputs.start + j) * in_dim + i]
            })
        });
        Linear {
            halves,
            split,
            bias,
            out_dim,
            in_dim,
        }
    }

    /// The output columns of block `half` (0 or 1).
    fn columns(&self, half: usize) -> Range<usize> {
        if half == 0 {
            0..self.split
        } else {
            self.split..self.out_dim
        }
    }

    /// `out = input Wᵀ + b` for `rows` rows.
    fn apply(&self, input: &[f32], rows: usize, out: &mut [f32], quantized: &mut QuantizedRows) {
        let n = self.out_dim;
        for row in out[..rows * n].chunks_exact_mut(n) {
            row.copy_from_slice(&self.bias);
        }
        quantized.quantize(input, rows, self.in_dim, self.in_dim);
        for half in 0..2 {
            let out = &mut out[self.columns(half).start..];
            self.halves[half].accumulate(quantized, 0, out, n);
        }
    }

    /// `x += input Wᵀ + b` (a residual connection), the input given as
    /// blocks of its columns: each half of the output is computed into
    /// `spare` as [`Linear::apply_half`] computes it, then both are added
    /// to `x`. These are the steps of a pass split over two threads, in
    /// the same order, so a text's vector has the same bits whichever ran.
    fn apply_residual(
        &self,
        inputs: &[InputBlock<'_>],
        rows: usize,
        x: &mut [f32],
        spare: &mut Vec<f32>,
        quantized: &mut QuantizedRows,
    ) {
        reserve(spare, rows * self.out_dim);
        let (first, second) = spare[..rows * self.out_dim].split_at_mut(rows * self.split);
        self.apply_half(inputs, rows, 0, first, quantized);
        self.apply_half(inputs, rows, 1, second, quantized);
        add_halves(x, self.out_dim, self.split, first, second);
    }

    /// Block `half` of `input Wᵀ + b` into `out` (`rows × width`), the
    /// input given as blocks of its columns, in order, each quantised on
    /// its own.
    fn apply_half(
        &self,
        inputs: &[InputBlock<'_>],
        rows: usize,
        half: usize,
        out: &mut [f32],
        quantized: &mut QuantizedRows,
    ) {
        let cols = self.columns(half);
        let width = cols.len();
        for row in out[..rows * width].chunks_exact_mut(width) {
            row.copy_from_slice(&self.bias[cols.clone()]);
        }
        let mut first = 0;
        for block in inputs {
            quantized.quantize(block.values, rows, block.width, block.stride);
            self.halves[half].accumulate(quantized, first, out, width);
            first += block.width;
        }
    }
}

/// Columns of a layer's input: `width` values from the start of each row
/// of `values`, rows `stride` apart.
#[derive(Clone, Copy)]
pub(super) struct InputBlock<'a> {
    pub(super) values: &'a [f32],
    pub(super) width: usize,
    pub(super) stride: usize,
}

impl<'a> InputBlock<'a> {
    /// A packed block: rows `width` apart.
    pub(super) fn packed(values: &'a [f32], width: usize) -> InputBlock<'a> {
        InputBlock {
            values,
            width,
            stride: width,
        }
    }

    /// `matrix` (rows `stride` wide) as blocks of columns `widths` wide.
    fn columns<const N: usize>(
        matrix: &'a [f32],
        stride: usize,
        widths: [usize; N],
    ) -> [InputBlock<'a>; N] {
        let mut start = 0;
        widths.map(|width| {
            let block = InputBlock {
                values: &matrix[start..],
                width,
                stride,
            };
            start += width;
            block
        })
    }
}

/// `x += [left | right]` row by row: `left` holds the first `split` of
/// the `n` columns, `right` the others, each row-major and packed.
pub(super) fn add_halves(x: &mut [f32], n: usize, split: usize, left: &[f32], right: &[f32]) {
    for (r, row) in x.chunks_exact_mut(n).enumerate() {
        let (first, second) = row.split_at_mut(split);
        kernels::add(first, &left[r * split..(r + 1) * split]);
        kernels::add(second, &right[r * (n - split)..(r + 1) * (n - split)]);
    }
}

/// Where a group of attention heads reads queries, keys and values (its
/// heads' queries together, then their keys, then their values) and
/// writes its context.
#[derive(Debug, Clone, Copy)]
struct GroupLayout {
    heads: usize,
    qkv_stride: usize,
    qkv_base: usize,
    context_stride: usize,
    context_base: usize,
}

/// The two halves the heads are divided into: a split pass gives one to
/// each thread, and the fused query-key-value weight is ordered by them.
fn head_groups(config: &BertConfig) -> [Range<usize>; 2] {
    let heads = config.num_attention_heads;
    [0..heads / 2, heads / 2..heads]
}

/// Grows `buffer` to at least `len` values (never shrinks: it is reused).
fn reserve(buffer: &mut Vec<f32>, len: usize) {
    if buffer.len() < len {
        buffer.resize(len, 0.0);
    }
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
        // A split pass multiplies each half of a layer's input on its own,
        // so each half must start on a pair of rows (see `quantized`).
        let first_heads = head_groups(&config)[0].len();
        let head_width = config.hidden_size / config.num_attention_heads;
        if !(first_heads * head_width).is_multiple_of(2)
            || !(config.intermediate_size / 2).is_multiple_of(2)
        {
            return Err(bad("layer widths must split into even halves".into()));
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
                layers.push(Layer::load(tensors, index, &config)?);
            }
            Ok(Bert {
                config: config.clone(),
                word,
                position,
                token_type,
                embedding_norm,
                layers,
                spare: Mutex::default(),
            })
        };
        load(&mut tensors).map_err(bad)
    }

    /// Width of the embeddings.
    pub(crate) fn dim(&self) -> usize {
        self.config.hidden_size
    }

    /// Longest sequence accepted.
    pub(crate) fn max_len(&self) -> usize {
        self.config.max_position_embeddings
    }

    /// Embeds sequences of token ids (each non-empty, at most `max_len`):
    /// mean-pooled, L2-normalised, one row of `dim()` per sequence.
    pub(crate) fn embed(&self, sequences: &[&[u32]]) -> Vec<Vec<f32>> {
        let mut scratch = self.take_scratch();
        let vectors = self.forward(sequences, &mut scratch);
        self.give_back(scratch);
        vectors
    }

    /// Buffers left by an earlier pass, or new ones.
    fn take_scratch(&self) -> Scratch {
        let mut spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
        spare.pop().unwrap_or_default()
    }

    /// Keeps `scratch` for a later pass, unless `MAX_SPARE` are kept.
    fn give_back(&self, scratch: Scratch) {
        let mut spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
        if spare.len() < MAX_SPARE {
            spare.push(scratch);
        }
    }

    /// The whole encoder over `sequences`, concatenated.
    fn forward(&self, sequences: &[&[u32]], s: &mut Scratch) -> Vec<Vec<f32>> {
        let (h, inter) = (self.config.hidden_size, self.config.intermediate_size);
        let lengths: Vec<usize> = sequences.iter().map(|ids| ids.len()).collect();
        let tokens: usize = lengths.iter().sum();
        if tokens == 0 {
            return sequences.iter().map(|_| vec![0.0; h]).collect();
        }
        let longest = lengths.iter().copied().max().unwrap_or(0);
        reserve(&mut s.x, tokens * h);
        reserve(&mut s.qkv, tokens * 3 * h);
        reserve(&mut s.context, tokens * h);
        reserve(&mut s.inner, tokens * inter);
        reserve(&mut s.scores, longest * longest);
        self.embed_tokens(sequences, &mut s.x[..tokens * h]);
        for layer in &self.layers {
            self.encode(layer, &lengths, s);
        }
        pool(&s.x[..tokens * h], &lengths, h)
    }

    /// Word, position and token-type embeddings, normalised.
    fn embed_tokens(&self, sequences: &[&[u32]], x: &mut [f32]) {
        let h = self.config.hidden_size;
        let mut rows = x.chunks_exact_mut(h);
        for sequence in sequences {
            for (position, (&id, out)) in sequence.iter().zip(&mut rows).enumerate() {
                let id = (id as usize).min(self.config.vocab_size - 1);
                let position = position.min(self.config.max_position_embeddings - 1);
                out.copy_from_slice(&self.word[id * h..(id + 1) * h]);
                kernels::add(out, &self.position[position * h..(position + 1) * h]);
                kernels::add(out, &self.token_type);
            }
        }
        let norm = &self.embedding_norm;
        kernels::layer_norm(x, &norm.gamma, &norm.beta, self.config.layer_norm_eps);
    }

    /// One encoder layer, in place on `s.x`.
    fn encode(&self, layer: &Layer, lengths: &[usize], s: &mut Scratch) {
        let (h, inter) = (self.config.hidden_size, self.config.intermediate_size);
        let eps = self.config.layer_norm_eps;
        let tokens: usize = lengths.iter().sum();
        let x = &mut s.x[..tokens * h];
        layer.qkv.apply(x, tokens, &mut s.qkv, &mut s.quantized);
        let d = h / self.config.num_attention_heads;
        let groups = head_groups(&self.config);
        for heads in groups.clone() {
            let group = GroupLayout {
                heads: heads.len(),
                qkv_stride: 3 * h,
                qkv_base: 3 * heads.start * d,
                context_stride: h,
                context_base: heads.start * d,
            };
            self.attend(&s.qkv, lengths, group, &mut s.context, &mut s.scores);
        }
        // The queries, keys and values are spent: their buffer takes the
        // halves of the residual layers' outputs.
        let widths = groups.map(|heads| heads.len() * d);
        let blocks = InputBlock::columns(&s.context, h, widths);
        let attention_out = &layer.attention_out;
        attention_out.apply_residual(&blocks, tokens, x, &mut s.qkv, &mut s.quantized);
        let norm = &layer.attention_norm;
        kernels::layer_norm(x, &norm.gamma, &norm.beta, eps);
        let inner = &mut s.inner[..tokens * inter];
        layer.intermediate.apply(x, tokens, inner, &mut s.quantized);
        kernels::gelu(inner);
        let blocks = InputBlock::columns(inner, inter, [inter / 2, inter - inter / 2]);
        let output = &layer.output;
        output.apply_residual(&blocks, tokens, x, &mut s.qkv, &mut s.quantized);
        let norm = &layer.output_norm;
        kernels::layer_norm(x, &norm.gamma, &norm.beta, eps);
    }

    /// Scaled dot-product attention of a group of heads, each sequence on
    /// its own: `scores = scale · Q Kᵀ`, softmax, `context = P V`.
    fn attend(
        &self,
        qkv: &[f32],
        lengths: &[usize],
        group: GroupLayout,
        context: &mut [f32],
        scores: &mut [f32],
    ) {
        let d = self.config.hidden_size / self.config.num_attention_heads;
        let width = group.heads * d;
        let scale = 1.0 / (d as f32).sqrt();
        let mut start = 0;
        for &len in lengths {
            let rows = &qkv[start * group.qkv_stride..(start + len) * group.qkv_stride];
            let out = &mut context[start * group.context_stride..];
            let scores = &mut scores[..len * len];
            for head in 0..group.heads {
                let at = |part: usize| &rows[group.qkv_base + part * width + head * d..];
                let queries = View::rows(at(0), len, d, group.qkv_stride);
                let keys = View::transposed(at(1), d, len, group.qkv_stride);
                product(queries, keys, scores, len, scale, false);
                kernels::softmax_rows(scores, len);
                let weights = View::rows(scores, len, len, len);
                let values = View::rows(at(2), len, d, group.qkv_stride);
                let out = &mut out[group.context_base + head * d..];
                product(weights, values, out, group.context_stride, 1.0, false);
            }
            start += len;
        }
    }
}

impl Layer {
    /// Layer `index`'s weights, the query, key and value projections fused.
    fn load(tensors: &mut Tensors, index: usize, config: &BertConfig) -> Result<Layer, String> {
        let (h, inter) = (config.hidden_size, config.intermediate_size);
        let name = |part: &str| format!("encoder.layer.{index}.{part}");
        // Every layer but the fused one is cut in the middle of its outputs.
        let linear = |tensors: &mut Tensors, part: &str, out: usize, inp: usize| {
            let (weight, bias) = tensors.linear(&name(part), out, inp)?;
            Ok::<_, String>(Linear::new(&weight, bias, out, inp, out / 2))
        };
        let (query, query_bias) = tensors.linear(&name("attention.self.query"), h, h)?;
        let (key, key_bias) = tensors.linear(&name("attention.self.key"), h, h)?;
        let (value, value_bias) = tensors.linear(&name("attention.self.value"), h, h)?;
        // Rows ordered by head group, then query, key, value (see GroupLayout).
        let d = h / config.num_attention_heads;
        let (mut weight, mut bias) = (Vec::with_capacity(3 * h * h), Vec::with_capacity(3 * h));
        for heads in head_groups(config) {
            let rows = heads.start * d..heads.end * d;
            for (w, b) in [
                (&query, &query_bias),
                (&key, &key_bias),
                (&value, &value_bias),
            ] {
                weight.extend_from_slice(&w[rows.start * h..rows.end * h]);
                bias.extend_from_slice(&b[rows.clone()]);
            }
        }
        let first_group = head_groups(config)[0].len() * d;
        let qkv = Linear::new(&weight, bias, 3 * h, h, 3 * first_group);
        Ok(Layer {
            qkv,
            attention_out: linear(tensors, "attention.output.dense", h, h)?,
            attention_norm: tensors.norm(&name("attention.output.LayerNorm"), h)?,
            intermediate: linear(tensors, "intermediate.dense", inter, h)?,
            output: linear(tensors, "output.dense", h, inter)?,
            output_norm: tensors.norm(&name("output.LayerNorm"), h)?,
        })
    }
}

/// Each sequence's mean hidden state, L2-normalised.
fn pool(x: &[f32], lengths: &[usize], h: usize) -> Vec<Vec<f32>> {
    let mut rows = x.chunks_exact(h);
    lengths
        .iter()
        .map(|&len| {
            let mut pooled = vec![0.0f32; h];
            for row in (&mut rows).take(len) {
                kernels::add(&mut pooled, row);
            }
            let norm = pooled.iter().map(|v| v * v).sum::<f32>().sqrt();
            if norm > 0.0 {
                pooled.iter_mut().for_each(|v| *v /= norm);
            }
            pooled
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_computes_x_times_w_transposed_plus_bias() {
        // 2 outputs × 3 inputs, within the 8-bit weights' rounding.
        let layer = Linear::new(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], vec![0.5, -0.5], 2, 3, 1);
        let x = vec![1.0, 0.0, -1.0, 2.0, 1.0, 0.0]; // 2 rows × 3
        let expected = vec![
            1.0 - 3.0 + 0.5,
            4.0 - 6.0 - 0.5,
            2.0 + 2.0 + 0.5,
            8.0 + 5.0 - 0.5,
        ];
        let mut out = vec![0.0; 4];
        let close = |got: &[f32], want: &[f32]| {
            let off = got.iter().zip(want).map(|(g, w)| (g - w).abs());
            assert!(off.fold(0.0, f32::max) < 0.05, "{got:?} vs {want:?}");
        };
        layer.apply(&x, 2, &mut out, &mut QuantizedRows::default());
        close(&out, &expected);
        let mut residual = vec![1.0; 4];
        // The input as two blocks of columns, 2 and 1 wide.
        let blocks = InputBlock::columns(&x, 3, [2, 1]);
        let mut spare = Vec::new();
        layer.apply_residual(
            &blocks,
            2,
            &mut residual,
            &mut spare,
            &mut QuantizedRows::default(),
        );
        let plus_one: Vec<f32> = expected.iter().map(|v| v + 1.0).collect();
        close(&residual, &plus_one);
    }
}
