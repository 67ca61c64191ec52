use super::*;

fn ids<T: Clone>(v: &[(T, f64)]) -> Vec<T> {
    v.iter().map(|(t, _)| t.clone()).collect()
}

#[test]
fn fusion_keeps_an_agreed_order_and_scores_the_first_one() {
    let lexical = vec![("a", 9.0), ("b", 5.0), ("c", 1.0)];
    let fused = fuse(lexical, &[0.9, 0.5, 0.1], 0.5);
    assert_eq!(ids(&fused), ["a", "b", "c"]);
    assert!((fused[0].1 - 1.0).abs() < 1e-12, "{fused:?}");
    assert!(fused.windows(2).all(|w| w[0].1 > w[1].1));
    assert!(fused.iter().all(|(_, s)| (0.0..=1.0).contains(s)));
}

#[test]
fn fusion_lifts_a_candidate_the_meaning_puts_first() {
    // Lexical: a, b, c, d. By meaning: d first by far, the rest as before.
    let lexical = vec![("a", 4.0), ("b", 3.0), ("c", 2.0), ("d", 1.0)];
    let fused = fuse(lexical.clone(), &[0.3, 0.2, 0.1, 0.9], 0.5);
    // d: 1/64 + 1/61; b: 1/62 + 1/63; a: 1/61 + 1/62: a stays first, d
    // passes b and c.
    assert_eq!(ids(&fused), ["a", "d", "b", "c"]);
    // All weight on meaning: the dense order alone.
    let dense_only = fuse(lexical.clone(), &[0.3, 0.2, 0.1, 0.9], 0.0);
    assert_eq!(ids(&dense_only), ["d", "a", "b", "c"]);
    // All weight on words: the lexical order alone.
    let lexical_only = fuse(lexical, &[0.3, 0.2, 0.1, 0.9], 1.0);
    assert_eq!(ids(&lexical_only), ["a", "b", "c", "d"]);
}

#[test]
fn fusion_breaks_ties_by_the_lexical_order_and_sinks_the_unknown() {
    let lexical = vec![("a", 1.0), ("b", 1.0), ("c", 1.0)];
    let fused = fuse(lexical, &[f32::NEG_INFINITY, 0.5, 0.5], 0.5);
    // b: 1/62 + 1/61, c: 1/63 + 1/62, a: 1/61 + 1/63.
    assert_eq!(ids(&fused), ["b", "a", "c"]);
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
