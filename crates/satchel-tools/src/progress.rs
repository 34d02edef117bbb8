//! Progress of a running call, for callers that can show it (an MCP
//! client that sent a progress token): a [`ProgressSink`] in the
//! [`ToolContext`](crate::ToolContext), and [`ProgressTicker`], which
//! reports a running process's elapsed time and output so far.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use satchel_exec::OutputMeter;

/// How often a running process's progress is reported.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// One progress report: `progress` only ever grows during a call.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    /// How far along, in the unit of `total` (seconds, for a process).
    pub progress: f64,
    /// The whole, when known.
    pub total: Option<f64>,
    /// What is happening, for a person.
    pub message: String,
}

/// Where a call's progress goes; reports must not block.
pub trait ProgressSink: Send + Sync + std::fmt::Debug {
    /// Takes one report.
    fn report(&self, update: ProgressUpdate);
}

/// Reports a running process's progress every [`PROGRESS_INTERVAL`]
/// until dropped: elapsed seconds as the progress (of `timeout`), and the
/// output so far in bytes and lines.
#[must_use = "progress stops when the ticker is dropped"]
pub struct ProgressTicker(Option<tokio::task::JoinHandle<()>>);

impl ProgressTicker {
    /// Starts reporting to `sink` (nothing when there is none).
    pub fn start(
        sink: Option<Arc<dyn ProgressSink>>,
        meter: &OutputMeter,
        timeout: Duration,
    ) -> ProgressTicker {
        let Some(sink) = sink else {
            return ProgressTicker(None);
        };
        let meter = meter.clone();
        let started = Instant::now();
        ProgressTicker(Some(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(PROGRESS_INTERVAL);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                let elapsed = started.elapsed().as_secs_f64();
                sink.report(ProgressUpdate {
                    progress: (elapsed * 10.0).round() / 10.0,
                    total: Some(timeout.as_secs_f64()),
                    message: format!(
                        "running for {elapsed:.0} s; {} of output so far ({} lines)",
                        crate::format::plural(meter.bytes() as usize, "byte", "bytes"),
                        meter.lines()
                    ),
                });
            }
        })))
    }
}

impl Drop for ProgressTicker {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Debug, Default)]
    struct Kept(Mutex<Vec<ProgressUpdate>>);

    impl ProgressSink for Kept {
        fn report(&self, update: ProgressUpdate) {
            self.0.lock().unwrap().push(update);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn reports_every_second_with_the_output_so_far_until_dropped() {
        let kept = Arc::new(Kept::default());
        let meter = OutputMeter::default();
        let ticker = ProgressTicker::start(Some(kept.clone()), &meter, Duration::from_secs(60));
        tokio::time::sleep(Duration::from_millis(2500)).await;
        drop(ticker);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let updates = kept.0.lock().unwrap().clone();
        assert_eq!(updates.len(), 2, "{updates:?}");
        assert!(updates[0].progress < updates[1].progress);
        assert_eq!(updates[1].total, Some(60.0));
        assert_eq!(
            updates[1].message,
            "running for 2 s; 0 bytes of output so far (0 lines)"
        );
    }
}
