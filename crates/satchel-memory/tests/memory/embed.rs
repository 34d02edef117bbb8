//! The embedding model against known answers. Needs the model files:
//! `scripts/fetch-memory-model.sh` (or `SATCHEL_TEST_MODEL_DIR`).

use satchel_memory::embed::cosine;

#[test]
fn minilm_matches_the_reference_similarity() {
    let embedder = crate::support::embedder();
    let vectors = embedder
        .embed(&[
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "The stock market fell sharply today.",
        ])
        .unwrap();
    assert_eq!(vectors.len(), 3);
    for vector in &vectors {
        assert_eq!(vector.len(), 384);
        let norm: f32 = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    }
    let similar = cosine(&vectors[0], &vectors[1]);
    // sentence-transformers gives 0.755 for this pair.
    assert!((similar - 0.755).abs() < 0.005, "{similar}");
    let unrelated = cosine(&vectors[0], &vectors[2]);
    assert!(unrelated < 0.2, "{unrelated}");
}
