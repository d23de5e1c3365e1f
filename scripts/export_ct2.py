"""Writes a CTranslate2 model directory from one of this tool's translation checkpoints, so that
a model trained here can be served by CTranslate2 (OpenNMT, LibreTranslate/Argos) and timed
against it.

    python scripts/export_ct2.py CHECKPOINT_OR_RUN_DIR OUT_DIR

CHECKPOINT_OR_RUN_DIR is a checkpoint directory (model.safetensors, config.toml and the
vocabularies: vocab.src.txt/vocab.tgt.txt or tokenizer.json) or a run directory, whose best/
or else last/ is used, as `transformer translate --checkpoint` reads it. The tensor names are
the PyTorch reference's, so this is also a converter for The Annotated Transformer's own
state_dict. Needs `ctranslate2`, `safetensors` and `numpy` (PyPI).

Supported: the reference's architecture (pre-norm, sinusoidal positions, biases, separate
embeddings and generator), which is this tool's default; other variants are refused by name.

The one difference CTranslate2 cannot express is the reference's LayerNorm,
a * (x - mean) / (std + 1e-6) with the unbiased (n - 1) std, where CTranslate2 computes
gamma * (x - mean) / sqrt(var + eps) with the biased variance. Since the unbiased std is the
biased one times sqrt(n / (n - 1)), the gain is folded: gamma = a * sqrt((n - 1) / n), with
eps = 1e-12 for the reference's 1e-6 added outside the root. The two agree to about 1e-6
relative (the eps terms differ), which keeps greedy decoding identical in practice.
"""

import argparse
import math
import os
import shutil
import sys
import tomllib

import numpy as np
from safetensors.numpy import load_file


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def checkpoint_dir(path):
    """The checkpoint inside a run directory (best/, else last/), or `path` itself."""
    for sub in ("best", "last"):
        if os.path.isfile(os.path.join(path, sub, "model.safetensors")):
            return os.path.join(path, sub)
    if os.path.isfile(os.path.join(path, "model.safetensors")):
        return path
    fail(f"{path} holds no model.safetensors (nor best/ or last/ with one); give a checkpoint or run directory")


def vocabularies(ckpt):
    """(source tokens, target tokens), each in id order."""
    def bpe(name):
        from tokenizers import Tokenizer

        vocab = Tokenizer.from_file(os.path.join(ckpt, name)).get_vocab()
        return [t for t, _ in sorted(vocab.items(), key=lambda item: item[1])]

    if os.path.isfile(os.path.join(ckpt, "tokenizer.json")):
        tokens = bpe("tokenizer.json")
        return tokens, tokens
    if os.path.isfile(os.path.join(ckpt, "tokenizer.src.json")):
        return bpe("tokenizer.src.json"), bpe("tokenizer.tgt.json")
    read = lambda name: open(os.path.join(ckpt, name), encoding="utf-8").read().splitlines()
    return read("vocab.src.txt"), read("vocab.tgt.txt")


def folded_gain(gain):
    """The reference's gain for CTranslate2's LayerNorm (see the module's docstring)."""
    n = gain.shape[0]
    return gain * np.float32(math.sqrt((n - 1) / n))


