// -*- mode: c++; indent-tabs-mode: nil; tab-width:2  -*-
// ExternalReordering: Moses's own lexicalized reordering, with the scores of every
// translation option coming from the moses-reorder scoring service instead of a table.
//
// What it is for: orientation handling (phrase/hier states, bidirectional, default
// scores, sparse features) stays LexicalReordering's; this class only fills the
// per-option score rows that LexicalReordering would have read from its table, with
// one Score RPC per sentence. What it must not do: talk gRPC itself (that is
// reordering_client.h) or re-implement any orientation logic.
//
// ini:  ExternalReordering name=ExternalReordering0 type=hier-msd-bidirectional-fe
//         input-factor=0 output-factor=0 server=127.0.0.1:50051 model=ja-en
//         [version=N] [timeout-ms=5000] [on-error=fail|default] [default-scores=...]
#pragma once

#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

#include <atomic>

#include "moses/FF/LexicalReordering/LexicalReordering.h"
#include "ReorderingType.h"
#include "feature_options.h"
#include "reordering_client.h"

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

  // Our keys, removed from a feature line (the base class throws on unknown keys).
  // Returns the line without them; fills `found` (key -> value) if given.
  static std::string StripServiceKeys(const std::string &line,
                                      std::vector<std::pair<std::string, std::string> > *found);

private:
  void ScoreSentence(Manager &manager) const;
  void CacheFallbackRows(const std::vector<TranslationOption*> &options) const;

  reordering::FeatureOptions m_options;  // our keys of the feature line (feature_options.h)
  uint64_t m_pinnedVersion;     // the version every sentence of this run is scored with
  // A full row (classes x directions, like a table's, whatever collapseff says): the
  // default-scores (already ln) or zeros, LRState's "no row" behaviour.
  Scores m_fallbackRow;
  std::unique_ptr<reordering::Client> m_client;
  mutable reordering::RpcStats m_stats;  // sentences, failures, RPCs in flight: the end-of-run summary
};

}
