"""The pure WordPiece tokenizer gives the model's reference ids, truncates at 128 and never pads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.cache import wordpiece
from gateway.cache.wordpiece import MAX_TOKENS, WordPieceTokenizer, normalise, split_words

CASES = json.loads((Path(__file__).parent / "data" / "wordpiece_reference.json").read_text())["cases"]


@pytest.fixture(scope="module")
def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.packaged()


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_ids_equal_the_reference_tokenizers(tokenizer: WordPieceTokenizer, case: dict) -> None:
    assert tokenizer.encode(case["text"]) == case["ids"]


def test_a_sentence_is_cls_pieces_sep_without_padding(tokenizer: WordPieceTokenizer) -> None:
    ids = tokenizer.encode("How do I reset my password?")
    assert ids == [101, 2129, 2079, 1045, 25141, 2026, 20786, 1029, 102]
    assert tokenizer.encode("") == [101, 102]


def test_long_text_is_cut_to_128_ids_ending_with_sep(tokenizer: WordPieceTokenizer) -> None:
    ids = tokenizer.encode("tokenization " * 200)
    assert len(ids) == MAX_TOKENS and ids[0] == tokenizer.cls_id and ids[-1] == tokenizer.sep_id
    assert tokenizer.count("tokenization " * 200) == 2 + 400  # "token", "##ization" per word


def test_unknown_and_overlong_words_become_unk(tokenizer: WordPieceTokenizer) -> None:
    assert tokenizer.word_ids("a" * 101) == [tokenizer.unk_id]
    assert tokenizer.word_ids("\u2603\u2603") == [tokenizer.unk_id]
    assert tokenizer.word_ids("unaffable") == [14477, 20961, 3468]


def test_normalisation_lowercases_strips_accents_and_spaces_cjk() -> None:
    assert normalise("Café ÀÉÎ") == "cafe aei"
    assert normalise("中文") == " 中  文 "
    assert normalise("a\x00b\u200bc\td") == "abc d"
    assert normalise("ΣΊΣΥΦΟΣ") == "σισυφοσ"
    assert split_words("don't stop, now!") == ["don", "'", "t", "stop", ",", "now", "!"]


def test_a_vocabulary_that_is_not_the_packaged_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wordpiece, "VOCAB_SHA256", "0" * 64)
    with pytest.raises(RuntimeError, match="sha256"):
        WordPieceTokenizer.packaged()
