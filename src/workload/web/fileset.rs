//! The files a web run requests: their paths, sizes, checksums, size
//! classes and request weights, and the one draw of the next file.
//!
//! - `webbench`: WebBench's static working set ZD_STATIC_V11 as a web
//!   server lab's static test uses it — 100 files, 2,500,000 bytes in all.
//!   WebBench does not publish the sizes of its files, so perflab's are a
//!   geometric series from the smallest to the largest in the ratio 1:1000
//!   (file `i` of 0…99 is `a·1000^(i/99)` bytes, `a` chosen so the sizes
//!   sum to the total; rounding is settled on the largest file), each file
//!   requested equally often.
//! - `specweb:DIRS`: SPECweb96/99's file set. Each directory holds 36
//!   files in four classes of nine: `102·k`, `1,024·k`, `10,240·k` and
//!   `102,400·k` bytes for `k` = 1…9. Classes are requested 35% / 50% /
//!   14% / 1%; inside a class the nine files by SPECweb99's published
//!   frequencies (3.9, 5.9, 8.8, 17.7, 35.3, 11.8, 7.1, 5.0, 4.4%, file 5
//!   the most requested); directories by Zipf's law with α = 1 (directory
//!   `d` of 1…DIRS in proportion to 1/d).
//! - `tree:DIR`: an existing tree, walked once (sizes and CRC-32s), every
//!   file requested equally often.
//! - `--urls FILE`: paths and weights, one per line; sizes unknown, so
//!   only the status is checked.
//!
//! Generated files' bytes derive from the file's index alone
//! ([`generated_content`]), so their checksums are known without keeping
//! the files in memory. Sizes are grouped into SPECweb's four classes
//! (under 1 KiB, 10 KiB, 100 KiB, and beyond), by which latency is shown.

use crate::error::PlanError;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file set a run requests, as the user named it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileSetSpec {
    /// WebBench's static set: 100 files, 2.5 MB.
    Webbench,
    /// SPECweb's set in this many directories.
    Specweb { dirs: u32 },
    /// The files of an existing directory.
    Tree { dir: PathBuf },
    /// Paths and weights from a file.
    Urls { file: PathBuf },
}

/// WebBench's set: its file count and total bytes.
pub(crate) const WEBBENCH_FILES: usize = 100;
pub(crate) const WEBBENCH_BYTES: u64 = 2_500_000;
/// The largest SPECweb set perflab generates (about 5 GB).
pub(crate) const SPECWEB_MAX_DIRS: u32 = 1000;
/// The most files a tree or a URL list may hold.
pub(crate) const MAX_FILES: usize = 1_000_000;
/// SPECweb's class shares of requests, percent.
pub const SPECWEB_CLASS_SHARES: [f64; 4] = [35.0, 50.0, 14.0, 1.0];
/// SPECweb99's request frequencies of the nine files of a class, percent.
pub(crate) const SPECWEB_FILE_SHARES: [f64; 9] = [3.9, 5.9, 8.8, 17.7, 35.3, 11.8, 7.1, 5.0, 4.4];
/// The smallest file of each SPECweb class, bytes (file k is k times it).
const SPECWEB_UNITS: [u64; 4] = [102, 1024, 10_240, 102_400];
/// The size classes' names, by the classes' upper bounds (1 KiB, 10 KiB, 100 KiB).
pub const CLASS_NAMES: [&str; 4] = ["<1KiB", "1-10KiB", "10-100KiB", ">=100KiB"];

