"""Bad input is refused with an error naming the file and line, exit code 3, and nothing in --out."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.cli import main
from training.corpus.reading import read_corpus
from training.errors import InputError
from training.store.examples import StoreWriter

GOOD = {"src": "a b c\nd e\n", "tgt": "x y\nz\n", "align": "0-0 2-1\n0-0 1-0\n"}


def write(tmp_path: Path, **override) -> dict[str, Path]:
    files = {}
    for side, text in {**GOOD, **override}.items():
        files[side] = tmp_path / f"c.{side}"
        files[side].write_bytes(text.encode() if isinstance(text, str) else text)
    return files


def run_extract(files, out: Path, *extra: str) -> int:
    return main(["extract", "--src", str(files["src"]), "--tgt", str(files["tgt"]), "--align",
                 str(files["align"]), "--out", str(out), "--quiet", *extra])


@pytest.mark.parametrize("override, side, line, words", [
    ({"tgt": "x y\n"}, "tgt", 2, "has 1 lines"),
    ({"align": "0-0 2-1\n"}, "align", 2, "has 1 lines"),
    ({"align": "0-0 2-1\n0-0 1-1\n"}, "align", 2, "out of range"),
    ({"align": "0-0 3-1\n0-0\n"}, "align", 1, "out of range"),
    ({"align": "0-0 2-x\n0-0\n"}, "align", 1, "malformed"),
    ({"align": "0-0\n0--0\n"}, "align", 2, "malformed"),
    ({"align": "0-0\n1-0-0\n"}, "align", 2, "malformed"),
    ({"align": "0-0\n-1-0\n"}, "align", 2, "malformed"),
    ({"align": "0-0 12\n0-0\n"}, "align", 1, "malformed"),
    ({"src": b"a b c\nd \xff e\n"}, "src", 2, "invalid UTF-8: byte 0xff at byte offset 2 (0-based) of line 2"),
    ({"tgt": "x ||| y\nz\n"}, "tgt", 1, "field separator"),
    # an empty line whose alignment line is not: the text file's line is the error (issue 47)
    ({"tgt": "x y\n\n"}, "tgt", 2, "the line is empty, but line 2 of c.align aligns points to it (0-0)"),
    ({"src": "\nd e\n"}, "src", 1, "the line is empty, but line 1 of c.align aligns points to it (0-0)"),
])
def test_bad_corpus_names_file_and_line(tmp_path, capsys, override, side, line, words):
    files = write(tmp_path, **override)
    out = tmp_path / "store"
    assert run_extract(files, out) == 3
    message = capsys.readouterr().err
    assert f"{files[side]}:{line}: " in message and words in message, message
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.align", "c.src", "c.tgt"]


def test_out_in_new_directories_is_made_and_a_refused_run_removes_them(tmp_path, capsys):
    files = write(tmp_path)
    out = tmp_path / "work" / "deep" / "store"          # `mkdir -p` is not needed first
    assert run_extract(files, out) == 0
    assert (out / "store.json").is_file()
    (tmp_path / "bad").mkdir()
    bad = write(tmp_path / "bad", align="0-0 2-1\n")
    assert run_extract(bad, tmp_path / "new" / "deeper" / "store") == 3
    assert "has 1 lines" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "c.align", "c.src", "c.tgt", "work"]
    # a file where a directory must go is named
    assert run_extract(files, files["src"] / "store") == 3
    assert f"{files['src']}: cannot create the directory" in capsys.readouterr().err


def test_over_long_sentence(tmp_path):
    files = write(tmp_path)
    with pytest.raises(InputError, match=r"c.src:1: sentence has 3 tokens, more than --max-sentence-length 2"):
        read_corpus(files["src"], files["tgt"], files["align"], max_sentence_length=2)


def test_existing_output_is_not_touched(tmp_path, capsys):
    files = write(tmp_path)
    out = tmp_path / "store"
    out.mkdir()
    (out / "keep").write_text("mine")
    assert run_extract(files, out) == 3
    assert "already exists" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["keep"]


def test_unknown_model_and_text_of_two_models_of_one_kind(tmp_path, capsys):
    files = write(tmp_path)
    # misused options: usage errors (2), as argparse's own
    assert run_extract(files, tmp_path / "a", "--model", "hier-xyz") == 2
    assert run_extract(files, tmp_path / "b", "--model", "wbe-msd", "--model", "wbe-mslr", "--moses-format") == 2
    assert "one wbe model at a time" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_failure_while_writing_leaves_nothing(tmp_path):
    out = tmp_path / "store"
    with pytest.raises(RuntimeError):
        with StoreWriter(out) as writer:
            (writer.path("partial")).write_text("half")
            raise RuntimeError("disk full")
    assert list(tmp_path.iterdir()) == []


def test_moses_tokenization_and_empty_lines(tmp_path):
    """Only spaces and tabs separate tokens; '\\r' and U+3000 stay inside; an empty pair is kept, unextracted."""
    files = write(tmp_path, src="a\tb\u3000c  d\r\n\n", tgt="x y\n\n", align="0-0 1-1\n\n")
    corpus = read_corpus(files["src"], files["tgt"], files["align"])
    assert corpus.src_vocab == ["a", "b\u3000c", "d\r"]
    assert corpus.n_sentences == 2 and corpus.src_offsets.tolist() == [0, 3, 3]


def test_duplicate_points_are_dropped(tmp_path):
    files = write(tmp_path, align="0-0 2-1 0-0\n0-0 1-0\n")
    corpus = read_corpus(files["src"], files["tgt"], files["align"])
    assert corpus.align.tolist() == [[0, 0], [2, 1], [0, 0], [1, 0]]
    assert corpus.align_offsets.tolist() == [0, 2, 4]


@pytest.mark.parametrize("command", ["extract", "lexical"])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert "Exit codes" in capsys.readouterr().out


def test_odd_tokens_survive_the_store(tmp_path):
    """Tokens holding '\\r', U+2028, U+0085 or U+3000 come back from vocab files unchanged."""
    from training.store.examples import ExampleStore

    files = write(tmp_path, src="a\r b\u2028 c\x85\n\u3000d e\n", tgt="x y\nz\n", align="0-0 2-1\n0-0 1-0\n")
    out = tmp_path / "store"
    assert run_extract(files, out) == 0
    corpus = read_corpus(files["src"], files["tgt"], files["align"])
    store = ExampleStore.open(out)
    assert store.src_vocab == corpus.src_vocab == ["a\r", "b\u2028", "c\x85", "\u3000d", "e"]
    assert store.n_examples > 0
