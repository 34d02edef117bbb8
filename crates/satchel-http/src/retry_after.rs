//! How long a server asks a client to wait before trying again, read from
//! a response's headers. One parser for every client in Satchel (model
//! providers, search backends), so they all honour the same spellings.
//!
//! HTTP dates are parsed by `httpdate`, already linked through hyper: it
//! reads all three formats RFC 9110 §5.6.7 obliges a recipient to accept
//! (IMF-fixdate, RFC 850, asctime), where `jiff`'s RFC 2822 parser reads
//! only the first.

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, RETRY_AFTER};

/// How long the server asks to wait: `retry-after-ms` (milliseconds, as
/// OpenAI sends it) when present and valid, else `Retry-After` as a number
/// of seconds or as an HTTP date (a date in the past, relative to `now`,
/// means no wait). `None` when neither header is there or readable; a
/// negative, non-finite or out-of-range number is unreadable.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(wait) = text("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .and_then(|ms| seconds(ms / 1000.0))
    {
        return Some(wait);
    }
    let value = text(RETRY_AFTER.as_str())?;
    if let Ok(number) = value.parse::<f64>() {
        return seconds(number);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// `value` seconds, when it is a duration at all.
fn seconds(value: f64) -> Option<Duration> {
    if value.is_sign_negative() {
        return None;
    }
    Duration::try_from_secs_f64(value).ok()
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    fn now() -> SystemTime {
        // Sun, 06 Nov 1994 08:49:07 GMT: RFC 9110's example date, less 30 s.
        SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_747)
    }

    #[test]
    fn seconds_whole_fractional_and_padded() {
        for (value, expected) in [
            ("7", Duration::from_secs(7)),
            (" 120 ", Duration::from_secs(120)),
            ("0", Duration::ZERO),
            ("1.5", Duration::from_millis(1500)),
        ] {
            assert_eq!(
                retry_after(&headers(&[("retry-after", value)]), now()),
                Some(expected),
                "{value:?}"
            );
        }
    }

    #[test]
    fn http_dates_in_all_three_formats_are_relative_to_now() {
        for value in [
            "Sun, 06 Nov 1994 08:49:37 GMT",  // IMF-fixdate
            "Sunday, 06-Nov-94 08:49:37 GMT", // obsolete RFC 850
            "Sun Nov  6 08:49:37 1994",       // obsolete asctime
        ] {
            assert_eq!(
                retry_after(&headers(&[("retry-after", value)]), now()),
                Some(Duration::from_secs(30)),
                "{value:?}"
            );
        }
        let past = httpdate::fmt_http_date(now() - Duration::from_secs(30));
        assert_eq!(
            retry_after(&headers(&[("retry-after", &past)]), now()),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn milliseconds_come_first_when_readable() {
        let both = headers(&[("retry-after", "7"), ("retry-after-ms", "1500")]);
        assert_eq!(retry_after(&both, now()), Some(Duration::from_millis(1500)));
        let bad_ms = headers(&[("retry-after", "7"), ("retry-after-ms", "soon")]);
        assert_eq!(retry_after(&bad_ms, now()), Some(Duration::from_secs(7)));
        let only_ms = headers(&[("retry-after-ms", "250")]);
        assert_eq!(
            retry_after(&only_ms, now()),
            Some(Duration::from_millis(250))
        );
    }

    #[test]
    fn unreadable_values_are_none_and_never_panic() {
        assert_eq!(retry_after(&HeaderMap::new(), now()), None);
        for value in [
            "soon",
            "-5",
            "NaN",
            "inf",
            "1e30",
            "",
            "Sun, 32 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(
                retry_after(&headers(&[("retry-after", value)]), now()),
                None,
                "{value:?}"
            );
        }
        // Too large for a Duration: once a panic in the request driver.
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "1e300")]), now()),
            None
        );
        let mut latin1 = HeaderMap::new();
        latin1.insert(
            "retry-after",
            HeaderValue::from_bytes(b"\xe9t\xe9").unwrap(),
        );
        assert_eq!(retry_after(&latin1, now()), None);
    }
}
