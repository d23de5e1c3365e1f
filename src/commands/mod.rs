//! The commands, one file each holding its arguments (a clap `Args` struct) and its `run`, as
//! cargo's `src/bin/cargo/commands/`; this file is their table: the parser, each command's
//! help, and the dispatch.

use attention::AttentionArgs;
use average::AverageArgs;
use bench::BenchArgs;
use clap::{Parser, Subcommand};
use completions::CompletionsArgs;
use download::DownloadArgs;
use eval::EvalArgs;
use export::ExportArgs;
use generate::GenerateArgs;
use infer_test::InferTestArgs;
use man::ManArgs;
use plot::PlotArgs;
use quantize::QuantizeArgs;
use sentences::SentencesArgs;
use serve::ServeArgs;
use tokenize::TokenizeArgs;
use train::TrainArgs;
use translate::TranslateArgs;

pub mod attention;
pub mod average;
pub mod bench;
pub mod completions;
pub mod download;
pub mod eval;
pub mod export;
pub mod generate;
pub mod infer_test;
pub mod man;
pub mod plot;
pub mod quantize;
pub mod sentences;
pub mod serve;
pub mod tokenize;
pub mod train;
pub mod translate;

#[derive(Debug, Parser)]
#[command(
    name = "transformer",
    version,
    about = "Train and run The Annotated Transformer's encoder-decoder on Candle"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train a translation model and write a checkpoint directory
    #[command(
        after_help = "Examples:\n  transformer train --config configs/base.toml\n  \
                            transformer train --resume runs/base"
    )]
    Train(TrainArgs),
    /// Translate a text, stdin line by line, or a file (.txt, .html, .docx) with a trained
    /// checkpoint; texts are cut into sentences and put back together
    #[command(
        after_help = "Examples:\n  transformer translate \"ich mochte ein bier\"\n  \
                            transformer translate --checkpoint runs/multi30k-cpu --beam 5 < de.txt\n  \
                            transformer translate --format html \"<p>Ich <b>mag</b> Bier.</p>\"\n  \
                            transformer translate --file brief.docx --out letter.docx"
    )]
    Translate(TranslateArgs),
    /// Cut text into sentences as translate and serve do (one per line; a blank line after
    /// each input line's)
    #[command(
        after_help = "Example:\n  echo 'Wir kommen am 3. Mai. Bring z. B. Brot mit.' | transformer sentences --lang de"
    )]
    Sentences(SentencesArgs),
    /// Continue a prompt (or each line of stdin, in batches) with a trained decoder-only
    /// language model: by sampling, or by the beam search translation uses
    #[command(
        after_help = "Examples:\n  transformer generate --checkpoint runs/lm-tiny \"And God said\" \
                            --temperature 0.8 --top-k 40\n  \
                            transformer generate --checkpoint runs/lm-tiny --beam 4 - < prompts.txt\n\n\
                            The decoders are the ones translate runs (one decoding contract for every \
                            model family): --beam is translate's beam search, and prompts of one token \
                            length from stdin are decoded as one batch, each exactly as it would be alone."
    )]
    Generate(GenerateArgs),
    /// Score translations with BLEU and chrF exactly as sacreBLEU does
    #[command(
        after_help = "Examples:\n  transformer eval --hyp out.en --ref test.en\n  \
                            transformer eval --checkpoint runs/multi30k-cpu --src test.de.gz \
                            --ref test.en.gz --beam 5"
    )]
    Eval(EvalArgs),
    /// Average the weights of a run's last kept checkpoints (training.keep_last) into one
    #[command(after_help = "Example:\n  transformer average runs/multi30k-cpu --last 5")]
    Average(AverageArgs),
    /// Print the ids (or pieces) a checkpoint's tokenizer gives each line, as the model reads them
    #[command(
        after_help = "Examples:\n  transformer tokenize --checkpoint opus-mt-de-en \"Zwei Hunde spielen.\"\n                        transformer tokenize --checkpoint opus-mt-de-en --target --pieces - < refs.en"
    )]
    Tokenize(TokenizeArgs),
    /// Write a checkpoint as a Hugging Face directory of its family (transformers, CTranslate2)
    #[command(
        after_help = "Example:\n  transformer export --to hf runs/opus-mt-de-en-tuned --out de-en-hf\n\n                      The checkpoint must be a MarianMT model or an M2M100 / NLLB-200 one: a Hugging \
                      Face directory, or a run fine-tuned from one (training.init_from); each is \
                      written as its family's directory."
    )]
    Export(ExportArgs),
    /// Write a checkpoint's int8 copy (a quarter of the size), which every command loads directly
    #[command(
        after_help = "Example:\n  transformer quantize runs/multi30k-cpu/averaged --out runs/multi30k-cpu/int8\n  \
                      transformer translate --checkpoint runs/multi30k-cpu/int8 \"Zwei Hunde spielen.\"\n\n\
                      Every linear layer and embedding table is stored as int8 with one scale per \
                      row; it decodes as --compute-type int8 does from the float checkpoint, with the \
                      same translations. An int8 checkpoint cannot be trained, averaged or exported: \
                      keep the float one."
    )]
    Quantize(QuantizeArgs),
    /// Download a model's files from the Hugging Face Hub into its cache, without running it
    #[command(
        after_help = "Examples:\n  transformer download Helsinki-NLP/opus-mt-de-en\n  \
                      transformer translate --checkpoint Helsinki-NLP/opus-mt-de-en \"Ein Hund läuft.\"\n\n\
                      Every --checkpoint takes a Hub name the same way. The files go to the cache \
                      Python's tools share (HF_HUB_CACHE, else HF_HOME/hub, else \
                      ~/.cache/huggingface/hub), checked against the Hub's sizes and hashes. \
                      HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE=1 (the cache only) and \
                      HF_HUB_DOWNLOAD_TIMEOUT (seconds) are honoured."
    )]
    Download(DownloadArgs),
    /// Redraw a run's loss.png from its metrics.jsonl
    #[command(after_help = "Example:\n  transformer plot runs/base --out base-loss.png")]
    Plot(PlotArgs),
    /// Draw every attention head (encoder, decoder, encoder-decoder) for one sentence as a PNG
    #[command(
        after_help = "Example:\n  transformer attention \"ich mochte ein bier\" --layers 1,6 \
                            --out attention.png"
    )]
    Attention(AttentionArgs),
    /// Serve translations over HTTP: LibreTranslate's API, a /v1 API and a page at /
    #[command(
        after_help = "Examples:\n  transformer serve --checkpoint runs/multi30k-cpu/averaged\n  \
                            transformer serve --host 0.0.0.0 --port 8080 --api-key \"$KEY\"\n\n\
                            curl -s localhost:5000/translate -d q='ich mochte ein bier' -d source=de -d target=en"
    )]
    Serve(ServeArgs),
    /// One workload of the speed benchmark (scripts/bench.sh runs them all against PyTorch)
    #[command(after_help = "Example:\n  transformer bench copy --steps 10")]
    Bench(BenchArgs),
    /// The Annotated Transformer's untrained-model demo: greedy decoding with random weights
    #[command(after_help = "Example:\n  transformer infer-test --runs 10 --seed 1")]
    InferTest(InferTestArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or powershell
    #[command(
        after_help = "Examples:\n  transformer completions bash > ~/.local/share/bash-completion/completions/transformer\n  \
                            transformer completions zsh > ~/.zfunc/_transformer\n  \
                            transformer completions fish > ~/.config/fish/completions/transformer.fish"
    )]
    Completions(CompletionsArgs),
    /// Print the man page (roff) of transformer and of each subcommand, or write them as files
    #[command(after_help = "Examples:\n  transformer man | man -l -\n  \
                            transformer man --out-dir ~/.local/share/man/man1")]
    Man(ManArgs),
}

/// Runs one parsed command.
pub fn run(command: Command) -> anyhow::Result<()> {
    crate::device_choice::choose_kernels()?;
    crate::device_choice::choose_tf32()?;
    match command {
        Command::Train(args) => train::run(args),
        Command::Translate(args) => translate::run(args),
        Command::Sentences(args) => sentences::run(args),
        Command::Generate(args) => generate::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Average(args) => average::run(args),
        Command::Export(args) => export::run(args),
        Command::Quantize(args) => quantize::run(args),
        Command::Download(args) => download::run(args),
        Command::Tokenize(args) => tokenize::run(args),
        Command::Plot(args) => plot::run(args),
        Command::Attention(args) => attention::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Bench(args) => bench::run(args),
        Command::InferTest(args) => infer_test::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Man(args) => man::run(args),
    }
}
