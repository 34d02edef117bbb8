//! The linear layers' products in integers: twice the multiply-adds per
//! instruction of `f32` (sixteen for AVX2 `vpmaddwd`, eight for an FMA).
//!
//! Weights are quantised once, per output column, to 11 bits
//! (`[-1023, 1023]`); activations per row, just before each product, to
//! as many bits as keep the kernel's `i32` sums exact (13 to 15, see
//! `activation_limit`). Both are held as `i16`, so `vpmaddwd` multiplies
//! sixteen pairs and adds neighbours in one instruction; the sums are
//! exact and scaled back to `f32` into the output after every `DEPTH`
//! pairs. 11-bit weights measured best: 8 bits moved embeddings to a
//! cosine of 0.9965 from the `f32` pass, 11 bits keep them above 0.9999
//! (tested in `embed`), and wider weights leave the activations fewer bits.
//!
//! The kernel keeps a 6 × 16 tile of sums in twelve registers and streams
//! a packed block of weights past it (the layout of BLIS-style
//! micro-kernels); a plain-Rust kernel computes the same integers where
//! AVX2 is missing.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{
    __m256i, _mm256_add_epi32, _mm256_add_ps, _mm256_cvtepi32_ps, _mm256_loadu_ps,
    _mm256_loadu_si256, _mm256_madd_epi16, _mm256_mul_ps, _mm256_set1_epi32, _mm256_set1_ps,
    _mm256_setzero_si256, _mm256_storeu_ps,
};

use crate::simd::round_small;

/// Largest weight magnitude after quantisation (11 bits, symmetric).
const WEIGHT_MAX: i32 = 1023;
/// Output columns per packed block: two AVX2 registers of eight sums.
const BLOCK: usize = 16;
/// Rows per register tile: 6 × 2 sums, two weights and one broadcast
/// fill fifteen of the sixteen registers.
const TILE: usize = 6;
/// Pairs of input rows summed before the sums are scaled into the output:
/// a block of weights this deep (12 KiB) stays in the core's L1 while the
/// tiles of rows go past it.
const DEPTH: usize = 192;
/// Bytes of quantised activations one pass over the weights serves, so
/// the rows stay in the core's L2 while every block of weights goes past.
const ROWS_BYTES: usize = 96 * 1024;
/// Bytes of packed weights the tiles of a chunk of rows share, kept in
/// the core's L2 (512 KiB) beside the rows.
const WEIGHTS_BYTES: usize = 192 * 1024;

/// `Wᵀ` (`[k, n]`) quantised per column and packed for the kernel.
pub(crate) struct QuantizedWeights {
    /// Blocks of `BLOCK` columns; within a block, for each pair of rows
    /// `(2p, 2p + 1)`, each column's two weights side by side:
    /// `[block][pair][column][2]`. Zero-padded to whole pairs and blocks.
    packed: Vec<i16>,
    /// Per column, what one quantised unit of its weights stands for
    /// (zero-padded to whole blocks).
    scales: Vec<f32>,
    /// Rows (`k`, the input width) and columns (`n`, the output width).
    rows: usize,
    cols: usize,
}

/// Activations quantised row by row, for one product.
#[derive(Default)]
pub(crate) struct QuantizedRows {
    /// Row-major, each row zero-padded to an even width.
    values: Vec<i16>,
    /// Per row, what one quantised unit stands for.
    scales: Vec<f32>,
    rows: usize,
    /// Pairs of values per row.
    pairs: usize,
}

/// One call of the kernel: a tile of at most `TILE` rows against one
/// block of weights, over `pairs` pairs of input rows.
struct Tile<'a> {
    /// The first row's first pair; rows `stride` values apart.
    values: &'a [i16],
    stride: usize,
    rows: usize,
    /// `pairs × BLOCK × 2` packed weights.
    weights: &'a [i16],
    pairs: usize,
    /// One per row, and one per column of the block.
    row_scales: &'a [f32],
    col_scales: &'a [f32],
}

