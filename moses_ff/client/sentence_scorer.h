// One sentence's scores from the service, for the ExternalReordering feature of either
// decoder (moses_ff/moses/ and moses_ff/moses2/ExternalReordering.cpp).
//
// What it is for: what both features do alike. At load: connect to server=, check the
// served model against type=, pin its version for the run and learn whether it has decoder
// context (ModelInfo.context). Per sentence: one Score RPC for all the pairs the feature
// collected (a ScoreInputBuilder), the check that the answer is the pinned version's, and a
// row per pair, or, when the RPC fails under on-error=default, the fallback row; the counts
// of the end-of-run summary. A model without context gives each pair a row of scores (the
// ScoreTransform of its probabilities). A model with context (issue 48) gives each pair its
// two raw blocks, own scores then neighbour scores, and the sentence its boundary block; the
// decoder combines them at each expansion with ContextScore, the one place where the softmax
// and the transform of a context model's scores are done, for both decoders. A feature only
// walks its decoder's options into the builder, stores each row where its decoder reads it
// and, for a context model, picks the neighbour of each step (its decoder's states).
// What it must not do: depend on Moses (the score transform is the decoder's own function,
// passed in, and an error comes back as text for the feature to throw), decide
// orientations, or talk gRPC itself (reordering_client.h).
//
// C++11-clean like reordering_client.h: the features include it with Moses's -std.
#ifndef MOSES_FF_CLIENT_SENTENCE_SCORER_H_
#define MOSES_FF_CLIENT_SENTENCE_SCORER_H_

#include <stddef.h>
#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

#include "feature_options.h"
#include "reordering_client.h"

namespace reordering {

// The decoder's score of a served probability: FloorScore(TransformScore(p)), max(ln p,
// -100), computed by the decoder's own functions, so that a row is exactly what its table
// loader makes of p.
typedef float (*ScoreTransform)(float probability);

// The decoder's score of class `k` of one direction of a context model (the proto's
// ScoreResponse): the softmax over the direction's `classes` columns of own[j] +
// neighbour[j], class k's probability through `transform`. `own` points at that direction's
// block of the pair's own scores, `neighbour` at the same block of its neighbour's (a pair's
// neighbour block, or the boundary at the sentence edge); NULL adds nothing (a neighbour
// with no target word: see the features' states).
float ContextScore(const float *own, const float *neighbour, size_t classes, size_t k, ScoreTransform transform);

// The most classes of one direction (mslr's four).
const size_t kMaxClasses = 4;

// ContextScore of every class k < `classes` into out[k], bit for bit, with one softmax: what
// a decoder that keeps a combined block for reuse (ContextCache) computes.
void ContextScores(const float *own, const float *neighbour, size_t classes, ScoreTransform transform, float *out);

// The combined blocks of one sentence, kept for reuse: an expansion combines the option's
// own block with the neighbour block its history hands it, and the same two blocks meet
// again and again (on 20 Kyoto test sentences, 10.6M combinations for 1.05M distinct pairs
// of blocks), so the softmax and the transform's ln of a pair are computed once and then
// read. Keyed by the two blocks' addresses: a decoder passes one address per distinct
// neighbour block (ScoredSentence's rows give each direction's canonical copy) to share
// entries. Not thread-safe: one sentence is decoded by one thread.
class ContextCache {
 public:
  ContextCache() : mask_(0), used_(0), classes_(0), transform_(NULL) {}
  void Init(size_t classes, ScoreTransform transform) {
    classes_ = classes;
    transform_ = transform;
    slots_.assign(1 << 12, Slot());
    mask_ = slots_.size() - 1;
    used_ = 0;
  }
  // ContextScore(own, neighbour, classes, k, transform), from the cache when seen before.
  float Score(const float *own, const float *neighbour, size_t k) {
    size_t i = Hash(own, neighbour) & mask_;
    for (;; i = (i + 1) & mask_) {
      Slot &s = slots_[i];
      if (s.own == own && s.neighbour == neighbour) return s.scores[k];
      if (s.own == NULL) break;
    }
    if (2 * (used_ + 1) > slots_.size()) {
      Grow();
      for (i = Hash(own, neighbour) & mask_; slots_[i].own != NULL; i = (i + 1) & mask_) {}
    }
    Slot &s = slots_[i];
    s.own = own;
    s.neighbour = neighbour;
    ContextScores(own, neighbour, classes_, transform_, s.scores);
    ++used_;
    return s.scores[k];
  }

 private:
  struct Slot {
    const float *own, *neighbour;
    float scores[kMaxClasses];
    Slot() : own(NULL), neighbour(NULL) {}
  };
  static size_t Hash(const float *a, const float *b) {
    uint64_t h = (uint64_t) (uintptr_t) a * 0x9E3779B97F4A7C15ULL ^ (uint64_t) (uintptr_t) b * 0xC2B2AE3D27D4EB4FULL;
    return (size_t) (h ^ (h >> 29));
  }
  void Grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(2 * old.size(), Slot());
    mask_ = slots_.size() - 1;
    for (size_t j = 0; j < old.size(); ++j) {
      if (old[j].own == NULL) continue;
      size_t i = Hash(old[j].own, old[j].neighbour) & mask_;
      while (slots_[i].own != NULL) i = (i + 1) & mask_;
      slots_[i] = old[j];
    }
  }
  std::vector<Slot> slots_;
  size_t mask_, used_, classes_;
  ScoreTransform transform_;
};

