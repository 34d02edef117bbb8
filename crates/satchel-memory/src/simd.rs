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
