"""Writes tests/fixtures/training/: 20 optimiser steps of the PyTorch reference's training loop,
for tests/training_reference.rs to repeat with `transformer train` and compare.

    python scripts/make_training_fixture.py [--out tests/fixtures/training] [--seed 0]

The loop is The Annotated Transformer's (scripts/reference.py): `LabelSmoothing` summed and
divided by the batch's target tokens (`SimpleLossCompute`), Adam with betas 0.9/0.98 and eps
1e-9, and the Noam rate through `LambdaLR` wired as the notebook wires it (the scheduler steps
after the optimiser, so step n takes rate(n - 1), and the first two both rate(1)); dropout is
0 so that both sides compute the same function. `transformer` matches it with
`training.schedule = "noam-lambdalr"`.

One deliberate difference, which the `accumulate` scenario follows: the notebook's
`accum_iter` divides each batch by its own tokens, takes its first optimiser step after the
first batch alone, and advances the schedule every batch, not every step. `transformer`
divides the summed loss of the `accumulate` batches by all their tokens (one step on them is
one step on a batch of their size) and advances the schedule once per optimiser step; the
reference below does the same.

The directory is a checkpoint (model.safetensors: the reference's state_dict before the first
step; config.toml and word vocabularies in our format), pairs.tsv (the corpus), one training
config per scenario (<name>.toml, with `init_from` this directory), and expected.json (each
scenario's loss per step) with expected-<name>.safetensors (`after.<param>`: every parameter
after the last step; `grad1.<param>`: the gradient Adam was given at step 1, clipped where the
scenario clips).
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
# Each pair's longer side (with <s> and </s>) has its own length, so that the batches
# `transformer` forms (sorted by that length, cut at max_tokens) are known without its
# random order.
PAIRS = [
    ("ich mochte", "i want"),
    ("ich mochte ein bier", "i want a beer"),
    ("du hast eine cola", "you have a coke ."),
    ("er mochte ein bier und wasser", "he wants a beer and water"),
    ("sie hat ein haus und eine cola", "she has a house and a coke ."),
    ("ich mochte ein bier und du hast wasser .", "i want a beer and you have water"),
]
MODEL = dict(layers=2, d_model=16, d_ff=32, heads=2, dropout=0.0, attention_dropout=0.0, max_len=16)
STEPS = 20
COMMON = dict(lr_factor=0.5, warmup=4, label_smoothing=0.1, adam_beta1=0.9, adam_beta2=0.98,
              adam_eps=1e-9)
# name -> (accumulate, whether to clip); max_tokens is chosen so that every optimiser step
# takes all the pairs: one batch, or two accumulated.
SCENARIOS = {"plain": (1, False), "accumulate": (2, False), "clipped": (1, True)}
FIXTURE = "tests/fixtures/training"


def vocab(sentences):
    words = []
    for sentence in sentences:
        for word in sentence.split():
            if word not in words:
                words.append(word)
    return SPECIALS + words


def encode(sentence, words):
    return [reference.BOS] + [words.index(w) for w in sentence.split()] + [reference.EOS]


def batches_for(encoded, max_tokens):
    """`transformer`'s epoch_batches without its shuffles: sorted by the longer side, cut
    where one more pair would pass max_tokens (rows x longest)."""
    order = sorted(encoded, key=lambda p: max(len(p[0]), len(p[1])))
    batches, current = [], []
    for pair in order:
        longest = max(len(pair[0]), len(pair[1]))
        if current and (len(current) + 1) * longest > max_tokens:
            batches.append(current)
            current = []
        current.append(pair)
    batches.append(current)
    return batches


def max_tokens_giving(encoded, count):
    for max_tokens in range(1, 1000):
        if len(batches_for(encoded, max_tokens)) == count:
            return max_tokens
    raise SystemExit(f"no max_tokens splits the pairs into {count} batches")


def tensors(batch):
    """The reference's Batch: padded source, decoder input, targets, masks, tokens."""
    pad = reference.PAD
    width = max(len(s) for s, _ in batch)
    tgt_width = max(len(t) for _, t in batch)
    src = torch.tensor([s + [pad] * (width - len(s)) for s, _ in batch])
    tgt = torch.tensor([t + [pad] * (tgt_width - len(t)) for _, t in batch])
    tgt_in, tgt_y = tgt[:, :-1], tgt[:, 1:]
    src_mask = (src != pad).unsqueeze(-2)
    tgt_mask = reference.target_mask(tgt_in, pad)
    return src, tgt_in, tgt_y, src_mask, tgt_mask, int((tgt_y != pad).sum())