// Moses's LRState::ComparePrevScores on `n` values (a block of a row): 0 if equal or both
// absent (NULL), else -1 or 1, an absent one after a present one. What a state compares
// when two hypotheses may recombine.
int CompareScores(const float *mine, const float *yours, size_t n);

// What SentenceScorer::Score made of one sentence: a row per pair, in the order the pairs
// were added. A row is the pair's blocks side by side, each block the type's columns in
// Moses's order (classes x directions, backward block first): without context one block,
// the scores (through the ScoreTransform), so Width() is the model's output count (or the
// fallback row's length); with context (Context()) two raw blocks, own then neighbour
// (Width() = 2 x Outputs()), and Boundary() beside the rows.
class ScoredSentence {
 public:
  ScoredSentence() : pairs_(0), width_(0), outputs_(0), served_(false), seconds_(0) {}

  // False when no pair has a row: a sentence without pairs, or a failed RPC under
  // on-error=default with no fallback row (no row: no score, as for a pair missing from a
  // table).
  bool HasRows() const { return !values_.empty(); }
  // True for the server's rows; false for the fallback row (or none).
  bool Served() const { return served_; }
  // True for a context model's served blocks: each row is own | neighbour, raw scores
  // (ContextScore combines them); false for rows of scores (or none).
  bool Context() const { return !boundary_.empty(); }
  size_t NumPairs() const { return pairs_; }
  size_t Width() const { return width_; }
  // Columns of one block: the model's outputs (the fallback row's length for it).
  size_t Outputs() const { return outputs_; }
  // Pair `pair`'s row of Width() scores, or NULL without rows.
  const float *Row(size_t pair) const {
    if (values_.empty()) return NULL;
    return &values_[served_ ? pair * width_ : 0];
  }
  // With Context(): the sentence edges as a neighbour, Outputs() raw scores (backward
  // columns: the start, before the first phrase; forward: the end); else NULL.
  const float *Boundary() const { return boundary_.empty() ? NULL : &boundary_[0]; }
  // Wall time of the sentence's RPC (0 without one).
  double Seconds() const { return seconds_; }

 private:
  friend class SentenceScorer;
  size_t pairs_, width_, outputs_;
  bool served_;
  double seconds_;
  std::vector<float> values_;  // served: [pairs x width]; fallback: the one row all pairs share
  std::vector<float> boundary_;  // a context model's boundary block, else empty
};

// The service as one feature sees it. Score() is const and may run on many decoding
// threads at once.
class SentenceScorer {
 public:
  // `feature` (the feature's name) starts every message. `fallback` is the row of every
  // pair of a sentence whose RPC fails under on-error=default, already a score (empty: no
  // row). `options` is the feature's parsed line.
  SentenceScorer(const std::string &feature, const FeatureOptions &options, ScoreTransform transform,
                 const std::vector<float> &fallback);
  ~SentenceScorer();
  SentenceScorer(const SentenceScorer &) = delete;
  SentenceScorer &operator=(const SentenceScorer &) = delete;

  // Connects, asks for model= (version=, or the newest), checks its schema against type=
  // and pins its version, and whether it has context, for every later Score(). False, and
  // *error says why (starting with the feature's name), if the server cannot be asked or
  // serves another schema; else *pinned is the line that says what was pinned (without a
  // newline).
  bool Load(std::string *error, std::string *pinned);

  // Scores the pairs of sentence `sentence_id` (its number, for messages) into *out: the
  // served rows, or, if the RPC fails under on-error=default, the fallback row (and a line
  // on stderr naming the sentence and the error). A sentence without pairs sends nothing.
  // False, and *error says why (starting with the feature's name), when the decoder must
  // stop: the RPC failed under on-error=fail, or the answer is not the pinned version's
  // (its version, width, or context blocks where Load saw none, or none where it saw them).
  bool Score(const ScoreInput &pairs, long sentence_id, ScoredSentence *out, std::string *error) const;

  uint64_t pinned_version() const { return pinned_version_; }
  // Whether the pinned model has decoder context (after a successful Load).
  bool context() const { return context_; }
  // ContextScore with this model's classes and the decoder's transform: the score of class
  // `k` of the direction whose block `own` and `neighbour` point at.
  float Combine(const float *own, const float *neighbour, size_t k) const {
    return ContextScore(own, neighbour, classes_, k, transform_);
  }
  // For RpcSummary and FailureSummary (feature_options.h).
  const RpcStats &stats() const { return stats_; }

 private:
  std::string feature_;
  FeatureOptions options_;
  ScoreTransform transform_;
  std::vector<float> fallback_;
  size_t classes_;  // of one direction's block
  uint64_t pinned_version_;
  bool context_;
  std::unique_ptr<Client> client_;
  mutable RpcStats stats_;
};

}  // namespace reordering

#endif  // MOSES_FF_CLIENT_SENTENCE_SCORER_H_
