//! Hugging Face MarianMT directories run as checkpoints, against transformers itself: the
//! fixtures scripts/make_marian_fixture.py wrote (shared and separate vocabularies; swish,
//! ReLU and GELU; different widths and depths; `.safetensors` and `.bin`), each trained a few
//! hundred steps in PyTorch, with what `MarianMTModel` and `generate()` gave.

mod common;

use std::path::Path;

use candle_core::{Device, Tensor};
use common::{
    largest_difference, marian_expected, multi30k_lines, replaced_by_fifo,
    replaced_by_link_to_dev_zero, succeeded, transformer, translated_ids, MARIAN_FIXTURES,
};
use serde_json::Value;
use transformer::checkpoint::{self, Task};
use transformer::decoding::teacher_forced_log_probs;

fn matrix(value: &Value) -> Vec<Vec<u32>> {
    serde_json::from_value(value.clone()).unwrap()
}

fn tensor(rows: &[Vec<u32>]) -> Tensor {
    let width = rows[0].len();
    let flat: Vec<u32> = rows.iter().flatten().copied().collect();
    Tensor::from_vec(flat, (rows.len(), width), &Device::Cpu).unwrap()
}

#[test]
fn teacher_forced_log_probs_equal_transformers_within_1e4() {
    for fixture in MARIAN_FIXTURES {
        let dir = Path::new(fixture);
        let loaded = checkpoint::load(dir, &Device::Cpu).unwrap();
        let model = loaded.model_for(Task::Translate).unwrap();
        let case = &marian_expected(dir)["teacher_forced"];
        let src = tensor(&matrix(&case["input_ids"]));
        let tgt_in = tensor(&matrix(&case["decoder_input_ids"]));
        // transformers' attention mask is the source's padding: ours must be the same.
        let mask = tensor(&matrix(&case["attention_mask"]));
        let specials = loaded.tokenizers.specials();
        let batch = transformer::model::TeacherForced::framed(
            src,
            tgt_in,
            specials.pad,
            specials.decoder_starts_from_pad(),
        )
        .unwrap();
        let transformer::model::TeacherForced::WithSource { source, .. } = &batch else {
            unreachable!()
        };
        assert_eq!(
            source.mask.squeeze(1).unwrap().to_vec2::<u8>().unwrap(),
            mask.to_vec2::<u32>()
                .unwrap()
                .iter()
                .map(|row| row.iter().map(|&m| m as u8).collect())
                .collect::<Vec<Vec<u8>>>()
        );
        let ours = teacher_forced_log_probs(&**model, &batch).unwrap();
        let theirs = candle_core::safetensors::load(dir.join("expected.safetensors"), &Device::Cpu)
            .unwrap()
            .remove("log_probs")
            .unwrap();
        let difference = largest_difference(&ours, &theirs);
        assert!(
            difference < 1e-4,
            "{fixture}: log-probs differ by {difference}"
        );
    }
}

/// `generate()`'s rows without the decoder's start symbol and the padding after `</s>`.
fn generated(rows: &Value, pad: u32) -> Vec<Vec<u32>> {
    matrix(rows)
        .into_iter()
        .map(|row| {
            let mut row = row[1..].to_vec();
            while row.last() == Some(&pad) {
                row.pop();
            }
            row
        })
        .collect()
}

