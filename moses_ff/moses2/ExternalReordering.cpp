// -*- mode: c++; indent-tabs-mode: nil; tab-width:2  -*-
// See ExternalReordering.h for what this is for and what it must not do.
#include "ExternalReordering.h"

#include <algorithm>
#include <iostream>

#include <boost/functional/hash.hpp>

#include "../LexicalReordering/ReorderingStack.h"
#include "../../AlignmentInfo.h"
#include "../../InputPathBase.h"
#include "../../MemPool.h"
#include "../../Scores.h"
#include "../../System.h"
#include "../../PhraseBased/Hypothesis.h"
#include "../../PhraseBased/InputPath.h"
#include "../../PhraseBased/InputPaths.h"
#include "../../PhraseBased/Manager.h"
#include "../../PhraseBased/Sentence.h"
#include "../../PhraseBased/TargetPhraseImpl.h"
#include "../../PhraseBased/TargetPhrases.h"
#include "../../legacy/Bitmaps.h"
#include "../../legacy/Factor.h"
#include "../../legacy/Parameter.h"
#include "../../legacy/Util2.h"
#include "util/exception.hh"

#ifdef HAVE_CMPH
#include "../../TranslationModel/CompactPT/LexicalReorderingTableCompact.h"
#endif

using namespace std;

namespace Moses2
{
namespace
{

string Surface(const Word &w, FactorType f)
{
  const Factor *factor = w[f];
  return factor ? factor->GetString().as_string() : string();
}

// What Moses2's tables make of a probability.
float Moses2Score(float probability)
{
  return FloorScore(TransformScore(probability));
}

typedef LRModel::ReorderingType ReorderingType;

// The rows of one option: the table's (path=; NULL without a table or for a pair it
// lacks) and the service's (NULL for an option it sent no row for).
struct OptionRows {
  const SCORE *table;
  const SCORE *model;
  OptionRows() : table(NULL), model(NULL) {}
  OptionRows(const SCORE *t, const SCORE *m) : table(t), model(m) {}
};

// The states: what Moses2's LRState, PhraseBasedReorderingState, HReorderingBackwardState,
// HReorderingForwardState and BidirectionalReorderingState do, with the option's row
// taken from the sentence's rows instead of the target phrase's ffData. Same orientation
// calls, same hash and recombination rules, same "no row, no score". With a table
// (path=), each option has two rows, the table's block of scores first, and one state
// serves both: the same scores as a LexicalReordering feature beside this one, without
// that feature's second reordering state on every hypothesis expansion.
class ExtState : public FFState
{
public:
  ExtState(const ExternalReordering &ff, LRModel::Direction dir, size_t offset)
    : m_ff(ff), m_direction(dir), m_offset(offset), m_rows(NULL), m_prevPath(NULL) {}

  // `row` is the option's rows, `path` its input path.
  virtual void Init(const SentenceRows *rows, const OptionRows &row, const InputPathBase &path,
                    bool first, const Bitmap *coverage) = 0;
  // Scores the step to `hypo` (whose option's rows are `row`) and fills `next`.
  virtual void Expand(const ManagerBase &mgr, const Hypothesis &hypo, const OptionRows &row,
                      Scores &scores, FFState &next) const = 0;

  const SentenceRows *Rows() const {
    return m_rows;
  }
  virtual std::string ToString() const {
    return "ExternalReordering state";
  }

protected:
  const LRModel &Config() const {
    return m_ff.Configuration();
  }

  // LRState::CopyScores: backward reads the current option's rows, forward the previous
  // one's; the table's block of scores first, then the service's.
  void CopyScores(const System &system, Scores &accum, const OptionRows &current, ReorderingType reoType) const {
    const OptionRows &rows = m_direction == LRModel::Backward ? current : m_prevRow;
    size_t off_remote = m_offset + reoType;
    size_t off_local = Config().CollapseScores() ? m_offset : off_remote;
    size_t block = 0;
    if (m_ff.HasTable()) {
      if (rows.table != NULL) accum.PlusEquals(system, m_ff, rows.table[off_remote], off_local);
      block = m_ff.BlockSize();
    }
    if (rows.model == NULL) return;
    UTIL_THROW_IF2(block + off_local >= m_ff.GetNumScores(), "offset out of vector bounds!");
    accum.PlusEquals(system, m_ff, rows.model[off_remote], block + off_local);
  }

