// -*- mode: c++; indent-tabs-mode: nil; tab-width:2  -*-
// See ExternalReordering.h for what this is for and what it must not do.
#include "ExternalReordering.h"

#include <algorithm>
#include <iostream>
#include <vector>

#include <boost/functional/hash.hpp>

#include "moses/AlignmentInfo.h"
#include "moses/Bitmap.h"
#include "moses/FF/LexicalReordering/BidirectionalReorderingState.h"
#include "moses/FF/LexicalReordering/LRState.h"
#include "moses/FF/LexicalReordering/PhraseBasedReorderingState.h"
#include "moses/FF/LexicalReordering/ReorderingStack.h"
#include "moses/FF/LexicalReordering/SparseReordering.h"
#include "moses/Hypothesis.h"
#include "moses/InputType.h"
#include "moses/Manager.h"
#include "moses/Range.h"
#include "moses/ScoreComponentCollection.h"
#include "moses/TargetPhrase.h"
#include "moses/TranslationOption.h"
#include "moses/TranslationOptionCollection.h"
#include "moses/TranslationOptionList.h"
#include "moses/Util.h"
#include "moses/Word.h"
#include "util/exception.hh"

using namespace std;

namespace Moses
{
namespace
{

string Surface(const Word &w, FactorType f)
{
  const Factor *factor = w.GetFactor(f);
  return factor ? factor->GetString().as_string() : string();
}

// What Moses's tables make of a probability (the row cached on an option).
float MosesScore(float probability)
{
  return FloorScore(TransformScore(probability));
}

// The states of a model with decoder context (ExternalReordering.h says what they do). Each
// is its Moses twin (PhraseBasedReorderingState, HReorderingBackwardState,
// HReorderingForwardState: same orientation calls, hash and recombination rules) with the
// score of a step combined from two blocks instead of read from one row, and the neighbour
// block the next step reads. Moses's BidirectionalReorderingState holds two of them.
class ContextState : public LRState
{
public:
  // A first state: `offset` is its first score (Moses's), `block` the first column of its
  // direction in a full row of the model.
  ContextState(const LRModel &config, LRModel::Direction dir, size_t offset, size_t block)
    : LRState(config, dir, offset), m_block(block), m_context(NULL) {}
  // The state after `topt`: its neighbour block becomes the context, unless it has no
  // target words, when the context before it stays.
  ContextState(const ContextState *prev, const TranslationOption &topt)
    : LRState(prev, topt), m_block(prev->m_block), m_context(prev->m_context) {
    const float *row = Row(topt);
    if (row && topt.GetTargetPhrase().GetSize() > 0) m_context = row + Feature().Outputs();
  }

protected:
  const ExternalReordering &Feature() const {
    return *static_cast<const ExternalReordering*>(m_configuration.GetScoreProducer());
  }

  // The option's cached blocks (own | neighbour | boundary), or NULL when its row is a row
  // of scores (a sentence whose RPC failed under on-error=default) or it has none.
  const float *Row(const TranslationOption &topt) const {
    const Scores *row = topt.GetLexReorderingScores(m_configuration.GetScoreProducer());
    return row && row->size() == 3 * Feature().Outputs() ? &(*row)[0] : NULL;
  }