impl FileSetSpec {
    /// Parses `--fileset` (`webbench`, `specweb:DIRS`, `tree:DIR`).
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        if text == "webbench" {
            return Ok(FileSetSpec::Webbench);
        }
        if let Some(n) = text.strip_prefix("specweb:") {
            let dirs = n
                .parse::<u32>()
                .ok()
                .filter(|d| (1..=SPECWEB_MAX_DIRS).contains(d))
                .ok_or_else(|| {
                    format!("'{n}' is not a directory count from 1 to {SPECWEB_MAX_DIRS}")
                })?;
            return Ok(FileSetSpec::Specweb { dirs });
        }
        if let Some(dir) = text.strip_prefix("tree:") {
            if dir.is_empty() {
                return Err("'tree:' needs a directory, e.g. tree:/var/www/html".to_string());
            }
            return Ok(FileSetSpec::Tree {
                dir: PathBuf::from(dir),
            });
        }
        Err(format!(
            "'{text}' is not a file set; use webbench, specweb:DIRS or tree:DIR"
        ))
    }

    /// Whether perflab makes the files itself (and can write them anywhere).
    pub(crate) fn generated(&self) -> bool {
        matches!(self, FileSetSpec::Webbench | FileSetSpec::Specweb { .. })
    }
}

/// One file of the set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebFile {
    /// Its path below the base URL (no leading `/`), percent-encoded.
    pub path: String,
    /// Its size in bytes, when known.
    pub(crate) size: Option<u64>,
    /// The CRC-32 of its bytes, when known.
    pub(crate) checksum: Option<u32>,
    /// Its size class (an index into [`CLASS_NAMES`]).
    pub class: usize,
    /// Its share of requests (any positive scale).
    pub weight: f64,
    /// Where a tree's file is on disk (to copy it into a managed server).
    pub(crate) source: Option<PathBuf>,
    /// Generated files: the index their bytes derive from.
    pub(crate) seed: Option<u64>,
}

/// The files of a run and the draw of the next.
#[derive(Debug, Clone)]
pub struct FileSet {
    pub files: Vec<WebFile>,
    /// Cumulative weights, normalised to end at 1.
    cumulative: Vec<f64>,
}

/// The size class of a file of `size` bytes.
pub(crate) fn class_of(size: u64) -> usize {
    match size {
        0..=1023 => 0,
        1024..=10_239 => 1,
        10_240..=102_399 => 2,
        _ => 3,
    }
}

/// The bytes of generated file `seed`, `size` long.
pub(crate) fn generated_content(seed: u64, size: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; usize::try_from(size).unwrap_or(usize::MAX)];
    SmallRng::seed_from_u64(seed ^ 0x0070_6572_666c_6162).fill_bytes(&mut bytes);
    bytes
}

impl FileSet {
    /// Builds the set a spec names: generated sets are computed, a tree
    /// is walked and read, a URL list is parsed.
    pub fn build(spec: &FileSetSpec) -> Result<Self, PlanError> {
        let files = match spec {
            FileSetSpec::Webbench => generate(
                webbench_sizes()
                    .into_iter()
                    .enumerate()
                    .map(|(i, size)| (format!("webbench/file{i:03}.html"), size, 1.0)),
            ),
            FileSetSpec::Specweb { dirs } => generate(specweb_files(*dirs)),
            FileSetSpec::Tree { dir } => walk_tree(dir)?,
            FileSetSpec::Urls { file } => read_urls(file)?,
        };
        Ok(FileSet::of(files))
    }

    /// A set of these files (at least one, each with a positive weight).
    pub(crate) fn of(files: Vec<WebFile>) -> Self {
        let total: f64 = files.iter().map(|f| f.weight).sum();
        let mut sum = 0.0;
        let cumulative = files
            .iter()
            .map(|f| {
                sum += f.weight;
                sum / total
            })
            .collect();
        FileSet { files, cumulative }
    }

    /// Draws the next file's index.
    pub(crate) fn draw(&self, rng: &mut SmallRng) -> usize {
        let u: f64 = rng.gen();
        self.cumulative
            .partition_point(|&c| c <= u)
            .min(self.files.len() - 1)
    }

