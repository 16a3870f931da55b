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
// What it must not do: talk gRPC itself (reordering_client.h) or decide orientations.
//
// ini:  ExternalReordering name=LexicalReordering0 num-features=6
//         type=hier-msd-bidirectional-fe input-factor=0 output-factor=0
//         server=127.0.0.1:50051 model=ja-en [version=N] [timeout-ms=5000]
//         [on-error=fail|default] [default-scores=p1,p2,...]
// default-scores (probabilities, as in Moses) is only the row of a sentence whose RPC
// failed with on-error=default; without it such a sentence gets no reordering score, as
// Moses2's LexicalReordering does for a pair missing from its table.
#pragma once

#include <stdint.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../LexicalReordering/LexicalReordering.h"
#include "../LexicalReordering/LRModel.h"
#include "ReorderingType.h"

namespace reordering
{
class Client;
}

namespace Moses2
{
class InputPathBase;

// One sentence's rows of ln-probabilities, one per (input path, target phrase) the
// phrase tables gave for it. Written once (by the RPC), then only read.
class SentenceRows
{
public:
  // The row of an option, or NULL (no row: no score, as Moses2 for a pair not in its table).
  const SCORE *Find(const InputPathBase *path, const void *targetPhrase) const {
    Index::const_iterator it = m_index.find(Key(path, targetPhrase));
    return it == m_index.end() ? NULL : &m_values[it->second];
  }
  void Add(const InputPathBase *path, const void *targetPhrase, const SCORE *row, size_t width) {
    m_index[Key(path, targetPhrase)] = m_values.size();
    m_values.insert(m_values.end(), row, row + width);
  }
  void Reserve(size_t pairs, size_t width) {
    m_index.reserve(pairs);
    m_values.reserve(pairs * width);
  }

private:
  typedef std::pair<const void*, const void*> Key;
  struct KeyHash {
    size_t operator()(const Key &k) const {
      size_t seed = std::hash<const void*>()(k.first);
      return seed ^ (std::hash<const void*>()(k.second) + 0x9e3779b9 + (seed << 6) + (seed >> 2));
    }
  };
  typedef std::unordered_map<Key, size_t, KeyHash> Index;
  Index m_index;
  std::vector<SCORE> m_values;
};

class ExternalReordering : public LexicalReordering
{
public:
  ExternalReordering(size_t startInd, const std::string &line);
  virtual ~ExternalReordering();

  // Connects, checks the served model's schema against type=, pins its version.
  // Skipped for -show-weights (moses2 loads every feature for it), so that works offline.
  virtual void Load(System &system);

  // No table: no ffData slot, nothing to do when a phrase table prunes.
  virtual size_t HasPhraseTableInd() const {
    return false;
  }
  virtual void EvaluateAfterTablePruning(MemPool &pool, const TargetPhrases &tps,
                                         const Phrase<Moses2::Word> &sourcePhrase) const {
  }

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

  // Our keys, removed from a feature line (LexicalReordering throws on unknown keys).
  // Returns the line without them; fills `found` (key -> value, every key) if given.
  static std::string StripServiceKeys(const std::string &line,
                                      std::vector<std::pair<std::string, std::string> > *found);

private:
  enum OnError { FAIL, USE_DEFAULT };

  std::unique_ptr<SentenceRows> ScoreSentence(const ManagerBase &mgr) const;

  std::string m_type;                 // type= as the ini spells it
  reordering_type::Schema m_schema;   // what it means: what Load() checks
  std::string m_server;
  std::string m_model;
  uint64_t m_requestedVersion;  // 0 = newest at Load()
  uint64_t m_pinnedVersion;     // the version every sentence of this run is scored with
  int m_timeoutMs;
  OnError m_onError;
  FactorType m_inputFactor, m_outputFactor;
  std::vector<SCORE> m_defaultRow;  // ln(default-scores), full row; empty = none given
  std::unique_ptr<reordering::Client> m_client;

  mutable std::mutex m_sentencesMutex;
  mutable std::unordered_map<const InputType*, std::unique_ptr<SentenceRows> > m_sentenceRows;

  mutable std::atomic<size_t> m_sentences, m_failures;
  // For the end-of-run summary: Score RPCs running now / at most at once, their wall time.
  mutable std::atomic<size_t> m_inFlight, m_maxInFlight, m_rpcs;
  mutable std::atomic<long long> m_rpcMicros;
};

}
