"""The BERT-uncased WordPiece tokenizer of the local embedding model, in pure Python over the packaged vocab.txt.

Facts it follows (the model's own tokenizer configuration: ``BertNormalizer`` with ``lowercase`` on and accents
stripped, ``BertPreTokenizer``, ``WordPiece`` with ``[UNK]``, ``##`` continuations and 100 characters at most per
word, a ``[CLS] … [SEP]`` template, 128 tokens at most):

- Clean-up: NUL, U+FFFD and every control, format, private-use or surrogate character (categories Cc, Cf, Co,
  Cs) except tab, newline and carriage return are dropped; remaining whitespace (category Zs, line and paragraph
  separators, tab, newline, carriage return) becomes a space.
- CJK ideographs (the unified blocks, extensions A–E and the compatibility blocks) get a space on each side.
- Accents are stripped (NFD, then combining marks, category Mn, dropped) and the text is lower-cased character
  by character (a capital sigma always becomes σ, never the word-final ς that ``str.lower`` would choose).
- Words split on whitespace; every punctuation character (ASCII ``!``–``/``, ``:``–``@``, ``[``–`` ` ``, ``{``–``~``
  and Unicode categories P*) is a word of its own.
- Each word becomes its greedy longest-match sub-words (later pieces prefixed ``##``); a word with a piece that is
  not in the vocabulary, or longer than 100 characters, becomes ``[UNK]``.

Single sentences are never padded: padding a short sentence to 128 tokens costs the model eight times the work.
The vocabulary (``data/vocab.txt``, Apache-2.0, see ``data/NOTICE``) is read when the model is loaded and checked
against its sha256.
"""

from __future__ import annotations

import hashlib
import unicodedata
from importlib import resources

VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
MAX_TOKENS = 128
MAX_WORD_CHARS = 100
CLS, SEP, UNK = "[CLS]", "[SEP]", "[UNK]"

_KEEP_CONTROLS = frozenset("\t\n\r")
_OTHER = frozenset(("Cc", "Cf", "Co", "Cs"))
_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


def _is_punctuation(char: str) -> bool:
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def normalise(text: str) -> str:
    """The text as the model's normaliser leaves it: cleaned, CJK spaced, accents stripped, lower-cased."""
    if text.isascii():
        return _normalise_ascii(text)
    out: list[str] = []
    for char in text:
        cp = ord(char)
        if cp == 0 or cp == 0xFFFD:
            continue
        if char in _KEEP_CONTROLS or char.isspace():
            if unicodedata.category(char) in _OTHER and char not in _KEEP_CONTROLS:
                continue  # \x1c-\x1f, \x85, \x0b, \x0c: controls, dropped
            out.append(" ")
        elif unicodedata.category(char) in _OTHER:
            continue
        elif _is_cjk(cp):
            out.append(f" {char} ")
        else:
            out.append(char)
    decomposed = unicodedata.normalize("NFD", "".join(out))
    stripped = "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
    return stripped.replace("\u03a3", "\u03c3").lower()  # capital sigma: always σ, never a word-final ς


def _normalise_ascii(text: str) -> str:
    out = []
    for char in text:
        cp = ord(char)
        if char in _KEEP_CONTROLS:
            out.append(" ")
        elif cp < 32 or cp == 127:
            continue
        else:
            out.append(char)
    return "".join(out).lower()


def split_words(normalised: str) -> list[str]:
    """Whitespace-separated words, with each punctuation character a word of its own."""
    words: list[str] = []
    for chunk in normalised.split():
        if chunk.isalnum():
            words.append(chunk)
            continue
        start = 0
        for i, char in enumerate(chunk):
            if _is_punctuation(char):
                if i > start:
                    words.append(chunk[start:i])
                words.append(char)
                start = i + 1
        if start < len(chunk):
            words.append(chunk[start:])
    return words


class WordPieceTokenizer:
    """Text → input ids for the model: ``[CLS]``, up to 126 sub-word ids, ``[SEP]``; never padded."""

    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab = vocab
        self.cls_id = vocab[CLS]
        self.sep_id = vocab[SEP]
        self.unk_id = vocab[UNK]

    @classmethod
    def packaged(cls) -> WordPieceTokenizer:
        """A tokenizer over the packaged vocabulary, read and checked now (the model that owns it is loaded once
        per embedder, so this runs once per worker)."""
        data = resources.files("gateway.cache").joinpath("data/vocab.txt").read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest != VOCAB_SHA256:
            raise RuntimeError(f"gateway/cache/data/vocab.txt has sha256 {digest}, expected {VOCAB_SHA256}")
        return cls(read_vocab(data))

    def word_ids(self, word: str) -> list[int]:
        """The sub-word ids of one word (``[UNK]`` alone when it cannot be spelled from the vocabulary)."""
        vocab = self.vocab
        whole = vocab.get(word)
        if whole is not None:
            return [whole]
        if len(word) > MAX_WORD_CHARS:
            return [self.unk_id]
        ids: list[int] = []
        start, end_of_word = 0, len(word)
        while start < end_of_word:
            end = end_of_word
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return [self.unk_id]
            ids.append(found)
            start = end
        return ids

    def encode(self, text: str, max_tokens: int = MAX_TOKENS) -> list[int]:
        """``[CLS]`` + the text's sub-word ids (cut to fit) + ``[SEP]``: at most ``max_tokens`` ids."""
        room = max_tokens - 2
        ids = [self.cls_id]
        for word in split_words(normalise(text)):
            ids.extend(self.word_ids(word))
            if len(ids) > room:
                del ids[room + 1 :]
                break
        ids.append(self.sep_id)
        return ids

    def count(self, text: str) -> int:
        """How many ids the text has before truncation, ``[CLS]`` and ``[SEP]`` included."""
        return 2 + sum(len(self.word_ids(w)) for w in split_words(normalise(text)))


def read_vocab(data: bytes) -> dict[str, int]:
    """vocab.txt (one token a line, the line number its id) as a token → id map."""
    return {token: i for i, token in enumerate(data.decode("utf-8").split("\n")) if token or i == 0}

