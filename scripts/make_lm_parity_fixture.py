"""Writes tests/fixtures/parity-lm/: a small decoder-only language model from the PyTorch
reference (scripts/reference.py make_lm: the gist's post-norm, learned positions, bias-free
attention) and what it computes.

    python scripts/make_lm_parity_fixture.py [--out tests/fixtures/parity-lm] [--seed 0]

model.safetensors is the state_dict as is; config.toml is the `[model]` table; expected.json
has input ids, the next-token logits of every position, and a greedy continuation computed
the way the gist would (the whole sequence re-run at every step).
"""

import argparse
import json
import os
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

MODEL = dict(arch="decoder-only", layers=2, d_model=32, d_ff=64, heads=4, dropout=0.1,
             attention_dropout=0.1, max_len=48, norm="post", positions="learned",
             attention_bias=False, ffn_bias=True, share_embeddings=False)
VOCAB = 13
FIT_STEPS = 60
PROMPT = [1, 2, 3]
CONTINUE = 12


def pattern(offset, length):
    """A cyclic sequence, so that a briefly fitted model continues it with clear margins."""
    return [(offset + i) % (VOCAB - 1) + 1 for i in range(length)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/fixtures/parity-lm")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    keys = ("layers", "d_model", "d_ff", "heads", "dropout", "max_len", "attention_dropout",
            "norm", "positions", "attention_bias", "ffn_bias", "share_embeddings")
    cfg = {k: MODEL[k] for k in keys}
    cfg["N"], cfg["h"] = cfg.pop("layers"), cfg.pop("heads")
    model = reference.make_lm(VOCAB, **cfg)

    train = torch.tensor([pattern(o, 24) for o in range(8)])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(FIT_STEPS):
        logits = model(train[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), train[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()

    ids = torch.tensor([pattern(3, 16), [5, 9, 2, 7, 7, 1, 12, 4, 3, 3, 8, 6, 10, 11, 2, 5]])
    with torch.no_grad():
        logits = model(ids)
        sequence, margins = list(PROMPT), []
        for _ in range(CONTINUE):
            last = model(torch.tensor([sequence]))[0, -1]
            top2 = last.topk(2).values
            margins.append(float(top2[0] - top2[1]))
            sequence.append(int(last.argmax()))

    os.makedirs(args.out, exist_ok=True)
    save_file({k: v.contiguous().clone() for k, v in model.state_dict().items()},
              os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(args.out, "config.toml"), "w") as f:
        f.write("[model]\n")
        for k, v in MODEL.items():
            value = ("true" if v else "false") if isinstance(v, bool) else (
                f'"{v}"' if isinstance(v, str) else v)
            f.write(f"{k} = {value}\n")
        # Not read by the parity test; a decoder-only config names a text corpus.
        f.write('\n[data]\ntrain = { text = "data/genesis.txt" }\n')
    # A word vocabulary of VOCAB tokens (the four specials, then w4, w5, ...), so that the
    # fixture is a whole checkpoint that the strict loader of `transformer generate` reads.
    words = ["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(4, VOCAB)]
    for side in ("src", "tgt"):
        with open(os.path.join(args.out, f"vocab.{side}.txt"), "w") as f:
            f.write("".join(w + "\n" for w in words))
    expected = {
        "generated_by": "scripts/make_lm_parity_fixture.py --seed %d (torch %s)" % (
            args.seed, torch.__version__),
        "vocab": VOCAB,
        "ids": ids.tolist(),
        "logits": logits.tolist(),
        "prompt": PROMPT,
        "greedy": sequence[len(PROMPT):],
    }
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(expected, f)
    print(f"wrote {args.out}; final fit loss {loss.item():.3f}; "
          f"smallest greedy top-2 margin {min(margins):.3f}; greedy {expected['greedy']}")


if __name__ == "__main__":
    main()
