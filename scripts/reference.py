"""The Annotated Transformer's model in PyTorch: the reference this project ports.

The modules are copied from The Annotated Transformer (Harvard NLP) with two changes that do
not alter the maths: `make_model` accepts `max_len` for the position table (default 5000, the
reference's) and `attention_dropout` (default 0.1, the value the reference always ends up
with). `greedy_decode` adds what `transformer translate` does on top of the reference's loop:
it stops after the end symbol and records each chosen word's log-probability.

`make_model` also builds the other tutorials' variants, each off by default (the defaults are
The Annotated Transformer exactly): `norm="post"` (the paper's and d2l's AddNorm with
torch.nn.LayerNorm, and no final norm per stack), `positions="learned"` (an nn.Embedding of
max_len positions named `pe`), `attention_bias=False` / `ffn_bias=False` (the walkthrough's
bias-free projections) and `share_embeddings=True` (the generator uses the target embedding's
matrix).
"""

import copy
import math

import torch
import torch.nn as nn


def attention(query, key, value, mask=None, dropout=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout=0.1, bias=True):
        super().__init__()
        assert d_model % h == 0
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model, bias=bias), 4)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)
        nbatches = query.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.linears[-1](x)


class EncoderDecoder(nn.Module):
    def __init__(self, encoder, decoder, src_embed, tgt_embed, generator):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.src_embed = src_embed
        self.tgt_embed = tgt_embed
        self.generator = generator

    def forward(self, src, tgt, src_mask, tgt_mask):
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)

    def encode(self, src, src_mask):
        return self.encoder(self.src_embed(src), src_mask)

    def decode(self, memory, src_mask, tgt, tgt_mask):
        return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)


class Generator(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x):
        return torch.log_softmax(self.proj(x), dim=-1)


def clones(module, N):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


class LayerNorm(nn.Module):
    def __init__(self, features, eps=1e-6):
        super().__init__()
        self.a_2 = nn.Parameter(torch.ones(features))
        self.b_2 = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.a_2 * (x - mean) / (std + self.eps) + self.b_2


class SublayerConnection(nn.Module):
    def __init__(self, size, dropout, post_norm=False):
        super().__init__()
        self.post_norm = post_norm
        self.norm = nn.LayerNorm(size) if post_norm else LayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        if self.post_norm:
            return self.norm(x + self.dropout(sublayer(x)))
        return x + self.dropout(sublayer(self.norm(x)))


def final_norm(size, post_norm):
    """Pre-norm stacks end with a norm; post-norm layers already end with one."""
    return nn.Identity() if post_norm else LayerNorm(size)


class Encoder(nn.Module):
    def __init__(self, layer, N, post_norm=False):
        super().__init__()
        self.layers = clones(layer, N)
        self.norm = final_norm(layer.size, post_norm)

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class EncoderLayer(nn.Module):
    def __init__(self, size, self_attn, feed_forward, dropout, post_norm=False):
        super().__init__()
        self.self_attn = self_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout, post_norm), 2)
        self.size = size

    def forward(self, x, mask):
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, mask))
        return self.sublayer[1](x, self.feed_forward)


class Decoder(nn.Module):
    def __init__(self, layer, N, post_norm=False):
        super().__init__()
        self.layers = clones(layer, N)
        self.norm = final_norm(layer.size, post_norm)

    def forward(self, x, memory, src_mask, tgt_mask):
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)


class DecoderLayer(nn.Module):
    def __init__(self, size, self_attn, src_attn, feed_forward, dropout, post_norm=False):
        super().__init__()
        self.size = size
        self.self_attn = self_attn
        self.src_attn = src_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout, post_norm), 3)

    def forward(self, x, memory, src_mask, tgt_mask):
        m = memory
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, tgt_mask))
        x = self.sublayer[1](x, lambda x: self.src_attn(x, m, m, src_mask))
        return self.sublayer[2](x, self.feed_forward)