  // LRState::CopyScores for the step to `topt` with orientation `reoType`: the same score
  // and sparse features, the dense score combined from the blocks (a row of scores, or none,
  // is read as LRState reads it).
  void AddScore(ScoreComponentCollection *accum, const TranslationOption &topt, const InputType &input,
                ReorderingType reoType) const {
    LexicalReordering *producer = m_configuration.GetScoreProducer();
    const bool backward = m_direction == LRModel::Backward;
    const TranslationOption *relevant = backward ? &topt : m_prevOption;
    const size_t off_remote = m_offset + reoType;
    const size_t off_local = m_configuration.CollapseScores() ? m_offset : off_remote;
    UTIL_THROW_IF2(off_local >= producer->GetNumScoreComponents(), "offset out of vector bounds!");
    Scores scores(producer->GetNumScoreComponents(), 0);
    bool scored = true;
    if (const float *own = Row(*relevant)) {
      const size_t width = Feature().Outputs();
      const float *neighbour = NULL;
      if (backward)  // the last option placed with target words, or the sentence start
        neighbour = m_context ? m_context : own + 2 * width;
      else if (topt.GetTargetPhrase().GetSize() > 0)
        neighbour = Row(topt) + width;
      scores[off_local] = Feature().Scorer().Combine(own + m_block, neighbour ? neighbour + m_block : NULL, reoType);
    } else if (const Scores *cached = relevant->GetLexReorderingScores(producer)) {
      UTIL_THROW_IF2(off_remote >= cached->size(), "offset out of vector bounds!");
      scores[off_local] = (*cached)[off_remote];
    } else if (producer->GetHaveDefaultScores()) {
      scores[off_local] = producer->GetDefaultScore(off_remote);
    } else {
      scored = false;  // no row, no default: no cost, as in LRState
    }
    if (scored) accum->PlusEquals(producer, scores);
    const SparseReordering *sparse = m_configuration.GetSparseReordering();
    if (sparse) sparse->CopyScores(*relevant, m_prevOption, input, reoType, m_direction, accum);
  }

  // What two states with equal orientation state must also share to be merged: backward,
  // the neighbour block the next step reads; forward, the previous option's own block (as
  // LRState::ComparePrevScores; rows of scores are compared by it).
  int CompareNext(const ContextState &other) const {
    const size_t classes = m_configuration.GetNumberOfTypes();
    if (m_direction == LRModel::Backward)
      return reordering::CompareScores(m_context ? m_context + m_block : NULL,
                                       other.m_context ? other.m_context + m_block : NULL, classes);
    if (!m_prevOption || !other.m_prevOption)
      return m_prevOption == other.m_prevOption ? 0 : m_prevOption ? -1 : 1;
    const float *mine = Row(*m_prevOption), *yours = Row(*other.m_prevOption);
    if (!mine || !yours) return ComparePrevScores(other.m_prevOption);
    return reordering::CompareScores(mine + m_block, yours + m_block, classes);
  }

  size_t m_block;
  // The neighbour block of the last option placed with target words; NULL before there is
  // one (the backward context is then the sentence start: the boundary).
  const float *m_context;
};

class ContextPhraseState : public ContextState
{
public:
  ContextPhraseState(const LRModel &config, LRModel::Direction dir, size_t offset, size_t block)
    : ContextState(config, dir, offset, block), m_prevRange(NOT_FOUND, NOT_FOUND), m_first(true) {}
  ContextPhraseState(const ContextPhraseState *prev, const TranslationOption &topt)
    : ContextState(prev, topt), m_prevRange(topt.GetSourceWordsRange()), m_first(false) {}

  size_t hash() const {
    size_t ret = hash_value(m_prevRange);
    boost::hash_combine(ret, m_direction);
    return ret;
  }
  bool operator==(const FFState &o) const {
    if (&o == this) return true;
    const ContextPhraseState &other = static_cast<const ContextPhraseState&>(o);
    return m_prevRange == other.m_prevRange && CompareNext(other) == 0;
  }
  LRState *Expand(const TranslationOption &topt, const InputType &input, ScoreComponentCollection *scores) const {
    if ((m_direction != LRModel::Forward && PhraseBasedReorderingState::m_useFirstBackwardScore) || !m_first) {
      const Range cur = topt.GetSourceWordsRange();
      AddScore(scores, topt, input, m_first ? m_configuration.GetOrientation(cur)
               : m_configuration.GetOrientation(m_prevRange, cur));
    }
    return new ContextPhraseState(this, topt);
  }

private:
  Range m_prevRange;
  bool m_first;
};

class ContextHierBackwardState : public ContextState
{
public:
  ContextHierBackwardState(const LRModel &config, size_t offset, size_t block)
    : ContextState(config, LRModel::Backward, offset, block) {}
  ContextHierBackwardState(const ContextHierBackwardState *prev, const TranslationOption &topt)
    : ContextState(prev, topt), m_reoStack(prev->m_reoStack) {}

