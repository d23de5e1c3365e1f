//! Models from the Hub by name, through the binary, against a local stand-in for the Hub
//! (`scripts/hub_server.py`, serving the MarianMT fixtures; no network): a download lands in
//! the Hugging Face cache layout and translates as the directory it came from, a second run
//! downloads nothing, `HF_HUB_OFFLINE=1` and an unreachable Hub use the cache, and a missing
//! name, a private model, an unknown revision, a family we do not run, a cut or damaged file
//! and a stalled server each end with a one-line error and nothing half-written in the cache.
//! The multilingual fixtures (M2M100, NLLB-200) come by name too.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

const FIXTURE: &str = "tests/fixtures/marian-gelu";

/// The stand-in Hub, killed when dropped.
struct Hub {
    child: Child,
    url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Hub {
    /// Serves the fixture as `good/model` (and, for the faults, under other names), a copy
    /// whose config says `bert` as `other/bert`, the fixture with a decoy `.bin` beside its
    /// safetensors as `both/weights`, and the fixture as the private `me/secret`.
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bert = dir.path().join("bert");
        let both = dir.path().join("both");
        let bare = dir.path().join("bare");
        std::fs::create_dir(&bare).unwrap();
        // An M2M100 model without its SentencePiece model.
        let m2m100_bare = dir.path().join("m2m100-bare");
        std::fs::create_dir(&m2m100_bare).unwrap();
        for file in [
            "config.json",
            "model.safetensors",
            "tokenizer_config.json",
            "vocab.json",
        ] {
            std::fs::copy(
                Path::new("tests/fixtures/m2m100-tiny").join(file),
                m2m100_bare.join(file),
            )
            .unwrap();
        }
        for file in ["config.json", "model.safetensors"] {
            std::fs::copy(Path::new(FIXTURE).join(file), bare.join(file)).unwrap();
        }
        for copy in [&bert, &both] {
            std::fs::create_dir(copy).unwrap();
            for entry in std::fs::read_dir(FIXTURE).unwrap() {
                let entry = entry.unwrap();
                std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
            }
        }
        let config = std::fs::read_to_string(bert.join("config.json")).unwrap();
        std::fs::write(
            bert.join("config.json"),
            config.replace("\"marian\"", "\"bert\""),
        )
        .unwrap();
        std::fs::write(both.join("pytorch_model.bin"), b"not the weights").unwrap();
        let log = dir.path().join("requests.log");
        let model = |name: &str, path: &Path| format!("{name}={}", path.display());
        let fixture = Path::new(FIXTURE);
        let child = Command::new("python3")
            .arg("scripts/hub_server.py")
            .args(["--model", &model("good/model", fixture)])
            .args([
                "--model",
                &model("cut/model", fixture),
                "--truncate",
                "cut/model",
            ])
            .args([
                "--model",
                &model("bad/model", fixture),
                "--corrupt",
                "bad/model",
            ])
            .args([
                "--model",
                &model("slow/model", fixture),
                "--stall",
                "slow/model",
            ])
            .args(["--model", &model("other/bert", &bert)])
            .args(["--model", &model("both/weights", &both)])
            .args(["--model", &model("bare/model", &bare)])
            .args([
                "--model",
                &model("multi/m2m100", Path::new("tests/fixtures/m2m100-tiny")),
            ])
            .args([
                "--model",
                &model("multi/nllb", Path::new("tests/fixtures/nllb-tiny")),
            ])
            .args(["--model", &model("multi/bare", &m2m100_bare)])
            .args([
                "--model",
                &model("drip/model", fixture),
                "--trickle",
                "drip/model",
            ])
            .args([
                "--private",
                &model("me/secret", fixture),
                "--token",
                "t0ken",
            ])
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs scripts/hub_server.py");
        Self::listening(child, log, dir)
    }

    /// A stand-in of its own serving `models` (name, directory, fault flag if any): a mirror.
    fn mirror(models: &[(&str, &Path, Option<&str>)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("requests.log");
        let mut command = Command::new("python3");
        command.arg("scripts/hub_server.py");
        for (name, path, fault) in models {
            command.args(["--model", &format!("{name}={}", path.display())]);
            if let Some(fault) = fault {
                command.args([*fault, name]);
            }
        }
        let child = command
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs scripts/hub_server.py");
        Self::listening(child, log, dir)
    }

    /// The stand-in once it says where it listens.
    fn listening(mut child: Child, log: PathBuf, dir: tempfile::TempDir) -> Self {
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("http://"), "hub_server.py said {line:?}");
        Self {
            child,
            url: line.trim().to_string(),
            log,
            _dir: dir,
        }
    }

