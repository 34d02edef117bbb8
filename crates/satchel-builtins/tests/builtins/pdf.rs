//! `read` of a PDF: its text, page by page, numbered and paged like a
//! text file; a PDF without text and a broken one are described, never
//! dumped, and never take the process down.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use serde_json::json;

use super::files::{Files, text};

/// A PDF of one page per entry of `pages`, each line of a page drawn in
/// Helvetica, with a correct cross-reference table.
fn pdf(pages: &[&[&str]]) -> Vec<u8> {
    let mut objects: Vec<String> = Vec::new();
    let page_ids: Vec<usize> = (0..pages.len()).map(|i| 4 + 2 * i).collect();
    objects.push("<< /Type /Catalog /Pages 2 0 R >>".into());
    objects.push(format!(
        "<< /Type /Pages /Kids [{}] /Count {} >>",
        page_ids
            .iter()
            .map(|id| format!("{id} 0 R"))
            .collect::<Vec<_>>()
            .join(" "),
        pages.len()
    ));
    objects.push(
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".into(),
    );
    for (i, lines) in pages.iter().enumerate() {
        let mut stream = String::from("BT /F1 12 Tf 72 720 Td 14 TL\n");
        for line in *lines {
            stream.push_str(&format!("({line}) Tj T*\n"));
        }
        stream.push_str("ET");
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            5 + 2 * i
        ));
        objects.push(format!(
            "<< /Length {} >>\nstream\n{stream}\nendstream",
            stream.len()
        ));
    }
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{object}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

#[tokio::test]
async fn a_pdf_is_read_as_its_text_page_by_page() {
    let files = Files::new();
    std::fs::write(
        files.path("report.pdf"),
        pdf(&[&["Quarterly report", "Revenue rose"], &["Second page here"]]),
    )
    .unwrap();
    let whole = text(&files.call("read", json!({"file_path": "report.pdf"})).await);
    assert!(
        whole.contains("Text extracted from a PDF of 2 pages"),
        "{whole}"
    );
    assert!(whole.contains("\t--- page 1 ---\n"), "{whole}");
    assert!(whole.contains("Quarterly report"), "{whole}");
    assert!(whole.contains("Revenue rose"), "{whole}");
    assert!(whole.contains("\t--- page 2 ---\n"), "{whole}");
    assert!(whole.contains("Second page here"), "{whole}");
    // Paged like a text file.
    let first = text(
        &files
            .call("read", json!({"file_path": "report.pdf", "limit": 1}))
            .await,
    );
    assert!(first.contains("lines 1-1 of"), "{first}");
    assert!(first.contains("call again with offset 2"), "{first}");
    assert!(!first.contains("Second page"), "{first}");
}

#[tokio::test]
async fn a_pdf_without_text_or_a_broken_one_is_described() {
    let files = Files::new();
    std::fs::write(files.path("scan.pdf"), pdf(&[&[]])).unwrap();
    let scan = text(&files.call("read", json!({"file_path": "scan.pdf"})).await);
    assert!(scan.contains("text cannot be extracted"), "{scan}");
    assert!(scan.contains("no text layer"), "{scan}");
    let mut broken = pdf(&[&["hello"]]);
    broken.truncate(broken.len() / 2);
    std::fs::write(files.path("broken.pdf"), &broken).unwrap();
    let out = files.call("read", json!({"file_path": "broken.pdf"})).await;
    assert!(!out.is_error, "{out:?}");
    let described = text(&out);
    assert!(described.contains("PDF of"), "{described}");
    assert!(!described.contains("%PDF"), "{described}");
}
