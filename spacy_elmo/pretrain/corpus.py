"""Training text, streamed: files -> token sequences -> batches (docs/reference/pretraining-config.md,
[corpus]).

Batches are deterministic functions of ``(seed, epoch, rank)``, so a run's position is a few
counters (``DataPosition``) and ``--resume`` replays the text up to it without running the model.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, List, Literal, Optional, Sequence, Tuple, TypeVar

from ..batching import pack_sequences
from ..chars import BOS_TOKEN, EOS_TOKEN
from ..sentences import split_sentences, windows
from ..text_files import JSONL_SUFFIX, SPACY_SUFFIX, texts
from ..validation import StrictPositive
from .section import Section

Tokens = List[str]
T = TypeVar("T")


class CorpusError(ValueError):
    """Training text that cannot be used, naming the files (a bad line: ``TextFileError``)."""


class CorpusSettings(Section):
    """How to turn files into token sequences (the reading keys of ``[corpus]``)."""

    tokenized: bool = True
    lang: str = "en"
    split_sentences: bool = True
    max_sequence_length: StrictPositive = 100
    on_decode_error: Literal["skip", "raise"] = "raise"


@dataclass
class CorpusStats:
    """Counts kept while streaming, reported in the metrics."""

    #: The numbers (each in its file) of the lines left out as not UTF-8, as they are met.
    undecodable: List[int] = field(default_factory=list)

    @property
    def skipped_lines(self) -> int:
        return len(self.undecodable)


def check_text(files: Sequence[Path], settings: CorpusSettings) -> List[str]:
    """Read every line of the text and JSONL ``files`` once, before any work is done with them:
    the first that cannot be read raises TextFileError, except that with ``on_decode_error =
    "skip"`` the lines that are not UTF-8 are left out, and returned (``"{file}, line {n}"``)."""
    skipped: List[str] = []
    for path in files:
        if path.suffix != SPACY_SUFFIX:
            undecodable: List[int] = []
            for _ in texts(path, undecodable if settings.on_decode_error == "skip" else None):
                pass
            skipped += [f"{path}, line {number}" for number in undecodable]
    return skipped


class SequenceReader:
    """Reads token sequences from corpus files, one shard of them per rank."""

    def __init__(
        self,
        files: Sequence[Path],
        settings: CorpusSettings,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.files = list(files)
        self.settings = settings
        self.rank = rank
        self.world_size = world_size
        self.stats = CorpusStats()
        self._tokenizer: Optional[Callable[[str], list]] = None
        self._items = 0  # lines and docs read so far, over all files: what the shards split

    def __iter__(self) -> Iterator[Tokens]:
        self._items = 0
        for path in self.files:
            if path.suffix == SPACY_SUFFIX:
                yield from self._from_docbin(path)
            else:
                yield from self._from_text(path)

    def _mine(self) -> bool:
        """Whether the next line or doc of the corpus belongs to this rank's shard (counted over
        all files, so that many short files still give every rank its share)."""
        self._items += 1
        return (self._items - 1) % self.world_size == self.rank

    def _from_text(self, path: Path) -> Iterator[Tokens]:
        """The sequences of each line of a text file, or of each text of a JSONL file (raw text,
        for spaCy's tokenizer whatever ``tokenized`` says)."""
        undecodable = self.stats.undecodable if self.settings.on_decode_error == "skip" else None
        tokenized = self.settings.tokenized and path.suffix != JSONL_SUFFIX
        for _, text in texts(path, undecodable):
            if self._mine():
                yield from self.sequences(text, tokenized)

    def _from_docbin(self, path: Path) -> Iterator[Tokens]:
        from spacy import blank
        from spacy.tokens import DocBin

        try:
            docbin = DocBin().from_disk(path)
        except Exception as err:  # DocBin raises several error types for corrupt files
            raise CorpusError(f"{path}: not a readable .spacy (DocBin) file: {err}") from err
        vocab = blank(self.settings.lang).vocab
        for doc in docbin.get_docs(vocab):
            if not self._mine():
                continue
            parts = list(doc.sents) if doc.has_annotation("SENT_START") else [doc]
            for part in parts:
                yield from windows([t.text for t in part if not t.is_space], self.settings.max_sequence_length)

    def sequences(self, text: str, tokenized: bool) -> Iterator[Tokens]:
        """The token sequences of one text: split on whitespace (``tokenized``) or by spaCy's
        tokenizer, cut into sentences (or windows) of at most ``max_sequence_length``, as
        ``[corpus]`` says."""
        size = self.settings.max_sequence_length
        tokens = text.split() if tokenized else self._tokenize(text)
        yield from split_sentences(tokens, size) if self.settings.split_sentences else windows(tokens, size)

    def _tokenize(self, text: str) -> Tokens:
        if self._tokenizer is None:
            from spacy import blank

            self._tokenizer = blank(self.settings.lang).tokenizer
        return [t.text for t in self._tokenizer(text) if not t.is_space]


@dataclass
class DataPosition:
    """Where a rank's stream stands: resume replays ``batches`` batches of ``epoch``. Windows
    count instead the ``sentences`` taken from the epoch and keep each row's sentence and the
    place in it where the next window starts (``rows``: [tokens, offset] per row)."""

    epoch: int = 0
    batches: int = 0
    sentences: int = 0
    rows: Optional[List[list]] = None


class _Stream:
    """What both batch streams keep: this rank's shard of the files, its seed, where it stands
    (``position``, which a checkpoint saves) and the last epoch's corpus counts."""

    def __init__(
        self, files: Sequence[Path], settings: CorpusSettings, buffer_size: int, seed: int, rank: int, world_size: int
    ) -> None:
        self.files = list(files)
        self.settings = settings
        self.buffer_size = buffer_size
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.position = DataPosition()
        self.last_stats = CorpusStats()

    def _buffers(self, epoch: int) -> Iterator[Tuple[List[Tokens], random.Random]]:
        """This rank's sequences of ``epoch``, ``buffer_size`` at a time, each with the epoch's
        generator (seeded by seed, epoch and rank, so a resume replays the same order)."""
        rng = random.Random(f"{self.seed}-{epoch}-{self.rank}")
        reader = SequenceReader(self.files, self.settings, self.rank, self.world_size)
        self.last_stats = reader.stats
        buffer: List[Tokens] = []
        for sequence in reader:
            buffer.append(sequence)
            if len(buffer) >= self.buffer_size:
                yield buffer, rng
                buffer = []
        if buffer:
            yield buffer, rng

    def _endless(self, items_of: Callable[[int], Iterator[T]], epoch: int, skip: int) -> Iterator[Tuple[int, int, T]]:
        """``(epoch, n, item)``: the items of ``items_of(epoch)`` from the ``skip + 1``-th on (the
        ``n``-th of its epoch), then those of the following epochs, forever."""
        while True:
            produced = 0
            for item in items_of(epoch):
                produced += 1
                if produced > skip:
                    yield epoch, produced, item
            if produced == 0:
                raise CorpusError(
                    f"the training corpus ({', '.join(map(str, self.files[:3]))}) gives no text "
                    f"for rank {self.rank} of {self.world_size}: is it empty or only blank lines?"
                )
            epoch, skip = epoch + 1, 0


class BatchStream(_Stream):
    """Endless, deterministic stream of training batches (lists of token sequences).

    A buffer of ``buffer_size`` sequences is shuffled, sorted by length and cut into batches of
    at most ``batch_tokens`` padded tokens (boundary tokens included), and the batches of the
    buffer are shuffled again: little padding, yet random order.
    """

    def __init__(
        self,
        files: Sequence[Path],
        settings: CorpusSettings,
        batch_tokens: int,
        buffer_size: int = 10000,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if batch_tokens < settings.max_sequence_length + 2:
            raise CorpusError(
                f"training.batch_tokens ({batch_tokens}) must hold one sequence of "
                f"corpus.max_sequence_length + 2 tokens ({settings.max_sequence_length + 2})"
            )
        super().__init__(files, settings, buffer_size, seed, rank, world_size)
        self.batch_tokens = batch_tokens

    def batches(self, start: Optional[DataPosition] = None) -> Iterator[List[Tokens]]:
        """Yield batches forever from ``start`` (default: the beginning), updating
        ``self.position`` after each."""
        start = start or DataPosition()
        for epoch, produced, batch in self._endless(self._epoch_batches, start.epoch, start.batches):
            self.position = DataPosition(epoch, produced)
            yield batch

    def _epoch_batches(self, epoch: int) -> Iterator[List[Tokens]]:
        for sequences, rng in self._buffers(epoch):
            rng.shuffle(sequences)
            sequences.sort(key=len)
            batches = pack_sequences(sequences, self.batch_tokens, overhead=2)
            rng.shuffle(batches)
            yield from batches


class WindowStream(_Stream):
    """Endless, deterministic stream of bilm-tf's batches: ``rows`` rows of running text, each
    taking the next sentence (``<S> w_1 .. w_n </S>``) of the epoch's shuffled order when its
    current one ends. Yields ``(forward, backward)``: ``rows`` lists of ``length + 1`` tokens (the
    inputs and the last target); the next batch starts at the last of them, so the LSTM states
    carry on. The backward rows hold the same sentences at the same places, each reversed.
    """

    def __init__(
        self,
        files: Sequence[Path],
        settings: CorpusSettings,
        rows: int,
        length: int,
        buffer_size: int = 10000,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        super().__init__(files, settings, buffer_size, seed, rank, world_size)
        self.rows = rows
        self.length = length

    def batches(self, start: Optional[DataPosition] = None) -> Iterator[Tuple[List[Tokens], List[Tokens]]]:
        """Yield batches forever from ``start`` (default: the beginning), updating
        ``self.position`` after each."""
        start = start or DataPosition()
        self._epoch, self._taken = start.epoch, start.sentences  # until a row takes a sentence
        sentences = self._sentences(start.epoch, start.sentences)
        rows = [(list(tokens), offset) for tokens, offset in start.rows] if start.rows else []
        while len(rows) < self.rows:
            rows.append((next(sentences), 0))
        while True:
            forward: List[Tokens] = []
            backward: List[Tokens] = []
            for r in range(self.rows):
                window_forward, window_backward, rows[r] = self._window(rows[r], sentences)
                forward.append(window_forward)
                backward.append(window_backward)
            self.position = DataPosition(
                self._epoch, sentences=self._taken, rows=[[list(t), o] for t, o in rows]
            )
            yield forward, backward

    def _window(self, row: Tuple[Tokens, int], sentences: Iterator[Tokens]):
        """``length + 1`` tokens of a row from ``row`` = (sentence, offset) on, in both reading
        orders; returns them and the row's place for the next window (at the last token)."""
        tokens, offset = row
        forward: Tokens = []
        backward: Tokens = []
        while True:
            bounded = [BOS_TOKEN, *tokens, EOS_TOKEN]
            take = min(self.length + 1 - len(forward), len(bounded) - offset)
            forward += bounded[offset : offset + take]
            reversed_ = [EOS_TOKEN, *tokens[::-1], BOS_TOKEN]
            backward += reversed_[offset : offset + take]
            if len(forward) == self.length + 1:
                return forward, backward, (tokens, offset + take - 1)
            tokens, offset = next(sentences), 0

    def _sentences(self, epoch: int, skip: int) -> Iterator[Tokens]:
        """The sentences of ``epoch`` in their shuffled order from the ``skip``-th on, then those
        of the following epochs; ``_epoch`` and ``_taken`` say where it stands."""
        for now, taken, sentence in self._endless(self._shuffled, epoch, skip):
            self._epoch, self._taken = now, taken
            yield sentence

    def _shuffled(self, epoch: int) -> Iterator[Tokens]:
        for buffer, rng in self._buffers(epoch):
            rng.shuffle(buffer)
            yield from buffer


def count_words(files: Sequence[Path], settings: CorpusSettings) -> Counter:
    """Word frequencies over the whole corpus (all shards), streamed."""
    counts: Counter = Counter()
    for sequence in SequenceReader(files, settings):
        counts.update(sequence)
    return counts