  size_t hash() const {
    return m_reoStack.hash();
  }
  bool operator==(const FFState &o) const {
    const ContextHierBackwardState &other = static_cast<const ContextHierBackwardState&>(o);
    return m_reoStack == other.m_reoStack && CompareNext(other) == 0;
  }
  LRState *Expand(const TranslationOption &topt, const InputType &input, ScoreComponentCollection *scores) const {
    ContextHierBackwardState *next = new ContextHierBackwardState(this, topt);
    const int reoDistance = next->m_reoStack.ShiftReduce(topt.GetSourceWordsRange());
    AddScore(scores, topt, input, m_configuration.GetOrientation(reoDistance));
    return next;
  }

private:
  ReorderingStack m_reoStack;
};

class ContextHierForwardState : public ContextState
{
public:
  ContextHierForwardState(const LRModel &config, size_t sentenceLength, size_t offset, size_t block)
    : ContextState(config, LRModel::Forward, offset, block), m_first(true), m_prevRange(NOT_FOUND, NOT_FOUND)
    , m_coverage(sentenceLength) {}
  ContextHierForwardState(const ContextHierForwardState *prev, const TranslationOption &topt)
    : ContextState(prev, topt), m_first(false), m_prevRange(topt.GetSourceWordsRange())
    , m_coverage(prev->m_coverage, topt.GetSourceWordsRange()) {}