    /// The index of the file drawn most often.
    pub(crate) fn most_requested(&self) -> usize {
        self.files
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.weight.total_cmp(&b.1.weight))
            .map_or(0, |(i, _)| i)
    }

    /// Each class's share of requests (0 to 1), by [`CLASS_NAMES`].
    pub(crate) fn class_shares(&self) -> [f64; 4] {
        let total: f64 = self.files.iter().map(|f| f.weight).sum();
        let mut shares = [0.0; 4];
        for f in &self.files {
            shares[f.class] += f.weight / total;
        }
        shares
    }

    /// Bytes of all the files whose size is known.
    pub(crate) fn total_bytes(&self) -> u64 {
        self.files.iter().filter_map(|f| f.size).sum()
    }

    /// Writes the set's files below `root` (generated bytes, or a tree's
    /// files copied), world-readable.
    pub fn write_into(&self, root: &Path) -> anyhow::Result<()> {
        use anyhow::Context;
        for file in &self.files {
            let path = root.join(decode_path(&file.path));
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create {}", parent.display()))?;
            }
            match (&file.source, file.seed, file.size) {
                (Some(source), _, _) => {
                    std::fs::copy(source, &path).with_context(|| {
                        format!("cannot copy {} to {}", source.display(), path.display())
                    })?;
                }
                (None, Some(seed), Some(size)) => {
                    std::fs::write(&path, generated_content(seed, size))
                        .with_context(|| format!("cannot write {}", path.display()))?;
                }
                _ => anyhow::bail!("{} has no content to write", file.path),
            }
        }
        Ok(())
    }
}

/// WebBench's 100 sizes, summing to 2,500,000 bytes.
fn webbench_sizes() -> Vec<u64> {
    let ratio = 1000f64.powf(1.0 / (WEBBENCH_FILES - 1) as f64);
    let raw: Vec<f64> = (0..WEBBENCH_FILES).map(|i| ratio.powi(i as i32)).collect();
    let scale = WEBBENCH_BYTES as f64 / raw.iter().sum::<f64>();
    let mut sizes: Vec<u64> = raw.iter().map(|r| (r * scale).round() as u64).collect();
    let sum: u64 = sizes.iter().sum();
    let last = sizes.len() - 1;
    sizes[last] = (sizes[last] + WEBBENCH_BYTES).saturating_sub(sum);
    sizes
}

/// SPECweb's files: (path, size, weight) for `dirs` directories.
fn specweb_files(dirs: u32) -> Vec<(String, u64, f64)> {
    let harmonic: f64 = (1..=dirs).map(|d| 1.0 / f64::from(d)).sum();
    let file_total: f64 = SPECWEB_FILE_SHARES.iter().sum();
    let mut out = Vec::with_capacity(dirs as usize * 36);
    for d in 1..=dirs {
        let dir_share = 1.0 / f64::from(d) / harmonic;
        for (class, unit) in SPECWEB_UNITS.iter().enumerate() {
            for (k, file_share) in SPECWEB_FILE_SHARES.iter().enumerate() {
                out.push((
                    format!("specweb/dir{:05}/class{class}_{}", d - 1, k + 1),
                    unit * (k as u64 + 1),
                    dir_share * SPECWEB_CLASS_SHARES[class] / 100.0 * file_share / file_total,
                ));
            }
        }
    }
    out
}

/// Generated files with their checksums.
fn generate(files: impl IntoIterator<Item = (String, u64, f64)>) -> Vec<WebFile> {
    files
        .into_iter()
        .enumerate()
        .map(|(i, (path, size, weight))| {
            let seed = i as u64;
            WebFile {
                path,
                size: Some(size),
                checksum: Some(crc32fast::hash(&generated_content(seed, size))),
                class: class_of(size),
                weight,
                source: None,
                seed: Some(seed),
            }
        })
        .collect()
}

