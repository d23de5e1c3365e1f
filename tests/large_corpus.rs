//! Training corpora streamed in blocks and cached encoded: a cached corpus trains exactly as
//! one read afresh, a second run and a resume map the cache (tokenizer included), a changed
//! file is never read from a stale entry, a broken line deep in a corpus is named with its
//! line, and a disk that fills while caching leaves no entry behind and the run goes on.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::{succeeded, transformer};

/// `count` pairs of made-up German and English over a small vocabulary, varied in length:
/// enough blocks (16,384 lines each) to stream in several rounds.
fn pairs_text(count: usize) -> String {
    let de = [
        "ich", "du", "er", "wir", "haus", "bier", "hund", "katze", "ball", "rot", "groß", "über",
    ];
    let en = [
        "i", "you", "he", "we", "house", "beer", "dog", "cat", "ball", "red", "big", "over",
    ];
    let mut text = String::with_capacity(count * 40);
    for i in 0..count {
        let words: Vec<usize> = (0..2 + i % 7)
            .map(|j| (i * 7 + j * 5 + i / 13) % de.len())
            .collect();
        let side = |vocab: &[&str]| {
            words
                .iter()
                .map(|&w| vocab[w])
                .collect::<Vec<_>>()
                .join(" ")
        };
        text.push_str(&format!("{}\t{}\n", side(&de), side(&en)));
    }
    text
}

fn config(dir: &Path, corpus: &Path, cache: &str, cache_dir: &Path) -> PathBuf {
    let path = dir.join(format!("{cache}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"[model]
layers = 1
d_model = 32
d_ff = 64
heads = 4
dropout = 0.0
attention_dropout = 0.0

[data]
train = "{}"
tokenizer = "bpe"
vocab_size = 60
cache = "{cache}"
cache_dir = "{}"

[training]
seed = 3
epochs = 1
max_tokens = 256
warmup = 10
log_every = 1
checkpoint_every = 1000
"#,
            corpus.display(),
            cache_dir.display()
        ),
    )
    .unwrap();
    path
}

fn train(config: &Path, run: &Path, steps: usize) -> Output {
    succeeded(
        transformer()
            .args(["train", "--device", "cpu", "--overwrite", "--config"])
            .arg(config)
            .arg("--out")
            .arg(run)
            .args(["--stop-at-step", &steps.to_string()]),
    )
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Every logged step's loss, from a run's metrics.jsonl.
fn losses(run: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|record| record.get("lr").is_some())
        .map(|r| (r["step"].as_u64().unwrap(), r["loss"].as_f64().unwrap()))
        .collect()
}

/// The entries (and anything else) in one of the cache's kinds of entry.
fn entries(cache: &Path, kind: &str) -> Vec<String> {
    match std::fs::read_dir(cache.join("corpora").join(kind)) {
        Ok(dir) => {
            let mut names: Vec<String> = dir
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        }
        Err(_) => Vec::new(),
    }
}

