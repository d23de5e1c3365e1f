"""The Annotated Transformer in Rust on Candle, from Python: translate, train and score with
the engine of the ``transformer`` command.

Errors are exceptions carrying the line the command prints: ``ValueError`` for a bad
argument or config, ``FileNotFoundError`` for a missing file or checkpoint,
``KeyboardInterrupt`` for a training run stopped by Ctrl-C (its checkpoint saved),
``RuntimeError`` for anything else.
"""

import os
import pathlib
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Union, final, overload

__version__: str
__all__ = ["__version__", "BleuScore", "ChrfScore", "TrainResult", "Translation", "Translator", "bleu", "chrf", "train"]

_Path = Union[str, "os.PathLike[str]"]

@final
class Translation:
    """The translation of one text: its sentences' translations put back together between
    the text's own whitespace, their tokens one after another. ``str()`` is the translation."""

    source: str
    """The text as given."""
    translation: str
    """The translated text."""
    tokens: List[str]
    """The generated tokens, ``</s>`` included where the model produced it."""
    ids: List[int]
    """The tokens' ids in the target vocabulary."""
    log_probs: Optional[List[float]]
    """Each token's log-probability under the model; ``None`` unless ``return_scores=True``."""
    score: Optional[float]
    """The sum of ``log_probs``; ``None`` unless ``return_scores=True``."""
    short: bool
    """Under half the length the model gives such a source: a sentence may be missing."""
    truncated_from: Optional[int]
    """The source's token count when it was longer than the model reads and was cut."""
    stopped_at_limit: Optional[int]
    """The token limit the translation ran into before it ended (its end is missing)."""
    unknown_words: List[str]
    """Source words the vocabulary lacks, read as ``<unk>``."""

@final
class Translator:
    """A translation model opened for decoding, as ``transformer translate --checkpoint``
    opens it. Calls release the GIL while they decode, so Python threads can share one
    ``Translator``.

    ``checkpoint``: a run directory (its ``best/``, else ``last/``), a checkpoint directory,
    a Hugging Face MarianMT, M2M100 or NLLB-200 directory, or a Hub name
    (``Helsinki-NLP/opus-mt-de-en``, fetched into the Hugging Face cache once).
    ``device``: ``"auto"`` (CUDA where built in and present, else the CPU), ``"cpu"``,
    ``"cuda"`` or ``"cuda:N"``. ``compute_type``: ``"default"`` (the checkpoint's own),
    ``"float32"``, ``"int8"`` or ``"bfloat16"``. ``vocab_map``: a CTranslate2 ``vmap.txt``.
    ``source_lang``/``target_lang``: a multilingual model's language pair (``"de"``,
    ``"eng_Latn"``), which each call may change.
    """

    def __new__(
        cls,
        checkpoint: _Path,
        device: str = "auto",
        compute_type: str = "default",
        vocab_map: Optional[_Path] = None,
        source_lang: Optional[str] = None,
        target_lang: Optional[str] = None,
    ) -> "Translator": ...
    @overload
    def translate(
        self,
        texts: str,
        *,
        beam: Optional[int] = None,
        max_len: Optional[int] = None,
        length_penalty: Optional[float] = None,
        source_lang: Optional[str] = None,
        target_lang: Optional[str] = None,
        return_scores: bool = False,
        format: Literal["text"] = "text",
        sentence_split: bool = True,
        batch_size: Optional[int] = None,
        batch_tokens: Optional[int] = None,
    ) -> Translation:
        """Translates ``texts`` (a str, or a list of them): each is cut into sentences
        (unless ``sentence_split=False``), the sentences of all are decoded in batches of at
        most ``batch_size`` sentences and ``batch_tokens`` tokens, and each text is put back
        together. A str gives one result, a list a list. ``beam=1`` is greedy decoding;
        ``beam``, ``max_len`` and ``length_penalty`` default to the checkpoint's
        ``[decode]`` settings. ``format="html"`` reads each text as an HTML page or fragment
        and returns the translated markup."""

    @overload
    def translate(
        self,
        texts: List[str],
        *,
        beam: Optional[int] = None,
        max_len: Optional[int] = None,
        length_penalty: Optional[float] = None,
        source_lang: Optional[str] = None,
        target_lang: Optional[str] = None,
        return_scores: bool = False,
        format: Literal["text"] = "text",
        sentence_split: bool = True,
        batch_size: Optional[int] = None,
        batch_tokens: Optional[int] = None,
    ) -> List[Translation]: ...
    @overload
    def translate(
        self,
        texts: str,
        *,
        beam: Optional[int] = None,
        max_len: Optional[int] = None,
        length_penalty: Optional[float] = None,
        source_lang: Optional[str] = None,
        target_lang: Optional[str] = None,
        return_scores: bool = False,
        format: Literal["html"],
        sentence_split: bool = True,
        batch_size: Optional[int] = None,
        batch_tokens: Optional[int] = None,
    ) -> str: ...
    @overload
    def translate(
        self,
        texts: List[str],
        *,
        beam: Optional[int] = None,
        max_len: Optional[int] = None,
        length_penalty: Optional[float] = None,
        source_lang: Optional[str] = None,
        target_lang: Optional[str] = None,
        return_scores: bool = False,
        format: Literal["html"],
        sentence_split: bool = True,
        batch_size: Optional[int] = None,
        batch_tokens: Optional[int] = None,
    ) -> List[str]: ...
    def translate_file(
        self,
        path: _Path,
        out: _Path,
        *,
        format: Optional[Literal["text", "html", "docx"]] = None,
        beam: Optional[int] = None,
        max_len: Optional[int] = None,
        length_penalty: Optional[float] = None,
    ) -> int:
        """Translates the file at ``path`` (.txt, .html/.htm or .docx, or ``format``) into
        ``out``, written atomically once done, as ``transformer translate --file PATH --out
        OUT`` does; returns how many sentences it translated."""
    @property
    def languages(self) -> Optional[List[str]]:
        """A multilingual model's language codes; ``None`` for a model of one pair."""
    @property
    def checkpoint(self) -> pathlib.Path:
        """The checkpoint directory the model was read from."""
    @property
    def device(self) -> str:
        """Where it decodes: ``"cpu"`` or ``"cuda:N"``."""
    @property
    def compute_type(self) -> str:
        """The products' number form: ``"float32"``, ``"int8"`` or ``"bfloat16"``."""
    @property
    def notes(self) -> List[str]:
        """What opening it noticed (said on stderr too)."""

