//! Loops compiled twice, for the baseline x86-64 (SSE2, and no `popcnt`
//! instruction) and for AVX2 with POPCNT, the version picked at run time:
//! eight lanes instead of four, and a one-instruction bit count for the
//! sign-bit scan. No `-C target-cpu` is needed, so binaries still run on
//! any x86-64.

/// Defines `$name`, which runs `$body` compiled with AVX2 and POPCNT when
/// the CPU has them and for the baseline target otherwise.
macro_rules! dispatch {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? $body:block) => {
        $(#[$doc])*
        pub(crate) fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn generic($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,popcnt")]
            fn avx2($($arg: $ty),*) $(-> $ret)? {
                generic($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("popcnt")
            {
                // SAFETY: the CPU supports both features, checked just above.
                return unsafe { avx2($($arg),*) };
            }
            generic($($arg),*)
        }
    };
}

pub(crate) use dispatch;

/// `value` rounded to the nearest integer, ties to even, for magnitudes
/// below 2²² (quantised codes and activations). Adding 1.5 · 2²³ leaves
/// the rounded integer in the low bits of the sum, which vectorises where
/// `round` (a libm call) and a float-to-int `as` (which must saturate) do
/// not.
#[inline(always)]
pub(crate) fn round_small(value: f32) -> i32 {
    const MAGIC: f32 = 12_582_912.0;
    (value + MAGIC).to_bits().wrapping_sub(MAGIC.to_bits()) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_to_nearest_ties_to_even() {
        for (value, expected) in [
            (0.0, 0),
            (0.5, 0),
            (1.5, 2),
            (-0.5, 0),
            (-1.5, -2),
            (-2.6, -3),
            (32767.0, 32767),
            (-32767.0, -32767),
            (1234.49, 1234),
        ] {
            assert_eq!(round_small(value), expected, "{value}");
        }
    }
}
