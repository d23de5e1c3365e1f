"""Writes tests/fixtures/m2m100-tiny/ and tests/fixtures/nllb-tiny/: tiny multilingual
translation models of the two families self-hosters run for many languages (Meta's M2M100 and
NLLB-200, both `M2M100ForConditionalGeneration` in transformers), as transformers saves them,
and what transformers computes with them, for the parity tests of issue 44.

    python scripts/make_m2m100_fixture.py            # both
    python scripts/make_m2m100_fixture.py --family nllb

Each directory holds what `save_pretrained` writes for the model and its tokenizer:
- M2M100: config.json, generation_config.json, model.safetensors, and M2M100Tokenizer's
  sentencepiece.bpe.model + vocab.json (the fairseq dictionary: <s> 0, <pad> 1, </s> 2,
  <unk> 3, then the pieces; the `__xx__` language tokens and 8 made-up words come after it);
- NLLB: the same model files and NllbTokenizer's tokenizer.json (a BPE over SentencePiece's
  pieces, the fairseq ids, the 202 `xxx_Latn` language codes added after the vocabulary).

The SentencePiece BPE model is learned on Multi30k's German and English training sentences
(data/multi30k, scripts/get-multi30k.sh), the model trained a few hundred steps in PyTorch on
both directions (German to English and English to German, the target language forced as the
first generated token) so that its outputs are not degenerate. Beside it, expected.json:

- `tokenized`: the tokenizer's source ids of val and test2016 lines and odd ones, for each
  source language (the language token and `</s>` where each family puts them);
- `generate`: for each language pair, `model.generate()` on a padded batch with
  `forced_bos_token_id` the target language's token, greedy and beam 4: the ids and their text.

Needs torch, transformers, sentencepiece and protobuf (scripts/requirements.txt).
"""

import argparse
import gzip
import json
import os
import shutil
import tempfile

import sentencepiece as spm
import torch
from transformers import GenerationConfig, M2M100Config, M2M100ForConditionalGeneration

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "data", "multi30k")

TRAIN_PAIRS = 4000
TRAIN_STEPS = 600
TOKENIZED_LINES = 20
PIECES = 500
# Each family's codes for the two languages (and a third it knows, never trained on).
LANGUAGES = {"m2m100": ("de", "en", "fr"), "nllb": ("deu_Latn", "eng_Latn", "fra_Latn")}
BATCH = {
    "de": ["Ein Mann in einem blauen Hemd steht auf einer Leiter.", "Zwei Hunde spielen im Schnee.",
           "Eine Frau", "Kinder spielen an einem sonnigen Tag im Park mit einem roten Ball."],
    "en": ["A man in a blue shirt is standing on a ladder.", "Two dogs play in the snow.",
           "A woman", "Children play in the park on a sunny day with a red ball."],
}


def lines(name, count=None):
    with gzip.open(os.path.join(DATA, name), "rt", encoding="utf-8") as f:
        out = [line.rstrip("\n") for line in f]
    return out[:count] if count else out