/// The regular files below `dir`, read once for their checksums.
fn walk_tree(dir: &Path) -> Result<Vec<WebFile>, PlanError> {
    let bad = |why: String| {
        PlanError::flag(
            "--fileset",
            why,
            "give tree:DIR with the files the server serves",
        )
    };
    let meta = std::fs::metadata(dir).map_err(|e| bad(format!("{}: {e}", dir.display())))?;
    if !meta.is_dir() {
        return Err(bad(format!("{} is not a directory", dir.display())));
    }
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        let entries = std::fs::read_dir(&at).map_err(|e| bad(format!("{}: {e}", at.display())))?;
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() {
                if files.len() >= MAX_FILES {
                    return Err(bad(format!(
                        "{} holds more than {MAX_FILES} files",
                        dir.display()
                    )));
                }
                let (size, checksum) =
                    checksum_of(&path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
                let relative = path.strip_prefix(dir).unwrap_or(&path);
                files.push(WebFile {
                    path: encode_path(&relative.to_string_lossy()),
                    size: Some(size),
                    checksum: Some(checksum),
                    class: class_of(size),
                    weight: 1.0,
                    source: Some(path),
                    seed: None,
                });
            }
        }
    }
    if files.is_empty() {
        return Err(bad(format!("{} holds no files", dir.display())));
    }
    Ok(files)
}

/// A file's size and CRC-32, read in pieces: a large file costs a
/// buffer, not its size in memory.
fn checksum_of(path: &Path) -> std::io::Result<(u64, u32)> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut size = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => return Ok((size, hasher.finalize())),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        size = size.saturating_add(n as u64);
    }
}

/// Parses a URL list: `PATH [WEIGHT]` per line, `#` comments, blank lines.
pub(crate) fn parse_urls(text: &str, name: &str) -> Result<Vec<WebFile>, PlanError> {
    let bad = |line: usize, why: String| {
        PlanError::flag(
            "--urls",
            format!("{name} line {line}: {why}"),
            "each line is /PATH [WEIGHT], e.g. /index.html 10",
        )
    };
    let mut files = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let path = words.next().unwrap_or_default();
        let Some(path) = path.strip_prefix('/') else {
            return Err(bad(n + 1, format!("'{path}' does not start with /")));
        };
        if path.bytes().any(|b| b.is_ascii_control()) {
            return Err(bad(n + 1, "the path holds control characters".to_string()));
        }
        let weight = match words.next() {
            None => 1.0,
            Some(w) => w
                .parse::<f64>()
                .ok()
                .filter(|w| w.is_finite() && *w > 0.0)
                .ok_or_else(|| bad(n + 1, format!("'{w}' is not a positive weight")))?,
        };
        if let Some(extra) = words.next() {
            return Err(bad(n + 1, format!("'{extra}' after the weight")));
        }
        if files.len() >= MAX_FILES {
            return Err(bad(n + 1, format!("more than {MAX_FILES} paths")));
        }
        files.push(WebFile {
            path: path.to_string(),
            size: None,
            checksum: None,
            class: 0,
            weight,
            source: None,
            seed: None,
        });
    }
    if files.is_empty() {
        return Err(PlanError::flag(
            "--urls",
            format!("{name} lists no path"),
            "give one /PATH [WEIGHT] per line",
        ));
    }
    Ok(files)
}

fn read_urls(file: &Path) -> Result<Vec<WebFile>, PlanError> {
    // A URL list of a million paths is some tens of MiB.
    let text = crate::util::read_text_bounded(file, 64 << 20).map_err(|e| {
        PlanError::flag(
            "--urls",
            format!("{}: {e}", file.display()),
            "give a readable text file",
        )
    })?;
    parse_urls(&text, &file.display().to_string())
}

