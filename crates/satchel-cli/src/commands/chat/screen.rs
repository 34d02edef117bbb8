//! The REPL's terminal output: streamed markdown, tool calls with their
//! formatters, and a spinner with the elapsed time while tools run.
//!
//! Everything goes to stdout through one [`Screen`] behind a mutex, so the
//! spinner line is cleared before anything else is printed.

use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use satchel_agent::{AgentEvent, SideKind};

use super::markdown::MarkdownStream;

/// Spinner frames (braille dots).
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// What is on the terminal now.
pub(crate) struct Screen {
    color: bool,
    markdown: MarkdownStream,
    /// Tools running: (call id, tool name, started).
    running: Vec<(String, String, Instant)>,
    spinner_drawn: bool,
    frame: usize,
    /// True while a consent prompt owns the terminal.
    paused: bool,
    /// Thinking text is being shown (dim) and needs a newline after it.
    thinking: bool,
    /// Since when the model has been asked and nothing has arrived yet.
    waiting: Option<Instant>,
}

/// A handle shared by the event sink, the spinner task and consent.
#[derive(Clone)]
pub(crate) struct SharedScreen(Arc<Mutex<Screen>>);

impl SharedScreen {
    pub(crate) fn new(color: bool) -> SharedScreen {
        SharedScreen(Arc::new(Mutex::new(Screen {
            color,
            markdown: MarkdownStream::new(color),
            running: Vec::new(),
            spinner_drawn: false,
            frame: 0,
            paused: false,
            thinking: false,
            waiting: None,
        })))
    }

    /// Whether the screen shows colours.
    pub(crate) fn color(&self) -> bool {
        self.lock().color
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Screen> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Redraws the spinner every 100 ms while tools run.
    pub(crate) fn spawn_spinner(&self) -> tokio::task::JoinHandle<()> {
        let screen = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                screen.lock().draw_spinner();
            }
        })
    }

    /// Shows one event.
    pub(crate) fn show(&self, event: AgentEvent) {
        let mut screen = self.lock();
        screen.show(event);
    }
}

impl Screen {
    fn out(&mut self, text: &str) {
        self.clear_spinner();
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    fn clear_spinner(&mut self) {
        if self.spinner_drawn {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(b"\r\x1b[2K");
            let _ = out.flush();
            self.spinner_drawn = false;
        }
    }

    /// Starts (or stops) showing the time waited for the model's first
    /// token.
    pub(crate) fn waiting(&mut self, on: bool) {
        self.waiting = on.then(Instant::now);
        if !on {
            self.clear_spinner();
        }
    }

    fn draw_spinner(&mut self) {
        if self.paused {
            return;
        }
        if self.running.is_empty() {
            let Some(since) = self.waiting else {
                return;
            };
            self.frame = (self.frame + 1) % FRAMES.len();
            let line = format!(
                "\r\x1b[2K{} waiting for the model {:.1}s",
                FRAMES[self.frame],
                since.elapsed().as_secs_f64()
            );
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(self.paint("2", &line).as_bytes());
            let _ = out.flush();
            self.spinner_drawn = true;
            return;
        }
        let started = self
            .running
            .iter()
            .map(|r| r.2)
            .min()
            .unwrap_or_else(Instant::now);
        let names: Vec<&str> = self.running.iter().map(|r| r.1.as_str()).collect();
        self.frame = (self.frame + 1) % FRAMES.len();
        let line = format!(
            "\r\x1b[2K{} {} {:.1}s",
            FRAMES[self.frame],
            names.join(", "),
            started.elapsed().as_secs_f64()
        );
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(self.paint("2", &line).as_bytes());
        let _ = out.flush();
        self.spinner_drawn = true;
    }

    /// Stops the spinner while a prompt owns the terminal.
    pub(crate) fn pause(&mut self) {
        self.clear_spinner();
        self.flush_text();
        self.paused = true;
    }

    pub(crate) fn resume(&mut self) {
        self.paused = false;
    }

    /// Ends the answer's last line.
    pub(crate) fn flush_text(&mut self) {
        let rest = self.markdown.finish();
        if !rest.is_empty() {
            self.out(&rest);
            self.out("\n");
        }
        if self.thinking {
            self.thinking = false;
            self.out("\n");
        }
    }

    /// Prints a line of its own (a notice, a command's output).
    pub(crate) fn line(&mut self, text: &str) {
        self.flush_text();
        self.out(text);
        self.out("\n");
    }

    fn show(&mut self, event: AgentEvent) {
        // The model answered: the wait for the first token is over.
        if matches!(
            event,
            AgentEvent::TextDelta(_)
                | AgentEvent::ThinkingDelta(_)
                | AgentEvent::ToolStarted { .. }
        ) {
            self.waiting = None;
        }
        match event {
            AgentEvent::TextDelta(text) => {
                if self.thinking {
                    self.thinking = false;
                    self.out("\n");
                }
                let rendered = self.markdown.push(&text);
                if !rendered.is_empty() {
                    self.out(&rendered);
                }
            }
            AgentEvent::ThinkingDelta(text) => {
                self.thinking = true;
                let text = self.paint("2;3", &text);
                self.out(&text);
            }
            AgentEvent::ToolStarted {
                call_id,
                tool,
                display,
            } => {
                let line = format!("{} {display}", self.paint("1;34", "▸"));
                self.line(&line);
                self.running.push((call_id, tool, Instant::now()));
            }
            AgentEvent::ToolFinished {
                call_id,
                display,
                is_error,
                duration,
                ..
            } => {
                self.running.retain(|r| r.0 != call_id);
                let mark = if is_error {
                    self.paint("31", "✗")
                } else {
                    self.paint("32", "✓")
                };
                let timing = self.paint("2", &format!("({} ms)", duration.as_millis()));
                let body = display.replace('\n', "\n  ");
                self.line(&format!("{mark} {body} {timing}"));
            }
            AgentEvent::Side { kind, text } => {
                let label = match kind {
                    SideKind::Goal => "goal",
                    SideKind::Objective => "objective",
                    SideKind::Title => "title",
                    SideKind::Summary => "summary of older turns",
                };
                let text = if kind == SideKind::Summary {
                    format!("{} chars", text.chars().count())
                } else {
                    text
                };
                let line = self.paint("2", &format!("{label}: {text}"));
                self.line(&line);
            }
            AgentEvent::Notice(text) => {
                let line = self.paint("33", &format!("note: {text}"));
                self.line(&line);
            }
            AgentEvent::TurnStarted { .. }
            | AgentEvent::TurnFinished { .. }
            | AgentEvent::AnswerComplete { .. } => {}
        }
    }
}
