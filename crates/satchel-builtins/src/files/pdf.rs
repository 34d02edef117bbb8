//! A PDF's text for `read`, by `pdf-extract` (over `lopdf`), page by
//! page with a marker line before each page. The extractor is not
//! hardened against every malformed file and may panic on one; the panic
//! is caught and reported as a file whose text cannot be extracted, so a
//! PDF never takes the process down.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Largest PDF whose text is extracted (it is read whole into memory).
pub(crate) const MAX_PDF_BYTES: u64 = 50 * 1024 * 1024;

/// A PDF's text and its number of pages.
pub(crate) struct PdfText {
    /// Every page's text after a `--- page N ---` line.
    pub(crate) text: String,
    pub(crate) pages: usize,
}

/// The text of the PDF in `bytes`, or why it cannot be had.
pub(crate) fn text(bytes: &[u8]) -> Result<PdfText, String> {
    let pages = catch_unwind(AssertUnwindSafe(|| {
        pdf_extract::extract_text_from_mem_by_pages(bytes)
    }))
    .map_err(|_| "the PDF extractor failed on this file".to_owned())?
    .map_err(|error| error.to_string())?;
    let mut text = String::new();
    for (number, page) in pages.iter().enumerate() {
        text.push_str(&format!("--- page {} ---\n", number + 1));
        let page = page.trim_matches('\n');
        if !page.is_empty() {
            text.push_str(page);
            text.push('\n');
        }
    }
    if pages.iter().all(|page| page.trim().is_empty()) {
        return Err(format!(
            "its {} pages hold no text layer (a scan, perhaps)",
            pages.len()
        ));
    }
    Ok(PdfText {
        text,
        pages: pages.len(),
    })
}