/// A relative file path as a URL path: bytes outside RFC 3986's
/// unreserved set and `/` percent-encoded.
fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The file path a URL path encoded by [`encode_path`] names.
fn decode_path(path: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(
        crate::util::percent_decoded_bytes(path),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webbench_has_its_count_and_total() {
        let set = FileSet::build(&FileSetSpec::Webbench).unwrap();
        assert_eq!(set.files.len(), WEBBENCH_FILES);
        assert_eq!(set.total_bytes(), WEBBENCH_BYTES);
        let sizes: Vec<u64> = set.files.iter().filter_map(|f| f.size).collect();
        assert!(sizes.windows(2).all(|w| w[0] <= w[1]), "{sizes:?}");
        assert!(sizes[0] > 100 && sizes[99] > 500 * sizes[0], "{sizes:?}");
    }

    #[test]
    fn specweb_has_its_classes_and_shares() {
        let set = FileSet::build(&FileSetSpec::Specweb { dirs: 2 }).unwrap();
        assert_eq!(set.files.len(), 72);
        let sizes: Vec<u64> = set.files[..36].iter().filter_map(|f| f.size).collect();
        assert_eq!(&sizes[..3], &[102, 204, 306]);
        assert_eq!(sizes[35], 921_600);
        let shares = set.class_shares();
        for (got, want) in shares.iter().zip(SPECWEB_CLASS_SHARES) {
            assert!((got * 100.0 - want).abs() < 1e-9, "{shares:?}");
        }
        // Zipf over directories: the first twice as often as the second.
        let dir = |d: &str| -> f64 {
            set.files
                .iter()
                .filter(|f| f.path.contains(d))
                .map(|f| f.weight)
                .sum()
        };
        assert!((dir("dir00000") / dir("dir00001") - 2.0).abs() < 1e-9);
        // Draws follow the weights.
        let mut rng = SmallRng::seed_from_u64(1);
        let mut seen = [0u32; 4];
        for _ in 0..100_000 {
            seen[set.files[set.draw(&mut rng)].class] += 1;
        }
        for (n, want) in seen.iter().zip(SPECWEB_CLASS_SHARES) {
            assert!((f64::from(*n) / 1000.0 - want).abs() < 0.5, "{seen:?}");
        }
    }

    #[test]
    fn a_trees_file_is_checksummed_in_pieces_as_if_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            checksum_of(&path).unwrap(),
            (200_000, crc32fast::hash(&bytes))
        );
        std::fs::write(&path, b"").unwrap();
        assert_eq!(checksum_of(&path).unwrap(), (0, crc32fast::hash(b"")));
    }

    #[test]
    fn generated_bytes_match_their_checksums_and_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let set = FileSet::build(&FileSetSpec::Specweb { dirs: 1 }).unwrap();
        set.write_into(dir.path()).unwrap();
        for f in &set.files {
            let bytes = std::fs::read(dir.path().join(&f.path)).unwrap();
            assert_eq!(Some(bytes.len() as u64), f.size);
            assert_eq!(Some(crc32fast::hash(&bytes)), f.checksum);
        }
        let tree = FileSet::build(&FileSetSpec::Tree {
            dir: dir.path().into(),
        })
        .unwrap();
        assert_eq!(tree.files.len(), 36);
        assert_eq!(tree.total_bytes(), set.total_bytes());
    }

    #[test]
    fn trees_and_url_lists_refuse_what_cannot_run() {
        let empty = tempfile::tempdir().unwrap();
        let err = FileSet::build(&FileSetSpec::Tree {
            dir: empty.path().into(),
        })
        .unwrap_err();
        assert!(err.to_string().contains("holds no files"), "{err}");
        let files = parse_urls("# a list\n/index.html 10\n\n/a%20b.png\n", "u.txt").unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(
            (files[0].path.as_str(), files[0].weight),
            ("index.html", 10.0)
        );
        for (text, says) in [
            ("/a x\n", "line 1: 'x' is not a positive weight"),
            ("/a -1\n", "not a positive weight"),
            ("/a NaN\n", "not a positive weight"),
            ("a 1\n", "does not start with /"),
            ("/a 1 2\n", "after the weight"),
            ("# nothing\n", "lists no path"),
        ] {
            let err = parse_urls(text, "u.txt").unwrap_err().to_string();
            assert!(
                err.contains(says) && err.starts_with("--urls"),
                "{text}: {err}"
            );
        }
        assert!(FileSetSpec::parse("specweb:0").is_err());
        assert!(FileSetSpec::parse("specweb:1001").is_err());
        assert!(FileSetSpec::parse("webbench2").is_err());
    }

    #[test]
    fn odd_names_survive_the_url_round_trip() {
        let name = "a b/ü%.html";
        assert_eq!(decode_path(&encode_path(name)), PathBuf::from(name));
        assert_eq!(encode_path("a b"), "a%20b");
    }
}
