"""transformers' side of scripts/bench-memory.sh: loads the M2M100-family directory DIR and
translates each line of stdin (German into English, 4 beams, at most 20 new tokens), as
`transformer translate` does in the rows beside it; an empty stdin only loads the model.

    python scripts/memory_transformers.py DIR < sources
"""

import sys

import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer


def main():
    model = AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1]).eval()
    sources = sys.stdin.read().splitlines()
    if not sources:
        return
    tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], src_lang="deu_Latn")
    batch = tokenizer(sources, return_tensors="pt", padding=True)
    with torch.no_grad():
        model.generate(**batch, num_beams=4, max_new_tokens=20,
                       forced_bos_token_id=tokenizer.convert_tokens_to_ids("eng_Latn"))


if __name__ == "__main__":
    main()