def subsequent_mask(size):
    attn_shape = (1, size, size)
    mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
    return mask == 0


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1, bias=True):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(self.w_1(x).relu()))


class Embeddings(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x):
        return self.lut(x) * math.sqrt(self.d_model)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)


class LearnedPositionalEncoding(nn.Module):
    """Trained position vectors (the decoder-only gist's, indexed by position, not token)."""

    def __init__(self, d_model, dropout, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        self.pe = nn.Embedding(max_len, d_model)

    def forward(self, x):
        return self.dropout(x + self.pe.weight[: x.size(1)].unsqueeze(0))


def building_blocks(h, d_model, d_ff, dropout, max_len, attention_dropout, positions,
                    attention_bias, ffn_bias):
    """The attention, feed-forward and position modules every layer is copied from."""
    attn = MultiHeadedAttention(h, d_model, attention_dropout, bias=attention_bias)
    ff = PositionwiseFeedForward(d_model, d_ff, dropout, bias=ffn_bias)
    if positions == "learned":
        position = LearnedPositionalEncoding(d_model, dropout, max_len)
    else:
        position = PositionalEncoding(d_model, dropout, max_len)
    return attn, ff, position


def xavier_init(model):
    """The reference's initialisation: Xavier-uniform for every matrix."""
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


def make_model(
    src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1,
    max_len=5000, attention_dropout=0.1, norm="pre", positions="sinusoidal",
    attention_bias=True, ffn_bias=True, share_embeddings=False,
):
    c = copy.deepcopy
    post = norm == "post"
    attn, ff, position = building_blocks(h, d_model, d_ff, dropout, max_len, attention_dropout,
                                         positions, attention_bias, ffn_bias)
    model = EncoderDecoder(
        Encoder(EncoderLayer(d_model, c(attn), c(ff), dropout, post), N, post),
        Decoder(DecoderLayer(d_model, c(attn), c(attn), c(ff), dropout, post), N, post),
        nn.Sequential(Embeddings(d_model, src_vocab), c(position)),
        nn.Sequential(Embeddings(d_model, tgt_vocab), c(position)),
        Generator(d_model, tgt_vocab),
    )
    if share_embeddings:
        model.generator.proj.weight = model.tgt_embed[0].lut.weight
    return xavier_init(model)


def make_model_from_config(model_cfg, src_vocab, tgt_vocab):
    """Builds the reference from the `[model]` table of a `transformer` config.toml."""
    if model_cfg.get("activation", "relu") != "relu":
        raise ValueError(f"the reference has only ReLU, not model.activation = {model_cfg['activation']!r}")
    return make_model(
        src_vocab, tgt_vocab,
        N=model_cfg["layers"], d_model=model_cfg["d_model"], d_ff=model_cfg["d_ff"],
        h=model_cfg["heads"], dropout=model_cfg["dropout"], max_len=model_cfg["max_len"],
        attention_dropout=model_cfg["attention_dropout"],
        norm=model_cfg.get("norm", "pre"), positions=model_cfg.get("positions", "sinusoidal"),
        attention_bias=model_cfg.get("attention_bias", True),
        ffn_bias=model_cfg.get("ffn_bias", True),
        share_embeddings=model_cfg.get("share_embeddings", False),
    )


def target_mask(tgt, pad):
    """The reference's Batch.make_std_mask: hide padding and future words."""
    mask = (tgt != pad).unsqueeze(-2)
    return mask & subsequent_mask(tgt.size(-1)).type_as(mask.data)


PAD, BOS, EOS, UNK = 0, 1, 2, 3


def greedy_decode(model, src, src_mask, max_steps, start_symbol=BOS, end_symbol=EOS):
    """The reference's greedy_decode, stopping after `end_symbol`; returns ids and log-probs."""
    memory = model.encode(src, src_mask)
    ys = torch.zeros(1, 1).fill_(start_symbol).type_as(src.data)
    ids, log_probs = [], []
    for _ in range(max_steps):
        out = model.decode(memory, src_mask, ys, subsequent_mask(ys.size(1)).type_as(src.data))
        prob = model.generator(out[:, -1])
        best_log_prob, next_word = torch.max(prob, dim=1)
        next_word = int(next_word.item())
        ids.append(next_word)
        log_probs.append(float(best_log_prob.item()))
        ys = torch.cat([ys, torch.empty(1, 1).type_as(src.data).fill_(next_word)], dim=1)
        if next_word == end_symbol:
            break
    return ids, log_probs


class DecoderOnlyLM(nn.Module):
    """The decoder-only gist made correct: each block reads the previous block's output (the
    gist fed every block the embeddings), the causal mask is applied, positions are looked up
    by position (the gist indexed them by token id), and d_k is an integer. Its blocks are the
    Annotated Transformer's EncoderLayer under a causal mask, so the parameter names are this
    file's: embed.*, decoder.layers.N.*, decoder.norm.* (pre-norm), generator.proj.*."""

    def __init__(self, embed, decoder, generator):
        super().__init__()
        self.embed = embed
        self.decoder = decoder
        self.generator = generator

    def forward(self, ids):
        """Next-token logits (batch, len, vocab)."""
        mask = subsequent_mask(ids.size(1))
        return self.generator.proj(self.decoder(self.embed(ids), mask))


def make_lm(
    vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1, max_len=5000,
    attention_dropout=0.1, norm="post", positions="learned", attention_bias=False,
    ffn_bias=True, share_embeddings=False,
):
    """The decoder-only language model; the defaults are the gist's choices (post-norm,
    learned positions, bias-free attention projections)."""
    c = copy.deepcopy
    post = norm == "post"
    attn, ff, position = building_blocks(h, d_model, d_ff, dropout, max_len, attention_dropout,
                                         positions, attention_bias, ffn_bias)
    model = DecoderOnlyLM(
        nn.Sequential(Embeddings(d_model, vocab), position),
        Encoder(EncoderLayer(d_model, c(attn), c(ff), dropout, post), N, post),
        Generator(d_model, vocab),
    )
    if share_embeddings:
        model.generator.proj.weight = model.embed[0].lut.weight
    return xavier_init(model)


# Training, as The Annotated Transformer's notebook trains ("Training" and "Label Smoothing"):
# the criterion, the loss normalisation and the learning-rate function LambdaLR is given.


class LabelSmoothing(nn.Module):
    "The notebook's label smoothing: KL divergence (summed) to a smoothed target."

    def __init__(self, size, padding_idx, smoothing=0.0):
        super().__init__()
        self.criterion = nn.KLDivLoss(reduction="sum")
        self.padding_idx = padding_idx
        self.confidence = 1.0 - smoothing
        self.smoothing = smoothing
        self.size = size
        self.true_dist = None

    def forward(self, x, target):
        assert x.size(1) == self.size
        true_dist = x.data.clone()
        true_dist.fill_(self.smoothing / (self.size - 2))
        true_dist.scatter_(1, target.data.unsqueeze(1), self.confidence)
        true_dist[:, self.padding_idx] = 0
        mask = torch.nonzero(target.data == self.padding_idx)
        if mask.dim() > 0:
            true_dist.index_fill_(0, mask.squeeze(), 0.0)
        self.true_dist = true_dist
        return self.criterion(x, true_dist.clone().detach())


class SimpleLossCompute:
    "The notebook's loss: the generator, the criterion, divided by the batch's tokens."

    def __init__(self, generator, criterion):
        self.generator = generator
        self.criterion = criterion

    def __call__(self, x, y, norm):
        x = self.generator(x)
        sloss = (
            self.criterion(x.contiguous().view(-1, x.size(-1)), y.contiguous().view(-1))
            / norm
        )
        return sloss.data * norm, sloss


def rate(step, model_size, factor, warmup):
    """The notebook's Noam rate, for LambdaLR: step 0 (LambdaLR's first) is read as 1."""
    if step == 0:
        step = 1
    return factor * (model_size ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))
