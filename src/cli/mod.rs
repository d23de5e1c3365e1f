//! The command line: one Args struct per subcommand, nothing else.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand};

use crate::config::ComputeType;
use crate::device::DeviceRequest;

mod serve;
pub use serve::ServeArgs;

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
    /// Write a checkpoint as a Hugging Face MarianMT directory (transformers, CTranslate2)
    #[command(
        after_help = "Example:\n  transformer export --to hf runs/opus-mt-de-en-tuned --out de-en-hf\n\n                      The checkpoint must be a MarianMT model: a Hugging Face directory, or a run \
                      fine-tuned from one (training.init_from)."
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
}

#[derive(Debug, Args)]
pub struct DeviceArgs {
    /// Where to run: auto (CUDA if built in and present, else CPU), cpu, cuda, or cuda:N
    #[arg(long, default_value = "auto", value_name = "DEVICE")]
    pub device: DeviceRequest,
}

/// A whole number of at least 1, for sizes where 0 would mean no work.
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a whole number")),
    }
}

/// Any finite number, negative ones included.
fn finite(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(format!("{text:?} is not a finite number")),
    }
}

/// A finite number of at least 0.
fn non_negative(text: &str) -> Result<f64, String> {
    match finite(text)? {
        x if x >= 0.0 => Ok(x),
        _ => Err("must be 0 or more".into()),
    }
}

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// TOML config; without it, the built-in base config (configs/base.toml)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Continue the run in RUN_DIR from its last/ checkpoint, exactly where it stopped
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["config", "out", "seed", "overwrite"])]
    pub resume: Option<PathBuf>,
    /// Stop after step N with a checkpoint that --resume continues (for time-limited jobs)
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub stop_at_step: Option<usize>,
    /// Run directory (overrides the config's run.dir; default runs/<config name>)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seed for initialisation, dropout and data order (overrides training.seed)
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Replace a checkpoint already in the run directory
    #[arg(long)]
    pub overwrite: bool,
    /// No progress output (errors and warnings still go to stderr)
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub device: DeviceArgs,
}

#[derive(Debug, Args)]
pub struct DecodeArgs {
    #[command(flatten)]
    pub settings: DecodeSettingsArgs,
    /// Most sentences decoded together (from stdin: of the lines already waiting, so that a
    /// line typed at a terminal is translated at once)
    #[arg(long, default_value_t = 32, value_name = "N", value_parser = at_least_one)]
    pub batch_size: usize,
}

/// How to decode, each over the checkpoint's `[decode]` setting.
#[derive(Debug, Args)]
pub struct DecodeSettingsArgs {
    /// Beam size; 1 is greedy decoding (at most the target vocabulary's size) [default: the
    /// checkpoint's decode.beam (a MarianMT directory's num_beams), else 1]
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub beam: Option<usize>,
    /// Length penalty exponent for beam search: scores are divided by ((5 + len) / 6)^alpha
    /// (len^alpha for a MarianMT checkpoint, as transformers divides); negative values favour
    /// short translations [default: the checkpoint's decode.length_penalty, else 1.0]
    #[arg(long, value_name = "ALPHA", value_parser = finite, allow_negative_numbers = true)]
    pub length_penalty: Option<f64>,
    /// Most target tokens to generate, </s> included [default: the checkpoint's
    /// decode.max_len, else source length + 50]
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub max_len: Option<usize>,
    /// What the linear layers compute in: float32, or int8 (weights quantized per output
    /// row when the checkpoint loads, CPU only) [default: the checkpoint's
    /// decode.compute_type, else float32]
    #[arg(long, value_name = "TYPE", value_parser = ComputeType::parse)]
    pub compute_type: Option<ComputeType>,
}

#[derive(Debug, Args)]
pub struct TranslateArgs {
    /// Sentence to translate; without it (or with -), stdin is translated line by line
    #[arg(value_name = "TEXT")]
    pub text: Option<String>,
    /// Checkpoint or run directory (a run's best/, else last/); default: the translation run
    /// under runs/ written most recently
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// Print one JSON object per input line, with tokens, ids and log-probabilities (a line of
    /// several sentences: their tokens one after another)
    #[arg(long, conflicts_with_all = ["file", "format"])]
    pub json: bool,
    /// Translate this file into --out: .txt, .html/.htm or .docx (--format names the format
    /// of a file with another extension)
    #[arg(long, value_name = "FILE", requires = "out", conflicts_with = "text")]
    pub file: Option<PathBuf>,
    /// Where --file's translation is written (atomically; - is stdout)
    #[arg(long, value_name = "FILE", requires = "file")]
    pub out: Option<PathBuf>,
    /// What TEXT, stdin or --file holds: text (line by line), html (one page or fragment:
    /// the text translated, the markup kept) or docx; default: text, or --file's extension
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<FormatArg>,
    #[command(flatten)]
    pub split: SplitArgs,
    #[command(flatten)]
    pub decode: DecodeArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// The formats `translate` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    Text,
    Html,
    Docx,
}