def model_spec(tensors, model, src_tokens, tgt_tokens):
    from ctranslate2.specs import common_spec, transformer_spec
    from ctranslate2.converters import utils

    layers = model.get("layers", 6)
    activation = {"relu": common_spec.Activation.RELU, "swish": common_spec.Activation.SWISH,
                  "gelu": common_spec.Activation.GELU}.get(model.get("activation", "relu"))
    if activation is None:
        fail(f"model.activation = {model.get('activation')!r} has no CTranslate2 counterpart")
    spec = transformer_spec.TransformerSpec.from_config(
        (layers, layers), model.get("heads", 8), pre_norm=True, activation=activation,
    )
    spec.config.layer_norm_epsilon = 1e-12

    def get(name):
        if name not in tensors:
            fail(f"the checkpoint has no tensor {name}; is it a translation model of the default architecture?")
        return tensors[name]

    def linear(target, prefix):
        target.weight = get(f"{prefix}.weight")
        target.bias = get(f"{prefix}.bias")

    def fused(target, prefixes):
        parts = [common_spec.LinearSpec() for _ in prefixes]
        for part, prefix in zip(parts, prefixes):
            linear(part, prefix)
        utils.fuse_linear(target, parts)

    def norm(target, prefix):
        target.gamma = folded_gain(get(f"{prefix}.a_2"))
        target.beta = get(f"{prefix}.b_2")

    def feed_forward(ffn, prefix, sublayer):
        linear(ffn.linear_0, f"{prefix}.feed_forward.w_1")
        linear(ffn.linear_1, f"{prefix}.feed_forward.w_2")
        norm(ffn.layer_norm, f"{prefix}.sublayer.{sublayer}.norm")

    def self_attention(attention, prefix):
        fused(attention.linear[0], [f"{prefix}.self_attn.linears.{j}" for j in range(3)])
        linear(attention.linear[1], f"{prefix}.self_attn.linears.3")
        norm(attention.layer_norm, f"{prefix}.sublayer.0.norm")

    def embeddings(stack, prefix):
        table = stack.embeddings[0] if isinstance(stack.embeddings, list) else stack.embeddings
        table.weight = get(f"{prefix}.0.lut.weight")
        stack.scale_embeddings = True
        pe = get(f"{prefix}.1.pe")
        stack.position_encodings.encodings = pe.reshape(-1, pe.shape[-1])

    embeddings(spec.encoder, "src_embed")
    embeddings(spec.decoder, "tgt_embed")
    for i, layer in enumerate(spec.encoder.layer):
        self_attention(layer.self_attention, f"encoder.layers.{i}")
        feed_forward(layer.ffn, f"encoder.layers.{i}", 1)
    norm(spec.encoder.layer_norm, "encoder.norm")
    for i, layer in enumerate(spec.decoder.layer):
        p = f"decoder.layers.{i}"
        self_attention(layer.self_attention, p)
        linear(layer.attention.linear[0], f"{p}.src_attn.linears.0")
        fused(layer.attention.linear[1], [f"{p}.src_attn.linears.{j}" for j in (1, 2)])
        linear(layer.attention.linear[2], f"{p}.src_attn.linears.3")
        norm(layer.attention.layer_norm, f"{p}.sublayer.1.norm")
        feed_forward(layer.ffn, p, 2)
    norm(spec.decoder.layer_norm, "decoder.norm")
    linear(spec.decoder.projection, "generator.proj")
    spec.register_source_vocabulary(src_tokens)
    spec.register_target_vocabulary(tgt_tokens)
    return spec


def check_architecture(model):
    """Refuses, by key, the variants CTranslate2's Transformer spec does not take as ours."""
    defaults = {"arch": "encoder-decoder", "norm": "pre", "positions": "sinusoidal",
                "attention_bias": True, "ffn_bias": True, "share_embeddings": False}
    for key, default in defaults.items():
        if model.get(key, default) != default:
            fail(f"model.{key} = {model[key]!r} is not supported by this exporter (only {default!r})")


def export(tensors, model, src_tokens, tgt_tokens, out):
    check_architecture(model)
    spec = model_spec(tensors, model, src_tokens, tgt_tokens)
    spec.validate()
    spec.optimize(quantization=None)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    spec.save(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="checkpoint or run directory")
    parser.add_argument("out", help="CTranslate2 model directory to write (replaced if it exists)")
    args = parser.parse_args()
    ckpt = checkpoint_dir(args.checkpoint)
    with open(os.path.join(ckpt, "config.toml"), "rb") as f:
        config = tomllib.load(f)
    tensors = load_file(os.path.join(ckpt, "model.safetensors"))
    if any(t.dtype.name == "int8" for t in tensors.values()):
        sys.exit(f"error: {ckpt} holds int8 weights (made by `transformer quantize`); export "
                 "the float checkpoint it was quantized from (CTranslate2 quantizes on its own: "
                 "ct2's compute_type int8)")
    src_tokens, tgt_tokens = vocabularies(ckpt)
    export(tensors, config.get("model", {}), src_tokens, tgt_tokens, args.out)
    print(f"wrote {args.out} from {ckpt}")


if __name__ == "__main__":
    main()
