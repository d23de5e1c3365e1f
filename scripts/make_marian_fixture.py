"""Writes tests/fixtures/marian-*/: tiny Hugging Face MarianMT directories and what
transformers computes with them, for the parity tests of issue 28.

    python scripts/make_marian_fixture.py --all              # every variant
    python scripts/make_marian_fixture.py --variant shared   # one of VARIANTS
    python scripts/make_marian_fixture.py --bench DIR        # the speed benchmark's model

Each directory is what `MarianMTModel.save_pretrained` and `MarianTokenizer.save_pretrained`
write (config.json, generation_config.json, model.safetensors or pytorch_model.bin,
source.spm, target.spm, vocab.json, target_vocab.json with separate vocabularies,
tokenizer_config.json), for a model whose SentencePiece models were trained on a slice of
Multi30k (data/multi30k, scripts/get-multi30k.sh) and which was then trained a few hundred
steps in PyTorch so that its outputs are not degenerate, then given a zero <pad> embedding row
as OPUS-MT's converted checkpoints have. Beside it, expected.json:

- `tokenized`: MarianTokenizer's source ids (`</s>` appended) of the first lines of Multi30k's
  val and test2016 sources and of a few odd lines (blanks, tabs, unseen characters,
  compatibility forms, an empty line), and its target ids of their references (and the odd
  lines);
- `teacher_forced`: a padded batch (input_ids, attention_mask, decoder_input_ids as
  transformers shifts the labels); the log-probabilities it gives are `log_probs` in
  expected.safetensors;
- `generate`: `model.generate()` on a padded batch with the model's own generation settings
  (greedy and beam search), the ids and their detokenized text.

Needs torch, transformers and sentencepiece (PyPI; scripts/test-marian.sh makes the venv).
"""

import argparse
import gzip
import json
import os
import shutil
import tempfile

import sentencepiece as spm
import torch
from safetensors.torch import save_file
from transformers import GenerationConfig, MarianConfig, MarianMTModel, MarianTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "data", "multi30k")

# name: vocabularies shared or separate, the activation, sizes, the weights' format, the
# SentencePiece vocabulary sizes and normalizer (OPUS-MT's models use nmt_nfkc, whose
# precompiled character map is most of an .spm file's 240 KB: one variant carries it).
VARIANTS = {
    "shared": dict(separate=False, activation="swish", d_model=32, ffn=64, layers=(2, 2),
                   heads=4, safetensors=True, vocab=(300, 300), normalizer="nmt_nfkc",
                   renormalize=True),
    "separate": dict(separate=True, activation="relu", d_model=48, ffn=96, layers=(2, 1),
                     heads=4, safetensors=False, vocab=(260, 220), normalizer="identity",
                     renormalize=False),
    "gelu": dict(separate=False, activation="gelu", d_model=32, ffn=128, layers=(3, 3),
                 heads=2, safetensors=True, vocab=(240, 240), normalizer="identity",
                 renormalize=True),
}
TRAIN_PAIRS = 4000
TRAIN_STEPS = 800
TOKENIZED_LINES = 40
BATCH = [
    "Ein Mann in einem blauen Hemd steht auf einer Leiter.",
    "Zwei Hunde spielen im Schnee.",
    "Eine Frau",
    "Kinder spielen an einem sonnigen Tag im Park mit einem roten Ball.",
]


def lines(name, count=None):
    with gzip.open(os.path.join(DATA, name), "rt", encoding="utf-8") as f:
        out = [line.rstrip("\n") for line in f]
    return out[:count] if count else out


def train_spm(sentences, prefix, vocab_size, normalizer):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write("\n".join(sentences) + "\n")
        corpus = f.name
    # Marian's own models: unigram, no <s>/</s>/<pad> of SentencePiece's (vocab.json has them).
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, vocab_size=vocab_size, model_type="unigram",
        character_coverage=1.0, bos_id=-1, eos_id=-1, pad_id=-1, unk_id=0,
        normalization_rule_name=normalizer, num_threads=2, minloglevel=2,
    )
    os.unlink(corpus)
    return prefix + ".model"


