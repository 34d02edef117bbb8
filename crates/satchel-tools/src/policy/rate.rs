//! Rate limits per tool (`"search": "10/min"`) and the cap on concurrent
//! tool processes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::rule::glob_matches;

/// At most `count` calls in any window of `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Calls allowed per window.
    pub count: usize,
    /// The window.
    pub per: Duration,
}

impl Limit {
    /// Parses `10/min`, `3/s`, `100/hour`, `1000/day`.
    pub fn parse(text: &str) -> Result<Limit, String> {
        let (count, unit) = text.split_once('/').ok_or_else(|| {
            format!("rate limit `{text}` is not of the form N/unit (e.g. 10/min)")
        })?;
        let count: usize = count
            .trim()
            .parse()
            .map_err(|_| format!("rate limit `{text}`: `{count}` is not a count"))?;
        let per = match unit.trim() {
            "s" | "sec" | "second" => Duration::from_secs(1),
            "m" | "min" | "minute" => Duration::from_secs(60),
            "h" | "hour" => Duration::from_secs(3600),
            "d" | "day" => Duration::from_secs(86_400),
            other => {
                return Err(format!(
                    "rate limit `{text}`: unknown unit `{other}` (s, min, hour, day)"
                ));
            }
        };
        Ok(Limit { count, per })
    }
}

/// Sliding-window limits keyed by tool-name pattern.
///
/// The clock is passed in (`now`), so tests and callers decide what time it is.
#[derive(Debug, Default)]
pub struct RateLimiter {
    limits: Vec<(String, Limit)>,
    calls: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl RateLimiter {
    /// A limiter for `(tool pattern, limit)` pairs; the first matching pattern applies.
    pub fn new(limits: Vec<(String, Limit)>) -> RateLimiter {
        RateLimiter {
            limits,
            calls: Mutex::default(),
        }
    }

    /// Records a call to `tool` at `now` if it is within its limit;
    /// otherwise says how long to wait until it would be.
    pub fn acquire(&self, tool: &str, now: Instant) -> Result<(), Duration> {
        let Some((pattern, limit)) = self
            .limits
            .iter()
            .find(|(pattern, _)| glob_matches(pattern, tool))
        else {
            return Ok(());
        };
        let mut calls = self
            .calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let window = calls.entry(pattern.clone()).or_default();
        while window
            .front()
            .is_some_and(|&at| now.saturating_duration_since(at) >= limit.per)
        {
            window.pop_front();
        }
        if window.len() >= limit.count {
            let oldest = window.front().copied().unwrap_or(now);
            return Err(limit
                .per
                .saturating_sub(now.saturating_duration_since(oldest)));
        }
        window.push_back(now);
        Ok(())
    }
}

impl RateLimiter {
    /// Takes back a call recorded at `at` that did not run after all (it
    /// was refused for another reason), so it does not count.
    pub fn refund(&self, tool: &str, at: Instant) {
        let Some((pattern, _)) = self
            .limits
            .iter()
            .find(|(pattern, _)| glob_matches(pattern, tool))
        else {
            return;
        };
        let mut calls = self
            .calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(window) = calls.get_mut(pattern)
            && let Some(index) = window.iter().rposition(|&recorded| recorded == at)
        {
            window.remove(index);
        }
    }
}

/// A cap on tool processes running at once.
#[derive(Debug, Clone)]
pub struct ProcessSlots {
    semaphore: Arc<Semaphore>,
    capacity: usize,
}

impl ProcessSlots {
    /// At most `capacity` at once.
    pub fn new(capacity: usize) -> ProcessSlots {
        ProcessSlots {
            semaphore: Arc::new(Semaphore::new(capacity)),
            capacity,
        }
    }

    /// The cap.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Waits up to `patience` for a slot; `None` when none freed up.
    pub async fn acquire(&self, patience: Duration) -> Option<OwnedSemaphorePermit> {
        tokio::time::timeout(patience, self.semaphore.clone().acquire_owned())
            .await
            .ok()?
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse() {
        assert_eq!(
            Limit::parse("10/min").unwrap(),
            Limit {
                count: 10,
                per: Duration::from_secs(60)
            }
        );
        assert_eq!(
            Limit::parse("3 / s").unwrap(),
            Limit {
                count: 3,
                per: Duration::from_secs(1)
            }
        );
        assert!(Limit::parse("ten/min").is_err());
        assert!(Limit::parse("10/fortnight").is_err());
        assert!(Limit::parse("10").is_err());
    }

    #[test]
    fn sliding_window_allows_again_once_the_oldest_call_ages_out() {
        let limiter = RateLimiter::new(vec![(
            "search".into(),
            Limit {
                count: 2,
                per: Duration::from_secs(60),
            },
        )]);
        let t0 = Instant::now();
        assert_eq!(limiter.acquire("search", t0), Ok(()));
        assert_eq!(
            limiter.acquire("search", t0 + Duration::from_secs(10)),
            Ok(())
        );
        assert_eq!(
            limiter.acquire("search", t0 + Duration::from_secs(20)),
            Err(Duration::from_secs(40))
        );
        // Refused calls do not count against the window.
        assert_eq!(
            limiter.acquire("search", t0 + Duration::from_secs(59)),
            Err(Duration::from_secs(1))
        );
        assert_eq!(
            limiter.acquire("search", t0 + Duration::from_secs(60)),
            Ok(())
        );
        assert_eq!(
            limiter.acquire("search", t0 + Duration::from_secs(61)),
            Err(Duration::from_secs(9))
        );
        // Other tools are not limited.
        assert_eq!(limiter.acquire("bash", t0), Ok(()));
    }

    #[test]
    fn patterns_share_one_window() {
        let limiter = RateLimiter::new(vec![(
            "mcp_web__*".into(),
            Limit {
                count: 1,
                per: Duration::from_secs(1),
            },
        )]);
        let t0 = Instant::now();
        assert!(limiter.acquire("mcp_web__fetch", t0).is_ok());
        assert!(limiter.acquire("mcp_web__search", t0).is_err());
    }

    #[tokio::test]
    async fn process_slots_cap_concurrency() {
        let slots = ProcessSlots::new(1);
        let held = slots.acquire(Duration::from_millis(10)).await.unwrap();
        assert!(slots.acquire(Duration::from_millis(10)).await.is_none());
        drop(held);
        assert!(slots.acquire(Duration::from_millis(10)).await.is_some());
    }
}