  // LRState::ComparePrevScores, on the previous options' rows (the table's, then the service's).
  int ComparePrevScores(const ExtState &other) const {
    int c = CompareRows(m_prevRow.table, other.m_prevRow.table);
    return c != 0 ? c : CompareRows(m_prevRow.model, other.m_prevRow.model);
  }

  int CompareRows(const SCORE *mine, const SCORE *yours) const {
    if (mine == yours) return 0;
    if (yours == NULL) return -1;
    if (mine == NULL) return 1;
    size_t stop = m_offset + Config().GetNumberOfTypes();
    for (size_t i = m_offset; i < stop; i++) {
      if (mine[i] < yours[i]) return -1;
      if (mine[i] > yours[i]) return 1;
    }
    return 0;
  }

  void Set(const SentenceRows *rows, const OptionRows &row, const InputPathBase &path) {
    m_rows = rows;
    m_prevRow = row;
    m_prevPath = &path;
  }

  const ExternalReordering &m_ff;
  LRModel::Direction m_direction;
  size_t m_offset;
  const SentenceRows *m_rows;
  OptionRows m_prevRow;             // the rows of the option that made this state
  const InputPathBase *m_prevPath;  // and its input path
};

class PhraseState : public ExtState
{
public:
  PhraseState(const ExternalReordering &ff, LRModel::Direction dir, size_t offset)
    : ExtState(ff, dir, offset), m_first(false) {}

  void Init(const SentenceRows *rows, const OptionRows &row, const InputPathBase &path, bool first,
            const Bitmap *) {
    Set(rows, row, path);
    m_first = first;
  }
  size_t hash() const {
    size_t ret = (size_t) &m_prevPath->range;
    boost::hash_combine(ret, m_direction);
    return ret;
  }
  bool operator==(const FFState &o) const {
    if (&o == this) return true;
    const PhraseState &other = static_cast<const PhraseState&>(o);
    if (&m_prevPath->range != &other.m_prevPath->range) return false;
    return m_direction != LRModel::Forward || ComparePrevScores(other) == 0;
  }
  void Expand(const ManagerBase &mgr, const Hypothesis &hypo, const OptionRows &row, Scores &scores,
              FFState &next) const {
    if (m_direction != LRModel::Forward || !m_first) {
      const Range &cur = hypo.GetInputPath().range;
      ReorderingType reoType = m_first ? Config().GetOrientation(cur)
                                       : Config().GetOrientation(m_prevPath->range, cur);
      CopyScores(mgr.system, scores, row, reoType);
    }
    static_cast<PhraseState&>(next).Init(m_rows, row, hypo.GetInputPath(), false, NULL);
  }

private:
  bool m_first;
};

class HierBackwardState : public ExtState
{
public:
  HierBackwardState(MemPool &pool, const ExternalReordering &ff, size_t offset)
    : ExtState(ff, LRModel::Backward, offset), m_stack(pool) {}

  void Init(const SentenceRows *rows, const OptionRows &row, const InputPathBase &path, bool,
            const Bitmap *) {
    Set(rows, row, path);
    m_stack.Init();
  }
  size_t hash() const {
    return m_stack.hash();
  }
  bool operator==(const FFState &o) const {
    return m_stack == static_cast<const HierBackwardState&>(o).m_stack;
  }
  void Expand(const ManagerBase &mgr, const Hypothesis &hypo, const OptionRows &row, Scores &scores,
              FFState &next) const {
    HierBackwardState &nextState = static_cast<HierBackwardState&>(next);
    nextState.Init(m_rows, row, hypo.GetInputPath(), false, NULL);
    nextState.m_stack = m_stack;
    int reoDistance = nextState.m_stack.ShiftReduce(hypo.GetInputPath().range);
    CopyScores(mgr.system, scores, row, Config().GetOrientation(reoDistance));
  }

private:
  ReorderingStack m_stack;
};

class HierForwardState : public ExtState
{
public:
  HierForwardState(const ExternalReordering &ff, size_t offset)
    : ExtState(ff, LRModel::Forward, offset), m_first(true), m_coverage(NULL) {}

