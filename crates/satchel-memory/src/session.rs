//! Sessions: when one ends on its own ([`division_after`]), the sentinel
//! the model stores to start a new one, and the [`Summarizer`] that writes
//! an ended session's summary.

use async_trait::async_trait;
use jiff::ToSpan;
use jiff::civil::Time;
use jiff::tz::TimeZone;
use satchel_store::{MemoryRecord, MemorySession, Timestamp};

use crate::config::AutoDivide;

/// What the model stores (with category `system`) to start a new session.
pub const NEW_SESSION_SENTINEL: &str = "__NEW_SESSION__";

/// The category that goes with [`NEW_SESSION_SENTINEL`].
pub const SYSTEM_CATEGORY: &str = "system";

/// Writes the summary of an ended session; the agent loop implements it
/// with a side request to the model.
#[async_trait]
pub trait Summarizer: Send + Sync {
    /// A short summary of what the session's memories say.
    async fn summarize(
        &self,
        session: &MemorySession,
        memories: &[MemoryRecord],
    ) -> Result<String, String>;
}

/// The first division strictly after `start`: the next `at` (local time in
/// `zone`) for daily sessions, the next such time on `weekday` for weekly
/// ones, `None` when sessions only end when asked.
///
/// A local time that a DST change skips is taken as the instant after the
/// gap; one that occurs twice, as the first.
pub fn division_after(
    start: Timestamp,
    divide: AutoDivide,
    at: Time,
    zone: &TimeZone,
) -> Option<Timestamp> {
    let start_instant = jiff::Timestamp::from_millisecond(start.as_millis()).ok()?;
    let local = start_instant.to_zoned(zone.clone());
    let mut date = local.date();
    let step_ok = |date: jiff::civil::Date| -> Option<jiff::Timestamp> {
        date.to_datetime(at)
            .to_zoned(zone.clone())
            .ok()
            .map(|z| z.timestamp())
    };
    for _ in 0..16 {
        let candidate = step_ok(date)?;
        let weekday_ok = match divide {
            AutoDivide::Daily => true,
            AutoDivide::Weekly(weekday) => date.weekday() == weekday,
            AutoDivide::None => return None,
        };
        if weekday_ok && candidate > start_instant {
            return Some(Timestamp::from_millis(candidate.as_millisecond()));
        }
        date = date.checked_add(1.day()).ok()?;
    }
    None
}

#[cfg(test)]
mod tests {
    use jiff::civil::Weekday;
    use pretty_assertions::assert_eq;

    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    #[test]
    fn daily_division_is_the_next_local_time() {
        let paris = TimeZone::get("Europe/Paris").unwrap();
        let four = Time::constant(4, 0, 0, 0);
        // 03:59 Paris (01:59Z in summer) → the same day's 04:00 (02:00Z).
        assert_eq!(
            division_after(at("2025-06-10T01:59:00Z"), AutoDivide::Daily, four, &paris),
            Some(at("2025-06-10T02:00:00Z"))
        );
        // Exactly at 04:00 → the next day's.
        assert_eq!(
            division_after(at("2025-06-10T02:00:00Z"), AutoDivide::Daily, four, &paris),
            Some(at("2025-06-11T02:00:00Z"))
        );
        // In winter Paris is UTC+1.
        assert_eq!(
            division_after(at("2025-01-10T12:00:00Z"), AutoDivide::Daily, four, &paris),
            Some(at("2025-01-11T03:00:00Z"))
        );
        assert_eq!(
            division_after(at("2025-01-10T12:00:00Z"), AutoDivide::None, four, &paris),
            None
        );
    }

    #[test]
    fn weekly_division_waits_for_the_weekday_and_survives_dst() {
        let paris = TimeZone::get("Europe/Paris").unwrap();
        let four = Time::constant(4, 0, 0, 0);
        // Wednesday 2025-03-26 → Monday 2025-03-31 04:00 CEST (after the
        // change to summer time on the 30th) = 02:00Z.
        assert_eq!(
            division_after(
                at("2025-03-26T10:00:00Z"),
                AutoDivide::Weekly(Weekday::Monday),
                four,
                &paris
            ),
            Some(at("2025-03-31T02:00:00Z"))
        );
        // 02:30 does not exist in Paris on 2025-03-30: the instant after the gap.
        let skipped = Time::constant(2, 30, 0, 0);
        assert_eq!(
            division_after(
                at("2025-03-29T12:00:00Z"),
                AutoDivide::Daily,
                skipped,
                &paris
            ),
            Some(at("2025-03-30T01:30:00Z"))
        );
    }
}