/// Computes a tile's sums and adds them, scaled, to `out` (the tile's
/// first row and column; rows `out_stride` apart; `cols` columns wide).
trait Kernel: Copy {
    fn run(self, tile: &Tile<'_>, out: &mut [f32], out_stride: usize, cols: usize);
}

impl QuantizedWeights {
    /// `rows × cols` weights, element `(i, j)` given by `weight(i, j)`.
    pub(crate) fn new(rows: usize, cols: usize, weight: impl Fn(usize, usize) -> f32) -> Self {
        let pairs = rows.div_ceil(2);
        let blocks = cols.div_ceil(BLOCK);
        let mut packed = vec![0i16; blocks * pairs * BLOCK * 2];
        let mut scales = vec![0.0f32; blocks * BLOCK];
        for (j, scale) in scales.iter_mut().enumerate().take(cols) {
            let max = (0..rows).map(|i| weight(i, j).abs()).fold(0.0f32, f32::max);
            if max == 0.0 {
                continue;
            }
            *scale = max / WEIGHT_MAX as f32;
            let (block, lane) = (j / BLOCK, j % BLOCK);
            for i in 0..rows {
                let at = ((block * pairs + i / 2) * BLOCK + lane) * 2 + i % 2;
                packed[at] = (weight(i, j) / *scale).round_ties_even() as i16;
            }
        }
        QuantizedWeights {
            packed,
            scales,
            rows,
            cols,
        }
    }

    /// `out[r][j] += Σᵢ input[r][i] · W[first + i][j]`: the product of
    /// `input`'s rows (quantised) with rows `first..` of the weights, added
    /// to `out`, whose rows are `out_stride` apart. `first` must be even.
    ///
    /// Panics if the shapes disagree or `out` is too short.
    pub(crate) fn accumulate(
        &self,
        input: &QuantizedRows,
        first: usize,
        out: &mut [f32],
        out_stride: usize,
    ) {
        let (rows, n) = (input.rows, self.cols);
        assert!(
            first.is_multiple_of(2)
                && first / 2 + input.pairs <= self.rows.div_ceil(2)
                && (rows == 0 || n == 0 || (rows - 1) * out_stride + n <= out.len()),
            "quantised product out of bounds"
        );
        #[cfg(target_arch = "x86_64")]
        if let Some(avx2) = Avx2::detect() {
            // SAFETY: the CPU supports AVX2 (`detect`).
            unsafe { self.walk_avx2(input, first, out, out_stride, avx2) };
            return;
        }
        self.walk(input, first, out, out_stride, Plain);
    }

    /// `walk`, compiled with AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn walk_avx2(
        &self,
        input: &QuantizedRows,
        first: usize,
        out: &mut [f32],
        out_stride: usize,
        kernel: Avx2,
    ) {
        self.walk(input, first, out, out_stride, kernel);
    }

    /// Runs `kernel` over every tile: rows in chunks that stay in L2, then
    /// pairs `DEPTH` at a time, then groups of blocks of weights that stay
    /// in L2, then tiles of rows, then the group's blocks. Each tile writes
    /// a run of whole rows of the group's outputs, which the prefetcher
    /// follows; one block per tile row across all tiles would miss the
    /// cache on every row of `out`.
    #[inline(always)]
    fn walk(
        &self,
        input: &QuantizedRows,
        first: usize,
        out: &mut [f32],
        out_stride: usize,
        kernel: impl Kernel,
    ) {
        let (all_pairs, width) = (self.rows.div_ceil(2), input.pairs * 2);
        let chunk = (ROWS_BYTES / (2 * width).max(1) / TILE).max(1) * TILE;
        let blocks = self.cols.div_ceil(BLOCK);
        for chunk_start in (0..input.rows).step_by(chunk) {
            let chunk_end = input.rows.min(chunk_start + chunk);
            for depth_start in (0..input.pairs).step_by(DEPTH) {
                let pairs = DEPTH.min(input.pairs - depth_start);
                let group = (WEIGHTS_BYTES / (pairs * BLOCK * 4)).max(1);
                for group_start in (0..blocks).step_by(group) {
                    for tile_start in (chunk_start..chunk_end).step_by(TILE) {
                        let rows = TILE.min(chunk_end - tile_start);
                        for block in group_start..blocks.min(group_start + group) {
                            let start = (block * all_pairs + first / 2 + depth_start) * BLOCK * 2;
                            let col = block * BLOCK;
                            let tile = Tile {
                                values: &input.values[tile_start * width + depth_start * 2..],
                                stride: width,
                                rows,
                                weights: &self.packed[start..start + pairs * BLOCK * 2],
                                pairs,
                                row_scales: &input.scales[tile_start..tile_start + rows],
                                col_scales: &self.scales[col..col + BLOCK],
                            };
                            let out = &mut out[tile_start * out_stride + col..];
                            kernel.run(&tile, out, out_stride, BLOCK.min(self.cols - col));
                        }
                    }
                }
            }
        }
    }
}