  size_t hash() const {
    return hash_value(m_prevRange);
  }
  bool operator==(const FFState &o) const {
    if (&o == this) return true;
    const ContextHierForwardState &other = static_cast<const ContextHierForwardState&>(o);
    return m_prevRange == other.m_prevRange && CompareNext(other) == 0;
  }
  LRState *Expand(const TranslationOption &topt, const InputType &input, ScoreComponentCollection *scores) const {
    const Range cur = topt.GetSourceWordsRange();
    const Bitmap cov(m_coverage, cur);  // the coverage after this step, as Moses keeps it
    if (!m_first) AddScore(scores, topt, input, m_configuration.GetOrientation(m_prevRange, cur, cov));
    return new ContextHierForwardState(this, topt);
  }

private:
  bool m_first;
  Range m_prevRange;
  Bitmap m_coverage;
};

}  // namespace

ExternalReordering::ExternalReordering(const string &line)
  : LexicalReordering(reordering::DecoderLine(line, reordering::MOSES))
  , m_outputs(0)
{
  string why;
  UTIL_THROW_IF2(!m_options.ParseLine(line, &why), GetScoreProducerDescription() << ": " << why);
  m_outputs = m_options.schema.NumOutputs();
  UTIL_THROW_IF2(!m_options.path.empty(), GetScoreProducerDescription()
                 << ": path= (the table beside the model in one feature) is Moses2's only; in moses "
                 "keep the table as its own LexicalReordering line");
  // With no row, LRState adds default-scores if given, else nothing: a failed sentence
  // gets exactly that row, so it is not retried once per hypothesis. Rows are full
  // (classes x directions) even with collapseff, where Moses has fewer scores than
  // columns and reads default-scores past its end; we read zeros there instead.
  vector<float> fallback(m_options.schema.NumOutputs(), 0.0f);
  if (GetHaveDefaultScores())
    for (size_t i = 0; i < fallback.size() && i < GetNumScoreComponents(); ++i)
      fallback[i] = GetDefaultScore(i);
  m_scorer.reset(new reordering::SentenceScorer(GetScoreProducerDescription(), m_options, MosesScore, fallback));
}

ExternalReordering::~ExternalReordering()
{
  VERBOSE(1, reordering::RpcSummary(GetScoreProducerDescription(), m_scorer->stats()));
  cerr << reordering::FailureSummary(GetScoreProducerDescription(), m_scorer->stats());
}

void ExternalReordering::Load(AllOptions::ptr const& opts)
{
  LexicalReordering::Load(opts);  // no path=, so no table is read
  string why, pinned;
  UTIL_THROW_IF2(!m_scorer->Load(&why, &pinned), why);
  VERBOSE(1, pinned << endl);
}

FFState const* ExternalReordering::EmptyHypothesisState(const InputType &input) const
{
  if (!m_scorer->context()) return LexicalReordering::EmptyHypothesisState(input);
  // The layout of LRModel::CreateLRState, with our states.
  const LRModel &config = GetModel();
  const size_t classes = config.GetNumberOfTypes();
  LRState *backward = NULL, *forward = NULL;
  if (config.GetDirection() != LRModel::Forward) {
    if (config.IsPhraseBased()) backward = new ContextPhraseState(config, LRModel::Backward, 0, 0);
    else backward = new ContextHierBackwardState(config, 0, 0);
    if (config.GetDirection() == LRModel::Backward) return backward;
  }
  const size_t offset = backward ? (config.CollapseScores() ? 1 : classes) : 0, block = backward ? classes : 0;
  if (config.IsPhraseBased()) forward = new ContextPhraseState(config, LRModel::Forward, offset, block);
  else forward = new ContextHierForwardState(config, input.GetSize(), offset, block);
  if (config.GetDirection() == LRModel::Forward) return forward;
  return new BidirectionalReorderingState(config, backward, forward, 0);
}

FFState* ExternalReordering::EvaluateWhenApplied(const Hypothesis& hypo,
                                                 const FFState* prev_state,
                                                 ScoreComponentCollection* out) const
{
  if (!hypo.GetTranslationOption().GetLexReorderingScores(this))
    ScoreSentence(hypo.GetManager());
  return LexicalReordering::EvaluateWhenApplied(hypo, prev_state, out);
}

void ExternalReordering::ScoreSentence(Manager &manager) const
{
  const InputType &source = manager.GetSource();
  const TranslationOptionCollection *toc = manager.getSntTranslationOptions();
  const size_t n = source.GetSize();

  reordering::ScoreInputBuilder pairs;
  for (size_t i = 0; i < n; ++i) pairs.AddSourceToken(Surface(source.GetWord(i), m_options.input_factor));
  vector<TranslationOption*> options;  // in the order of the pairs
  for (size_t start = 0; start < n; ++start) {
    for (size_t end = start; end < n; ++end) {
      const TranslationOptionList *list = toc->GetTranslationOptionList(start, end);
      if (!list) break;
      for (TranslationOptionList::const_iterator it = list->begin(); it != list->end(); ++it) {
        const TargetPhrase &tp = (*it)->GetTargetPhrase();
        pairs.StartPair(start, end + 1);
        for (size_t k = 0; k < tp.GetSize(); ++k)
          pairs.AddTargetToken(Surface(tp.GetWord(k), m_options.output_factor));
        const AlignmentInfo &align = tp.GetAlignTerm();
        for (AlignmentInfo::const_iterator a = align.begin(); a != align.end(); ++a)
          pairs.AddAlignmentPoint(a->first, a->second);
        options.push_back(*it);
      }
    }
  }

  reordering::ScoredSentence scored;
  string why;
  UTIL_THROW_IF2(!m_scorer->Score(pairs.input(), source.GetTranslationId(), &scored, &why), why);
  if (!scored.HasRows()) return;  // no options
  if (scored.Served())
    VERBOSE(1, "Line " << source.GetTranslationId() << ": " << GetScoreProducerDescription() << " scored "
            << options.size() << " translation options in one RPC, took " << scored.Seconds() << " seconds"
            << endl);
  // A row of scores per option; or, for a context model, its blocks with the sentence's
  // boundary after them (own | neighbour | boundary), which our states combine.
  const size_t width = scored.Width() + (scored.Context() ? scored.Outputs() : 0);
  Scores row(width);
  for (size_t p = 0; p < options.size(); ++p) {
    const float *values = scored.Row(p);
    std::copy(values, values + scored.Width(), row.begin());
    if (scored.Context()) std::copy(scored.Boundary(), scored.Boundary() + scored.Outputs(), row.begin() + scored.Width());
    options[p]->CacheLexReorderingScores(*this, row);
  }
}

}
