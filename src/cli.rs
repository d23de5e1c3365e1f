//! The command line: one Args struct per subcommand, nothing else.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    Train(TrainArgs),
    /// Translate a sentence, or stdin line by line, with a trained checkpoint
    Translate(TranslateArgs),
    /// Continue a prompt with a trained decoder-only language model
    Generate(GenerateArgs),
    /// Score translations with BLEU and chrF exactly as sacreBLEU does
    Eval(EvalArgs),
    /// Redraw a run's loss.png from its metrics.jsonl
    Plot(PlotArgs),
    /// Draw every attention head (encoder, decoder, encoder-decoder) for one sentence as a PNG
    Attention(AttentionArgs),
    /// One workload of the speed benchmark (scripts/bench.sh runs them all against PyTorch)
    Bench(BenchArgs),
    /// The Annotated Transformer's untrained-model demo: greedy decoding with random weights
    InferTest(InferTestArgs),
}

#[derive(Debug, Args)]
pub struct DeviceArgs {
    /// Where to run: auto (CUDA if built in and present, else CPU), cpu, cuda, or cuda:N
    #[arg(long, default_value = "auto", value_name = "DEVICE")]
    pub device: String,
}

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// TOML config; without it, the built-in base config (configs/base.toml)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Continue the run in DIR from its last/ checkpoint, exactly where it stopped
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["config", "out", "seed", "overwrite"])]
    pub resume: Option<PathBuf>,
    /// Stop after step N with a checkpoint that --resume continues (for time-limited jobs)
    #[arg(long, value_name = "N")]
    pub stop_at_step: Option<usize>,
    /// Run directory (overrides the config's run.dir; default runs/<config name>)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seed for initialisation, dropout and data order (overrides training.seed)
    #[arg(long)]
    pub seed: Option<u64>,
    /// Replace a checkpoint already in the run directory
    #[arg(long)]
    pub overwrite: bool,
    /// No progress output
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub device: DeviceArgs,
}

#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// Beam size; 1 is greedy decoding
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub beam: usize,
    /// Length penalty exponent for beam search: scores are divided by ((5 + len) / 6)^alpha
    /// [default: 1.0]
    #[arg(long, value_name = "ALPHA")]
    pub length_penalty: Option<f32>,
    /// Most target tokens to generate, </s> included (default: source length + 50)
    #[arg(long, value_name = "N")]
    pub max_len: Option<usize>,
    /// Sentences decoded together (greedy decoding)
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub batch_size: usize,
}

#[derive(Debug, Args)]
pub struct TranslateArgs {
    /// Sentence to translate; without it, stdin is translated line by line
    pub text: Option<String>,
    /// Checkpoint or run directory (a run's best/, else last/); default: the run under runs/
    /// written most recently
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// Print one JSON object per input with tokens, ids and log-probabilities
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub decode: DecodeArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Text to continue; empty: the model starts a line of its own
    #[arg(default_value = "")]
    pub prompt: String,
    /// Language-model checkpoint or run directory (a run's best/, else last/)
    #[arg(long, value_name = "DIR")]
    pub checkpoint: PathBuf,
    /// Most tokens to add (fewer when the model ends the line or the position table ends)
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_new: usize,
    /// Softmax temperature; 0 always takes the most likely token (greedy)
    #[arg(long, default_value_t = 1.0, value_name = "T")]
    pub temperature: f64,
    /// Draw only among the K most likely tokens
    #[arg(long, value_name = "K")]
    pub top_k: Option<usize>,
    /// Seed of the draws: the same seed, prompt and checkpoint give the same text
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    #[command(flatten)]
    pub device: DeviceArgs,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Reference translations, one per line (plain or .gz)
    #[arg(long = "ref", value_name = "FILE")]
    pub reference: PathBuf,
    /// Score this hypothesis file instead of translating (no model needed)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["checkpoint", "src"])]
    pub hyp: Option<PathBuf>,
    /// Checkpoint or run directory to translate --src with
    #[arg(long, value_name = "DIR", requires = "src")]
    pub checkpoint: Option<PathBuf>,
    /// Source sentences, one per line, aligned with --ref
    #[arg(long, value_name = "FILE", requires = "checkpoint")]
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
    #[command(flatten)]
    pub decode: DecodeArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
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
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
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
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    pub workload: BenchWorkload,
    /// Timed training steps, or sentences for greedy-1
    #[arg(long, default_value_t = 10)]
    pub steps: usize,
    /// The Multi30k batch file (written by export-multi30k, read by multi30k)
    #[arg(
        long,
        value_name = "FILE",
        default_value = "target/bench-multi30k.safetensors"
    )]
    pub batches: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
}

#[derive(Debug, Args)]
pub struct InferTestArgs {
    /// How many freshly initialised models to run
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Seed of the first model (run i uses seed + i); random when absent
    #[arg(long)]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub device: DeviceArgs,
}
