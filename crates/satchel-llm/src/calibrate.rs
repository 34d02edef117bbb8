//! Token estimates calibrated to a model's own tokenizer.
//!
//! For a model whose tokenizer is not embedded (Claude, Llama, Qwen,
//! SmolLM...), the count on the sent bytes uses `cl100k` as a stand-in,
//! which can be off by 10-30%. Every call stores that count beside the
//! input tokens the server reported; the ratio of the two over the latest
//! calls turns the next count into the server's figure. The exact count
//! stays what is recorded; the calibrated one is what thresholds use and
//! what `satchel context` shows beside it.

use serde::{Deserialize, Serialize};

/// The ratio of reported to counted input tokens over recent calls.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Reported tokens per counted token.
    pub ratio: f64,
    /// Calls it was learned from.
    pub samples: usize,
}

impl Calibration {
    /// Calls a ratio is learned from: recent enough to follow a changed
    /// prompt, enough to smooth one odd call.
    pub const WINDOW: usize = 20;

    /// Outside these bounds a server's figures are not about the same
    /// text (a cache, a bug): the samples are not used.
    const PLAUSIBLE: std::ops::RangeInclusive<f64> = 0.25..=4.0;

    /// The ratio over `(estimate, reported)` pairs, weighted by size (the
    /// large requests are the ones that meet the window); `None` without
    /// usable pairs.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (u64, u64)>) -> Option<Calibration> {
        let (mut counted, mut reported, mut samples) = (0u64, 0u64, 0usize);
        for (estimate, input) in pairs.into_iter().take(Self::WINDOW) {
            if estimate == 0 || input == 0 {
                continue;
            }
            if !Self::PLAUSIBLE.contains(&(input as f64 / estimate as f64)) {
                continue;
            }
            counted += estimate;
            reported += input;
            samples += 1;
        }
        (samples > 0).then(|| Calibration {
            ratio: reported as f64 / counted as f64,
            samples,
        })
    }

    /// `tokens` as the server would count them.
    pub fn apply(&self, tokens: u64) -> u64 {
        (tokens as f64 * self.ratio).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_is_weighted_by_size_and_skips_implausible_pairs() {
        let calibration =
            Calibration::from_pairs([(100, 80), (1_000, 780), (0, 5), (50, 0), (100, 900)])
                .unwrap();
        assert_eq!(calibration.samples, 2);
        assert!((calibration.ratio - 860.0 / 1_100.0).abs() < 1e-9);
        assert_eq!(calibration.apply(1_100), 860);
        assert_eq!(Calibration::from_pairs([]), None);
        assert_eq!(Calibration::from_pairs([(10, 1)]), None);
    }

    #[test]
    fn only_the_latest_window_counts() {
        let recent = std::iter::repeat_n((100, 50), Calibration::WINDOW);
        let old = std::iter::repeat_n((100, 200), 5);
        let calibration = Calibration::from_pairs(recent.chain(old)).unwrap();
        assert_eq!(calibration.samples, Calibration::WINDOW);
        assert!((calibration.ratio - 0.5).abs() < 1e-9);
    }
}
