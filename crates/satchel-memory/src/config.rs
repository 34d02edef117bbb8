//! The `memory` section of agent.json ([`MemorySettings`], camelCase, as
//! written) and what it becomes ([`MemoryConfig`], checked and typed).
//!
//! Every weight of recall is here, with its default and what it does, so
//! that ranking can be tuned without a rebuild. Paths are passed in: the
//! binary resolves the default model directory from XDG variables.

use std::path::PathBuf;
use std::time::Duration;

use jiff::civil::{Time, Weekday};
use jiff::tz::TimeZone;
use serde::Deserialize;

use crate::index::Bm25;

/// The `memory` section as written in agent.json.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct MemorySettings {
    /// Whose memories these are; memories of other namespaces are never
    /// recalled.
    pub namespace: String,
    /// The embedding model's directory; `null`: Satchel's data directory.
    pub model_dir: Option<PathBuf>,
    /// Days a memory of each layer lives; `null` means forever.
    pub ttl_days: TtlSettings,
    /// Days an archived session memory is kept before it is purged.
    pub archived_session_days: f64,
    /// How sessions are divided.
    pub sessions: SessionSettings,
    /// How recall ranks.
    pub recall: RecallSettings,
    /// Cosine similarity at or above which a new memory updates an
    /// existing one of the same layer instead of being added.
    pub duplicate_similarity: f32,
    /// Minutes between purges of expired memories in long-running processes.
    pub purge_interval_minutes: u64,
    /// Longest memory accepted, in characters.
    pub max_content_chars: usize,
    /// Whether the binary fetches the embedding model on first use when it
    /// is missing (this crate never does: no network here).
    pub fetch_model: bool,
}

impl Default for MemorySettings {
    fn default() -> MemorySettings {
        MemorySettings {
            namespace: "default".into(),
            model_dir: None,
            ttl_days: TtlSettings::default(),
            archived_session_days: 14.0,
            sessions: SessionSettings::default(),
            recall: RecallSettings::default(),
            duplicate_similarity: 0.92,
            purge_interval_minutes: 60,
            max_content_chars: 4000,
            fetch_model: true,
        }
    }
}

/// Lifetimes of the layers, in days (`session` ends with its session).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct TtlSettings {
    /// Permanent facts: forever by default.
    pub long: Option<f64>,
    /// Goals and plans: 90 days.
    pub mid: Option<f64>,
    /// Recent context and summaries: 14 days.
    pub short: Option<f64>,
}

impl Default for TtlSettings {
    fn default() -> TtlSettings {
        TtlSettings {
            long: None,
            mid: Some(90.0),
            short: Some(14.0),
        }
    }
}

/// How sessions are divided: `autoDivide` at `divideAt` local time.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SessionSettings {
    /// `daily` (default), `weekly` or `none`.
    pub auto_divide: String,
    /// Local time of the division, `HH:MM` (default `04:00`).
    pub divide_at: String,
    /// Day of a weekly division (default `monday`).
    pub weekday: String,
    /// IANA time zone (`Europe/Paris`); `null`: the system's.
    pub time_zone: Option<String>,
}

impl Default for SessionSettings {
    fn default() -> SessionSettings {
        SessionSettings {
            auto_divide: "daily".into(),
            divide_at: "04:00".into(),
            weekday: "monday".into(),
            time_zone: None,
        }
    }
}

/// Recall's weights; see [`RecallConfig`] for what each does.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct RecallSettings {
    /// `convex` (weighted sum of normalised scores) or `rrf` (reciprocal ranks).
    pub fusion: String,
    /// Weight of the semantic ranking in the fusion.
    pub semantic_weight: f32,
    /// Weight of the keyword (BM25) ranking in the fusion.
    pub keyword_weight: f32,
    /// Reciprocal-rank-fusion constant `k`.
    pub rrf_k: f32,
    /// Candidates taken from each ranking before fusion.
    pub candidates: usize,
    /// Half-life of the recency factor, in days.
    pub recency_half_life_days: f32,
    /// How much recency can lower a score (0: not at all, 1: fully).
    pub recency_weight: f32,
    /// How much low certainty can lower a score (0: not at all, 1: fully).
    pub certainty_weight: f32,
    /// Results under this relevance (0 to 1) are left out.
    pub min_relevance: f32,
    /// Above this many candidate vectors, search first by sign bits, then
    /// re-rank the best by the full vectors.
    pub exact_scan_limit: usize,
    /// BM25's term-frequency saturation `k1`.
    pub bm25_k1: f32,
    /// BM25's length normalisation `b`, 0 to 1.
    pub bm25_b: f32,
    /// How much of the namespace's mean embedding cosine is measured
    /// from, 0 to 1.
    pub centring: f32,
}