impl QuantizedRows {
    /// Quantises `rows` rows of `width` values, rows `stride` apart in
    /// `input`.
    pub(crate) fn quantize(&mut self, input: &[f32], rows: usize, width: usize, stride: usize) {
        let pairs = width.div_ceil(2);
        self.rows = rows;
        self.pairs = pairs;
        // Every value is written below (no clearing pass over the buffer),
        // the padding of an odd width included.
        self.values.resize(rows * pairs * 2, 0);
        self.scales.resize(rows, 0.0);
        let limit = activation_limit(pairs.min(DEPTH) * 2) as f32;
        for (r, (values, scale)) in self
            .values
            .chunks_exact_mut(pairs * 2)
            .zip(&mut self.scales)
            .enumerate()
        {
            let row = &input[r * stride..r * stride + width];
            let (values, padding) = values.split_at_mut(width);
            *scale = quantize_row(row, values, limit);
            padding.fill(0);
        }
    }
}

/// The largest activation magnitude for sums of `width` products: with
/// weights up to `WEIGHT_MAX` they must stay within `i32`, and each value
/// must fit `i16`.
fn activation_limit(width: usize) -> i32 {
    let exact = i32::MAX as usize / (width.max(1) * WEIGHT_MAX as usize);
    exact.min(i16::MAX as usize) as i32
}

