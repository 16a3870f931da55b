// -*- mode: c++; indent-tabs-mode: nil; tab-width:2  -*-
// ExternalReordering for Moses2: Moses2's lexicalized reordering with the scores of every
// translation option coming from the moses-reorder scoring service, one Score RPC per
// sentence, instead of from a table.
//
// What it is for: the same feature as moses_ff/moses/ExternalReordering (same ini keys,
// same batching), for the moses2 decoder. Orientations are Moses2's own (LRModel's
// GetOrientation and ReorderingStack); what differs from Moses2's LexicalReordering is
// where a row of scores lives. Moses2's LexicalReordering keeps each option's row in its
// target phrase (`ffData`), which the memory phrase table fills once at load and every
// sentence and thread shares; our rows depend on the sentence (source context, span), so
// they live in a per-sentence table keyed by (input path, target phrase), filled by one
// RPC when the sentence's empty hypothesis is made (after every phrase-table lookup), and
// read by the small state classes below, which do what Moses2's LRState family does with
// `ffData` (scores, hashing, recombination) but read that table instead.
// A model with decoder context (issue 48; the server says so at Load): a row holds the
// model's two raw blocks (own | neighbour) and the table keeps the sentence's boundary, and
// the states combine them at each step with SentenceScorer::Combine, as the moses feature
// does (moses_ff/moses/ExternalReordering.h says how, for every type: backward, the option's
// own block next to the last placed option's neighbour block, or the boundary for the first
// phrase; forward, the previous option's own block next to the placed option's; the
// orientations Moses2's own, from LRModel and ReorderingStack, the hierarchical one from the
// stack's block while the context words come from the last phrase placed; recombination
// also compares the neighbour block a backward state hands on; an option with no target
// words is no neighbour). A model without context is read exactly as before.
// What it must not do: talk gRPC itself or score a sentence (sentence_scorer.h, shared
// with the moses feature) or decide orientations.
//
// ini:  ExternalReordering name=LexicalReordering0 num-features=6
//         type=hier-msd-bidirectional-fe input-factor=0 output-factor=0
//         server=127.0.0.1:50051 model=ja-en [version=N] [timeout-ms=5000]
//         [on-error=fail|default] [default-scores=p1,p2,...] [path=TABLE]
// default-scores (probabilities, as in Moses) is only the row of a sentence whose RPC
// failed with on-error=default; without it such a sentence gets no reordering score, as
// Moses2's LexicalReordering does for a pair missing from its table.
// path= (Moses2's LexicalReordering key) puts Moses's reordering table beside the model in
// this one feature: num-features is then twice the type's count, the table's scores first
// (its weights come first), then the model's. That is the system of a LexicalReordering
// feature beside an ExternalReordering one, score for score, with one reordering state
// instead of two: each state costs about a third more decode time on 25-token sentences
// (benchmarks/RESULTS.md, issue 29).
#pragma once

#include <stdint.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../LexicalReordering/LexicalReordering.h"
#include "../LexicalReordering/LRModel.h"
#include "feature_options.h"
#include "sentence_scorer.h"

namespace Moses2
{
class InputPathBase;

// One sentence's rows of ln-probabilities, one per (input path, target phrase) the
// phrase tables gave for it (a context model's: its raw own | neighbour blocks, and the
// boundary beside them). Written once (by the RPC), then only read, once per hypothesis
// expansion: an open-addressing table of pointer pairs (one probe, mostly one cache line),
// sized by Reserve() before the first Add(). A context model's rows also give each
// direction's neighbour block as its canonical copy (the first row's with the same values:
// Canonicalize()), and the sentence's ContextCache of combined blocks is keyed by those, so
// each distinct pair of blocks is combined once per sentence (the one part written while
// the sentence is decoded, by its one thread).
class SentenceRows
{
public:
  SentenceRows() : m_mask(0), m_outputs(0), m_directions(0) {}

  // A context model's rows: own | neighbour, `outputs` columns each, and the sentence's
  // boundary block (`outputs` values).
  void SetContext(const SCORE *boundary, size_t outputs) {
    m_boundary.assign(boundary, boundary + outputs);
    m_outputs = outputs;
  }
  bool Context() const {
    return !m_boundary.empty();
  }
  // With Context(): the width of one block, and the boundary block.
  size_t Outputs() const {
    return m_outputs;
  }
  const SCORE *Boundary() const {
    return m_boundary.empty() ? NULL : &m_boundary[0];
  }

