//! `transformer`: The Annotated Transformer (Vaswani et al., 2017, as ported by Harvard NLP)
//! on Candle, with a trainer and a translator around it.
//!
//! Where each part of the paper lives (Figure 1, bottom to top):
//! - [`model::embeddings`]: embeddings scaled by sqrt(d_model) (3.4) and each side's
//!   embedding stack; [`model::positions`]: the sinusoidal positions (3.5)
//! - [`model::attention`]: scaled dot-product attention and MultiHeadedAttention (3.2, Fig. 2);
//!   [`model::masks`]: padding and subsequent-position masks (3.2.3)
//! - [`model::feed_forward`]: the position-wise feed-forward network (3.3)
//! - [`model::sublayer`]: LayerNorm and the SublayerConnection, Add & Norm (3.1)
//! - [`model::encoder`], [`model::decoder`]: the two stacks of Figure 1
//! - [`model::generator`]: the final Linear and softmax
//! - [`model::families`]: whole models, one file per family (the encoder-decoder of Figure 1,
//!   the decoder-only language model), `Model` (any of them, from one table) and what every
//!   family does; [`model::init`]: the reference's `make_model` initialisation (Xavier)
//! - [`model::step`]: the decoding contract every family implements (start a state,
//!   step it to next-token logits, reorder its rows), which every decoder is written against
//! - [`model::weights`]: the forms weights take (a linear layer's, an embedding table's,
//!   int8) and the trained weights as each pass sees them
//! - [`model::attention_maps`]: every head's attention for one sentence pair (the
//!   Annotated Transformer's "Attention Visualization")
//! - [`kernels`]: the ops the time goes to (linear, attention, LayerNorm, the residual with
//!   its dropout, the loss, Adam), fused on the CPU and composed from candle ops elsewhere;
//!   dropout (5.4) from a seeded source
//! - [`train`]: label smoothing (5.4), Adam and the Noam schedule (5.3), the loop, and the
//!   state that lets a run resume exactly
//! - [`decoding`]: greedy decoding (the reference's loop and a cached, batched one), beam
//!   search and sampling, over the decoding contract
//! - [`infer`]: the one front door (`Translator::open`), the one place that settles decoding
//!   settings ([`infer::settings`]); the translator (sentences in, sentences out) and the text
//!   generator, one or the other as `infer::Inference`
//! - [`metrics`]: BLEU (6.1) and chrF exactly as sacreBLEU computes them, and a training
//!   run's metrics.jsonl records
//! - [`corpus`]: parallel corpora read and cleaned (streamed in blocks at any size);
//!   [`tokenize`]: word, BPE and SentencePiece tokenizers and the special ids;
//!   [`training_data`]: a run's corpora as flat ids cached on disk, token-budget batches
//! - [`checkpoint`]: the run directory, written atomically ([`atomic_file`]), and the format
//!   layer that maps a file's tensor names onto the modules
//! - [`sentences`]: texts cut into the sentences the model translates, and put back
//! - [`config`]: every hyper-parameter and its default; [`device`]: CPU or CUDA
//! - [`distributed`]: data-parallel training's ranks and gradient sums (one process, MPI,
//!   NCCL); [`train::data_parallel`] deals each step's batches to them

pub mod atomic_file;
pub mod checkpoint;
pub mod config;
pub mod corpus;
pub mod decoding;
pub mod device;
pub mod distributed;
pub mod hub;
pub mod infer;
pub mod input_text;
pub mod kernels;
pub mod metrics;
pub mod model;
pub mod progress;
pub mod sentences;
pub mod small_file;
pub mod tokenize;
pub mod train;
pub mod training_data;
