//! The seed domains a node crawls at start: `crawl.seeds` and the
//! `crawl.seed_files` (one domain a line, `#` comments), read within limits.

use crate::config::{ConfigError, CrawlConfig};
use crate::identity;

/// Largest `crawl.seed_files` file read, in bytes.
pub const MAX_SEED_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Most seed domains (`crawl.seeds` and the seed files together).
pub const MAX_SEED_DOMAINS: usize = 100_000;

/// The domains to crawl at start: `crawl.seeds`, then every domain in
/// `crawl.seed_files` (normalised, in file order), each once.
///
/// # Errors
/// [`ConfigError::SeedFile`] naming the file (and the line) when a file
/// cannot be read, is over [`MAX_SEED_FILE_BYTES`], holds a line that
/// is not a domain name, or the seeds are more than
/// [`MAX_SEED_DOMAINS`].
pub fn seed_domains(config: &CrawlConfig) -> Result<Vec<String>, ConfigError> {
    use std::io::Read as _;
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<String> = Vec::new();
    for d in &config.seeds {
        if seen.insert(d.clone()) {
            out.push(d.clone());
        }
    }
    for path in &config.seed_files {
        let fail = |line: Option<usize>, message: String| ConfigError::SeedFile {
            path: path.clone(),
            line,
            message,
        };
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_SEED_FILE_BYTES + 1).read_to_string(&mut text))
            .map_err(|e| fail(None, e.to_string()))?;
        if text.len() as u64 > MAX_SEED_FILE_BYTES {
            return Err(fail(
                None,
                format!("larger than {MAX_SEED_FILE_BYTES} bytes"),
            ));
        }
        for (i, line) in text.lines().enumerate() {
            let line_text = line.split('#').next().unwrap_or_default().trim();
            if line_text.is_empty() {
                continue;
            }
            let domain = identity::normalise_domain(line_text)
                .map_err(|e| fail(Some(i + 1), e.to_string()))?;
            if seen.insert(domain.clone()) {
                out.push(domain);
            }
            if out.len() > MAX_SEED_DOMAINS {
                return Err(fail(
                    Some(i + 1),
                    format!("more than {MAX_SEED_DOMAINS} seed domains in all"),
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_files_add_their_domains_once_and_name_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("org1.domains");
        std::fs::write(
            &a,
            "# org1\nOne.org1.test\n\n  two.org1.test.  # trailing dot\nagent:three.org1.test\n",
        )
        .unwrap();
        let b = dir.path().join("more.domains");
        std::fs::write(&b, "two.org1.test\nfour.org2.test\n").unwrap();
        let config = CrawlConfig {
            seeds: vec!["zero.org0.test".into()],
            seed_files: vec![a, b],
            ..CrawlConfig::default()
        };
        assert_eq!(
            seed_domains(&config).unwrap(),
            [
                "zero.org0.test",
                "one.org1.test",
                "two.org1.test",
                "three.org1.test",
                "four.org2.test"
            ]
        );

        let bad = dir.path().join("bad.domains");
        std::fs::write(&bad, "ok.org1.test\nnot a domain\n").unwrap();
        let crawl = CrawlConfig {
            seed_files: vec![bad],
            ..CrawlConfig::default()
        };
        let err = seed_domains(&crawl).unwrap_err().to_string();
        assert!(
            err.contains("crawl.seed_files") && err.contains("bad.domains line 2"),
            "{err}"
        );
        let crawl = CrawlConfig {
            seed_files: vec![dir.path().join("absent.domains")],
            ..CrawlConfig::default()
        };
        let err = seed_domains(&crawl).unwrap_err().to_string();
        assert!(err.contains("absent.domains"), "{err}");

        let big = dir.path().join("big.domains");
        let line = "a-long-label-to-fill-the-file.org1.test\n";
        std::fs::write(
            &big,
            line.repeat((MAX_SEED_FILE_BYTES as usize) / line.len() + 1),
        )
        .unwrap();
        let crawl = CrawlConfig {
            seed_files: vec![big],
            ..CrawlConfig::default()
        };
        let err = seed_domains(&crawl).unwrap_err().to_string();
        assert!(err.contains("larger than"), "{err}");
    }
}