def marian_vocab(*spm_models):
    """OPUS-MT's layout: </s> 0, <unk> 1, then every piece, <pad> last."""
    vocab = {"</s>": 0, "<unk>": 1}
    for model in spm_models:
        processor = spm.SentencePieceProcessor(model_file=model)
        for i in range(processor.get_piece_size()):
            piece = processor.id_to_piece(i)
            if piece not in vocab and piece != "<unk>":
                vocab[piece] = len(vocab)
    vocab["<pad>"] = len(vocab)
    return vocab


def fill_vocab(vocab, size):
    """`vocab` filled with unused entries up to `size` tokens, <pad> kept last."""
    del vocab["<pad>"]
    while len(vocab) < size - 1:
        vocab[f"<unused{len(vocab)}>"] = len(vocab)
    vocab["<pad>"] = len(vocab)
    return vocab


def build(variant, out, seed):
    spec = VARIANTS[variant]
    torch.manual_seed(seed)
    src_train, tgt_train = lines("train.de.gz", TRAIN_PAIRS), lines("train.en.gz", TRAIN_PAIRS)
    work = tempfile.mkdtemp()
    source_spm = train_spm(src_train, os.path.join(work, "source"), spec["vocab"][0],
                           spec["normalizer"])
    target_spm = train_spm(tgt_train, os.path.join(work, "target"), spec["vocab"][1],
                           spec["normalizer"])
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    shutil.copy(source_spm, os.path.join(out, "source.spm"))
    shutil.copy(target_spm, os.path.join(out, "target.spm"))
    if spec["separate"]:
        source_vocab, target_vocab = marian_vocab(source_spm), marian_vocab(target_spm)
        # One <pad> id for both sides (the tokenizer's is the source's; the decoder starts
        # from it): the shorter vocabulary is filled up to the longer one's size.
        size = max(len(source_vocab), len(target_vocab))
        for vocab in (source_vocab, target_vocab):
            fill_vocab(vocab, size)
        with open(os.path.join(out, "target_vocab.json"), "w") as f:
            json.dump(target_vocab, f, ensure_ascii=False, indent=1)
    else:
        source_vocab = target_vocab = marian_vocab(source_spm, target_spm)
    with open(os.path.join(out, "vocab.json"), "w") as f:
        json.dump(source_vocab, f, ensure_ascii=False, indent=1)
    shutil.rmtree(work)

    tokenizer = MarianTokenizer(
        source_spm=os.path.join(out, "source.spm"), target_spm=os.path.join(out, "target.spm"),
        vocab=os.path.join(out, "vocab.json"),
        target_vocab_file=os.path.join(out, "target_vocab.json") if spec["separate"] else None,
        separate_vocabs=spec["separate"], source_lang="de", target_lang="en",
        model_max_length=64,
    )
    pad = tokenizer.pad_token_id
    config = MarianConfig(
        vocab_size=len(source_vocab),
        decoder_vocab_size=len(target_vocab),
        share_encoder_decoder_embeddings=not spec["separate"],
        d_model=spec["d_model"], encoder_ffn_dim=spec["ffn"], decoder_ffn_dim=spec["ffn"],
        encoder_layers=spec["layers"][0], decoder_layers=spec["layers"][1],
        encoder_attention_heads=spec["heads"], decoder_attention_heads=spec["heads"],
        activation_function=spec["activation"], max_position_embeddings=64,
        dropout=0.1, attention_dropout=0.0, activation_dropout=0.0,
        scale_embedding=True, pad_token_id=pad, eos_token_id=0, decoder_start_token_id=pad,
        forced_eos_token_id=0,
    )
    model = MarianMTModel(config)
    train(model, tokenizer, src_train, tgt_train)
    # OPUS-MT's converted checkpoints start the decoder from a <pad> whose embedding row is
    # zero (Marian itself has no <pad>; CTranslate2's converter relies on it). Training here
    # moved it through the tied output layer: the fixtures are made what OPUS-MT's are.
    with torch.no_grad():
        for table in {id(t): t for t in [model.get_input_embeddings().weight,
                                         model.model.encoder.embed_tokens.weight,
                                         model.model.decoder.embed_tokens.weight]}.values():
            table[pad].zero_()
    model.eval()
    # OPUS-MT's generation configs renormalise the scores after the bad-words processor.
    model.generation_config = GenerationConfig(
        num_beams=4, max_length=64, bad_words_ids=[[pad]], forced_eos_token_id=0,
        decoder_start_token_id=pad, pad_token_id=pad, eos_token_id=0, length_penalty=1.0,
        renormalize_logits=spec["renormalize"],
    )
    model.save_pretrained(out)
    if not spec["safetensors"]:
        # Many OPUS-MT repositories ship only PyTorch's pickle: every state_dict key, the tied
        # ones included, as older transformers wrote it.
        os.unlink(os.path.join(out, "model.safetensors"))
        torch.save(model.state_dict(), os.path.join(out, "pytorch_model.bin"))
    tokenizer.save_pretrained(out)
    expected, log_probs = expectations(model, tokenizer)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, ensure_ascii=False)
    save_file({"log_probs": log_probs}, os.path.join(out, "expected.safetensors"))
    print(f"{out}: {sum(p.numel() for p in model.parameters())} parameters, "
          f"{len(source_vocab)} / {len(target_vocab)} tokens, "
          f"greedy: {expected['generate']['greedy']['text'][0]!r}")