    /// The requests served so far.
    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_transformer"))
}

/// The binary with the Hub at `endpoint` and the cache in `cache`, nothing else from the
/// environment's Hugging Face settings.
fn with_hub(endpoint: &str, cache: &Path) -> Command {
    let mut command = binary();
    for var in [
        "HF_TOKEN",
        "HF_HOME",
        "HF_HUB_OFFLINE",
        "HF_HUB_DOWNLOAD_TIMEOUT",
    ] {
        command.env_remove(var);
    }
    command
        .env("HF_ENDPOINT", endpoint)
        .env("HF_HUB_CACHE", cache)
        .env("HOME", cache);
    command
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `translate --json` of one sentence: its ids.
fn ids_of(command: &mut Command, checkpoint: &str) -> Vec<u64> {
    let out = command
        .args([
            "translate",
            "--json",
            "--checkpoint",
            checkpoint,
            "Ein Hund läuft.",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    serde_json::from_value(value["ids"].clone()).unwrap()
}

/// Files under `dir` whose names say they were left half-written.
fn leftovers(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else if name.contains(".incomplete") || name.contains(".link.") {
                found.push(entry.path().display().to_string());
            }
        }
    }
    found
}

#[test]
fn a_hub_name_downloads_once_into_the_shared_cache_and_translates_as_its_directory() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let out = with_hub(&hub.url, cache.path())
        .args(["download", "good/model"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let snapshot = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    // huggingface_hub's layout: the snapshot's files are links into blobs/, refs/main names it.
    let model = cache.path().join("models--good--model");
    assert!(
        snapshot.starts_with(model.join("snapshots")),
        "{snapshot:?}"
    );
    let commit = std::fs::read_to_string(model.join("refs/main")).unwrap();
    assert_eq!(snapshot.file_name().unwrap().to_str().unwrap(), commit);
    for file in [
        "config.json",
        "model.safetensors",
        "source.spm",
        "vocab.json",
    ] {
        let link = std::fs::read_link(snapshot.join(file)).unwrap();
        assert!(link.starts_with("../../blobs"), "{file}: {link:?}");
        assert_eq!(
            std::fs::read(snapshot.join(file)).unwrap(),
            std::fs::read(Path::new(FIXTURE).join(file)).unwrap()
        );
    }
    let want = ids_of(&mut binary(), FIXTURE);
    let downloads = hub.requests().len();
    // A second run asks for the file list only, and translates as the fixture does.
    assert_eq!(
        ids_of(&mut with_hub(&hub.url, cache.path()), "good/model"),
        want
    );
    let again: Vec<String> = hub.requests()[downloads..].to_vec();
    assert!(
        again.iter().all(|r| r.contains("/api/models/")),
        "{again:?}"
    );
    // What a killed download left (its process gone) is removed when the blob is fetched
    // again; a blob damaged since (a wrong size) is fetched again.
    let blobs = model.join("blobs");
    let weights = std::fs::read_link(snapshot.join("model.safetensors")).unwrap();
    let etag = weights.file_name().unwrap().to_str().unwrap().to_string();
    let stale = blobs.join(format!("{etag}.incomplete.4000000"));
    std::fs::write(&stale, b"half a file").unwrap();
    std::fs::write(blobs.join(&etag), b"damaged").unwrap();
    assert_eq!(
        ids_of(&mut with_hub(&hub.url, cache.path()), "good/model"),
        want
    );
    assert!(!stale.exists());
    assert_eq!(
        std::fs::read(blobs.join(&etag)).unwrap(),
        std::fs::read(Path::new(FIXTURE).join("model.safetensors")).unwrap()
    );
    // Offline, and with the Hub away, the cache answers.
    let dead = "http://127.0.0.1:9";
    let mut offline = with_hub(dead, cache.path());
    offline.env("HF_HUB_OFFLINE", "1");
    assert_eq!(ids_of(&mut offline, "good/model"), want);
    let out = with_hub(dead, cache.path())
        .args(["translate", "--checkpoint", "good/model", "Ein Hund läuft."])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("using good/model from the cache"),
        "{}",
        stderr(&out)
    );
    // Offline, a model the cache lacks is named, with the way out.
    let out = with_hub(dead, cache.path())
        .env("HF_HUB_OFFLINE", "1")
        .args(["download", "good/other"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("good/other") && stderr(&out).contains("unset HF_HUB_OFFLINE"));
}

#[test]
fn safetensors_are_preferred_and_a_private_model_needs_its_token() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let want = ids_of(&mut binary(), FIXTURE);
    assert_eq!(
        ids_of(&mut with_hub(&hub.url, cache.path()), "both/weights"),
        want
    );
    assert!(!hub
        .requests()
        .iter()
        .any(|r| r.contains("pytorch_model.bin")));
    let out = with_hub(&hub.url, cache.path())
        .args(["download", "me/secret"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("me/secret") && stderr(&out).contains("HF_TOKEN"));
    let mut with_token = with_hub(&hub.url, cache.path());
    with_token.env("HF_TOKEN", "t0ken");
    assert_eq!(ids_of(&mut with_token, "me/secret"), want);
}

#[test]
fn bad_names_and_damaged_downloads_are_one_line_errors_and_leave_nothing_behind() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let cases: &[(&str, Option<i32>, &[&str])] = &[
        ("no/such", Some(2), &["no/such", "HF_TOKEN"]),
        (
            "good/model@v9",
            Some(2),
            &["good/model", "no revision \"v9\""],
        ),
        (
            "other/bert",
            Some(2),
            &["other/bert", "\"bert\"", "\"marian\""],
        ),
        (
            "cut/model",
            Some(1),
            &["model.safetensors of cut/model", "nothing was kept"],
        ),
        (
            "bad/model",
            Some(1),
            &["sha256", "not the", "nothing was kept"],
        ),
        (
            "slow/model",
            Some(1),
            &["sent nothing for 1 s", "HF_HUB_DOWNLOAD_TIMEOUT"],
        ),
        (
            "drip/model",
            Some(1),
            &["bytes/s, slower than any working link"],
        ),
        ("bare/model", Some(2), &["bare/model has no source.spm"]),
        (
            "multi/bare",
            Some(2),
            &["multi/bare has no sentencepiece.bpe.model or tokenizer.json"],
        ),
        ("good/model@/tmp/x", Some(2), &["not a Hub name"]),
    ];
    for (name, code, needles) in cases {
        let started = std::time::Instant::now();
        let out = with_hub(&hub.url, cache.path())
            .env("HF_HUB_DOWNLOAD_TIMEOUT", "1")
            .args(["download", name])
            .output()
            .unwrap();
        let said = stderr(&out);
        assert_eq!(out.status.code(), *code, "{name}: {said}");
        assert!(
            needles.iter().all(|n| said.contains(n)) && said.trim().lines().count() == 1,
            "{name}: {said}"
        );
        assert!(
            started.elapsed().as_secs() < 20,
            "{name} took {:?}",
            started.elapsed()
        );
    }
    // The refused family's weights were never asked for; no damaged file was kept.
    assert!(!hub
        .requests()
        .iter()
        .any(|r| r.contains("other/bert") && r.contains("model.safetensors")));
    assert_eq!(leftovers(cache.path()), Vec::<String>::new());
    for model in ["cut", "bad", "slow"] {
        let snapshots = cache
            .path()
            .join(format!("models--{model}--model/snapshots"));
        let kept: Vec<_> = std::fs::read_dir(&snapshots)
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|commit| std::fs::read_dir(commit.path()).unwrap().flatten())
            .map(|f| f.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !kept.contains(&"model.safetensors".to_string()),
            "{model}: {kept:?}"
        );
    }
    // An absurd deadline is refused, not a panic.
    let out = with_hub(&hub.url, cache.path())
        .env("HF_HUB_DOWNLOAD_TIMEOUT", "1e20")
        .args(["download", "good/model"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("HF_HUB_DOWNLOAD_TIMEOUT"),
        "{}",
        stderr(&out)
    );
    // As a checkpoint, a Hub name with an impossible revision is named as such.
    let out = with_hub(&hub.url, cache.path())
        .args(["translate", "--checkpoint", "good/model@/tmp/x", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not a revision"),
        "{}",
        stderr(&out)
    );
    // A local path is never taken for a Hub name: a typo under an existing folder says so.
    let out = with_hub(&hub.url, cache.path())
        .args(["translate", "--checkpoint", "tests/no-such-model", "x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!stderr(&out).contains("Hub"), "{}", stderr(&out));
}

#[test]
fn fine_tuning_starts_from_a_hub_name_and_the_run_records_its_snapshot() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (de, en) = (dir.path().join("train.de"), dir.path().join("train.en"));
    std::fs::write(&de, "Ein Hund läuft.\nZwei Männer spielen.\n".repeat(8)).unwrap();
    std::fs::write(&en, "A dog runs.\nTwo men play.\n".repeat(8)).unwrap();
    let config = dir.path().join("tune.toml");
    std::fs::write(
        &config,
        format!(
            "[data]\ntrain = {{ src = {:?}, tgt = {:?} }}\n\n[training]\ninit_from = \
             \"good/model\"\nepochs = 1\nmax_tokens = 256\nwarmup = 1\n",
            de.display().to_string(),
            en.display().to_string()
        ),
    )
    .unwrap();
    let run = dir.path().join("run");
    let out = with_hub(&hub.url, cache.path())
        .args(["train", "--device", "cpu", "--quiet", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&run)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let saved = std::fs::read_to_string(run.join("last/config.toml")).unwrap();
    let snapshot = cache.path().join("models--good--model/snapshots");
    assert!(
        saved.contains(&snapshot.display().to_string()),
        "the run's config does not name the snapshot: {saved}"
    );
}

#[test]
fn the_multilingual_families_come_by_name_and_translate_as_their_directories() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    for (name, fixture, source, target) in [
        ("multi/m2m100", "tests/fixtures/m2m100-tiny", "de", "en"),
        (
            "multi/nllb",
            "tests/fixtures/nllb-tiny",
            "deu_Latn",
            "eng_Latn",
        ),
    ] {
        let languages = ["--source-lang", source, "--target-lang", target];
        let translated = |checkpoint: &str| {
            let out = with_hub(&hub.url, cache.path())
                .args(["translate", "--json", "--checkpoint", checkpoint])
                .args(languages)
                .arg("Zwei Hunde spielen im Schnee.")
                .output()
                .unwrap();
            assert!(out.status.success(), "{checkpoint}: {}", stderr(&out));
            let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            value["ids"].clone()
        };
        assert_eq!(translated(name), translated(fixture), "{name}");
        assert!(leftovers(cache.path()).is_empty());
    }
}

/// A mirror that lists a revision's files without their hashes (names and sizes only):
/// a model already in the cache at that commit is used from there, a new one is downloaded
/// and checked against the hash each file's answer gives (its ETag, as huggingface_hub takes
/// it), and one whose answers give none either is refused, naming the way out.
#[test]
fn a_mirror_listing_no_hashes_serves_from_the_cache_or_checks_each_files_etag() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let want = ids_of(&mut with_hub(&hub.url, cache.path()), "good/model");
    let fixture = Path::new(FIXTURE);
    let mirror = Hub::mirror(&[
        ("good/model", fixture, Some("--no-hashes")),
        ("fresh/model", fixture, Some("--no-hashes")),
        ("blind/model", fixture, Some("--no-etags")),
    ]);
    assert_eq!(
        ids_of(&mut with_hub(&mirror.url, cache.path()), "good/model"),
        want
    );
    assert!(
        mirror.requests().iter().all(|r| r.contains("/api/models/")),
        "{:?}",
        mirror.requests()
    );
    assert_eq!(
        ids_of(&mut with_hub(&mirror.url, cache.path()), "fresh/model"),
        want
    );
    assert!(
        mirror
            .requests()
            .iter()
            .any(|r| r.starts_with("HEAD /fresh/model/resolve/")),
        "{:?}",
        mirror.requests()
    );
    let out = with_hub(&mirror.url, cache.path())
        .args(["download", "blind/model"])
        .output()
        .unwrap();
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("gives no hash for config.json of blind/model")
            && said.contains("HF_HUB_OFFLINE=1"),
        "{said}"
    );
    assert!(leftovers(cache.path()).is_empty());
    // Nothing of it was kept.
    let blobs = cache.path().join("models--blind--model/blobs");
    assert!(std::fs::read_dir(&blobs).map_or(true, |mut b| b.next().is_none()));
}