#[derive(Debug, Args)]
pub struct SplitArgs {
    /// Translate each line as one sentence, instead of cutting it into sentences first
    #[arg(long)]
    pub no_sentence_split: bool,
}

#[derive(Debug, Args)]
pub struct SentencesArgs {
    /// Text to cut; without it (or with -), each line of stdin
    #[arg(value_name = "TEXT")]
    pub text: Option<String>,
    /// The language whose rules apply (abbreviations, ordinals): de, en, fr, ...; others
    /// get English rules
    #[arg(long, value_name = "CODE")]
    pub lang: String,
    /// Print one JSON list of sentences per input line instead
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Text to continue; without it, the model starts a line of its own; - continues each
    /// line of stdin, one output line per input line, in batches (prompts of one token
    /// length are decoded together, each exactly as it would be alone)
    #[arg(default_value = "", value_name = "PROMPT")]
    pub prompt: String,
    /// Language-model checkpoint or run directory (a run's best/, else last/); default: the
    /// language-model run under runs/ written most recently
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// Most tokens to add (fewer when the model ends the line or the position table ends)
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_new: usize,
    /// Softmax temperature; 0 always takes the most likely token (greedy)
    #[arg(long, default_value_t = 1.0, value_name = "T", value_parser = non_negative)]
    pub temperature: f64,
    /// Draw only among the K most likely tokens
    #[arg(long, value_name = "K", value_parser = at_least_one)]
    pub top_k: Option<usize>,
    /// Seed of the draws: the same seed, prompt and checkpoint give the same text
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Beam search with N beams instead of sampling: the continuation the model scores
    /// highest under the length penalty (N at most the vocabulary's size)
    #[arg(long, value_name = "N", value_parser = at_least_one,
          conflicts_with_all = ["temperature", "top_k", "seed"])]
    pub beam: Option<usize>,
    /// Length penalty exponent for --beam: scores are divided by ((5 + len) / 6)^alpha
    /// [default: 1.0]
    #[arg(long, value_name = "ALPHA", value_parser = finite, allow_negative_numbers = true,
          requires = "beam")]
    pub length_penalty: Option<f64>,
    /// Most prompts from stdin decoded together
    #[arg(long, default_value_t = 32, value_name = "N", value_parser = at_least_one)]
    pub batch_size: usize,
    #[command(flatten)]
    pub device: DeviceArgs,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("input").required(true).args(["hyp", "src"])))]
pub struct EvalArgs {
    /// Reference translations, one per line (plain or .gz; - is stdin)
    #[arg(long = "ref", value_name = "FILE")]
    pub reference: PathBuf,
    /// Score this hypothesis file instead of translating (no model needed; - is stdin)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["checkpoint", "src"])]
    pub hyp: Option<PathBuf>,
    /// Checkpoint or run directory to translate --src with; default: the translation run
    /// under runs/ written most recently
    #[arg(long, value_name = "DIR", requires = "src")]
    pub checkpoint: Option<PathBuf>,
    /// Source sentences to translate, one per line, aligned with --ref (- is stdin)
    #[arg(long, value_name = "FILE")]
    pub src: Option<PathBuf>,
    /// Also write the translations here
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print {"bleu": ..., "signature": ..., ...} instead of sacreBLEU's text lines
    #[arg(long)]
    pub json: bool,
    /// Lowercase hypotheses and references for BLEU (sacreBLEU's -lc; chrF keeps the case)
    #[arg(long)]
    pub lowercase: bool,
    /// Cut each --src line into sentences (the checkpoint's data.source_lang rules),
    /// translate them and join them back, for sources with several sentences a line
    /// (Multi30k's lines are one sentence each)
    #[arg(long, requires = "src")]
    pub split_sentences: bool,
    #[command(flatten)]
    pub decode: DecodeArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
}

