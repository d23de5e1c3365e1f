"""An NLLB-200-distilled-600M-shaped model for the memory benchmark (scripts/bench-memory.sh):
M2M100ForConditionalGeneration with NLLB-200-distilled-600M's config (12 + 12 layers, d_model
1024, 256206 tokens: 615M parameters, 2.46 GB in float32), random weights (seed 0), saved by
transformers as safetensors, with the NLLB fixture's tokenizer files (whose ids the table
covers). Its translations are nonsense; its sizes, and so the memory loading it takes, are
the real model's. No network: nothing is downloaded.

    python scripts/make_nllb_shape.py OUT_DIR
"""

import shutil
import sys

import torch
from transformers import M2M100Config, M2M100ForConditionalGeneration


def main():
    out = sys.argv[1]
    config = M2M100Config(
        vocab_size=256206, d_model=1024, encoder_layers=12, decoder_layers=12,
        encoder_attention_heads=16, decoder_attention_heads=16, encoder_ffn_dim=4096,
        decoder_ffn_dim=4096, max_position_embeddings=1024, scale_embedding=True,
        activation_function="relu", dropout=0.1, attention_dropout=0.1, pad_token_id=1,
        bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, tie_word_embeddings=True)
    torch.manual_seed(0)
    with torch.no_grad():
        model = M2M100ForConditionalGeneration(config)
    model.save_pretrained(out, safe_serialization=True)
    for name in ["tokenizer.json", "tokenizer_config.json", "sentencepiece.bpe.model"]:
        shutil.copy(f"tests/fixtures/nllb-tiny/{name}", out)
    print(f"{out}: {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters")


if __name__ == "__main__":
    main()