impl Default for RecallSettings {
    fn default() -> RecallSettings {
        let config = RecallConfig::default();
        RecallSettings {
            fusion: match config.fusion {
                Fusion::Convex => "convex".into(),
                Fusion::Rrf => "rrf".into(),
            },
            semantic_weight: config.semantic_weight,
            keyword_weight: config.keyword_weight,
            rrf_k: config.rrf_k,
            candidates: config.candidates,
            recency_half_life_days: config.recency_half_life_days,
            recency_weight: config.recency_weight,
            certainty_weight: config.certainty_weight,
            min_relevance: config.min_relevance,
            exact_scan_limit: config.exact_scan_limit,
            bm25_k1: config.bm25.k1,
            bm25_b: config.bm25.b,
            centring: config.centring,
        }
    }
}

/// How the two rankings are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fusion {
    /// Weighted sum of scores normalised per query: cosine and BM25 each
    /// divided by the best candidate's (negative cosines count as 0, a
    /// memory without an embedding gets 0), weights divided by their sum.
    Convex,
    /// Reciprocal-rank fusion: `weight / (rrf_k + rank)` from each ranking,
    /// divided by the best possible sum.
    Rrf,
}

/// How recall ranks, once checked.
///
/// Each ranking (BM25 over words, cosine over embeddings) gives its best
/// `candidates`; [`Fusion`] combines them into a score from 0 to 1. That is
/// multiplied by `1 - recency_weight + recency_weight * 0.5^(age /
/// half_life)` and by `1 - certainty_weight + certainty_weight *
/// certainty`, giving `relevance`.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallConfig {
    /// How the rankings are combined.
    pub fusion: Fusion,
    /// Weight of the semantic ranking.
    pub semantic_weight: f32,
    /// Weight of the keyword ranking.
    pub keyword_weight: f32,
    /// The RRF constant: larger flattens the difference between ranks.
    pub rrf_k: f32,
    /// Candidates from each ranking.
    pub candidates: usize,
    /// Age at which the recency factor halves, in days.
    pub recency_half_life_days: f32,
    /// Share of the score recency controls, 0 to 1.
    pub recency_weight: f32,
    /// Share of the score certainty controls, 0 to 1.
    pub certainty_weight: f32,
    /// Results under this relevance are dropped.
    pub min_relevance: f32,
    /// Candidate count above which the vector search is two-stage.
    pub exact_scan_limit: usize,
    /// The keyword ranking's parameters.
    pub bm25: Bm25,
    /// Share of the namespace's mean embedding taken off both vectors
    /// before their cosine, 0 to 1. Sentence embeddings share a large
    /// common direction (for a conversation: its speakers, its tone), which
    /// makes every cosine high and squeezes what tells memories apart;
    /// measuring from the mean spreads them (see `index::mean`).
    pub centring: f32,
}

impl Default for RecallConfig {
    fn default() -> RecallConfig {
        RecallConfig {
            fusion: Fusion::Convex,
            semantic_weight: 1.0,
            keyword_weight: 1.0,
            rrf_k: 60.0,
            candidates: 100,
            recency_half_life_days: 180.0,
            recency_weight: 0.1,
            certainty_weight: 0.2,
            min_relevance: 0.0,
            exact_scan_limit: 20_000,
            bm25: Bm25::default(),
            centring: 1.0,
        }
    }
}

/// When sessions end on their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoDivide {
    /// Every day at the division time.
    Daily,
    /// Every week on the weekday, at the division time.
    Weekly(Weekday),
    /// Only when asked (`/newsession`, the sentinel).
    None,
}

/// The checked memory configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryConfig {
    /// Whose memories these are.
    pub namespace: String,
    /// The model directory, when configured; the binary supplies the default.
    pub model_dir: Option<PathBuf>,
    /// Lifetime of `long` memories; `None`: forever.
    pub long_ttl: Option<Duration>,
    /// Lifetime of `mid` memories.
    pub mid_ttl: Option<Duration>,
    /// Lifetime of `short` memories.
    pub short_ttl: Option<Duration>,
    /// How long archived session memories are kept.
    pub archived_session_ttl: Duration,
    /// When sessions end on their own.
    pub auto_divide: AutoDivide,
    /// Local time of the division.
    pub divide_at: Time,
    /// Time zone of the division; `None`: the system's, looked up the
    /// first time a session is divided ([`MemoryConfig::zone`]), since
    /// finding it walks the time-zone database and most commands never
    /// divide a session.
    pub time_zone: Option<TimeZone>,
    /// Ranking.
    pub recall: RecallConfig,
    /// Cosine at or above which a store updates an existing memory.
    pub duplicate_similarity: f32,
    /// Time between purges in long-running processes.
    pub purge_interval: Duration,
    /// Longest memory accepted, in characters.
    pub max_content_chars: usize,
    /// `fetchModel`: whether the binary fetches a missing model on first use.
    pub fetch_model: bool,
}

