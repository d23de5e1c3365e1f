"""tests/fixtures/m2m100-tiny-pth: the M2M100 fixture's weights saved as PyTorch saves a
state_dict (`torch.save`, pytorch_model.bin), its tied table listed under the four names
transformers gives it (model.shared, both stacks' embed_tokens, lm_head) over one storage, as
the Hub's older directories (NLLB-200's among them) ship it; the other files copied.

    python scripts/make_pth_fixture.py
"""

import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file

SOURCE = Path("tests/fixtures/m2m100-tiny")
OUT = Path("tests/fixtures/m2m100-tiny-pth")


def main():
    OUT.mkdir(exist_ok=True)
    state = load_file(SOURCE / "model.safetensors")
    shared = state["model.shared.weight"]
    for tied in ["model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                 "lm_head.weight"]:
        state[tied] = shared
    torch.save(state, OUT / "pytorch_model.bin")
    for name in ["config.json", "generation_config.json", "tokenizer_config.json",
                 "sentencepiece.bpe.model", "vocab.json"]:
        shutil.copy(SOURCE / name, OUT / name)


if __name__ == "__main__":
    main()
