use super::*;

fn ids<T: Clone>(v: &[(T, f64)]) -> Vec<T> {
    v.iter().map(|(t, _)| t.clone()).collect()
}

#[test]
fn fusion_keeps_an_agreed_order_and_scores_the_first_one() {
    let lexical = vec![("a", 9.0), ("b", 5.0), ("c", 1.0)];
    let fused = fuse(lexical, &[1.0, 0.5, 0.1], 0.5);
    assert_eq!(ids(&fused), ["a", "b", "c"]);
    assert!((fused[0].1 - 1.0).abs() < 1e-12, "{fused:?}");
    assert!(fused.windows(2).all(|w| w[0].1 > w[1].1));
    assert!(fused.iter().all(|(_, s)| (0.0..=1.0).contains(s)));
}

#[test]
fn fusion_weighs_how_far_ahead_the_words_are() {
    // b is a near word match and far closer in meaning: it passes a.
    let near = vec![("a", 10.0), ("b", 9.0), ("c", 1.0)];
    let fused = fuse(near, &[0.1, 0.9, 0.5], 0.7);
    // a: 0.7 + 0.03 = 0.73; b: 0.63 + 0.27 = 0.90; c: 0.07 + 0.15.
    assert_eq!(ids(&fused), ["b", "a", "c"]);
    assert!((fused[0].1 - 0.9).abs() < 1e-6, "{fused:?}");
    // A clear word match keeps its place against the same meanings.
    let clear = vec![("a", 10.0), ("b", 3.0), ("c", 1.0)];
    assert_eq!(
        ids(&fuse(clear.clone(), &[0.1, 0.9, 0.5], 0.7)),
        ["a", "b", "c"]
    );
    // All weight on meaning: the dense order; all on words: the lexical.
    assert_eq!(
        ids(&fuse(clear.clone(), &[0.1, 0.9, 0.5], 0.0)),
        ["b", "c", "a"]
    );
    assert_eq!(ids(&fuse(clear, &[0.1, 0.9, 0.5], 1.0)), ["a", "b", "c"]);
}

#[test]
fn fusion_breaks_ties_by_the_lexical_order_and_counts_no_negative_meaning() {
    let lexical = vec![("a", 1.0), ("b", 1.0), ("c", 1.0)];
    let fused = fuse(lexical, &[f32::NEG_INFINITY, 0.5, 0.5], 0.5);
    assert_eq!(ids(&fused), ["b", "c", "a"]);
    assert!((fused[2].1 - 0.5).abs() < 1e-12, "{fused:?}");
    // Odd inputs stay in 0..1: no lexical score, a NaN weight or cosine.
    let odd = fuse(
        vec![("x", 0.0), ("y", f64::NAN)],
        &[f32::NAN, 2.0],
        f64::NAN,
    );
    assert!(odd.iter().all(|(_, s)| (0.0..=1.0).contains(s)), "{odd:?}");
    assert!(fuse(Vec::<(u8, f64)>::new(), &[], 0.5).is_empty());
}

#[test]
#[should_panic(expected = "one cosine per candidate")]
fn fusion_wants_one_cosine_per_candidate() {
    let _ = fuse(vec![("a", 1.0)], &[], 0.5);
}

#[test]
fn vectors_are_scaled_to_unit_length() {
    let mut v = vec![3.0, 4.0];
    normalise(&mut v);
    assert!((dot(&v, &v) - 1.0).abs() < 1e-6);
    assert_eq!(v, [0.6, 0.8]);
    let mut zero = vec![0.0; 3];
    normalise(&mut zero);
    assert_eq!(zero, [0.0; 3]);
    let mut bad = vec![f32::NAN, 1.0];
    normalise(&mut bad);
    assert_eq!(bad, [0.0, 0.0]);
}

/// A safetensors file's bytes with `header` as its JSON header.
fn safetensors(header: &str, data: usize) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.resize(out.len() + data, 0);
    out
}

#[test]
fn the_embedding_shape_is_read_from_the_safetensors_header() {
    let ok = safetensors(
        r#"{"embeddings":{"dtype":"F32","shape":[3,2],"data_offsets":[0,24]}}"#,
        24,
    );
    assert_eq!(safetensors_shape(&ok), Ok((3, 2)));
    let other_name = safetensors(
        r#"{"embedding.weight":{"dtype":"F32","shape":[5,4],"data_offsets":[0,80]}}"#,
        80,
    );
    assert_eq!(safetensors_shape(&other_name), Ok((5, 4)));
    for (bytes, expected) in [
        (vec![1, 2, 3], "shorter than its header"),
        ((1u64 << 40).to_le_bytes().to_vec(), "more than"),
        (
            {
                let mut b = 100u64.to_le_bytes().to_vec();
                b.extend_from_slice(b"{}");
                b
            },
            "ends inside its header",
        ),
        (safetensors("not json", 0), "not JSON"),
        (
            safetensors(r#"{"weights":{}}"#, 0),
            "no `embeddings` tensor",
        ),
        (safetensors(r#"{"embeddings":{}}"#, 0), "no shape"),
        (
            safetensors(r#"{"embeddings":{"shape":[2,2,2]}}"#, 0),
            "not 2-D",
        ),
    ] {
        let err = safetensors_shape(&bytes).unwrap_err();
        assert!(err.contains(expected), "{err:?} should say {expected:?}");
    }
}

#[test]
fn a_model_file_is_read_within_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, vec![7u8; 100]).unwrap();
    assert_eq!(read_bounded(&path, 100).unwrap().len(), 100);
    match read_bounded(&path, 99) {
        Err(SemanticError::TooLarge { bytes, max, .. }) => {
            assert_eq!((bytes, max), (100, 99));
        }
        other => panic!("{other:?}"),
    }
    match read_bounded(&dir.path().join("absent"), 10) {
        Err(e @ SemanticError::Read { .. }) => {
            assert!(e.to_string().contains("absent"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_directory_without_the_model_files_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let err = Semantic::load(dir.path()).unwrap_err();
    assert!(
        err.to_string().contains("tokenizer.json"),
        "{err}: the first missing file is named"
    );
}

#[cfg(not(feature = "semantic"))]
#[test]
fn without_the_feature_a_model_is_refused_with_how_to_get_one() {
    let dir = tempfile::tempdir().unwrap();
    for (name, _) in MODEL_FILES {
        std::fs::write(dir.path().join(name), b"{}").unwrap();
    }
    let err = Semantic::load(dir.path()).unwrap_err();
    assert!(matches!(err, SemanticError::NotBuilt), "{err}");
    assert!(err.to_string().contains("--features semantic"), "{err}");
}
