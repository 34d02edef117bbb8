//! `/codestats` as a picture: runs and failures by language, and failures
//! by error category, over the last days, as horizontal bars in a PNG.
//!
//! Drawn on a plain RGB canvas with an embedded 8×8 bitmap font, so the
//! binary needs no font file and no system library to send it.

use font8x8::UnicodeFonts as _;
use satchel_builtins::code::CodeStats;

type Rgb = [u8; 3];

const BACKGROUND: Rgb = [255, 255, 255];
const INK: Rgb = [40, 40, 40];
const RUNS: Rgb = [76, 140, 214];
const FAILED: Rgb = [214, 84, 76];
const GRID: Rgb = [225, 225, 225];

/// Pixels per font pixel.
const SCALE: usize = 2;
const GLYPH: usize = 8 * SCALE;
const WIDTH: usize = 800;
const MARGIN: usize = 24;
const LABEL_WIDTH: usize = 14 * GLYPH;
const BAR_HEIGHT: usize = 22;
const ROW_GAP: usize = 10;

struct Canvas {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: usize, height: usize) -> Canvas {
        Canvas {
            width,
            height,
            pixels: BACKGROUND.repeat(width * height),
        }
    }

    fn rect(&mut self, x: usize, y: usize, w: usize, h: usize, color: Rgb) {
        for row in y..(y + h).min(self.height) {
            for col in x..(x + w).min(self.width) {
                let at = (row * self.width + col) * 3;
                self.pixels[at..at + 3].copy_from_slice(&color);
            }
        }
    }

    /// Writes `text` with its top-left corner at (`x`, `y`); characters the
    /// font lacks are drawn as `?`.
    fn text(&mut self, x: usize, y: usize, text: &str, color: Rgb) {
        for (index, c) in text.chars().enumerate() {
            let glyph = font8x8::BASIC_FONTS
                .get(c)
                .or_else(|| font8x8::BASIC_FONTS.get('?'))
                .unwrap_or([0; 8]);
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..8 {
                    if bits & (1 << col) != 0 {
                        self.rect(
                            x + index * GLYPH + col * SCALE,
                            y + row * SCALE,
                            SCALE,
                            SCALE,
                            color,
                        );
                    }
                }
            }
        }
    }

    fn png(&self) -> Result<Vec<u8>, png::EncodingError> {
        let mut bytes = Vec::new();
        {
            let width = u32::try_from(self.width).unwrap_or(u32::MAX);
            let height = u32::try_from(self.height).unwrap_or(u32::MAX);
            let mut encoder = png::Encoder::new(&mut bytes, width, height);
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            let mut writer = encoder.write_header()?;
            writer.write_image_data(&self.pixels)?;
        }
        Ok(bytes)
    }
}

/// One bar: a label, its length, and the part of it drawn as failed.
struct Bar {
    label: String,
    total: usize,
    failed: usize,
    note: String,
}

fn shorten(label: &str, chars: usize) -> String {
    if label.chars().count() <= chars {
        label.to_owned()
    } else {
        let mut short: String = label.chars().take(chars - 1).collect();
        short.push('~');
        short
    }
}

/// The chart of `stats` over `days` days, as PNG bytes; `None` when
/// there is nothing to draw.
pub fn code_stats_png(stats: &CodeStats, days: u32) -> Option<Vec<u8>> {
    if stats.total == 0 {
        return None;
    }
    let languages: Vec<Bar> = stats
        .languages
        .iter()
        .map(|language| Bar {
            label: language.language.clone(),
            total: language.total,
            failed: language.failures,
            note: format!("{} runs, {} failed", language.total, language.failures),
        })
        .collect();
    let categories: Vec<Bar> = stats
        .categories
        .iter()
        .map(|category| Bar {
            label: category.category.clone(),
            total: category.count,
            failed: category.count,
            note: format!("{} failures", category.count),
        })
        .collect();
    let rows = languages.len() + categories.len();
    let sections = 1 + usize::from(!categories.is_empty());
    let height = MARGIN * 2
        + GLYPH * 2
        + sections * (GLYPH + ROW_GAP * 2)
        + rows * (BAR_HEIGHT + ROW_GAP)
        + GLYPH;
    let mut canvas = Canvas::new(WIDTH, height);
    let mut y = MARGIN;
    canvas.text(
        MARGIN,
        y,
        &format!(
            "Code runs, last {days} days: {} ({} failed)",
            stats.total, stats.failures
        ),
        INK,
    );
    y += GLYPH * 2;
    let longest = languages
        .iter()
        .chain(&categories)
        .map(|bar| bar.total)
        .max()
        .unwrap_or(1)
        .max(1);
    let bar_room = WIDTH - MARGIN * 2 - LABEL_WIDTH - 12 * GLYPH;
    for (title, bars) in [
        ("By language", &languages),
        ("Failures by category", &categories),
    ] {
        if bars.is_empty() {
            continue;
        }
        y += ROW_GAP;
        canvas.text(MARGIN, y, title, INK);
        y += GLYPH + ROW_GAP;
        for bar in bars {
            let x = MARGIN + LABEL_WIDTH;
            canvas.text(
                MARGIN,
                y + (BAR_HEIGHT - GLYPH) / 2,
                &shorten(&bar.label, 13),
                INK,
            );
            canvas.rect(x, y, bar_room, BAR_HEIGHT, GRID);
            let length = (bar.total * bar_room).div_ceil(longest);
            let failed = (bar.failed * bar_room).div_ceil(longest).min(length);
            canvas.rect(x, y, length - failed, BAR_HEIGHT, RUNS);
            canvas.rect(x + length - failed, y, failed, BAR_HEIGHT, FAILED);
            canvas.text(
                x + bar_room + GLYPH / 2,
                y + (BAR_HEIGHT - GLYPH) / 2,
                &shorten(&bar.note, 11),
                INK,
            );
            y += BAR_HEIGHT + ROW_GAP;
        }
    }
    canvas.png().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use satchel_builtins::code::code_stats;
    use satchel_store::{CodeExecution, Timestamp};

    fn execution(language: &str, success: bool, category: Option<&str>) -> CodeExecution {
        CodeExecution {
            id: "x".into(),
            language: language.into(),
            runtime: "python3".into(),
            code: "print(1)".into(),
            stdout: String::new(),
            stderr: String::new(),
            exit_code: Some(i32::from(!success)),
            duration_ms: 12,
            success,
            error_category: category.map(str::to_owned),
            error_message: category.map(|_| "boom".to_owned()),
            sandbox: "none".into(),
            conversation_id: None,
            session_id: None,
            tool_call_id: None,
            trigger_message: None,
            reasoning: None,
            created_at: Timestamp::from_millis(0),
        }
    }

    #[test]
    fn a_chart_is_a_png_with_bars_in_both_colours() {
        let stats = code_stats(&[
            execution("python", true, None),
            execution("python", false, Some("syntax")),
            execution("javascript", true, None),
        ]);
        let png = code_stats_png(&stats, 7).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        reader.next_frame(&mut pixels).unwrap();
        let has = |color: Rgb| pixels.chunks(3).any(|p| p == color);
        assert!(has(RUNS) && has(FAILED) && has(INK));
        assert!(code_stats_png(&code_stats(&[]), 7).is_none());
    }
}