@final
class TrainResult:
    """What a training run did."""

    run_dir: pathlib.Path
    """The run directory."""
    checkpoint: pathlib.Path
    """The checkpoint to translate with: ``best/`` (the best validation BLEU), else ``last/``."""
    step: int
    """The step the run stands at, of ``total_steps``."""
    total_steps: int
    finished: bool
    """It trained all its epochs or stopped early; False when it stopped at ``stop_at_step``."""
    valid_loss: Optional[float]
    """The last validation's loss, where the run validates."""
    valid_bleu: Optional[float]
    """The last validation's BLEU, where the run validates."""
    best_bleu: Optional[float]
    """The best validation BLEU of the run."""
    records: List[Dict[str, Any]]
    """The run's metrics.jsonl records."""

def train(
    config: Union[_Path, Dict[str, Any], None] = None,
    *,
    out: Optional[_Path] = None,
    resume: Optional[_Path] = None,
    seed: Optional[int] = None,
    overwrite: bool = False,
    stop_at_step: Optional[int] = None,
    dtype: Optional[Literal["f32", "bf16", "f16"]] = None,
    device: str = "auto",
    quiet: bool = False,
    on_progress: Optional[Callable[[Dict[str, Any]], None]] = None,
) -> TrainResult:
    """Trains as ``transformer train`` does, into the same run directory format.

    ``config``: a config file's path (or the name of one the tool ships, as ``--config``
    takes it), a dict of its sections (as ``tomllib.load`` gives them; it then needs ``out``
    or ``run.dir``), or ``None`` for the built-in base config. ``resume``: continue the run
    in that directory from its ``last/`` checkpoint (with none of config, out, seed,
    overwrite). ``on_progress(event)`` is called on the calling thread with a dict for each
    step (``kind="step"``: step, total_steps, epoch, loss, lr, tokens_per_s, elapsed_s) and
    each record written to metrics.jsonl (``kind="epoch"`` or ``"validation"``); an
    exception it raises stops the run after its step, with a checkpoint, and is raised.
    Ctrl-C stops the run the same way and raises ``KeyboardInterrupt``; ``train(resume=...)``
    continues it."""

@final
class BleuScore:
    """A corpus BLEU score and the counts behind it, in sacreBLEU's names; ``str()`` is
    sacreBLEU's line."""

    score: float
    counts: List[int]
    """Matching n-grams, orders 1 to 4."""
    totals: List[int]
    """Hypothesis n-grams, orders 1 to 4."""
    precisions: List[float]
    """Modified n-gram precisions in percent, orders 1 to 4."""
    bp: float
    """The brevity penalty."""
    sys_len: int
    ref_len: int
    signature: str
    """sacreBLEU's signature of the settings (``nrefs:1|case:mixed|eff:no|tok:13a|...``)."""
    def __float__(self) -> float: ...

@final
class ChrfScore:
    """A corpus chrF2 score; ``str()`` is sacreBLEU's line."""

    score: float
    signature: str
    """sacreBLEU's signature of the settings (``nrefs:1|case:mixed|eff:yes|nc:6|...``)."""
    def __float__(self) -> float: ...

def bleu(
    hypotheses: Sequence[str],
    references: Sequence[Sequence[Optional[str]]],
    *,
    lowercase: bool = False,
) -> BleuScore:
    """Corpus BLEU exactly as ``sacrebleu.corpus_bleu(hypotheses, references)`` gives it:
    ``references`` is a list of reference streams, each with one reference per hypothesis
    (``None`` where a segment has fewer); 13a tokenization, exponential smoothing."""

def chrf(
    hypotheses: Sequence[str],
    references: Sequence[Sequence[Optional[str]]],
) -> ChrfScore:
    """Corpus chrF2 exactly as ``sacrebleu.corpus_chrf(hypotheses, references)`` gives it:
    character 6-grams, beta 2, whitespace removed."""