#[test]
fn a_cached_corpus_trains_exactly_as_one_read_afresh_and_later_runs_map_it() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("pairs.tsv.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(pairs_text(40_000).as_bytes()).unwrap();
    std::fs::write(&corpus, gz.finish().unwrap()).unwrap();
    let cache = dir.path().join("cache");
    let (fresh, first, second) = (
        dir.path().join("fresh"),
        dir.path().join("first"),
        dir.path().join("second"),
    );
    train(&config(dir.path(), &corpus, "off", &cache), &fresh, 12);
    assert!(entries(&cache, "encoded").is_empty());

    let cached = config(dir.path(), &corpus, "on", &cache);
    let wrote = stderr(&train(&cached, &first, 12));
    assert!(wrote.contains("40000 pairs read"), "{wrote}");
    assert!(wrote.contains("encoded and cached in"), "{wrote}");
    assert_eq!(losses(&first), losses(&fresh));
    assert_eq!(losses(&fresh).len(), 12);
    assert_eq!(entries(&cache, "encoded").len(), 1);

    // A second run over the same files: tokenizer and ids from the cache, the same steps.
    let mapped = stderr(&train(&cached, &second, 12));
    assert!(
        mapped.contains("tokenizer: learned from these files by an earlier run"),
        "{mapped}"
    );
    assert!(
        mapped.contains("encoded by an earlier run, mapped from"),
        "{mapped}"
    );
    assert!(mapped.contains("40000 pairs read"), "{mapped}");
    assert_eq!(losses(&second), losses(&fresh));

    // A resume maps the cache too and continues as the uninterrupted run would.
    let resumed = succeeded(
        transformer()
            .args(["train", "--device", "cpu", "--resume"])
            .arg(&second)
            .args(["--stop-at-step", "16"]),
    );
    assert!(
        stderr(&resumed).contains("mapped from"),
        "{}",
        stderr(&resumed)
    );
    let longer = dir.path().join("longer");
    train(&config(dir.path(), &corpus, "off", &cache), &longer, 16);
    assert_eq!(losses(&second), losses(&longer));
    // The run's sample translations are the corpus's first sources, cache or not.
    let stdout = |run: &Path| {
        let out = succeeded(
            transformer()
                .args(["translate", "--device", "cpu", "--checkpoint"])
                .arg(run)
                .arg("ich du er"),
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(stdout(&second), stdout(&longer));
}

#[test]
fn a_changed_corpus_file_is_encoded_again_not_read_from_the_stale_entry() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("pairs.tsv");
    let text = pairs_text(20_000);
    std::fs::write(&corpus, &text).unwrap();
    let cache = dir.path().join("cache");
    let cached = config(dir.path(), &corpus, "on", &cache);
    train(&cached, &dir.path().join("a"), 2);
    // The same size and one word changed deep in the file (its modification time kept
    // apart, the bytes are what count).
    let changed = text
        .replacen("katze", "kätze", 1)
        .replacen("groß", "gros", 1);
    assert_eq!(changed.len(), text.len());
    std::fs::write(&corpus, changed).unwrap();
    let again = stderr(&train(&cached, &dir.path().join("b"), 2));
    assert!(again.contains("tokenizer: learned in"), "{again}");
    assert!(again.contains("encoded and cached in"), "{again}");
    assert_eq!(entries(&cache, "encoded").len(), 2);
    assert_eq!(entries(&cache, "tokenizers").len(), 2);
}

#[test]
fn a_cache_entry_changed_in_place_is_named_and_encoded_again_not_trained_on() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("pairs.tsv");
    std::fs::write(&corpus, pairs_text(20_000)).unwrap();
    let cache = dir.path().join("cache");
    let cached = config(dir.path(), &corpus, "on", &cache);
    let fresh = dir.path().join("fresh");
    train(&cached, &fresh, 4);
    let entry = cache
        .join("corpora/encoded")
        .join(&entries(&cache, "encoded")[0]);
    let tokenizer_entry = cache
        .join("corpora/tokenizers")
        .join(&entries(&cache, "tokenizers")[0]);
    // One byte of each file flipped in place, its size kept: ids that are still ids, offsets
    // that would run backwards, a tokenizer that still parses.
    let flip = |path: &Path, at: usize| {
        let mut bytes = std::fs::read(path).unwrap();
        bytes[at] ^= 0x01;
        std::fs::write(path, bytes).unwrap();
    };
    for (file, at) in [("ids.bin", 4000), ("offsets.bin", 800)] {
        flip(&entry.join(file), at);
        let again = dir.path().join(format!("after-{file}"));
        let log = stderr(&train(&cached, &again, 4));
        assert!(
            log.contains(&format!(
                "warning: the cached encoded corpus in {} is damaged: {file} does not match \
                 its checksum (it changed on disk); encoding the corpus again",
                entry.display()
            )),
            "{log}"
        );
        assert!(log.contains("encoded and cached in"), "{log}");
        // Trained on the corpus, not on the damaged entry: as the first run.
        assert_eq!(losses(&again), losses(&fresh));
    }
    let vocab = std::fs::read_dir(&tokenizer_entry)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "json") && !p.ends_with("meta.json"))
        .unwrap();
    // One letter of a merge changed: the file still parses as a tokenizer.
    let mut bytes = std::fs::read(&vocab).unwrap();
    let at = bytes.len() / 2
        + bytes[bytes.len() / 2..]
            .iter()
            .position(|&b| b == b'e')
            .unwrap();
    bytes[at] = b'a';
    std::fs::write(&vocab, bytes).unwrap();
    let log = stderr(&train(&cached, &dir.path().join("after-tokenizer"), 4));
    assert!(
        log.contains("warning: the cached learned tokenizer in")
            && log.contains("does not match its checksum"),
        "{log}"
    );
    assert_eq!(losses(&dir.path().join("after-tokenizer")), losses(&fresh));
    // The metadata's own fields (what the run reports, which files it vouches for), and files
    // that are not the cache's: a link to /dev/zero (read until memory ran out), a pipe (the
    // run hung), a file the entry never had.
    let meta = entry.join("meta.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    std::fs::write(
        &meta,
        text.replacen("\"too_long\": 0", "\"too_long\": 7", 1),
    )
    .unwrap();
    let tokenizer_meta = tokenizer_entry.join("meta.json");
    let text = std::fs::read_to_string(&tokenizer_meta).unwrap();
    let start = text.find("\"checksums\"").unwrap();
    let end = start + text[start..].find('}').unwrap() + 1;
    std::fs::write(
        &tokenizer_meta,
        format!("{}\"checksums\": {{}}{}", &text[..start], &text[end..]),
    )
    .unwrap();
    let log = stderr(&train(&cached, &dir.path().join("after-meta"), 4));
    assert!(
        log.contains("meta.json does not match its checksum (it changed on disk)"),
        "{log}"
    );
    assert_eq!(
        log.matches("meta.json does not match its checksum").count(),
        2,
        "{log}"
    );
    assert_eq!(losses(&dir.path().join("after-meta")), losses(&fresh));
    std::fs::remove_file(entry.join("ids.bin")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", entry.join("ids.bin")).unwrap();
    std::fs::remove_file(meta_of(&tokenizer_entry)).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(meta_of(&tokenizer_entry))
        .status()
        .unwrap();
    assert!(fifo.success());
    let log = stderr(&train(&cached, &dir.path().join("after-links"), 4));
    assert!(
        log.contains("ids.bin is not a file the cache wrote (a link, pipe or device)")
            && log.contains("meta.json is not a file the cache wrote"),
        "{log}"
    );
    assert_eq!(losses(&dir.path().join("after-links")), losses(&fresh));
    std::fs::write(tokenizer_entry.join("stray.json"), "{}").unwrap();
    let log = stderr(&train(&cached, &dir.path().join("after-stray"), 4));
    assert!(
        log.contains("stray.json is not one of the files it was written with"),
        "{log}"
    );
    // A whole, valid entry of other settings copied into this one's place (it loaded: a
    // tokenizer of 45 tokens under a config of 60).
    let other = dir.path().join("other.toml");
    std::fs::write(
        &other,
        std::fs::read_to_string(&cached)
            .unwrap()
            .replace("vocab_size = 60", "vocab_size = 45"),
    )
    .unwrap();
    train(&other, &dir.path().join("other"), 1);
    let other_entry = entries(&cache, "tokenizers")
        .into_iter()
        .map(|name| cache.join("corpora/tokenizers").join(name))
        .find(|path| *path != tokenizer_entry)
        .unwrap();
    for file in std::fs::read_dir(&tokenizer_entry).unwrap().flatten() {
        std::fs::remove_file(file.path()).unwrap();
    }
    for file in std::fs::read_dir(&other_entry).unwrap().flatten() {
        std::fs::copy(file.path(), tokenizer_entry.join(file.file_name())).unwrap();
    }
    let log = stderr(&train(&cached, &dir.path().join("after-swap"), 4));
    assert!(log.contains("meta.json names another entry"), "{log}");
    assert_eq!(losses(&dir.path().join("after-swap")), losses(&fresh));
}

