"""Writes tests/fixtures/parity/: a small random reference model and what it computes.

    python scripts/make_parity_fixture.py [--out tests/fixtures/parity] [--seed 0]
    python scripts/make_parity_fixture.py --variant post-norm   # -> tests/fixtures/parity-post-norm
    python scripts/make_parity_fixture.py --all                 # the reference and every variant

The directory is a `transformer` checkpoint (model.safetensors is the reference's state_dict as
is; config.toml and the vocabularies are ours), plus expected.json with the inputs, the encoder
memory, teacher-forced decoder log-probabilities and greedy decodes. The Rust tests load it
through the same code as `transformer translate --checkpoint` and compare.
"""

import argparse
import json
import os
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
SRC_WORDS = ["ich", "du", "er", "sie", "mochte", "habe", "ein", "eine", "bier", "cola", "wasser", "haus"]
TGT_WORDS = ["i", "you", "he", "she", "want", "have", "a", "beer", "coke", "water"]
MODEL = dict(layers=2, d_model=32, d_ff=64, heads=4, dropout=0.1, attention_dropout=0.1, max_len=64)
PAIRS = [
    ("ich mochte ein bier", "i want a beer"),
    ("du habe eine cola bier", "you have coke"),
    ("er mochte wasser", "he want a water"),
]
MAX_STEPS = 10
# (source, most ids to generate): the training sources, unseen combinations, an unknown word
# (`auto`), and a decode cut short before </s>.
GREEDY = [(src, MAX_STEPS) for src, _ in PAIRS] + [
    ("sie habe ein haus ein bier ein cola", MAX_STEPS),
    ("ich mochte ein auto", MAX_STEPS),
    ("ich", MAX_STEPS),
    ("ich mochte ein bier", 2),
]
FIT_STEPS = 40
# The other tutorials' architectures: the [model] keys each fixture adds to MODEL.
VARIANTS = {
    "post-norm": dict(norm="post"),
    "learned-positions": dict(positions="learned"),
    "bias-free": dict(attention_bias=False, ffn_bias=False),
    "shared-embeddings": dict(share_embeddings=True),
}


def fit_briefly(model, src, tgt_in, tgt_out, src_mask, tgt_mask):
    """A few Adam steps on PAIRS, so that greedy decoding produces words and stops at </s>
    (a random model repeats one word) and its choices are not near-ties."""
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    model.train()
    for _ in range(FIT_STEPS):
        log_probs = model.generator(model.forward(src, tgt_in, src_mask, tgt_mask))
        loss = torch.nn.functional.nll_loss(
            log_probs.reshape(-1, log_probs.size(-1)), tgt_out.reshape(-1),
            ignore_index=reference.PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def config_toml(model_cfg):
    lines = ["[model]"] + [f"{k} = {toml_value(v)}" for k, v in model_cfg.items()]
    lines += ["", "[data]", 'train = "data/toy.tsv"', ""]
    return "\n".join(lines)


def encode(words, vocab):
    index = {w: i for i, w in enumerate(vocab)}
    return [reference.BOS] + [index.get(w, reference.UNK) for w in words.split()] + [reference.EOS]


def padded(rows):
    width = max(len(r) for r in rows)
    return torch.tensor([r + [reference.PAD] * (width - len(r)) for r in rows])


def smallest_top2_margin(model, src, src_mask, ids):
    """How close greedy decoding came to a tie: a margin near 0 would make the fixture fragile."""
    memory = model.encode(src, src_mask)
    ys = torch.tensor([[reference.BOS] + ids[:-1]])
    out = model.decode(memory, src_mask, ys, reference.subsequent_mask(ys.size(1)))
    top2 = model.generator(out).topk(2, dim=-1).values[0]
    return float((top2[:, 0] - top2[:, 1]).min())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="default: tests/fixtures/parity[-VARIANT]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variant", choices=sorted(VARIANTS))
    parser.add_argument("--all", action="store_true", help="the reference and every variant")
    args = parser.parse_args()
    variants = [None] + sorted(VARIANTS) if args.all else [args.variant]
    for variant in variants:
        out = args.out if args.out and not args.all else (
            "tests/fixtures/parity" + (f"-{variant}" if variant else ""))
        write_fixture(out, args.seed, variant)


def write_fixture(out, seed, variant):
    torch.manual_seed(seed)
    model_cfg = dict(MODEL, **VARIANTS.get(variant, {}))
    src_vocab, tgt_vocab = SPECIALS + SRC_WORDS, SPECIALS + TGT_WORDS
    model = reference.make_model_from_config(model_cfg, len(src_vocab), len(tgt_vocab))

    src_rows = [encode(s, src_vocab) for s, _ in PAIRS]
    tgt_rows = [encode(t, tgt_vocab) for _, t in PAIRS]
    src = padded(src_rows)
    tgt_in = padded([r[:-1] for r in tgt_rows])
    tgt_out = padded([r[1:] for r in tgt_rows])
    src_mask = (src != reference.PAD).unsqueeze(-2)
    tgt_mask = reference.target_mask(tgt_in, reference.PAD)
    fit_briefly(model, src, tgt_in, tgt_out, src_mask, tgt_mask)
    greedy = []
    margins = []
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        log_probs = model.generator(model.decode(memory, src_mask, tgt_in, tgt_mask))
        for sentence, max_steps in GREEDY:
            one = torch.tensor([encode(sentence, src_vocab)])
            one_mask = torch.ones(1, 1, one.size(1), dtype=torch.bool)
            ids, lps = reference.greedy_decode(model, one, one_mask, max_steps)
            margins.append(smallest_top2_margin(model, one, one_mask, ids))
            greedy.append({"source": sentence, "max_steps": max_steps, "ids": ids, "log_probs": lps})

    os.makedirs(out, exist_ok=True)
    # state_dict as is; a tied matrix is listed under both of its names (cloned, since
    # safetensors will not write one storage twice), as PyTorch users would export it.
    save_file({k: v.contiguous().clone() for k, v in model.state_dict().items()},
              os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.toml"), "w") as f:
        f.write(config_toml(model_cfg))
    for name, vocab in (("vocab.src.txt", src_vocab), ("vocab.tgt.txt", tgt_vocab)):
        with open(os.path.join(out, name), "w") as f:
            f.write("\n".join(vocab) + "\n")
    flags = f" --variant {variant}" if variant else ""
    expected = {
        "generated_by": "scripts/make_parity_fixture.py --seed %d%s (torch %s)" % (
            seed, flags, torch.__version__),
        "src": src.tolist(),
        "tgt_in": tgt_in.tolist(),
        "memory": memory.tolist(),
        "log_probs": log_probs.tolist(),
        "greedy": greedy,
    }
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)
    print(f"wrote {out}; smallest top-2 log-prob margin in greedy decoding: {min(margins):.4f}")


if __name__ == "__main__":
    main()
