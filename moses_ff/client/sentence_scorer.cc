// See sentence_scorer.h for what this is for.
#include "sentence_scorer.h"

#include <chrono>
#include <iostream>
#include <sstream>

namespace reordering {

SentenceScorer::SentenceScorer(const std::string &feature, const FeatureOptions &options, ScoreTransform transform,
                               const std::vector<float> &fallback)
    : feature_(feature), options_(options), transform_(transform), fallback_(fallback), pinned_version_(0) {}

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
  std::ostringstream line;
  line << feature_ << ": " << options_.server << " model " << options_.model << " version " << pinned_version_
       << " (" << info.family << ", " << info.moses_type << ") pinned for this run";
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
    out->width_ = fallback_.size();
    out->values_ = fallback_;
    return true;
  }
  const size_t width = options_.schema.NumOutputs();
  if (result.version != pinned_version_ || result.NumOutputs() != width) {
    std::ostringstream why;
    why << feature_ << ": server answered version " << result.version << " with " << result.NumOutputs()
        << " outputs; pinned version " << pinned_version_ << " has " << width;
    *error = why.str();
    return false;
  }
  out->seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out->served_ = true;
  out->width_ = width;
  out->values_.resize(result.probabilities.size());
  for (size_t i = 0; i < result.probabilities.size(); ++i) out->values_[i] = transform_(result.probabilities[i]);
  return true;
}

}  // namespace reordering