  // The row of an option, or NULL (no row: no score, as Moses2 for a pair not in its table).
  // With Canonicalize() done, *neighbours (if asked) is the row's canonical neighbour block
  // of each direction (Neighbours()).
  const SCORE *Find(const void *path, const void *targetPhrase, const SCORE *const **neighbours = NULL) const {
    if (m_slots.empty()) return NULL;
    for (size_t i = Hash(path, targetPhrase) & m_mask;; i = (i + 1) & m_mask) {
      const Slot &s = m_slots[i];
      if (s.targetPhrase == targetPhrase && s.path == path) {
        if (neighbours) *neighbours = m_canonical.empty() ? NULL : &m_canonical[s.row * m_directions];
        return &m_values[s.offset];
      }
      if (s.targetPhrase == NULL) return NULL;
    }
  }
  void Reserve(size_t pairs, size_t width) {
    size_t size = 16;
    while (size < 2 * pairs) size *= 2;
    m_slots.assign(size, Slot());
    m_mask = size - 1;
    m_values.reserve(pairs * width);
  }
  void Add(const void *path, const void *targetPhrase, const SCORE *row, size_t width) {
    size_t i = Hash(path, targetPhrase) & m_mask;
    while (m_slots[i].targetPhrase != NULL && !(m_slots[i].targetPhrase == targetPhrase && m_slots[i].path == path))
      i = (i + 1) & m_mask;
    m_slots[i].path = path;
    m_slots[i].targetPhrase = targetPhrase;
    m_slots[i].offset = m_values.size();
    m_slots[i].row = m_values.size() / width;
    m_values.insert(m_values.end(), row, row + width);
  }
  // With Context(), after the last Add(): each row's neighbour block of each of the
  // `directions` directions (`classes` columns each), as a pointer to the first copy of the
  // same values (bit for bit), and the cache of combined blocks made ready.
  void Canonicalize(size_t classes, size_t directions, reordering::ScoreTransform transform);
  // The cache of the sentence's combined blocks (ContextCache::Score).
  reordering::ContextCache &Cache() const {
    return m_cache;
  }

private:
  struct Slot {
    const void *path, *targetPhrase;
    size_t offset, row;
    Slot() : path(NULL), targetPhrase(NULL), offset(0), row(0) {}
  };
  static size_t Hash(const void *a, const void *b) {
    uint64_t h = (uint64_t) (uintptr_t) a * 0x9E3779B97F4A7C15ULL ^ (uint64_t) (uintptr_t) b * 0xC2B2AE3D27D4EB4FULL;
    return (size_t) (h ^ (h >> 29));
  }
  std::vector<Slot> m_slots;
  size_t m_mask;
  std::vector<SCORE> m_values;
  std::vector<SCORE> m_boundary;
  size_t m_outputs, m_directions;
  std::vector<const SCORE*> m_canonical;  // [row x direction]: canonical neighbour block
  mutable reordering::ContextCache m_cache;
};

class ExternalReordering : public LexicalReordering
{
public:
  ExternalReordering(size_t startInd, const std::string &line);
  virtual ~ExternalReordering();

  // Connects, checks the served model's schema against type=, pins its version.
  // Skipped for -show-weights (moses2 loads every feature for it), so that works offline.
  virtual void Load(System &system);

  // An ffData slot, filled from the table when a phrase table prunes, only with path=.
  virtual size_t HasPhraseTableInd() const {
    return HasTable();
  }
  virtual void EvaluateAfterTablePruning(MemPool &pool, const TargetPhrases &tps,
                                         const Phrase<Moses2::Word> &sourcePhrase) const;

  virtual FFState* BlankState(MemPool &pool, const System &sys) const;
  // Sends the sentence's one Score RPC (every option is known by now) and starts the
  // states off with its rows.
  virtual void EmptyHypothesisState(FFState &state, const ManagerBase &mgr,
                                    const InputType &input, const Hypothesis &hypo) const;
  virtual void EvaluateWhenApplied(const ManagerBase &mgr,
                                   const Hypothesis &hypo, const FFState &prevState, Scores &scores,
                                   FFState &state) const;
  using LexicalReordering::EvaluateWhenApplied;
  // Frees the sentence's rows.
  virtual void CleanUpAfterSentenceProcessing(const System &system, const InputType &input) const;

  const LRModel &Configuration() const {
    return *m_configuration;
  }
  // Whether path= put Moses's table beside the model; the scores of each block (the
  // table's, then the model's).
  bool HasTable() const {
    return !m_path.empty();
  }
  size_t BlockSize() const {
    return m_blockSize;
  }
  // The scorer, which combines a context model's blocks (SentenceScorer::Combine).
  const reordering::SentenceScorer &Scorer() const {
    return *m_scorer;
  }

private:
  std::unique_ptr<SentenceRows> ScoreSentence(const ManagerBase &mgr) const;

  // The table's full row of an option (NULL if the table lacks the pair), as Moses2's
  // LexicalReordering finds it, kept whole whatever num-features says.
  const SCORE *TableRow(MemPool &pool, const TargetPhraseImpl &targetPhrase,
                        const Phrase<Moses2::Word> &sourcePhrase) const;

  reordering::FeatureOptions m_options;  // our keys of the feature line (feature_options.h)
  size_t m_blockSize;           // scores of one block: the type's count
  // The sentence's RPC, the pinned version, the fallback row (ln(default-scores), full
  // row; none without default-scores), the end-of-run counts.
  std::unique_ptr<reordering::SentenceScorer> m_scorer;

  mutable std::mutex m_sentencesMutex;
  mutable std::unordered_map<const InputType*, std::unique_ptr<SentenceRows> > m_sentenceRows;
};

}