/// `translate --json` on the fixture's batch: the ids of each line.
#[test]
fn greedy_and_beam_search_give_generates_ids_in_a_padded_batch() {
    for fixture in MARIAN_FIXTURES {
        let dir = Path::new(fixture);
        let case = &marian_expected(dir)["generate"];
        let pad = matrix(&case["greedy"]["ids"])[0][0];
        let sources: Vec<String> = serde_json::from_value(case["sources"].clone()).unwrap();
        // The checkpoint's own generation settings: num_beams 4 from generation_config.json.
        assert_eq!(case["beam"]["num_beams"], 4);
        let beam = translated_ids(dir, &sources, &[]);
        assert_eq!(
            beam,
            generated(&case["beam"]["ids"], pad),
            "{fixture}: beam 4"
        );
        let greedy = translated_ids(dir, &sources, &["--beam", "1"]);
        assert_eq!(
            greedy,
            generated(&case["greedy"]["ids"], pad),
            "{fixture}: greedy"
        );
        // The text too: MarianTokenizer's decoding of the same ids.
        let out = succeeded(
            transformer()
                .args(["translate", "--checkpoint"])
                .arg(dir)
                .arg(&sources[1]),
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(text.trim_end(), case["beam"]["text"][1].as_str().unwrap());
    }
}

/// `translate --checkpoint DIR` of one sentence: its stdout.
fn translate(dir: &Path) -> String {
    let out = succeeded(
        transformer()
            .args(["translate", "--checkpoint"])
            .arg(dir)
            .arg("Zwei Hunde spielen im Schnee."),
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `translate --checkpoint DIR TEXT`, whatever its outcome.
fn translate_output(dir: &Path, text: &str) -> std::process::Output {
    transformer()
        .args(["translate", "--checkpoint"])
        .arg(dir)
        .arg(text)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap()
}

/// A copy of the shared fixture with `edit` applied to its directory.
fn damaged_copy(edit: impl FnOnce(&Path)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(MARIAN_FIXTURES[0]).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    edit(dir.path());
    dir
}

/// `file` replaced by a link to `/dev/zero`.
/// A change made to a copied fixture directory.
type Edit = dyn FnOnce(&Path);

/// Replaces `from` by `to` in the directory's file `name`.
fn edited(name: &'static str, from: &'static str, to: &'static str) -> impl FnOnce(&Path) {
    move |dir: &Path| {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{name} lacks {from:?}");
        std::fs::write(&path, text.replace(from, to)).unwrap();
    }
}

#[test]
fn damaged_directories_are_refused_in_one_line_naming_the_file_and_key() {
    // A family this tool does not run, or a tokenizer file missing, is the choice of
    // --checkpoint (status 2); a damaged file is the file's (status 1).
    let cases: Vec<(Box<Edit>, i32, &[&str])> = vec![
        (
            Box::new(edited("config.json", "\"marian\"", "\"bart\"")),
            2,
            &["config.json", "\"bart\" model", "MarianMT"],
        ),
        (
            Box::new(edited("config.json", "\"d_model\": 32", "\"d_model\": 0")),
            1,
            &["config.json: d_model: must be at least 1"],
        ),
        (
            Box::new(edited(
                "config.json",
                "\"encoder_layers\": 2",
                "\"encoder_layers\": 200",
            )),
            1,
            &["encoder_layers = 200", "holds 2 encoder layers"],
        ),
        (
            Box::new(edited(
                "config.json",
                "\"encoder_layers\": 2",
                "\"encoder_layers\": 900000000",
            )),
            1,
            &["encoder_layers: must be at most 256, got 900000000"],
        ),
        (
            Box::new(edited("vocab.json", "\"n\": 4", "\"n\": 3")),
            1,
            &["vocab.json", "both have id 3"],
        ),
        (
            Box::new(edited(
                "generation_config.json",
                "\"num_beams\": 4",
                "\"num_beams\": 0",
            )),
            1,
            &["generation_config.json: num_beams: must be at least 1"],
        ),
        (
            Box::new(|dir: &Path| std::fs::remove_file(dir.join("config.json")).unwrap()),
            1,
            &["has no config.json"],
        ),
        (
            Box::new(|dir: &Path| std::fs::remove_file(dir.join("target.spm")).unwrap()),
            2,
            &["has no target.spm, which MarianMT, OPUS-MT models need"],
        ),
        // Present but not valid: named with the line, never ignored.
        (
            Box::new(|dir: &Path| {
                std::fs::write(dir.join("tokenizer_config.json"), "{garbage\n").unwrap()
            }),
            1,
            &["tokenizer_config.json is not valid JSON", "line 1"],
        ),
        // Files that are not files: a read of /dev/zero never ended, a FIFO never began.
        (
            Box::new(|dir: &Path| replaced_by_link_to_dev_zero(&dir.join("vocab.json"))),
            1,
            &["vocab.json is a pipe or device, not a regular file"],
        ),
        (
            Box::new(|dir: &Path| replaced_by_fifo(&dir.join("model.safetensors"))),
            1,
            &["model.safetensors is a pipe or device, not a regular file"],
        ),
        (
            Box::new(|dir: &Path| {
                replaced_by_link_to_dev_zero(&dir.join("generation_config.json"))
            }),
            1,
            &["generation_config.json: it is a pipe or device"],
        ),
        (
            Box::new(|dir: &Path| replaced_by_fifo(&dir.join("tokenizer_config.json"))),
            1,
            &["tokenizer_config.json: it is a pipe or device"],
        ),
    ];
    for (edit, code, needles) in cases {
        let dir = damaged_copy(edit);
        let out = translate_output(dir.path(), "Zwei Hunde.");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(code), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        for needle in needles {
            assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
        }
    }
}

#[test]
fn export_never_replaces_the_checkpoint_it_reads_or_a_folder_of_other_files() {
    let work = tempfile::tempdir().unwrap();
    let exported = work.path().join("hf");
    succeeded(
        transformer()
            .args(["export", "--to", "hf", MARIAN_FIXTURES[1], "--out"])
            .arg(&exported),
    );
    // The export reads back as the directory it came from: the same translation.
    assert_eq!(
        translate(&exported),
        translate(Path::new(MARIAN_FIXTURES[1]))
    );
    for (out, needle) in [
        (
            exported.clone(),
            "is or holds the checkpoint being exported",
        ),
        (
            work.path().to_path_buf(),
            "is or holds the checkpoint being exported",
        ),
    ] {
        let status = transformer()
            .args(["export", "--to", "hf", "--overwrite", "--out"])
            .arg(&out)
            .arg(&exported)
            .output()
            .unwrap();
        let stderr = String::from_utf8(status.stderr).unwrap();
        assert_eq!(status.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(needle), "{stderr}");
    }
    // Not a directory (a dangling link, a file): never replaced, --overwrite or not.
    let dangling = work.path().join("dangling");
    std::os::unix::fs::symlink(work.path().join("nowhere"), &dangling).unwrap();
    let file = work.path().join("file");
    std::fs::write(&file, "mine").unwrap();
    for out in [&dangling, &file] {
        let status = transformer()
            .args(["export", "--to", "hf", "--overwrite", "--out"])
            .arg(out)
            .arg(&exported)
            .output()
            .unwrap();
        let stderr = String::from_utf8(status.stderr).unwrap();
        assert!(stderr.contains("is not a directory"), "{stderr}");
    }
    assert!(std::fs::symlink_metadata(&dangling).unwrap().is_symlink());
    // An earlier export with a file of someone's added is not an export's to replace.
    std::fs::write(exported.join("notes.txt"), "mine").unwrap();
    let copy = work.path().join("copy");
    succeeded(
        transformer()
            .args(["export", "--to", "hf", "--out"])
            .arg(&copy)
            .arg(MARIAN_FIXTURES[1]),
    );
    std::fs::write(copy.join("notes.txt"), "mine").unwrap();
    let status = transformer()
        .args(["export", "--to", "hf", "--overwrite", "--out"])
        .arg(&copy)
        .arg(MARIAN_FIXTURES[1])
        .output()
        .unwrap();
    assert!(String::from_utf8(status.stderr)
        .unwrap()
        .contains("holds notes.txt, which an export does not write"));
    // A bare name is a directory where the command runs.
    succeeded(
        transformer()
            .current_dir(work.path())
            .args(["export", "--to", "hf", "--out", "bare"])
            .arg(std::fs::canonicalize(MARIAN_FIXTURES[1]).unwrap()),
    );
    assert!(work.path().join("bare/model.safetensors").is_file());
    let other = work.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    let status = transformer()
        .args(["export", "--to", "hf", "--overwrite", "--out"])
        .arg(&other)
        .arg(&exported)
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(1));
    assert_eq!(
        std::fs::read_to_string(other.join("notes.txt")).unwrap(),
        "mine"
    );
    assert!(exported.join("model.safetensors").is_file());
}

/// `train` from the shared fixture on a few Multi30k pairs, with `model` as the config's
/// `[model]` section: the exit code, stderr and the run directory.
fn fine_tune(model: &str) -> (Option<i32>, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let read = |name: &str| multi30k_lines(name, 40);
    let pairs: Vec<String> = read("train.de.gz")
        .iter()
        .zip(read("train.en.gz"))
        .map(|(de, en)| format!("{de}\t{en}"))
        .collect();
    std::fs::write(dir.path().join("pairs.tsv"), pairs.join("\n") + "\n").unwrap();
    let config = format!(
        "{model}\n[data]\ntrain = \"{0}/pairs.tsv\"\nvalid = \"{0}/pairs.tsv\"\n\n[training]\n\
         init_from = \"{1}\"\nepochs = 1\nmax_tokens = 512\n",
        dir.path().display(),
        MARIAN_FIXTURES[0]
    );
    std::fs::write(dir.path().join("tune.toml"), config).unwrap();
    let out = transformer()
        .args(["train", "--device", "cpu", "--config"])
        .arg(dir.path().join("tune.toml"))
        .arg("--out")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    (out.status.code(), stderr, dir)
}

#[test]
fn fine_tuning_takes_the_checkpoints_model_and_refuses_a_stated_size_it_lacks() {
    // arch = "marian" is the preset every MarianMT directory agrees with.
    let (code, stderr, dir) = fine_tune("[model]\narch = \"marian\"\ndropout = 0.2\n");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("before training: valid loss"), "{stderr}");
    let run = dir.path().join("run");
    let saved = std::fs::read_to_string(run.join("last/config.toml")).unwrap();
    for line in [
        "dropout = 0.2",
        "tokenizer = \"marian\"",
        "norm = \"post\"",
        "beam = 4",
    ] {
        assert!(saved.contains(line), "{line} not in {saved}");
    }
    for file in ["source.spm", "target.spm", "vocab.json"] {
        assert!(run.join("last").join(file).is_file(), "{file}");
    }
    // The run translates, and exports as a directory that translates the same.
    let exported = dir.path().join("hf");
    succeeded(
        transformer()
            .args(["export", "--to", "hf"])
            .arg(&run)
            .arg("--out")
            .arg(&exported),
    );
    assert_eq!(translate(&run), translate(&exported));
    let (code, stderr, _) = fine_tune("[model]\nlayers = 3\nheads = 2\n");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("model.layers = 3 but it has 2")
            && stderr.contains("model.heads = 2 but it has 4"),
        "{stderr}"
    );
}

