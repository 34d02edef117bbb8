//! The element-wise and attention arithmetic of the encoder, written as
//! plain loops the compiler vectorises, each compiled for the baseline
//! x86-64 and for AVX2, picked at run time (see `simd`).
//!
//! `exp` and `erf` are polynomial approximations rather than `libm` calls
//! because a call per element cannot be vectorised.

use crate::simd::dispatch;

dispatch! {
    /// `x[i] = gelu(x[i])`, the exact (erf) GELU that BERT uses.
    fn gelu(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
        }
    }
}

dispatch! {
    /// `x[i] += y[i]`.
    fn add(x: &mut [f32], y: &[f32]) {
        for (a, b) in x.iter_mut().zip(y) {
            *a += b;
        }
    }
}

dispatch! {
    /// Layer normalisation of every `gamma.len()`-wide row of `x`.
    fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
        let h = gamma.len();
        for row in x.chunks_exact_mut(h) {
            let mean = sum(row) / h as f32;
            let mut lanes = [0.0f32; 8];
            let chunks = row.chunks_exact(8);
            let tail: f32 = chunks.remainder().iter().map(|v| (v - mean) * (v - mean)).sum();
            for chunk in chunks {
                for (lane, v) in lanes.iter_mut().zip(chunk) {
                    *lane += (v - mean) * (v - mean);
                }
            }
            let variance = (lanes.iter().sum::<f32>() + tail) / h as f32;
            let inv = 1.0 / (variance + eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
                *v = (*v - mean) * inv * g + b;
            }
        }
    }
}

dispatch! {
    /// Softmax of every `len`-wide row of `scores`, in place.
    fn softmax_rows(scores: &mut [f32], len: usize) {
        for row in scores.chunks_exact_mut(len) {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            for s in row.iter_mut() {
                *s = exp(*s - max);
            }
            let inv = 1.0 / sum(row);
            for s in row.iter_mut() {
                *s *= inv;
            }
        }
    }
}

/// A sum in eight lanes, so the compiler can vectorise it.
#[inline(always)]
fn sum(values: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let chunks = values.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for (lane, v) in lanes.iter_mut().zip(chunk) {
            *lane += v;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// `e^x` for `x <= 88`, relative error about 1e-7 (Cephes `expf`):
/// `2^n · e^r` with `|r| <= ln 2 / 2`, branch-free so it vectorises.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding and subtracting 1.5·2^23 rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let er = p * r * r + r + 1.0;
    // n is in [-126, 127]: 2^n is a normal float built from its exponent.
    er * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// The error function as a rational function of `x` on `[-4, 4]` (the
/// approximation Eigen and XLA use; |error| about 1e-7), 1 beyond.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10;
    p = p * x2 + 2.770_681_4e-8;
    p = p * x2 - 2.101_024e-6;
    p = p * x2 - 5.692_506_4e-5;
    p = p * x2 - 7.349_906_3e-4;
    p = p * x2 - 2.954_6e-3;
    p = p * x2 - 1.609_603_3e-2;
    let mut q = -1.456_607_2e-5;
    q = q * x2 - 2.133_740_6e-4;
    q = q * x2 - 1.682_827e-3;
    q = q * x2 - 7.373_329e-3;
    q = q * x2 - 1.426_474e-2;
    x * p / q
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7), the former GELU's.
    fn erf_reference(x: f64) -> f64 {
        let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
        let poly = t
            * (0.254_829_592
                + t * (-0.284_496_736
                    + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
        (1.0 - poly * (-x * x).exp()).copysign(x)
    }

    #[test]
    fn erf_is_within_1e6_everywhere() {
        for i in -6000..=6000 {
            let x = i as f32 / 1000.0;
            let error = (f64::from(erf(x)) - erf_reference(f64::from(x))).abs();
            assert!(error < 1e-6, "erf({x}) off by {error}");
        }
    }

    #[test]
    fn exp_is_within_2e7_relative() {
        for i in -8700..=8800 {
            let x = i as f32 / 100.0;
            let exact = f64::from(x).exp();
            let error = ((f64::from(exp(x)) - exact) / exact).abs();
            assert!(error < 2e-7, "exp({x}) off by {error}");
        }
    }

    #[test]
    fn layer_norm_centres_and_scales() {
        let mut x: Vec<f32> = (0..20).map(|v| v as f32).collect();
        layer_norm(&mut x, &[1.0; 20], &[0.0; 20], 1e-12);
        let mean: f32 = x.iter().sum::<f32>() / 20.0;
        let var: f32 = x.iter().map(|v| v * v).sum::<f32>() / 20.0;
        assert!(mean.abs() < 1e-6 && (var - 1.0).abs() < 1e-4, "{x:?}");
    }
}
