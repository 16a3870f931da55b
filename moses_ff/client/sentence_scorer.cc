// See sentence_scorer.h for what this is for.
#include "sentence_scorer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <sstream>

namespace reordering {

namespace {

// The softmax of own + neighbour over `classes` columns, shifted by the largest, in double
// (no overflow; p exact to float's precision): e[j] and their sum, in one fixed order, so
// that ContextScore and ContextScores give the same bits.
double Exponentials(const float *own, const float *neighbour, size_t classes, double *e) {
  double top = -HUGE_VAL;
  for (size_t j = 0; j < classes; ++j) top = std::max(top, double(own[j]) + (neighbour ? neighbour[j] : 0.0));
  double sum = 0.0;
  for (size_t j = 0; j < classes; ++j) {
    e[j] = std::exp(double(own[j]) + (neighbour ? neighbour[j] : 0.0) - top);
    sum += e[j];
  }
  return sum;
}

}  // namespace

float ContextScore(const float *own, const float *neighbour, size_t classes, size_t k, ScoreTransform transform) {
  double e[kMaxClasses];
  const double sum = Exponentials(own, neighbour, classes, e);
  return transform(static_cast<float>(e[k] / sum));
}

void ContextScores(const float *own, const float *neighbour, size_t classes, ScoreTransform transform, float *out) {
  double e[kMaxClasses];
  const double sum = Exponentials(own, neighbour, classes, e);
  for (size_t k = 0; k < classes; ++k) out[k] = transform(static_cast<float>(e[k] / sum));
}

int CompareScores(const float *mine, const float *yours, size_t n) {
  if (mine == yours) return 0;
  if (yours == NULL) return -1;
  if (mine == NULL) return 1;
  for (size_t i = 0; i < n; ++i) {
    if (mine[i] < yours[i]) return -1;
    if (mine[i] > yours[i]) return 1;
  }
  return 0;
}

SentenceScorer::SentenceScorer(const std::string &feature, const FeatureOptions &options, ScoreTransform transform,
                               const std::vector<float> &fallback)
    : feature_(feature),
      options_(options),
      transform_(transform),
      fallback_(fallback),
      classes_(options.schema.Classes().size()),
      pinned_version_(0),
      context_(false) {}

SentenceScorer::~SentenceScorer() = default;

bool SentenceScorer::Load(std::string *error, std::string *pinned) {
  ModelInfo info;
  try {
    client_.reset(new Client(options_.Client()));
    info = client_->GetModel(options_.model, options_.version);
  } catch (const ClientError &e) {
    client_.reset();
    *error = feature_ + ": cannot load model '" + options_.model + "' from " + options_.server + ": " + e.what();
    return false;
  }
  const std::string why = options_.Mismatch(info);
  if (!why.empty()) {
    client_.reset();
    *error = feature_ + ": " + why;
    return false;
  }
  pinned_version_ = info.version;
  context_ = info.context;
  std::ostringstream line;
  line << feature_ << ": " << options_.server << " model " << options_.model << " version " << pinned_version_
       << " (" << info.family << ", " << info.moses_type << (context_ ? ", with decoder context" : "")
       << ") pinned for this run";
  *pinned = line.str();
  return true;
}

bool SentenceScorer::Score(const ScoreInput &pairs, long sentence_id, ScoredSentence *out,
                           std::string *error) const {
  *out = ScoredSentence();
  out->pairs_ = pairs.NumPairs();
  ++stats_.sentences;
  if (pairs.NumPairs() == 0) return true;
  if (!client_) {
    *error = feature_ + ": scored before Load()";
    return false;
  }

  ScoreResult result;
  const std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  try {
    RpcScope counting(stats_);
    result = client_->Score(options_.model, pinned_version_, pairs);
  } catch (const ClientError &e) {
    std::ostringstream why;
    if (options_.on_error == FeatureOptions::FAIL) {
      why << feature_ << ": sentence " << sentence_id << ": " << e.what()
          << " (on-error=default would use default scores)";
      *error = why.str();
      return false;
    }
    const size_t failures = ++stats_.failures;
    std::cerr << feature_ << ": sentence " << sentence_id << " scored with default scores (" << failures
              << " so far): " << e.what() << std::endl;
    out->width_ = out->outputs_ = fallback_.size();
    out->values_ = fallback_;
    return true;
  }
  const size_t width = options_.schema.NumOutputs();
  if (result.version != pinned_version_ || result.NumOutputs() != width || result.context() != context_) {
    std::ostringstream why;
    why << feature_ << ": server answered version " << result.version << " with " << result.NumOutputs()
        << " outputs" << (result.context() ? " in context blocks" : "") << "; pinned version " << pinned_version_
        << " has " << width << (context_ ? " and decoder context" : "");
    *error = why.str();
    return false;
  }
  out->seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out->served_ = true;
  out->outputs_ = width;
  if (context_) {  // own | neighbour per pair, raw: the decoder combines them per step
    out->width_ = 2 * width;
    out->values_.resize(pairs.NumPairs() * out->width_);
    for (size_t p = 0; p < pairs.NumPairs(); ++p) {
      std::copy(&result.scores[p * width], &result.scores[p * width] + width, &out->values_[p * out->width_]);
      std::copy(&result.neighbour[p * width], &result.neighbour[p * width] + width,
                &out->values_[p * out->width_ + width]);
    }
    out->boundary_ = result.boundary;
    return true;
  }
  out->width_ = width;
  out->values_.resize(result.probabilities.size());
  for (size_t i = 0; i < result.probabilities.size(); ++i) out->values_[i] = transform_(result.probabilities[i]);
  return true;
}

}  // namespace reordering
