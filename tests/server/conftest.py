"""Fixtures for the server tests (helpers live in serverkit.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from serverkit import N_TRAIN, Sentence, keys_of, sentences


@pytest.fixture(scope="session")
def train_sentences(ja_en_dir) -> list[Sentence]:
    return sentences(ja_en_dir, "train", N_TRAIN)


@pytest.fixture(scope="session")
def test_sentences(ja_en_dir) -> list[Sentence]:
    return sentences(ja_en_dir, "test", 20)


@pytest.fixture(scope="session")
def corpus_keys(train_sentences) -> np.ndarray:
    return keys_of(train_sentences)


@pytest.fixture
def repo_root(tmp_path) -> Path:
    root = tmp_path / "models"
    root.mkdir()
    return root