  void Init(const SentenceRows *rows, const OptionRows &row, const InputPathBase &path, bool first,
            const Bitmap *coverage) {
    Set(rows, row, path);
    m_first = first;
    m_coverage = coverage;
  }
  size_t hash() const {
    return hash_value(m_prevPath->range);
  }
  bool operator==(const FFState &o) const {
    if (&o == this) return true;
    const HierForwardState &other = static_cast<const HierForwardState&>(o);
    return m_prevPath->range == other.m_prevPath->range && ComparePrevScores(other) == 0;
  }
  void Expand(const ManagerBase &mgr, const Hypothesis &hypo, const OptionRows &row, Scores &scores,
              FFState &next) const {
    const Range &cur = hypo.GetInputPath().range;
    // the coverage after this step, as Moses2's HReorderingForwardState keeps it
    Manager &mgrCast = const_cast<Manager&>(static_cast<const Manager&>(mgr));
    const Bitmap &cov = mgrCast.GetBitmaps().GetBitmap(*m_coverage, cur);
    if (!m_first)
      CopyScores(mgr.system, scores, row, Config().GetOrientation(m_prevPath->range, cur, cov));
    static_cast<HierForwardState&>(next).Init(m_rows, row, hypo.GetInputPath(), false, &cov);
  }

private:
  bool m_first;
  const Bitmap *m_coverage;
};

class BidirectionalState : public ExtState
{
public:
  BidirectionalState(const ExternalReordering &ff, ExtState *backward, ExtState *forward)
    : ExtState(ff, LRModel::Bidirectional, 0), m_backward(backward), m_forward(forward) {}