impl MemoryConfig {
    /// The time zone of session division: the configured one, else the
    /// system's (looked up once per process).
    pub fn zone(&self) -> TimeZone {
        static SYSTEM: std::sync::LazyLock<TimeZone> = std::sync::LazyLock::new(TimeZone::system);
        self.time_zone.clone().unwrap_or_else(|| SYSTEM.clone())
    }
}

impl Default for MemoryConfig {
    fn default() -> MemoryConfig {
        MemoryConfig::from_settings(MemorySettings::default()).0
    }
}

/// `value` days as a duration; `None` stays `None` (forever), anything but a
/// positive number is a warning and `default_days`.
fn days(
    value: Option<f64>,
    name: &str,
    default_days: Option<f64>,
    warnings: &mut Vec<String>,
) -> Option<Duration> {
    let days = value?;
    match Duration::try_from_secs_f64(days * 86_400.0) {
        Ok(duration) if days > 0.0 => Some(duration),
        _ => {
            let fallback = default_days.map_or("forever".to_owned(), |d| format!("{d} days"));
            warnings.push(format!(
                "memory.{name}: {days} is not a positive number of days; using {fallback}"
            ));
            default_days.map(|d| Duration::from_secs_f64(d * 86_400.0))
        }
    }
}

impl MemoryConfig {
    /// Checks the settings; each problem is a warning and a default.
    pub fn from_settings(settings: MemorySettings) -> (MemoryConfig, Vec<String>) {
        let mut warnings = Vec::new();
        let ttl = TtlSettings::default();
        let long_ttl = days(
            settings.ttl_days.long,
            "ttlDays.long",
            ttl.long,
            &mut warnings,
        );
        let mid_ttl = days(settings.ttl_days.mid, "ttlDays.mid", ttl.mid, &mut warnings);
        let short_ttl = days(
            settings.ttl_days.short,
            "ttlDays.short",
            ttl.short,
            &mut warnings,
        );
        let archived_session_ttl = days(
            Some(settings.archived_session_days),
            "archivedSessionDays",
            Some(14.0),
            &mut warnings,
        )
        .unwrap_or(Duration::from_secs(14 * 86_400));
        let weekday = match settings.sessions.weekday.to_ascii_lowercase().as_str() {
            "monday" | "mon" => Weekday::Monday,
            "tuesday" | "tue" => Weekday::Tuesday,
            "wednesday" | "wed" => Weekday::Wednesday,
            "thursday" | "thu" => Weekday::Thursday,
            "friday" | "fri" => Weekday::Friday,
            "saturday" | "sat" => Weekday::Saturday,
            "sunday" | "sun" => Weekday::Sunday,
            other => {
                warnings.push(format!(
                    "memory.sessions.weekday: `{other}` is not a day of the week; using monday"
                ));
                Weekday::Monday
            }
        };
        let auto_divide = match settings.sessions.auto_divide.as_str() {
            "daily" => AutoDivide::Daily,
            "weekly" => AutoDivide::Weekly(weekday),
            "none" => AutoDivide::None,
            other => {
                warnings.push(format!(
                    "memory.sessions.autoDivide: `{other}` is not daily, weekly or none; using daily"
                ));
                AutoDivide::Daily
            }
        };
        let divide_at = match settings.sessions.divide_at.parse::<Time>() {
            Ok(time) => time,
            Err(_) => {
                warnings.push(format!(
                    "memory.sessions.divideAt: `{}` is not a time like 04:00; using 04:00",
                    settings.sessions.divide_at
                ));
                Time::constant(4, 0, 0, 0)
            }
        };
        let time_zone = match &settings.sessions.time_zone {
            None => None,
            Some(name) => match TimeZone::get(name) {
                Ok(zone) => Some(zone),
                Err(error) => {
                    warnings.push(format!(
                        "memory.sessions.timeZone: `{name}`: {error}; using the system's time zone"
                    ));
                    None
                }
            },
        };
        let r = settings.recall;
        let unit = |value: f32, name: &str, default: f32, warnings: &mut Vec<String>| {
            if (0.0..=1.0).contains(&value) {
                value
            } else {
                warnings.push(format!(
                    "memory.recall.{name}: {value} is not between 0 and 1; using {default}"
                ));
                default
            }
        };
        let defaults = RecallConfig::default();
        let fusion = match r.fusion.as_str() {
            "convex" => Fusion::Convex,
            "rrf" => Fusion::Rrf,
            other => {
                warnings.push(format!(
                    "memory.recall.fusion: `{other}` is not convex or rrf; using convex"
                ));
                Fusion::Convex
            }
        };
        let recall = RecallConfig {
            fusion,
            semantic_weight: r.semantic_weight.max(0.0),
            keyword_weight: r.keyword_weight.max(0.0),
            rrf_k: r.rrf_k.max(0.0),
            candidates: r.candidates.clamp(1, 10_000),
            recency_half_life_days: if r.recency_half_life_days > 0.0 {
                r.recency_half_life_days
            } else {
                defaults.recency_half_life_days
            },
            recency_weight: unit(
                r.recency_weight,
                "recencyWeight",
                defaults.recency_weight,
                &mut warnings,
            ),
            certainty_weight: unit(
                r.certainty_weight,
                "certaintyWeight",
                defaults.certainty_weight,
                &mut warnings,
            ),
            min_relevance: unit(
                r.min_relevance,
                "minRelevance",
                defaults.min_relevance,
                &mut warnings,
            ),
            exact_scan_limit: r.exact_scan_limit,
            bm25: Bm25 {
                k1: if r.bm25_k1 >= 0.0 {
                    r.bm25_k1
                } else {
                    warnings.push(format!(
                        "memory.recall.bm25K1 must not be negative; using {}",
                        defaults.bm25.k1
                    ));
                    defaults.bm25.k1
                },
                b: unit(r.bm25_b, "bm25B", defaults.bm25.b, &mut warnings),
            },
            centring: unit(r.centring, "centring", defaults.centring, &mut warnings),
        };
        let namespace = if settings.namespace.trim().is_empty() {
            warnings.push("memory.namespace is empty; using `default`".into());
            "default".to_owned()
        } else {
            settings.namespace.trim().to_owned()
        };
        let config = MemoryConfig {
            namespace,
            model_dir: settings.model_dir,
            long_ttl,
            mid_ttl,
            short_ttl,
            archived_session_ttl,
            auto_divide,
            divide_at,
            time_zone,
            recall,
            duplicate_similarity: settings.duplicate_similarity.clamp(0.0, 1.0),
            purge_interval: Duration::from_secs(settings.purge_interval_minutes.max(1) * 60),
            max_content_chars: settings.max_content_chars.max(1),
            fetch_model: settings.fetch_model,
        };
        (config, warnings)
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn defaults_match_the_documented_lifetimes() {
        let config = MemoryConfig::default();
        assert_eq!(config.long_ttl, None);
        assert_eq!(config.mid_ttl, Some(Duration::from_secs(90 * 86_400)));
        assert_eq!(config.short_ttl, Some(Duration::from_secs(14 * 86_400)));
        assert_eq!(config.auto_divide, AutoDivide::Daily);
        assert_eq!(config.divide_at, Time::constant(4, 0, 0, 0));
        assert_eq!(config.namespace, "default");
    }

    #[test]
    fn bad_values_are_warnings_and_defaults() {
        let settings: MemorySettings = serde_json::from_value(serde_json::json!({
            "ttlDays": {"mid": -3},
            "sessions": {"autoDivide": "hourly", "divideAt": "25:00", "timeZone": "Mars/Olympus", "weekday": "someday"},
            "recall": {"recencyWeight": 3, "centring": -0.5}
        }))
        .unwrap();
        let (config, warnings) = MemoryConfig::from_settings(settings);
        assert_eq!(config.mid_ttl, Some(Duration::from_secs(90 * 86_400)));
        assert_eq!(config.auto_divide, AutoDivide::Daily);
        assert_eq!(
            config.recall.recency_weight,
            RecallConfig::default().recency_weight
        );
        assert_eq!(config.recall.centring, 1.0);
        assert_eq!(warnings.len(), 7, "{warnings:#?}");
    }

    #[test]
    fn weekly_division_takes_its_weekday() {
        let settings: MemorySettings = serde_json::from_value(serde_json::json!({
            "sessions": {"autoDivide": "weekly", "weekday": "fri", "divideAt": "18:30", "timeZone": "Europe/Paris"}
        }))
        .unwrap();
        let (config, warnings) = MemoryConfig::from_settings(settings);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(config.auto_divide, AutoDivide::Weekly(Weekday::Friday));
        assert_eq!(config.divide_at, Time::constant(18, 30, 0, 0));
    }
}