fn meta_of(entry: &Path) -> PathBuf {
    entry.join("meta.json")
}

#[test]
fn a_corpus_with_a_word_of_a_million_characters_trains_and_the_word_comes_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("pairs.tsv");
    // Without spaces: no language has such a word, a pasted blob does.
    let word: String = (0..1_000_000u32)
        .map(|i| char::from(b'a' + (i.wrapping_mul(2_654_435_761) >> 27) as u8 % 26))
        .collect();
    std::fs::write(&corpus, format!("{}{word}\tx\n", pairs_text(2_000))).unwrap();
    let cached = config(dir.path(), &corpus, "off", &dir.path().join("cache"));
    let run = dir.path().join("run");
    let log = stderr(&train(&cached, &run, 2));
    assert!(
        log.contains("warning: a word of 1000000 characters")
            && log.contains("segmented in pieces of at most 256 characters"),
        "{log}"
    );
    // Segmented in pieces, it decodes back to itself: `tokenize --pieces` joins to the word.
    let pieces = succeeded(
        transformer()
            .args(["tokenize", "--pieces", "--checkpoint"])
            .arg(&run)
            .write_stdin(format!("{word}\n")),
    );
    let joined: String = String::from_utf8(pieces.stdout)
        .unwrap()
        .split_whitespace()
        .filter(|p| !p.starts_with('<'))
        .collect::<String>()
        .replace('▁', "");
    assert_eq!(joined.len(), word.len());
    assert!(joined == word);
}