def train_spm(sentences, prefix):
    """A BPE model as NLLB's and M2M100's are: <unk> 0, <s> 1, </s> 2 (fairseq shifts them)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write("\n".join(sentences) + "\n")
        corpus = f.name
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, vocab_size=PIECES, model_type="bpe",
        character_coverage=1.0, num_threads=2, minloglevel=2,
    )
    os.unlink(corpus)
    return prefix + ".model"


def fairseq_vocab(spm_model):
    """The fairseq dictionary both families use: <s> <pad> </s> <unk>, then each piece."""
    processor = spm.SentencePieceProcessor(model_file=spm_model)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for i in range(processor.get_piece_size()):
        piece = processor.id_to_piece(i)
        if piece not in vocab:
            vocab[piece] = len(vocab)
    return vocab


def m2m100_tokenizer(spm_model, out):
    from transformers import M2M100Tokenizer
    shutil.copy(spm_model, os.path.join(out, "sentencepiece.bpe.model"))
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(fairseq_vocab(spm_model), f, ensure_ascii=False, indent=1)
    return M2M100Tokenizer(vocab_file=os.path.join(out, "vocab.json"),
                           spm_file=os.path.join(out, "sentencepiece.bpe.model"),
                           src_lang="de", tgt_lang="en", model_max_length=64)


def bpe_merges(spm_model):
    """The merges of a SentencePiece BPE model, as transformers' converter derives them: every
    split of a piece into two pieces, ordered by the merged piece's rank, then the parts'."""
    processor = spm.SentencePieceProcessor(model_file=spm_model)
    rank = {processor.id_to_piece(i): i for i in range(processor.get_piece_size())}
    merges = []
    for piece, piece_rank in rank.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in rank and right in rank:
                merges.append((piece_rank, rank[left], rank[right], left, right))
    return [(left, right) for *_, left, right in sorted(merges)]


def nllb_tokenizer(spm_model, out):
    """NllbTokenizer (tokenizers' BPE over the pieces, the fairseq ids), as NLLB ships it in
    tokenizer.json, the SentencePiece model beside it."""
    from transformers import NllbTokenizer
    shutil.copy(spm_model, os.path.join(out, "sentencepiece.bpe.model"))
    return NllbTokenizer(vocab=fairseq_vocab(spm_model), merges=bpe_merges(spm_model),
                         src_lang="deu_Latn", tgt_lang="eng_Latn", model_max_length=64)


def vocab_size(tokenizer, family):
    """The model's vocabulary: M2M100's dictionary, its 100 language tokens and 8 made-up words
    (as facebook/m2m100_418M's 128,112 are); NLLB's, every token of the tokenizer."""
    if family == "m2m100":
        return max(tokenizer.lang_token_to_id.values()) + 1 + 8
    return len(tokenizer)


def lang_id(tokenizer, family, code):
    return tokenizer.get_lang_id(code) if family == "m2m100" else tokenizer.convert_tokens_to_ids(code)


def build(family, out, seed):
    torch.manual_seed(seed)
    de, en = lines("train.de.gz", TRAIN_PAIRS), lines("train.en.gz", TRAIN_PAIRS)
    work = tempfile.mkdtemp()
    spm_model = train_spm(de + en, os.path.join(work, "sentencepiece.bpe"))
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    tokenizer = (m2m100_tokenizer if family == "m2m100" else nllb_tokenizer)(spm_model, out)
    shutil.rmtree(work)
    config = M2M100Config(
        vocab_size=vocab_size(tokenizer, family), d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, activation_function="relu", max_position_embeddings=64,
        dropout=0.1, attention_dropout=0.0, activation_dropout=0.0, scale_embedding=True,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
        encoder_layerdrop=0.0, decoder_layerdrop=0.0,
    )
    model = M2M100ForConditionalGeneration(config)
    source, target, _ = LANGUAGES[family]
    train(model, tokenizer, family, [(source, de, target, en), (target, en, source, de)])
    model.eval()
    model.generation_config = GenerationConfig(
        num_beams=4, max_length=64, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        decoder_start_token_id=2,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    expected = expectations(model, tokenizer, family)
    with open(os.path.join(out, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False)
    pairs = expected["generate"]
    print(f"{out}: {sum(p.numel() for p in model.parameters())} parameters, "
          f"{model.config.vocab_size} tokens; {pairs[0]['source_lang']}->{pairs[0]['target_lang']} greedy: "
          f"{pairs[0]['greedy']['text'][1]!r}")


def train(model, tokenizer, family, directions, batch_size=32):
    """Teacher-forced on both directions, the target language's token first (as generate()
    forces it), as transformers' multilingual models are fine-tuned."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 60))
    model.train()
    generator = torch.Generator().manual_seed(0)
    for step in range(TRAIN_STEPS):
        src_lang, sources, tgt_lang, targets = directions[step % len(directions)]
        tokenizer.src_lang, tokenizer.tgt_lang = src_lang, tgt_lang
        index = torch.randint(len(sources), (batch_size,), generator=generator).tolist()
        batch = tokenizer([sources[i] for i in index], text_target=[targets[i] for i in index],
                          padding=True, truncation=True, max_length=48, return_tensors="pt")
        labels = batch.pop("labels")
        # transformers' shift: </s> (decoder_start_token_id) then the labels, whose first is
        # the target language's token: generate() forces the same first token.
        decoder_input_ids = torch.cat([torch.full_like(labels[:, :1], 2), labels[:, :-1]], 1)
        labels[labels == tokenizer.pad_token_id] = -100
        loss = model(**batch, decoder_input_ids=decoder_input_ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % 100 == 0 or step == TRAIN_STEPS - 1:
            print(f"  step {step}: loss {loss.item():.3f}")


def expectations(model, tokenizer, family):
    source, target, third = LANGUAGES[family]
    odd = ["  Zwei  Hunde   spielen ", "\tEin Mann\tläuft", "Ein Mann 😀 mit ☃ und ½ km", ""]
    tokenized = []
    for lang, name in [(source, "de"), (target, "en")]:
        tokenizer.src_lang = lang
        texts = lines(f"val.{name}.gz", TOKENIZED_LINES) + lines(f"test2016.{name}.gz",
                                                                  TOKENIZED_LINES) + odd
        tokenized.append({"lang": lang, "sources": texts,
                          "ids": [tokenizer(t)["input_ids"] for t in texts]})
    generated = []
    for src_lang, tgt_lang, texts in [(source, target, BATCH["de"]), (target, source, BATCH["en"]),
                                      (source, third, BATCH["de"])]:
        tokenizer.src_lang = src_lang
        inputs = tokenizer(texts, padding=True, return_tensors="pt")
        forced = lang_id(tokenizer, family, tgt_lang)
        pair = {"source_lang": src_lang, "target_lang": tgt_lang, "sources": texts,
                "input_ids": inputs["input_ids"].tolist(), "forced_bos_token_id": forced}
        for name, beams in [("greedy", 1), ("beam", 4)]:
            with torch.no_grad():
                out = model.generate(**inputs, num_beams=beams, forced_bos_token_id=forced)
            pair[name] = {"num_beams": beams, "ids": out.tolist(),
                          "text": tokenizer.batch_decode(out, skip_special_tokens=True)}
        generated.append(pair)
    return {"tokenized": tokenized, "generate": generated}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--family", choices=sorted(LANGUAGES))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(2)
    for family in [args.family] if args.family else sorted(LANGUAGES):
        build(family, os.path.join(ROOT, "tests", "fixtures", f"{family}-tiny"), args.seed)


if __name__ == "__main__":
    main()