#[derive(Debug, Args)]
pub struct AverageArgs {
    /// Run directory (holds checkpoints/step-N/)
    pub run_dir: PathBuf,
    /// How many of the newest kept checkpoints to average
    #[arg(long, value_name = "K", value_parser = at_least_one)]
    pub last: usize,
    /// Where to write the averaged checkpoint (default: RUN_DIR/averaged)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TokenizeArgs {
    /// Text to tokenize; without it (or with -), each line of stdin
    #[arg(value_name = "TEXT")]
    pub text: Option<String>,
    /// Checkpoint or run directory (default: the translation run under runs/ written most
    /// recently)
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// Tokenize as a target (reference) sentence instead of a source
    #[arg(long)]
    pub target: bool,
    /// Print the pieces instead of their ids
    #[arg(long)]
    pub pieces: bool,
}

#[derive(Debug, Args)]
pub struct QuantizeArgs {
    /// Checkpoint or run directory to quantize (ours, or a Hugging Face MarianMT directory)
    pub checkpoint: PathBuf,
    /// The checkpoint directory to write
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Replace DIR when it is an earlier quantized checkpoint
    #[arg(long)]
    pub overwrite: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Checkpoint or run directory to export
    pub checkpoint: PathBuf,
    /// The format to write: hf (a Hugging Face MarianMT directory)
    #[arg(long = "to", value_enum)]
    pub to: ExportFormat,
    /// The directory to write
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Replace DIR when it already exists
    #[arg(long)]
    pub overwrite: bool,
}

/// The formats `export` writes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ExportFormat {
    /// `MarianMTModel.from_pretrained` and `ct2-transformers-converter` read it
    Hf,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Run directory (holds metrics.jsonl)
    pub run_dir: PathBuf,
    /// Where to write the picture (default: RUN_DIR/loss.png)
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AttentionArgs {
    /// The source sentence
    pub text: String,
    /// Checkpoint or run directory (default: the latest run under runs/)
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// Where to write the picture
    #[arg(long, value_name = "FILE", default_value = "attention.png")]
    pub out: PathBuf,
    /// Teacher-force this translation instead of the model's own greedy one
    #[arg(long, value_name = "TEXT")]
    pub target: Option<String>,
    /// Draw only these layers (1-based, comma-separated; default: all)
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = at_least_one)]
    pub layers: Vec<usize>,
    #[command(flatten)]
    pub device: DeviceArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchWorkload {
    /// One 800x512 by 512x2048 matrix product, --steps times: the machine's attainable FLOP/s
    Matmul,
    /// Training steps of the base model on the two toy pairs
    ToyTrain,
    /// The Annotated Transformer's copy task (N=2, batches of 80)
    Copy,
    /// Training steps of configs/multi30k-cpu.toml's model on Multi30k batches (--batches)
    Multi30k,
    /// Write the Multi30k batches both implementations train on (--batches FILE)
    ExportMulti30k,
    /// Greedy decoding with the base model, one sentence at a time
    Greedy1,
    /// Greedy decoding of 32 sentences in one batch
    Greedy32,
    /// Beam search (beam 5) over 32 sentences
    Beam5,
    /// A MarianMT directory (--checkpoint) translating test2016 sentences greedily, one at a
    /// time (--steps sentences)
    MarianGreedy1,
    /// The MarianMT directory translating 32 test2016 sentences greedily in one batch
    MarianGreedy32,
    /// The MarianMT directory translating 32 test2016 sentences with beam 4
    MarianBeam4,
    /// Under mpirun: --steps sums over the ranks of a gradient buffer the size of
    /// configs/multi30k-cpu.toml's model, alone (the communication of data-parallel training)
    Allreduce,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    pub workload: BenchWorkload,
    /// Timed training steps, or sentences for greedy-1
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = at_least_one)]
    pub steps: usize,
    /// The Multi30k batch file (written by export-multi30k, read by multi30k)
    #[arg(
        long,
        value_name = "FILE",
        default_value = "target/bench-multi30k.safetensors"
    )]
    pub batches: PathBuf,
    /// The MarianMT directory the marian-* workloads translate with
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// What the marian-* workloads' linear layers compute in: float32 or int8
    #[arg(long, value_name = "TYPE", value_parser = ComputeType::parse)]
    pub compute_type: Option<ComputeType>,
    /// Batches each rank sums per optimiser step (multi30k): one process with
    /// --accumulate R trains on the same batches per step as R ranks under mpirun
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = at_least_one)]
    pub accumulate: usize,
    #[command(flatten)]
    pub device: DeviceArgs,
}

#[derive(Debug, Args)]
pub struct InferTestArgs {
    /// How many freshly initialised models to run
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub runs: usize,
    /// Seed of the first model (run i uses seed + i); random when absent
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub device: DeviceArgs,
}
