// -*- mode: c++; indent-tabs-mode: nil; tab-width:2  -*-
// ExternalReordering: Moses's own lexicalized reordering, with the scores of every
// translation option coming from the moses-reorder scoring service instead of a table.
//
// What it is for: orientation handling (phrase/hier states, bidirectional, default
// scores, sparse features) stays LexicalReordering's; this class only fills the
// per-option score rows that LexicalReordering would have read from its table, with
// one Score RPC per sentence. What it must not do: talk gRPC itself or score a sentence
// (that is sentence_scorer.h, shared with the Moses2 feature) or re-implement any
// orientation logic.
//
// A model with decoder context (issue 48; the server says so at Load) scores a step from
// the option placed and its neighbour, which only the hypothesis knows, so Moses's states,
// which read one fixed row per option, cannot score it. For such a model only, the
// hypotheses carry this feature's own states (the .cpp): the same orientations, from
// Moses's LRModel::GetOrientation and ReorderingStack, for every type, and Moses's
// BidirectionalReorderingState around them; each option's cached row holds the model's
// raw blocks (own | neighbour | the sentence's boundary), and a step's score is
// SentenceScorer::Combine of the right two: backward, the option's own block next to the
// neighbour block of the last option placed (the boundary for the first phrase); forward,
// the previous option's own block next to the neighbour block of the option placed after
// it (Moses scores no forward orientation after the last phrase, and neither does this).
// Hierarchical types: the orientation comes from the stack's block (or the coverage, for
// forward), as in Moses, and the context words from the last phrase placed, not from the
// merged block. Recombination: a backward state also compares the neighbour block the next
// step will read (two hypotheses whose last phrases end in different words are never
// merged); a forward state compares the previous option's own block, as Moses's
// ComparePrevScores compares its row. An option with no target words is no neighbour: the
// one before it stays the backward context of the next step, and as the forward neighbour
// it adds nothing (the word after the previous option is not known yet when Moses scores
// that step). A model without context keeps Moses's own states and rows, untouched.
//
// ini:  ExternalReordering name=ExternalReordering0 type=hier-msd-bidirectional-fe
//         input-factor=0 output-factor=0 server=127.0.0.1:50051 model=ja-en
//         [version=N] [timeout-ms=5000] [on-error=fail|default] [default-scores=...]
#pragma once

#include <memory>
#include <string>

#include "moses/FF/LexicalReordering/LexicalReordering.h"
#include "feature_options.h"
#include "sentence_scorer.h"

namespace Moses
{
class Manager;

class ExternalReordering : public LexicalReordering
{
public:
  explicit ExternalReordering(const std::string &line);
  virtual ~ExternalReordering();

  // Connects, checks the served model's schema against type=, pins its version.
  // Not called for -show-weights, so that works with no server running.
  void Load(AllOptions::ptr const& opts);

  // Moses's states for a model without context; ours (see above) for a model with it.
  virtual FFState const* EmptyHypothesisState(const InputType &input) const;

  virtual FFState* EvaluateWhenApplied(const Hypothesis& cur_hypo,
                                       const FFState* prev_state,
                                       ScoreComponentCollection* accumulator) const;
  using LexicalReordering::EvaluateWhenApplied;

  // For the context states: the scorer that combines blocks, and the width of one block
  // (the model's outputs) in an option's cached row.
  const reordering::SentenceScorer &Scorer() const {
    return *m_scorer;
  }
  size_t Outputs() const {
    return m_outputs;
  }

private:
  void ScoreSentence(Manager &manager) const;

  reordering::FeatureOptions m_options;  // our keys of the feature line (feature_options.h)
  // The schema's outputs, counted once: Schema::NumOutputs() builds its class and direction
  // names, and the context states ask for it several times per expansion.
  size_t m_outputs;
  // The sentence's RPC, the pinned version, the fallback row, the end-of-run counts.
  std::unique_ptr<reordering::SentenceScorer> m_scorer;
};

}