/// Quantises `row` into `out` so its largest magnitude maps to `limit`;
/// returns what one unit stands for (0 for a row of zeros).
fn quantize_row(row: &[f32], out: &mut [i16], limit: f32) -> f32 {
    #[inline(always)]
    fn generic(row: &[f32], out: &mut [i16], limit: f32) -> f32 {
        let mut lanes = [0.0f32; 8];
        let chunks = row.chunks_exact(8);
        let tail = chunks
            .remainder()
            .iter()
            .fold(0.0f32, |m, v| m.max(v.abs()));
        for chunk in chunks {
            for (lane, v) in lanes.iter_mut().zip(chunk) {
                *lane = lane.max(v.abs());
            }
        }
        let max = lanes.iter().fold(tail, |m, &v| m.max(v));
        if max == 0.0 || !max.is_finite() {
            out.fill(0);
            return 0.0;
        }
        let inverse = limit / max;
        for (o, &v) in out.iter_mut().zip(row) {
            *o = round_small(v * inverse) as i16;
        }
        max / limit
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2(row: &[f32], out: &mut [i16], limit: f32) -> f32 {
        generic(row, out, limit)
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { avx2(row, out, limit) };
    }
    generic(row, out, limit)
}

/// The plain-Rust kernel: the same sums, one multiply at a time.
#[derive(Clone, Copy)]
struct Plain;

impl Kernel for Plain {
    fn run(self, tile: &Tile<'_>, out: &mut [f32], out_stride: usize, cols: usize) {
        let sums = plain_sums(tile);
        for (r, (sums, &scale)) in sums.iter().zip(tile.row_scales).enumerate() {
            let row = &mut out[r * out_stride..r * out_stride + cols];
            for ((o, &sum), &w) in row.iter_mut().zip(sums).zip(tile.col_scales) {
                *o += sum as f32 * (scale * w);
            }
        }
    }
}

/// A tile's integer sums, one multiply at a time.
fn plain_sums(tile: &Tile<'_>) -> Vec<[i32; BLOCK]> {
    (0..tile.rows)
        .map(|r| {
            let row = &tile.values[r * tile.stride..r * tile.stride + tile.pairs * 2];
            let mut sums = [0i32; BLOCK];
            for (pair, block) in row
                .chunks_exact(2)
                .zip(tile.weights.chunks_exact(BLOCK * 2))
            {
                for (sum, w) in sums.iter_mut().zip(block.chunks_exact(2)) {
                    *sum +=
                        i32::from(pair[0]) * i32::from(w[0]) + i32::from(pair[1]) * i32::from(w[1]);
                }
            }
            sums
        })
        .collect()
}

/// The AVX2 kernel; a value of this type proves the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Avx2(());

#[cfg(target_arch = "x86_64")]
impl Avx2 {
    fn detect() -> Option<Avx2> {
        std::is_x86_feature_detected!("avx2").then_some(Avx2(()))
    }
}

#[cfg(target_arch = "x86_64")]
impl Kernel for Avx2 {
    #[inline(always)]
    fn run(self, tile: &Tile<'_>, out: &mut [f32], out_stride: usize, cols: usize) {
        // SAFETY: `self` exists only when the CPU has AVX2 (`detect`).
        unsafe {
            match tile.rows {
                6 => avx2_tile::<6>(tile, out, out_stride, cols),
                5 => avx2_tile::<5>(tile, out, out_stride, cols),
                4 => avx2_tile::<4>(tile, out, out_stride, cols),
                3 => avx2_tile::<3>(tile, out, out_stride, cols),
                2 => avx2_tile::<2>(tile, out, out_stride, cols),
                1 => avx2_tile::<1>(tile, out, out_stride, cols),
                _ => unreachable!("a tile has 1 to {TILE} rows"),
            }
        }
    }
}

/// The AVX2 kernel for a tile of `R` rows: for each pair of input rows,
/// each tile row's pair of activations is broadcast and multiplied with
/// the block's sixteen columns by `vpmaddwd`; then the sums are scaled and
/// added to `out`.
///
/// Panics if a slice of `tile` or `out` is shorter than the tile.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn avx2_tile<const R: usize>(tile: &Tile<'_>, out: &mut [f32], out_stride: usize, cols: usize) {
    assert!(
        tile.rows == R
            && tile.values.len() >= (R - 1) * tile.stride + tile.pairs * 2
            && tile.weights.len() >= tile.pairs * BLOCK * 2
            && tile.row_scales.len() >= R
            && tile.col_scales.len() >= BLOCK
            && cols <= BLOCK
            && out.len() >= (R - 1) * out_stride + cols,
        "kernel tile out of bounds"
    );
    let mut acc = [[_mm256_setzero_si256(); 2]; R];
    let rows: [*const i16; R] = std::array::from_fn(|r| tile.values[r * tile.stride..].as_ptr());
    let mut weights = tile.weights.as_ptr();
    for p in 0..tile.pairs {
        // SAFETY: `p < pairs`, so this pair's 32 weights lie within
        // `weights` and each row's pair `p` within its row (asserted).
        let (low, high) = unsafe {
            (
                _mm256_loadu_si256(weights.cast::<__m256i>()),
                _mm256_loadu_si256(weights.add(BLOCK).cast::<__m256i>()),
            )
        };
        for (acc, row) in acc.iter_mut().zip(&rows) {
            // SAFETY: as above.
            let pair = _mm256_set1_epi32(unsafe { row.add(2 * p).cast::<i32>().read_unaligned() });
            acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(pair, low));
            acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(pair, high));
        }
        // SAFETY: at most one past the block's end, after the last pair.
        weights = unsafe { weights.add(BLOCK * 2) };
    }
    // SAFETY: `col_scales` holds `BLOCK` = 16 values (asserted).
    let col_scales = unsafe {
        let scales = tile.col_scales.as_ptr();
        [_mm256_loadu_ps(scales), _mm256_loadu_ps(scales.add(8))]
    };
    for (r, acc) in acc.iter().enumerate() {
        let row_scale = _mm256_set1_ps(tile.row_scales[r]);
        let row = &mut out[r * out_stride..];
        for half in 0..2 {
            let scaled = _mm256_mul_ps(
                _mm256_cvtepi32_ps(acc[half]),
                _mm256_mul_ps(col_scales[half], row_scale),
            );
            let (start, end) = (half * 8, cols.min(half * 8 + 8));
            if end - start.min(end) == 8 {
                // SAFETY: `row[start..start + 8]` lies within `out`, since
                // `start + 8 <= cols` (asserted above).
                unsafe {
                    let at = row.as_mut_ptr().add(start);
                    _mm256_storeu_ps(at, _mm256_add_ps(_mm256_loadu_ps(at), scaled));
                }
            } else if start < end {
                let mut values = [0.0f32; 8];
                // SAFETY: `values` holds eight floats.
                unsafe { _mm256_storeu_ps(values.as_mut_ptr(), scaled) };
                for (o, v) in row[start..end].iter_mut().zip(values) {
                    *o += v;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random value in `[-1, 1)`.
    fn noise(seed: usize) -> f32 {
        let x = (seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        x as f32 / (1u64 << 23) as f32 - 1.0
    }

    fn exact(
        input: &[f32],
        rows: usize,
        k: usize,
        weight: impl Fn(usize, usize) -> f32,
        n: usize,
    ) -> Vec<f32> {
        let mut out = vec![0.0f32; rows * n];
        for r in 0..rows {
            for j in 0..n {
                out[r * n + j] = (0..k).map(|i| input[r * k + i] * weight(i, j)).sum();
            }
        }
        out
    }

    #[test]
    fn products_are_within_quantisation_error_for_odd_shapes() {
        // Odd rows, a partial tile and a partial block of columns.
        let (rows, k, n) = (13, 37, 21);
        let weight = |i: usize, j: usize| noise(i * 1000 + j);
        let input: Vec<f32> = (0..rows * k).map(|v| noise(v + 77) * 3.0).collect();
        let quantized = QuantizedWeights::new(k, n, weight);
        let mut activations = QuantizedRows::default();
        activations.quantize(&input, rows, k, k);
        let mut out = vec![0.5f32; rows * n];
        quantized.accumulate(&activations, 0, &mut out, n);
        let expected = exact(&input, rows, k, weight, n);
        for (got, want) in out.iter().zip(&expected) {
            // 8-bit weights: about 1/254 of each column's largest weight
            // per product, over 37 products of activations up to 3.
            assert!((got - 0.5 - want).abs() < 0.2, "{got} vs {want}");
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_avx2_and_plain_kernels_agree() {
        let avx2 = Avx2::detect().expect("this test needs an x86-64 CPU with AVX2");
        let pairs = 50;
        let values: Vec<i16> = (0..TILE * pairs * 2)
            .map(|v| (noise(v) * 30000.0) as i16)
            .collect();
        let weights: Vec<i16> = (0..pairs * BLOCK * 2)
            .map(|v| (noise(v + 9) * 1023.0) as i16)
            .collect();
        // Powers of two, so both kernels' scaling is exact.
        let row_scales = [1.0, 0.5, 2.0, 1.0, 0.25, 4.0];
        let col_scales: Vec<f32> = (0..BLOCK)
            .map(|c| if c % 3 == 0 { 0.5 } else { 1.0 })
            .collect();
        for rows in 1..=TILE {
            for cols in [BLOCK, 11, 5] {
                let tile = Tile {
                    values: &values,
                    stride: pairs * 2,
                    rows,
                    weights: &weights,
                    pairs,
                    row_scales: &row_scales,
                    col_scales: &col_scales,
                };
                let (mut plain, mut vector) = (vec![1.0f32; TILE * 20], vec![1.0f32; TILE * 20]);
                Plain.run(&tile, &mut plain, 20, cols);
                avx2.run(&tile, &mut vector, 20, cols);
                assert_eq!(plain, vector, "{rows} rows, {cols} columns");
                assert!(plain.iter().filter(|&&v| v == 1.0).count() >= TILE * 20 - rows * cols);
            }
        }
    }

    #[test]
    fn a_block_of_input_rows_uses_its_rows_of_the_weights() {
        // The second half of the input against rows 4.. of the weights.
        let (k, n) = (8, 3);
        let weight = |i: usize, j: usize| (i * n + j) as f32 / 24.0;
        let quantized = QuantizedWeights::new(k, n, weight);
        let mut activations = QuantizedRows::default();
        activations.quantize(&[1.0, 0.0, 0.0, 1.0], 1, 4, 4);
        let mut out = vec![0.0f32; n];
        quantized.accumulate(&activations, 4, &mut out, n);
        for (j, got) in out.iter().enumerate() {
            let want = weight(4, j) + weight(7, j);
            assert!((got - want).abs() < 0.01, "{got} vs {want}");
        }
    }

    #[test]
    fn a_reused_buffer_pads_odd_rows_with_zeros() {
        let mut activations = QuantizedRows::default();
        activations.quantize(&[1.0; 8], 2, 4, 4);
        activations.quantize(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2, 3, 3);
        assert_eq!(activations.values.len(), 8);
        assert_eq!((activations.values[3], activations.values[7]), (0, 0));
    }

    #[test]
    fn sums_at_the_limits_do_not_overflow() {
        let k = 1536;
        let limit = activation_limit(k);
        assert!(k as i64 * limit as i64 * WEIGHT_MAX as i64 <= i32::MAX as i64);
        let quantized = QuantizedWeights::new(k, 1, |_, _| -1.0);
        let mut activations = QuantizedRows::default();
        activations.quantize(&vec![1.0; k], 1, k, k);
        let mut out = [0.0f32];
        quantized.accumulate(&activations, 0, &mut out, 1);
        assert!((out[0] + k as f32).abs() < 1.0, "{}", out[0]);
    }
}