def train(initial, src_words, tgt_words, groups, clip):
    """STEPS optimiser steps, each on `groups[step % len(groups)]`; returns the loss per
    target token of each step, the parameters after the last and step 1's gradients."""
    model = reference.make_model(len(src_words), len(tgt_words), N=MODEL["layers"],
                                 d_model=MODEL["d_model"], d_ff=MODEL["d_ff"], h=MODEL["heads"],
                                 dropout=MODEL["dropout"], max_len=MODEL["max_len"],
                                 attention_dropout=MODEL["attention_dropout"])
    model.load_state_dict(initial, strict=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0,
                                 betas=(COMMON["adam_beta1"], COMMON["adam_beta2"]),
                                 eps=COMMON["adam_eps"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lr_lambda=lambda step: reference.rate(step, MODEL["d_model"], COMMON["lr_factor"],
                                              COMMON["warmup"]),
    )
    criterion = reference.LabelSmoothing(len(tgt_words), reference.PAD, COMMON["label_smoothing"])
    loss_compute = reference.SimpleLossCompute(model.generator, criterion)
    model.train()
    losses, first_grads = [], None
    for step in range(STEPS):
        group = [tensors(batch) for batch in groups[step % len(groups)]]
        group_tokens = sum(b[-1] for b in group)
        total = 0.0
        for src, tgt_in, tgt_y, src_mask, tgt_mask, _ in group:
            out = model.forward(src, tgt_in, src_mask, tgt_mask)
            _, loss_node = loss_compute(out, tgt_y, group_tokens)
            loss_node.backward()
            total += loss_node.item()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        if step == 0:
            first_grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        losses.append(total)
    after = {n: p.detach().clone() for n, p in model.named_parameters()}
    return losses, after, first_grads


def gradient_norm(initial, src_words, tgt_words, group):
    """The global gradient norm of step 1, to clip at half of it."""
    _, _, grads = train(initial, src_words, tgt_words, [group], None)
    return float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads.values())))


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=FIXTURE)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    src_words = vocab(s for s, _ in PAIRS)
    tgt_words = vocab(t for _, t in PAIRS)
    encoded = [(encode(s, src_words), encode(t, tgt_words)) for s, t in PAIRS]
    model = reference.make_model(len(src_words), len(tgt_words), N=MODEL["layers"],
                                 d_model=MODEL["d_model"], d_ff=MODEL["d_ff"], h=MODEL["heads"],
                                 dropout=MODEL["dropout"], max_len=MODEL["max_len"],
                                 attention_dropout=MODEL["attention_dropout"])
    initial = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    os.makedirs(args.out, exist_ok=True)
    save_file(initial, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    for name, words in (("vocab.src.txt", src_words), ("vocab.tgt.txt", tgt_words)):
        with open(os.path.join(args.out, name), "w") as f:
            f.write("\n".join(words) + "\n")
    with open(os.path.join(args.out, "pairs.tsv"), "w") as f:
        f.writelines(f"{s}\t{t}\n" for s, t in PAIRS)
    model_toml = "".join(f"{k} = {toml_value(v)}\n" for k, v in MODEL.items())
    with open(os.path.join(args.out, "config.toml"), "w") as f:
        f.write("# Written by scripts/make_training_fixture.py: the reference's model before "
                "training.\n[model]\n" + model_toml +
                f'\n[data]\ntrain = "{FIXTURE}/pairs.tsv"\ntokenizer = "word"\n')
    expected = {}
    for name, (accumulate, clip) in SCENARIOS.items():
        max_tokens = max_tokens_giving(encoded, accumulate)
        group = batches_for(encoded, max_tokens)
        clip_norm = round(gradient_norm(initial, src_words, tgt_words, group) / 2, 4) if clip else None
        losses, after, grads = train(initial, src_words, tgt_words, [group], clip_norm)
        tensors_out = {f"after.{n}": t.contiguous() for n, t in after.items()}
        tensors_out.update({f"grad1.{n}": t.contiguous() for n, t in grads.items()})
        save_file(tensors_out, os.path.join(args.out, f"expected-{name}.safetensors"))
        training = dict(seed=1, epochs=STEPS, max_tokens=max_tokens, accumulate=accumulate,
                        schedule="noam-lambdalr", log_every=1, checkpoint_every=1000, **COMMON)
        if clip_norm is not None:
            training["clip_grad_norm"] = clip_norm
        training["init_from"] = FIXTURE
        with open(os.path.join(args.out, f"{name}.toml"), "w") as f:
            f.write(f"# The {name} scenario of scripts/make_training_fixture.py: {STEPS} steps "
                    "from this directory's weights.\n[model]\n" + model_toml +
                    f'\n[data]\ntrain = "{FIXTURE}/pairs.tsv"\n\n[training]\n' +
                    "".join(f"{k} = {toml_value(v)}\n" for k, v in training.items()))
        expected[name] = dict(losses=losses, batches=len(group), clip_grad_norm=clip_norm)
        print(f"{name}: {len(group)} batch(es) a step, losses {losses[0]:.4f} -> {losses[-1]:.4f}")
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(dict(steps=STEPS, torch=torch.__version__, scenarios=expected), f, indent=1)


if __name__ == "__main__":
    main()
