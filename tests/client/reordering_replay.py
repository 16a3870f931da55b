"""ExternalReordering's feature values of a decoded hypothesis, recomputed in Python from its
phrases and a context model's served blocks: what the decode tests compare with the values
Moses and Moses2 write in their n-best lists (issue 48).

Moses's msd orientations (moses/FF/LexicalReordering/LRModel.cpp GetOrientation,
ReorderingStack.cpp) are read again here, independently of the feature's C++, for the two
kinds the tests decode: phrase-based (wbe and phrase decode alike) and hierarchical. The
combination is reordering.v1's ScoreResponse contract: a step's probability is the softmax
over one direction's classes of the pair's own scores plus its neighbour's block, and its
score Moses's max(ln p, -100). What it must not do: guess. A line it cannot read, or a
phrase without target words (which these checks do not cover), is an error.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np

from server.api import pb, pb_grpc
from training.modelfile.request import arrays_from_strings

MONO, SWAP, DISC = 0, 1, 2  # Moses's msd columns
CLASSES = 3


@dataclass(frozen=True)
class Phrase:
    start: int  # source span, end exclusive
    end: int
    target: tuple[str, ...]
    alignment: tuple[tuple[int, int], ...]  # phrase-relative (source, target) points

    def pair(self) -> tuple[int, int, list[str], list[tuple[int, int]]]:
        return self.start, self.end, list(self.target), list(self.alignment)


@dataclass
class Hypothesis:
    sentence: int
    words: list[str]
    phrases: list[Phrase]  # in the order the decoder placed them (target order)
    values: np.ndarray     # the feature's scores as the decoder wrote them


def feature_values(scores: str, feature: str) -> np.ndarray:
    """The values after `feature=` in an n-best list's labelled scores field."""
    tokens = scores.split()
    if f"{feature}=" not in tokens:
        raise ValueError(f"no {feature}= in the scores field {scores!r}")
    out = []
    for token in tokens[tokens.index(f"{feature}=") + 1:]:
        if token.endswith("="):
            break
        out.append(float(token))
    return np.array(out)


def _range(text: str) -> tuple[int, int]:
    """'3' or '3-5' (inclusive, as Moses writes them) -> (first, last)."""
    first, _, last = text.partition("-")
    return int(first), int(last or first)


def read_moses_nbest(path: Path, feature: str) -> list[Hypothesis]:
    """Moses's n-best list written with -include-segmentation-in-n-best and
    -print-alignment-info-in-n-best: each phrase's source and target span and the word
    alignment of the whole hypothesis, from which each phrase's own alignment follows."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split(" ||| ")
        if len(fields) < 6:
            raise ValueError(f"{path}:{n}: expected segmentation and alignment fields: {line!r}")
        words = fields[1].split()
        points = [tuple(map(int, p.split("-"))) for p in fields[5].split()]
        phrases = []
        for segment in fields[4].split():
            src, _, tgt = segment.partition("=")
            (s0, s1), (t0, t1) = _range(src), _range(tgt)
            if t1 >= len(words):
                raise ValueError(f"{path}:{n}: segment {segment} past the {len(words)} target words")
            align = tuple(sorted((i - s0, j - t0) for i, j in points if s0 <= i <= s1 and t0 <= j <= t1))
            phrases.append(Phrase(s0, s1 + 1, tuple(words[t0:t1 + 1]), align))
        if sum(len(p.target) for p in phrases) != len(words):
            raise ValueError(f"{path}:{n}: the segments do not cover the {len(words)} target words")
        out.append(Hypothesis(int(fields[0]), words, phrases, feature_values(fields[2], feature)))
    return out


_SEGMENT = re.compile(r"^\|(\d+)-(\d+)\|$")


def read_segmented_best(lines: list[str], nbest: Path, feature: str,
                        alignments: dict[tuple[str, str], tuple[tuple[int, int], ...]],
                        sources: list[list[str]]) -> list[Hypothesis]:
    """Moses2's best translations written with -report-segmentation ('w w |0-1| w |2-2|')
    and the feature's values from its n-best list of 1 (Moses2 writes no segmentation
    there); each phrase's alignment from the phrase table (`alignments[source, target]`)."""
    values: dict[int, tuple[str, np.ndarray]] = {}
    for line in nbest.read_text(encoding="utf-8").splitlines():
        fields = line.split(" ||| ")
        values.setdefault(int(fields[0]), (fields[1].strip(), feature_values(fields[2], feature)))
    out = []
    for sentence, line in enumerate(lines):
        phrases, pending = [], []
        for token in line.split():
            m = _SEGMENT.match(token)
            if not m:
                pending.append(token)
                continue
            s0, s1 = int(m.group(1)), int(m.group(2))
            key = (" ".join(sources[sentence][s0:s1 + 1]), " ".join(pending))
            if key not in alignments:
                raise ValueError(f"line {sentence + 1}: phrase pair {key} is not in the phrase table")
            phrases.append(Phrase(s0, s1 + 1, tuple(pending), alignments[key]))
            pending = []
        if pending:
            raise ValueError(f"line {sentence + 1}: words after the last segment: {pending}")
        words = [w for p in phrases for w in p.target]
        text, vals = values[sentence]
        if text != " ".join(words):
            raise ValueError(f"line {sentence + 1}: the n-best list's best is {text!r}, the output {words!r}")
        out.append(Hypothesis(sentence, words, phrases, vals))
    return out