#[test]
fn a_served_marian_directory_answers_libretranslate_clients_for_its_language_pair() {
    use common::server::{get, post_json, Server};
    let dir = Path::new(MARIAN_FIXTURES[0]);
    let case = &marian_expected(dir)["generate"];
    let server = Server::start_with(dir, &[]);
    // The pair comes from the directory's tokenizer_config.json.
    let (status, languages) = get(&server.url("/languages"));
    assert_eq!(status, 200);
    let codes: Vec<String> = serde_json::from_slice::<Vec<serde_json::Value>>(&languages)
        .unwrap()
        .iter()
        .map(|l| l["code"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(codes, ["de", "en"]);
    let request = serde_json::json!({"q": case["sources"][1], "source": "de", "target": "en"});
    let (status, answer) = post_json(&server.url("/translate"), &request);
    assert_eq!(status, 200, "{answer}");
    // The directory's own settings: num_beams 4, as generate() decoded.
    assert_eq!(answer["translatedText"], case["beam"]["text"][1]);
    // German rules keep "z. B." in its sentence; a language without them would cut there.
    let abbreviated = "Bring z. B. Brot mit. Zwei Hunde.";
    let request = serde_json::json!({"q": abbreviated, "source": "de", "target": "en"});
    let (status, as_german) = post_json(&server.url("/translate"), &request);
    assert_eq!(status, 200, "{as_german}");
    drop(server);
    // Flags name the pair otherwise, for the clients: the model still reads German.
    let server = Server::start_with(dir, &["--source-lang", "gsw", "--target-lang", "en"]);
    let request = serde_json::json!({"q": abbreviated, "source": "gsw", "target": "en"});
    let (status, renamed) = post_json(&server.url("/translate"), &request);
    assert_eq!(status, 200, "{renamed}");
    assert_eq!(renamed["translatedText"], as_german["translatedText"]);
}

#[test]
fn a_multilingual_model_warns_of_a_source_without_its_target_language_token() {
    // Two pieces the sentences below never use become target-language tokens.
    let dir = damaged_copy(|dir: &Path| {
        edited("vocab.json", "\"\\u2581Seve\": 510", "\">>fra<<\": 510")(dir);
        edited("vocab.json", "\"\\u2581toward\": 511", "\">>spa<<\": 511")(dir);
    });
    let run = |text: &str| {
        let out = translate_output(dir.path(), text);
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8(out.stderr).unwrap()
    };
    let stderr = run("Zwei Hunde.");
    assert!(
        stderr.contains("translates into 2 languages") && stderr.contains(">>fra<<, >>spa<<"),
        "{stderr}"
    );
    assert!(!run(">>fra<< Zwei Hunde.").contains("warning"));
}

#[test]
fn generation_settings_this_tool_does_not_apply_are_warned_about() {
    let dir = damaged_copy(edited(
        "generation_config.json",
        "\"num_beams\": 4",
        "\"num_beams\": 4,\n  \"early_stopping\": true,\n  \"no_repeat_ngram_size\": 3",
    ));
    let out = translate_output(dir.path(), "Zwei Hunde.");
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8(out.stderr).unwrap();
    for key in ["early_stopping = true", "no_repeat_ngram_size = 3"] {
        assert!(
            stderr.contains(key) && stderr.contains("is not applied"),
            "{stderr}"
        );
    }
}

#[test]
fn eval_and_attention_take_a_marian_directory() {
    let dir = Path::new(MARIAN_FIXTURES[2]);
    let case = &marian_expected(dir)["generate"];
    let work = tempfile::tempdir().unwrap();
    let sources: Vec<String> = serde_json::from_value(case["sources"].clone()).unwrap();
    let references: Vec<String> = serde_json::from_value(case["beam"]["text"].clone()).unwrap();
    std::fs::write(work.path().join("src"), sources.join("\n") + "\n").unwrap();
    std::fs::write(work.path().join("ref"), references.join("\n") + "\n").unwrap();
    // The references are generate()'s own beam outputs: the directory's defaults score 100.
    let out = succeeded(
        transformer()
            .args(["eval", "--json", "--checkpoint"])
            .arg(dir)
            .arg("--src")
            .arg(work.path().join("src"))
            .arg("--ref")
            .arg(work.path().join("ref")),
    );
    let score: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(score["bleu"], 100.0, "{score}");
    let picture = work.path().join("attention.png");
    succeeded(
        transformer()
            .args(["attention", "--checkpoint"])
            .arg(dir)
            .arg(&sources[1])
            .arg("--out")
            .arg(&picture),
    );
    assert!(std::fs::metadata(&picture).unwrap().len() > 1000);
}