  void Init(const SentenceRows *rows, const OptionRows &row, const InputPathBase &path, bool first,
            const Bitmap *coverage) {
    Set(rows, row, path);
    m_backward->Init(rows, row, path, first, coverage);
    m_forward->Init(rows, row, path, first, coverage);
  }
  size_t hash() const {
    size_t ret = m_backward->hash();
    boost::hash_combine(ret, m_forward->hash());
    return ret;
  }
  bool operator==(const FFState &o) const {
    if (&o == this) return true;
    const BidirectionalState &other = static_cast<const BidirectionalState&>(o);
    return *m_backward == *other.m_backward && *m_forward == *other.m_forward;
  }
  void Expand(const ManagerBase &mgr, const Hypothesis &hypo, const OptionRows &row, Scores &scores,
              FFState &next) const {
    BidirectionalState &nextState = static_cast<BidirectionalState&>(next);
    nextState.Set(m_rows, row, hypo.GetInputPath());
    m_backward->Expand(mgr, hypo, row, scores, *nextState.m_backward);
    m_forward->Expand(mgr, hypo, row, scores, *nextState.m_forward);
  }

private:
  ExtState *m_backward;
  ExtState *m_forward;
};

}  // namespace

ExternalReordering::ExternalReordering(size_t startInd, const string &line)
  : LexicalReordering(startInd, reordering::DecoderLine(line, reordering::MOSES2))
  , m_blockSize(0)
{
  string why;
  UTIL_THROW_IF2(!m_options.ParseLine(line, &why), GetName() << ": " << why);
  const reordering_type::Schema &schema = m_options.schema;
  // Moses2's LexicalReordering takes its score count from num-features; say so if it is wrong.
  m_blockSize = schema.Directions().size() * (schema.collapse ? 1 : schema.Classes().size());
  const size_t expected = (HasTable() ? 2 : 1) * m_blockSize;
  UTIL_THROW_IF2(GetNumScores() != expected,
                 GetName() << ": type=" << m_options.type << " has " << m_blockSize << " scores"
                 << (HasTable() ? string(", twice that with the table of path=") : string())
                 << ", but num-features=" << GetNumScores());
  vector<float> fallback;
  if (!m_options.default_scores.empty()) {
    vector<SCORE> p = Tokenize<SCORE>(m_options.default_scores, ",");
    UTIL_THROW_IF2(p.size() != schema.NumOutputs(),
                   GetName() << ": default-scores has " << p.size() << " values, type=" << m_options.type
                   << " needs " << schema.NumOutputs() << " (classes x directions)");
    for (size_t i = 0; i < p.size(); ++i) fallback.push_back(Moses2Score(p[i]));
  }
  m_scorer.reset(new reordering::SentenceScorer(GetName(), m_options, Moses2Score, fallback));
}

ExternalReordering::~ExternalReordering()
{
  cerr << reordering::RpcSummary(GetName(), m_scorer->stats())
       << reordering::FailureSummary(GetName(), m_scorer->stats());
}

void ExternalReordering::Load(System &system)
{
  if (system.params.GetParam("show-weights")) return;
  if (HasTable()) LexicalReordering::Load(system);  // reads the table of path=
  string why, pinned;
  UTIL_THROW_IF2(!m_scorer->Load(&why, &pinned), why);
  cerr << pinned << endl;
}

FFState* ExternalReordering::BlankState(MemPool &pool, const System &sys) const
{
  // The layout of LRModel::CreateLRState: backward block first, each block one column
  // with collapseff.
  const LRModel &config = *m_configuration;
  const size_t block = config.CollapseScores() ? 1 : config.GetNumberOfTypes();
  ExtState *backward = NULL, *forward = NULL;
  size_t offset = 0;
  if (config.GetDirection() != LRModel::Forward) {
    if (config.IsPhraseBased())
      backward = new (pool.Allocate<PhraseState>()) PhraseState(*this, LRModel::Backward, offset);
    else
      backward = new (pool.Allocate<HierBackwardState>()) HierBackwardState(pool, *this, offset);
    offset += block;
    if (config.GetDirection() == LRModel::Backward) return backward;
  }
  if (config.IsPhraseBased())
    forward = new (pool.Allocate<PhraseState>()) PhraseState(*this, LRModel::Forward, offset);
  else
    forward = new (pool.Allocate<HierForwardState>()) HierForwardState(*this, offset);
  if (config.GetDirection() == LRModel::Forward) return forward;
  return new (pool.Allocate<BidirectionalState>()) BidirectionalState(*this, backward, forward);
}

void ExternalReordering::EmptyHypothesisState(FFState &state, const ManagerBase &mgr,
    const InputType &input, const Hypothesis &hypo) const
{
  const SentenceRows *rows;
  {
    std::lock_guard<std::mutex> lock(m_sentencesMutex);
    std::unordered_map<const InputType*, std::unique_ptr<SentenceRows> >::const_iterator it =
      m_sentenceRows.find(&input);
    rows = it == m_sentenceRows.end() ? NULL : it->second.get();
  }
  if (!rows) {
    std::unique_ptr<SentenceRows> scored = ScoreSentence(mgr);
    std::lock_guard<std::mutex> lock(m_sentencesMutex);
    rows = scored.get();
    m_sentenceRows[&input] = std::move(scored);
  }
  static_cast<ExtState&>(state).Init(rows, OptionRows(), hypo.GetInputPath(), true, &hypo.GetBitmap());
}

void ExternalReordering::EvaluateWhenApplied(const ManagerBase &mgr, const Hypothesis &hypo,
    const FFState &prevState, Scores &scores, FFState &state) const
{
  const ExtState &prev = static_cast<const ExtState&>(prevState);
  const TargetPhrase<Moses2::Word> &tp = hypo.GetTargetPhrase();
  OptionRows row(HasTable() ? static_cast<const SCORE*>(tp.ffData[m_PhraseTableInd]) : NULL,
                 prev.Rows() ? prev.Rows()->Find(&hypo.GetInputPath(), static_cast<const void*>(&tp)) : NULL);
  prev.Expand(mgr, hypo, row, scores, state);
}

void ExternalReordering::EvaluateAfterTablePruning(MemPool &pool, const TargetPhrases &tps,
    const Phrase<Moses2::Word> &sourcePhrase) const
{
  if (!HasTable()) return;
  for (TargetPhrases::const_iterator it = tps.begin(); it != tps.end(); ++it)
    (*it)->ffData[m_PhraseTableInd] = const_cast<SCORE*>(TableRow(pool, **it, sourcePhrase));
}

const SCORE *ExternalReordering::TableRow(MemPool &pool, const TargetPhraseImpl &targetPhrase,
    const Phrase<Moses2::Word> &sourcePhrase) const
{
  // LexicalReordering::EvaluateAfterTablePruning keeps num-features values of a row: here
  // that is both blocks, so it would read past the table's row. The row is kept whole.
  const size_t width = m_options.schema.NumOutputs();
  if (m_propertyInd >= 0) return targetPhrase.GetScoresProperty(m_propertyInd);
  Values values;
#ifdef HAVE_CMPH
  if (m_compactModel) values = m_compactModel->GetScore(sourcePhrase, targetPhrase, *m_blank);
#endif
  if (m_coll) {
    const Values *found = GetValues(sourcePhrase, targetPhrase);
    if (found) values = *found;
  }
  if (values.empty()) return NULL;
  UTIL_THROW_IF2(values.size() != width, GetName() << ": a row of the table of path= has " << values.size()
                 << " scores; type=" << m_options.type << " needs " << width);
  SCORE *row = pool.Allocate<SCORE>(width);
  std::copy(values.begin(), values.end(), row);
  return row;
}

void ExternalReordering::CleanUpAfterSentenceProcessing(const System &system, const InputType &input) const
{
  std::lock_guard<std::mutex> lock(m_sentencesMutex);
  m_sentenceRows.erase(&input);
}

std::unique_ptr<SentenceRows> ExternalReordering::ScoreSentence(const ManagerBase &mgrBase) const
{
  const Manager &mgr = static_cast<const Manager&>(mgrBase);
  const Sentence &sentence = static_cast<const Sentence&>(mgr.GetInput());
  const size_t numPt = mgr.system.mappings.size();

  reordering::ScoreInputBuilder pairs;
  for (size_t i = 0; i < sentence.GetSize(); ++i)
    pairs.AddSourceToken(Surface(sentence[i], m_options.input_factor));
  vector<pair<const InputPathBase*, const void*> > options;  // in the order of the pairs
  for (InputPathsBase::const_iterator p = mgr.GetInputPaths().begin(); p != mgr.GetInputPaths().end(); ++p) {
    const InputPath &path = static_cast<const InputPath&>(**p);
    for (size_t t = 0; t < numPt; ++t) {
      const TargetPhrases *tps = path.targetPhrases[t];
      if (!tps) continue;
      for (TargetPhrases::const_iterator it = tps->begin(); it != tps->end(); ++it) {
        const TargetPhraseImpl &tp = **it;
        pairs.StartPair(path.range.GetStartPos(), path.range.GetEndPos() + 1);
        for (size_t k = 0; k < tp.GetSize(); ++k)
          pairs.AddTargetToken(Surface(tp[k], m_options.output_factor));
        const AlignmentInfo &align = tp.GetAlignTerm();
        for (AlignmentInfo::const_iterator a = align.begin(); a != align.end(); ++a)
          pairs.AddAlignmentPoint(a->first, a->second);
        // the key EvaluateWhenApplied looks up: hypo.GetTargetPhrase(), a TargetPhrase<Word>
        options.push_back(make_pair(&path, static_cast<const void*>(static_cast<const TargetPhrase<Moses2::Word>*>(&tp))));
      }
    }
  }

  reordering::ScoredSentence scored;
  string why;
  UTIL_THROW_IF2(!m_scorer->Score(pairs.input(), mgr.GetTranslationId(), &scored, &why), why);
  std::unique_ptr<SentenceRows> rows(new SentenceRows());
  if (!scored.HasRows()) return rows;  // no rows, no reordering score (Moses2's "no row")
  rows->Reserve(options.size(), scored.Width());
  for (size_t p = 0; p < options.size(); ++p)
    rows->Add(options[p].first, options[p].second, scored.Row(p), scored.Width());
  return rows;
}

}
