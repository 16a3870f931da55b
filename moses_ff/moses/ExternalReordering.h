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

  virtual FFState* EvaluateWhenApplied(const Hypothesis& cur_hypo,
                                       const FFState* prev_state,
                                       ScoreComponentCollection* accumulator) const;
  using LexicalReordering::EvaluateWhenApplied;

private:
  void ScoreSentence(Manager &manager) const;

  reordering::FeatureOptions m_options;  // our keys of the feature line (feature_options.h)
  // The sentence's RPC, the pinned version, the fallback row, the end-of-run counts.
  std::unique_ptr<reordering::SentenceScorer> m_scorer;
};

}