#[test]
fn a_broken_line_deep_in_a_large_corpus_is_named_with_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let text = pairs_text(60_000);
    let mut lines: Vec<Vec<u8>> = text.lines().map(|l| l.as_bytes().to_vec()).collect();
    for (name, line, broken, needle) in [
        (
            "latin1.tsv",
            41_234,
            b"M\xe4nner\tmen".to_vec(),
            "latin1.tsv line 41234 is not valid UTF-8",
        ),
        (
            "columns.tsv.gz",
            52_001,
            b"ein bier\ta beer\tCC-BY".to_vec(),
            "columns.tsv.gz line 52001: expected `source<TAB>target`, found 3 columns",
        ),
    ] {
        let saved = std::mem::replace(&mut lines[line - 1], broken);
        let mut bytes = lines.join(&b'\n');
        bytes.push(b'\n');
        lines[line - 1] = saved;
        let corpus = dir.path().join(name);
        if name.ends_with(".gz") {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(&bytes).unwrap();
            bytes = gz.finish().unwrap();
        }
        std::fs::write(&corpus, bytes).unwrap();
        let output = transformer()
            .args(["train", "--device", "cpu", "--config"])
            .arg(config(dir.path(), &corpus, "on", &cache))
            .arg("--out")
            .arg(dir.path().join("run"))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1));
        let stderr = stderr(&output);
        assert!(stderr.contains(needle), "{stderr}");
        assert_eq!(stderr.matches("error:").count(), 1, "{stderr}");
        // Nothing half-made is left for a later run to trust.
        assert!(entries(&cache, "encoded").is_empty());
        assert!(entries(&cache, "tokenizers").is_empty());
    }
}

/// A 300 KiB tmpfs mounted for the test (root only; CI runs as root), unmounted on drop.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(at: PathBuf) -> Option<Self> {
        std::fs::create_dir_all(&at).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=300k", "tmpfs"])
            .arg(&at)
            .status()
            .is_ok_and(|s| s.success());
        mounted.then_some(Self(at))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_disk_that_fills_while_caching_leaves_no_entry_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(dir.path().join("small")) else {
        // CI runs as root and must run this check; elsewhere it needs root to mount.
        assert!(
            std::env::var_os("CI").is_none(),
            "mounting a tmpfs failed; this test needs root (CI runs as root)"
        );
        eprintln!("skipped: mounting a 300 KiB tmpfs needs root");
        return;
    };
    let corpus = dir.path().join("pairs.tsv");
    std::fs::write(&corpus, pairs_text(40_000)).unwrap();
    let cached = config(dir.path(), &corpus, "on", &disk.0);
    let fresh = dir.path().join("fresh");
    train(&config(dir.path(), &corpus, "off", &disk.0), &fresh, 5);
    for attempt in ["first", "second"] {
        let run = dir.path().join(attempt);
        let output = train(&cached, &run, 5);
        let stderr = stderr(&output);
        assert!(
            stderr.contains("warning: cannot cache the encoded corpus in"),
            "{stderr}"
        );
        assert!(stderr.contains("the disk is full"), "{stderr}");
        assert!(!stderr.contains("mapped from"), "{stderr}");
        // The run trained on the corpus encoded in memory, as a run without the cache.
        assert_eq!(losses(&run), losses(&fresh));
        // No entry, whole or partial, and no staging directory is left.
        let staged: Vec<String> = entries(&disk.0, "encoded")
            .into_iter()
            .filter(|name| !name.is_empty())
            .collect();
        assert!(staged.is_empty(), "{staged:?}");
    }
}