@dataclass(frozen=True)
class TableRow:
    target: tuple[str, ...]
    alignment: tuple[tuple[int, int], ...]
    scores: np.ndarray  # the row's scores as the decoder adds them: max(ln x, -100) each


def phrase_table_rows(path: Path) -> dict[tuple[str, ...], list[TableRow]]:
    """source words -> every row of the phrase table for them."""
    out: dict[tuple[str, ...], list[TableRow]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(" ||| ")
            scores = np.maximum(np.log(np.array(fields[2].split(), dtype=np.float64)), -100.0)
            align = tuple(sorted(tuple(map(int, p.split("-"))) for p in fields[3].split()))
            out.setdefault(tuple(fields[0].split()), []).append(TableRow(tuple(fields[1].split()), align, scores))
    return out


def phrase_table_alignments(path: Path) -> dict[tuple[str, str], tuple[tuple[int, int], ...]]:
    """(source, target) -> the alignment of its phrase-table row (the 4th field)."""
    return {(" ".join(source), " ".join(row.target)): row.alignment
            for source, rows in phrase_table_rows(path).items() for row in rows}


def segmentations(source: list[str], words: list[str], rows: dict[tuple[str, ...], list[TableRow]],
                  most: int = 100_000) -> list[tuple[list[Phrase], np.ndarray]]:
    """Every way Moses could have made `words` from `source` with this phrase table: phrases
    in target order over disjoint source spans covering the sentence, each with the sum of
    its rows' scores. For an n-best list that names no segmentation (Moses2's); more than
    `most` of them is an error, not a silent cut."""
    longest = max((len(k) for k in rows), default=0)
    by_target: dict[tuple[str, ...], list[tuple[int, int, TableRow]]] = {}
    for i in range(len(source)):
        for j in range(i + 1, min(len(source), i + longest) + 1):
            for row in rows.get(tuple(source[i:j]), ()):
                by_target.setdefault(row.target, []).append((i, j, row))
    found: list[tuple[list[Phrase], np.ndarray]] = []
    full = (1 << len(source)) - 1

    def extend(t: int, covered: int, placed: list[tuple[int, int, TableRow]]) -> None:
        if t == len(words):
            if covered == full:
                if len(found) == most:
                    raise ValueError(f"more than {most} segmentations of {' '.join(words)!r}")
                found.append(([Phrase(i, j, r.target, r.alignment) for i, j, r in placed],
                              sum(r.scores for _, _, r in placed)))
            return
        for k in range(1, len(words) - t + 1):
            for i, j, row in by_target.get(tuple(words[t:t + k]), ()):
                span = ((1 << j) - 1) ^ ((1 << i) - 1)
                if not covered & span:
                    extend(t + k, covered | span, placed + [(i, j, row)])

    extend(0, 0, [])
    return found


def distortion(phrases: list[Phrase]) -> float:
    """Moses's Distortion feature of phrases in target order: minus the sum of the jumps,
    the first measured from the sentence's start (moses2/FF/Distortion.cpp)."""
    total, prev_end = 0, None
    for p in phrases:
        total += p.start if prev_end is None else abs(prev_end - p.start)
        prev_end = p.end
    return -float(total)


def served_blocks(address: str, model: str, source: list[str], phrases: list[Phrase]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A context model's blocks for `phrases` of one sentence: own [n x outputs],
    neighbour [n x outputs], boundary [outputs] (one Score RPC with context_blocks)."""
    request = pb.ScoreRequest(model=model, context_blocks=True,
                              **arrays_from_strings(source, [p.pair() for p in phrases]))
    with grpc.insecure_channel(address) as channel:
        answer = pb_grpc.ReorderingScorerStub(channel).Score(request, timeout=60)
    m = len(answer.outputs)
    if not answer.boundary:
        raise ValueError(f"model {model!r} answered probabilities: it has no decoder context")
    return (np.array(answer.scores, dtype=np.float32).reshape(-1, m),
            np.array(answer.neighbour, dtype=np.float32).reshape(-1, m), np.array(answer.boundary, dtype=np.float32))


def _spans(phrases: list[Phrase]) -> list[tuple[int, int]]:
    return [(p.start, p.end - 1) for p in phrases]  # inclusive, as Moses's Range


def _phrase_orientation(prev: tuple[int, int] | None, cur: tuple[int, int]) -> int:
    """LRModel::GetOrientation(cur) for the first phrase, (prev, cur) after it (msd)."""
    if prev is None:
        return MONO if cur[0] == 0 else DISC
    if cur[0] == prev[1] + 1:
        return MONO
    return SWAP if prev[0] == cur[1] + 1 else DISC


def _shift_reduce(stack: list[tuple[int, int]], span: tuple[int, int]) -> int:
    """ReorderingStack::ShiftReduce: the distance to the block on top, and the new stack."""
    if not stack:
        stack.append(span)
        return span[0] + 1
    prev = stack[-1]
    distance = span[0] - prev[1] if span[0] > prev[0] else span[1] - prev[0]
    if distance in (1, -1):
        stack.pop()
        current = (prev[0], span[1]) if distance == 1 else (span[0], prev[1])
        while stack:
            top = stack[-1]
            if current[0] - top[1] == 1:
                current = (top[0], current[1])
            elif top[0] - current[1] == 1:
                current = (current[0], top[1])
            else:
                break
            stack.pop()
        stack.append(current)
    else:
        stack.append(span)
    return distance


def backward_orientations(kind: str, phrases: list[Phrase]) -> list[int]:
    """Each phrase's backward orientation (msd), the first one's against the sentence start."""
    spans = _spans(phrases)
    if kind != "hier":
        return [_phrase_orientation(spans[i - 1] if i else None, s) for i, s in enumerate(spans)]
    stack: list[tuple[int, int]] = []
    out = []
    for s in spans:
        d = _shift_reduce(stack, s)
        out.append(MONO if d == 1 else SWAP if d == -1 else DISC)
    return out


def forward_orientations(kind: str, phrases: list[Phrase], length: int) -> list[int]:
    """The forward orientation of every phrase but the last, against the phrase placed after
    it (msd; hierarchical: LRModel's coverage rule, with the coverage after that phrase)."""
    spans = _spans(phrases)
    if kind != "hier":
        return [_phrase_orientation(spans[i], spans[i + 1]) for i in range(len(spans) - 1)]
    covered = np.zeros(length, dtype=bool)
    covered[spans[0][0]:spans[0][1] + 1] = True
    out = []
    for prev, cur in zip(spans, spans[1:]):
        covered[cur[0]:cur[1] + 1] = True
        e, s = prev[1] + 1, cur[0]
        if s == e or (s >= e and not covered[e]):
            out.append(MONO)
            continue
        s, e = prev[0], cur[1]
        out.append(SWAP if e + 1 == s or (e < s and not covered[s - 1]) else DISC)
    return out


def _score(own: np.ndarray, neighbour: np.ndarray | None, k: int) -> float:
    """max(ln p_k, -100) of the softmax of own + neighbour, p a float as the decoder has it."""
    x = own.astype(np.float64) + (0.0 if neighbour is None else neighbour.astype(np.float64))
    p = np.exp(x - x.max())
    return max(float(np.log(np.float32(p[k] / p.sum()))), -100.0)


def expected_values(kind: str, phrases: list[Phrase], length: int, own: np.ndarray, neighbour: np.ndarray,
                    boundary: np.ndarray, context: bool = True) -> np.ndarray:
    """The six msd-bidirectional values of a hypothesis whose phrases have the blocks
    own[i], neighbour[i] (rows in the order of `phrases`). Backward, phrase i next to the
    neighbour block of phrase i-1 (the boundary for the first); forward, phrase i next to
    phrase i+1's (none after the last, as Moses). context=False drops every neighbour and
    boundary block: what the values would be if the decoder ignored them."""
    if any(not p.target for p in phrases):
        raise ValueError("a phrase without target words: not covered by this check")
    K = CLASSES
    values = np.zeros(2 * K)
    for i, o in enumerate(backward_orientations(kind, phrases)):
        before = (neighbour[i - 1] if i else boundary)[:K] if context else None
        values[o] += _score(own[i, :K], before, o)
    for i, o in enumerate(forward_orientations(kind, phrases, length)):
        values[K + o] += _score(own[i, K:], neighbour[i + 1, K:] if context else None, o)
    return values