def train(model, tokenizer, sources, targets, batch_size=32):
    """Teacher-forced training, as transformers' Seq2Seq models are fine-tuned (labels)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    # A short warmup: without it the separate-vocabulary variant learns to ignore its source.
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 60))
    model.train()
    generator = torch.Generator().manual_seed(0)
    for step in range(TRAIN_STEPS):
        index = torch.randint(len(sources), (batch_size,), generator=generator).tolist()
        batch = tokenizer([sources[i] for i in index], text_target=[targets[i] for i in index],
                          padding=True, truncation=True, max_length=48, return_tensors="pt")
        batch["labels"][batch["labels"] == tokenizer.pad_token_id] = -100
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % 100 == 0 or step == TRAIN_STEPS - 1:
            print(f"  step {step}: loss {loss.item():.3f}")


def expectations(model, tokenizer):
    val_src, val_tgt = lines("val.de.gz", TOKENIZED_LINES), lines("val.en.gz", TOKENIZED_LINES)
    test_src, test_tgt = lines("test2016.de.gz", TOKENIZED_LINES), lines("test2016.en.gz", TOKENIZED_LINES)
    # And what segmentation must get right beyond clean lines: runs of spaces, leading and
    # trailing blanks, tabs, characters the models never saw, compatibility forms that
    # nmt_nfkc folds, an empty line.
    odd = ["  Zwei  Hunde   spielen ", "\tEin Mann\tläuft", "Ein Mann 😀 mit ☃ und ½ km",
           "ÄÖÜ äöü ß ﬁ Ｗｅｌｔ", ""]
    sources, targets = val_src + test_src + odd, val_tgt + test_tgt + odd
    tokenized = {
        "sources": sources,
        "source_ids": [tokenizer(s)["input_ids"] for s in sources],
        "targets": targets,
        "target_ids": [tokenizer(text_target=t)["input_ids"] for t in targets],
    }
    batch = tokenizer(BATCH[:3], text_target=val_tgt[:3], padding=True, return_tensors="pt")
    labels = batch["labels"]
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(labels=labels)
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       decoder_input_ids=decoder_input_ids).logits
    log_probs = torch.log_softmax(logits, dim=-1).contiguous()
    teacher_forced = {
        "input_ids": batch["input_ids"].tolist(),
        "attention_mask": batch["attention_mask"].tolist(),
        "decoder_input_ids": decoder_input_ids.tolist(),
        "log_probs": "expected.safetensors",
    }
    inputs = tokenizer(BATCH, padding=True, return_tensors="pt")
    generated = {}
    for name, beams in [("greedy", 1), ("beam", model.generation_config.num_beams)]:
        with torch.no_grad():
            out = model.generate(**inputs, num_beams=beams)
        generated[name] = {
            "num_beams": beams,
            "ids": out.tolist(),
            "text": tokenizer.batch_decode(out, skip_special_tokens=True),
        }
    return {
        "tokenized": tokenized,
        "teacher_forced": teacher_forced,
        "generate": {"sources": BATCH, "input_ids": inputs["input_ids"].tolist(), **generated},
    }, log_probs


BENCH_VOCAB = 58101  # opus-mt-de-en's


def build_bench(out, seed):
    """The speed benchmark's model (scripts/bench.sh): OPUS-MT's shape (6 + 6 layers, d_model
    512, d_ff 2048, 8 heads, swish, 58,101 tokens shared by both sides, 512 positions) with
    transformers' random initialisation, <pad> row zero as in OPUS-MT's checkpoints; its
    SentencePiece models (6,000 pieces each side) learned on Multi30k, the vocabulary filled up
    to OPUS-MT's size. Not in the repository (about 300 MB): bench.sh makes it once."""
    torch.manual_seed(seed)
    src_train, tgt_train = lines("train.de.gz"), lines("train.en.gz")
    work = tempfile.mkdtemp()
    source_spm = train_spm(src_train, os.path.join(work, "source"), 6000, "nmt_nfkc")
    target_spm = train_spm(tgt_train, os.path.join(work, "target"), 6000, "nmt_nfkc")
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    shutil.copy(source_spm, os.path.join(out, "source.spm"))
    shutil.copy(target_spm, os.path.join(out, "target.spm"))
    vocab = fill_vocab(marian_vocab(source_spm, target_spm), BENCH_VOCAB)
    with open(os.path.join(out, "vocab.json"), "w") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=1)
    shutil.rmtree(work)
    tokenizer = MarianTokenizer(
        source_spm=os.path.join(out, "source.spm"), target_spm=os.path.join(out, "target.spm"),
        vocab=os.path.join(out, "vocab.json"), source_lang="de", target_lang="en",
        model_max_length=512,
    )
    pad = tokenizer.pad_token_id
    config = MarianConfig(
        vocab_size=BENCH_VOCAB, decoder_vocab_size=BENCH_VOCAB, d_model=512,
        encoder_ffn_dim=2048, decoder_ffn_dim=2048, encoder_layers=6, decoder_layers=6,
        encoder_attention_heads=8, decoder_attention_heads=8, activation_function="swish",
        max_position_embeddings=512, scale_embedding=True, pad_token_id=pad, eos_token_id=0,
        decoder_start_token_id=pad, forced_eos_token_id=0,
    )
    model = MarianMTModel(config)
    with torch.no_grad():
        model.get_input_embeddings().weight[pad].zero_()
    model.generation_config = GenerationConfig(
        num_beams=4, max_length=512, bad_words_ids=[[pad]], forced_eos_token_id=0,
        decoder_start_token_id=pad, pad_token_id=pad, eos_token_id=0, length_penalty=1.0,
        renormalize_logits=True,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    print(f"{out}: {sum(p.numel() for p in model.parameters())} parameters")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="shared")
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--bench", metavar="DIR", help="write the benchmark's model to DIR instead")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(2)
    if args.bench:
        build_bench(args.bench, args.seed)
        return
    for variant in sorted(VARIANTS) if args.all else [args.variant]:
        build(variant, os.path.join(ROOT, "tests", "fixtures", f"marian-{variant}"), args.seed)


if __name__ == "__main__":
    main()
