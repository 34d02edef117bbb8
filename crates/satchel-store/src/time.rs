//! Time as the store records it: [`Timestamp`] (unix milliseconds, shown
//! as RFC 3339 UTC) and the injectable [`Clock`] that says what "now" is.
//!
//! Timestamps are stored as integer unix milliseconds (sortable, cheap to
//! compare, a `BIGINT` in PostgreSQL) and written as RFC 3339 UTC text
//! (`2025-01-02T03:04:05.678Z`) wherever a person or another program reads
//! them: JSON exports, `--json` output, through `jiff`. No time zone
//! database is involved.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A point in time: milliseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The timestamp `millis` milliseconds after the unix epoch.
    pub const fn from_millis(millis: i64) -> Timestamp {
        Timestamp(millis)
    }

    /// The timestamp of a point of the system's clock (negative before
    /// 1970).
    pub fn from_system_time(time: SystemTime) -> Timestamp {
        Timestamp(match time.duration_since(UNIX_EPOCH) {
            Ok(since) => i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
            Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
        })
    }

    /// Milliseconds since the unix epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// The timestamp `duration` earlier, saturating at the representable range.
    pub fn saturating_sub(self, duration: Duration) -> Timestamp {
        let millis = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_sub(millis))
    }

    /// RFC 3339 in UTC with milliseconds, e.g. `2025-01-02T03:04:05.678Z`
    /// (clamped to years -9999 to 9999, the range RFC 3339 can write).
    pub fn to_rfc3339(self) -> String {
        let time = jiff::Timestamp::from_millisecond(self.0).unwrap_or(if self.0 < 0 {
            jiff::Timestamp::MIN
        } else {
            jiff::Timestamp::MAX
        });
        time.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
    }

    /// Parses RFC 3339 text (`YYYY-MM-DDTHH:MM:SS[.fraction]` with `Z` or
    /// an offset, a space accepted for `T`); fractions finer than a
    /// millisecond are dropped.
    pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
        let time: jiff::Timestamp = text.parse().ok()?;
        let millis = time.as_nanosecond().div_euclid(1_000_000);
        i64::try_from(millis).ok().map(Timestamp)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Timestamp, D::Error> {
        let text = String::deserialize(deserializer)?;
        Timestamp::parse_rfc3339(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "`{text}` is not an RFC 3339 UTC time like 2025-01-02T03:04:05.678Z"
            ))
        })
    }
}

/// What "now" is, for timestamps the store assigns. Injected so that tests
/// can pin time.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_system_time(SystemTime::now())
    }
}

/// A clock that only moves when told to; clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock showing `start`.
    pub fn new(start: Timestamp) -> ManualClock {
        ManualClock(Arc::new(AtomicI64::new(start.as_millis())))
    }

    /// Sets the time.
    pub fn set(&self, now: Timestamp) {
        self.0.store(now.as_millis(), Ordering::SeqCst);
    }

    /// Moves the time forward by `duration`.
    pub fn advance(&self, duration: Duration) {
        let millis = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(millis, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

/// Parses an age: a whole number and a unit, `s`, `m`, `h`, `d` or `w`
/// (`30s`, `15m`, `2h`, `7d`, `2w`), as `--since` options and the memory
/// tool's time bounds take them. `None` for anything else or an overflow.
pub fn parse_age(text: &str) -> Option<std::time::Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (digits, unit) = text.split_at(split);
    let count: u64 = digits.parse().ok()?;
    let seconds: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return None,
    };
    Some(std::time::Duration::from_secs(count.checked_mul(seconds)?))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn ages_need_a_number_and_a_unit() {
        use std::time::Duration;
        assert_eq!(parse_age("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_age("2w"), Some(Duration::from_secs(14 * 86_400)));
        for bad in ["", "7", "d", "7y", "-1d", "1.5h", "99999999999999999999d"] {
            assert_eq!(parse_age(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(
            Timestamp::from_millis(0).to_rfc3339(),
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(
            Timestamp::from_millis(951_782_400_123).to_rfc3339(),
            "2000-02-29T00:00:00.123Z"
        );
        assert_eq!(
            Timestamp::from_millis(1_735_787_045_678).to_rfc3339(),
            "2025-01-02T03:04:05.678Z"
        );
        assert_eq!(
            Timestamp::from_millis(-1).to_rfc3339(),
            "1969-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn parse_inverts_format_across_many_days() {
        // Every 7 hours and a bit from 1968 to 2104: leap years, century
        // rules and negative times all round-trip.
        let step = 7 * 3_600_000 + 1_234;
        let mut millis = -63_158_400_000;
        while millis < 4_260_000_000_000 {
            let time = Timestamp::from_millis(millis);
            assert_eq!(
                Timestamp::parse_rfc3339(&time.to_rfc3339()),
                Some(time),
                "{time}"
            );
            millis += step * 97;
        }
    }

    #[test]
    fn parse_accepts_variants_and_rejects_nonsense() {
        let expected = Some(Timestamp::from_millis(1_735_787_045_000));
        assert_eq!(Timestamp::parse_rfc3339("2025-01-02T03:04:05Z"), expected);
        assert_eq!(
            Timestamp::parse_rfc3339("2025-01-02 03:04:05+00:00"),
            expected
        );
        assert_eq!(
            Timestamp::parse_rfc3339("2025-01-02T03:04:05.6789Z"),
            Some(Timestamp::from_millis(1_735_787_045_678))
        );
        for bad in [
            "2025-01-02T03:04:05",
            "2025-02-30T00:00:00Z",
            "2025-13-01T00:00:00Z",
            "2025-01-02T24:00:00Z",
            "2025-1-02T03:04:05Z",
            "2025-01-02T03:04:05.Z",
            "yesterday",
        ] {
            assert_eq!(Timestamp::parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn serialises_as_rfc3339_text() {
        let time = Timestamp::from_millis(1_735_787_045_678);
        let json = serde_json::to_string(&time).unwrap();
        assert_eq!(json, "\"2025-01-02T03:04:05.678Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), time);
        assert!(serde_json::from_str::<Timestamp>("\"soon\"").is_err());
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(Timestamp::from_millis(1000));
        let shared = clock.clone();
        assert_eq!(clock.now(), Timestamp::from_millis(1000));
        shared.advance(Duration::from_secs(2));
        assert_eq!(clock.now(), Timestamp::from_millis(3000));
        clock.set(Timestamp::from_millis(5));
        assert_eq!(shared.now().as_millis(), 5);
        assert_eq!(
            Timestamp::from_millis(5).saturating_sub(Duration::from_millis(10)),
            Timestamp::from_millis(-5)
        );
    }
}
