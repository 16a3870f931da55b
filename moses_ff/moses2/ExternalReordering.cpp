// -*- mode: c++; indent-tabs-mode: nil; tab-width:2  -*-
// See ExternalReordering.h for what this is for and what it must not do.
#include "ExternalReordering.h"

#include <algorithm>
#include <cstring>
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
// lacks) and the service's (NULL for an option it sent no row for); for a context model,
// also its neighbour block, as each direction's canonical copy (SentenceRows::Canonicalize;
// NULL for an option with no target words: no neighbour).
struct OptionRows {
  const SCORE *table;
  const SCORE *model;
  const SCORE *const *neighbours;  // [direction] -> that direction's neighbour block
  OptionRows() : table(NULL), model(NULL), neighbours(NULL) {}
  OptionRows(const SCORE *t, const SCORE *m, const SCORE *const *n) : table(t), model(m), neighbours(n) {}
};

// The states: what Moses2's LRState, PhraseBasedReorderingState, HReorderingBackwardState,
// HReorderingForwardState and BidirectionalReorderingState do, with the option's row
// taken from the sentence's rows instead of the target phrase's ffData. Same orientation
// calls, same hash and recombination rules, same "no row, no score". With a table
// (path=), each option has two rows, the table's block of scores first, and one state
// serves both: the same scores as a LexicalReordering feature beside this one, without
// that feature's second reordering state on every hypothesis expansion. A context model's
// score of a step is combined from two blocks (ExternalReordering.h), and a state also
// holds the neighbour block the next backward step reads.
class ExtState : public FFState
{
public:
  // `offset` is the state's first score (Moses2's), `block` the first column of its
  // direction in a full row of the model.
  ExtState(const ExternalReordering &ff, LRModel::Direction dir, size_t offset, size_t block)
    : m_ff(ff), m_direction(dir), m_offset(offset), m_block(block)
    , m_index(block / ff.Configuration().GetNumberOfTypes()), m_rows(NULL), m_prevPath(NULL), m_context(NULL) {}

  // `row` is the option's rows, `path` its input path, `context` the neighbour block of the
  // last option placed with target words (NULL: none yet).
  virtual void Init(const SentenceRows *rows, const OptionRows &row, const InputPathBase &path,
                    bool first, const Bitmap *coverage, const SCORE *context) = 0;
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

  // The context after placing the option of `row`: its backward neighbour block (the
  // first direction's), or, when it has none (no target words, or no context model), the
  // context before it.
  const SCORE *NextContext(const OptionRows &row) const {
    return row.neighbours ? row.neighbours[0] : m_context;
  }

  // LRState::CopyScores: backward reads the current option's rows, forward the previous
  // one's; the table's block of scores first, then the service's (a context model's
  // combined from the option's own block and its neighbour's: the last option placed, or
  // the boundary, backward; the option placed now, forward).
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
    SCORE value;
    if (Context()) {  // Combine, through the sentence's cache of combined blocks
      const SCORE *neighbour = m_direction == LRModel::Backward ? (m_context ? m_context : m_rows->Boundary() + m_block)
                               : (current.neighbours ? current.neighbours[m_index] : NULL);
      value = m_rows->Cache().Score(rows.model + m_block, neighbour, reoType);
    } else {
      value = rows.model[off_remote];
    }
    accum.PlusEquals(system, m_ff, value, block + off_local);
  }

  bool Context() const {
    return m_rows && m_rows->Context();
  }

  // LRState::ComparePrevScores, on the previous options' rows (the table's, then the
  // service's; a context model's own block of this direction).
  int ComparePrevScores(const ExtState &other) const {
    int c = CompareRows(m_prevRow.table, other.m_prevRow.table, m_offset);
    return c != 0 ? c : CompareRows(m_prevRow.model, other.m_prevRow.model, Context() ? m_block : m_offset);
  }

  // What a backward state hands on beyond Moses2's: the neighbour block the next step
  // reads (0 when equal, and always without a context model).
  int CompareContext(const ExtState &other) const {
    return CompareRows(m_context, other.m_context, 0);
  }

  // Moses2 recombines two hypotheses when their states' hashes are equal (its
  // HypothesisColl compares hashes, moses2/legacy/Util2.h), so a backward state's
  // neighbour block must be in its hash, not only in operator==. Without a context model
  // m_context is NULL and the hash is Moses2's own.
  void CombineContext(size_t &seed) const {
    if (m_context != NULL)
      boost::hash_combine(seed, boost::hash_range(m_context, m_context + Config().GetNumberOfTypes()));
  }

  // The same for a forward state: what ComparePrevScores compares, the previous option's
  // scores of this direction, must be in its hash, or two hypotheses over the same last range
  // whose last options score differently are merged and an n-best entry below the best gets
  // the other option's forward scores. Moses2's own LexicalReordering hashes the range alone
  // (PhraseBasedReorderingState::hash) and does merge them; a model without context keeps
  // that, so it decodes exactly as Moses2's table does. A context model's forward state
  // hashes the scores.
  void CombinePrevScores(size_t &seed) const {
    if (!Context()) return;
    const size_t n = Config().GetNumberOfTypes();
    if (m_prevRow.table != NULL)
      boost::hash_combine(seed, boost::hash_range(m_prevRow.table + m_offset, m_prevRow.table + m_offset + n));
    if (m_prevRow.model != NULL)
      boost::hash_combine(seed, boost::hash_range(m_prevRow.model + m_block, m_prevRow.model + m_block + n));
  }

  int CompareRows(const SCORE *mine, const SCORE *yours, size_t start) const {
    return reordering::CompareScores(mine ? mine + start : NULL, yours ? yours + start : NULL,
                                     Config().GetNumberOfTypes());
  }

  void Set(const SentenceRows *rows, const OptionRows &row, const InputPathBase &path, const SCORE *context) {
    m_rows = rows;
    m_prevRow = row;
    m_prevPath = &path;
    m_context = context;
  }

  const ExternalReordering &m_ff;
  LRModel::Direction m_direction;
  size_t m_offset;
  size_t m_block;
  size_t m_index;                   // the direction's place among the type's directions
  const SentenceRows *m_rows;
  OptionRows m_prevRow;             // the rows of the option that made this state
  const InputPathBase *m_prevPath;  // and its input path
  const SCORE *m_context;           // the (canonical) neighbour block the next backward step reads
};

class PhraseState : public ExtState
{
public:
  PhraseState(const ExternalReordering &ff, LRModel::Direction dir, size_t offset, size_t block)
    : ExtState(ff, dir, offset, block), m_first(false) {}

  void Init(const SentenceRows *rows, const OptionRows &row, const InputPathBase &path, bool first,
            const Bitmap *, const SCORE *context) {
    Set(rows, row, path, context);
    m_first = first;
  }
  size_t hash() const {
    size_t ret = (size_t) &m_prevPath->range;
    boost::hash_combine(ret, m_direction);
    if (m_direction == LRModel::Backward) CombineContext(ret);
    else CombinePrevScores(ret);
    return ret;
  }
  bool operator==(const FFState &o) const {
    if (&o == this) return true;
    const PhraseState &other = static_cast<const PhraseState&>(o);
    if (&m_prevPath->range != &other.m_prevPath->range) return false;
    return (m_direction == LRModel::Forward ? ComparePrevScores(other) : CompareContext(other)) == 0;
  }
  void Expand(const ManagerBase &mgr, const Hypothesis &hypo, const OptionRows &row, Scores &scores,
              FFState &next) const {
    if (m_direction != LRModel::Forward || !m_first) {
      const Range &cur = hypo.GetInputPath().range;
      ReorderingType reoType = m_first ? Config().GetOrientation(cur)
                                       : Config().GetOrientation(m_prevPath->range, cur);
      CopyScores(mgr.system, scores, row, reoType);
    }
    static_cast<PhraseState&>(next).Init(m_rows, row, hypo.GetInputPath(), false, NULL, NextContext(row));
  }

private:
  bool m_first;
};

class HierBackwardState : public ExtState
{
public:
  HierBackwardState(MemPool &pool, const ExternalReordering &ff, size_t offset, size_t block)
    : ExtState(ff, LRModel::Backward, offset, block), m_stack(pool) {}

  void Init(const SentenceRows *rows, const OptionRows &row, const InputPathBase &path, bool,
            const Bitmap *, const SCORE *context) {
    Set(rows, row, path, context);
    m_stack.Init();
  }
  size_t hash() const {
    size_t ret = m_stack.hash();
    CombineContext(ret);
    return ret;
  }
  bool operator==(const FFState &o) const {
    const HierBackwardState &other = static_cast<const HierBackwardState&>(o);
    return m_stack == other.m_stack && CompareContext(other) == 0;
  }
  void Expand(const ManagerBase &mgr, const Hypothesis &hypo, const OptionRows &row, Scores &scores,
              FFState &next) const {
    HierBackwardState &nextState = static_cast<HierBackwardState&>(next);
    nextState.Init(m_rows, row, hypo.GetInputPath(), false, NULL, NextContext(row));
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
  HierForwardState(const ExternalReordering &ff, size_t offset, size_t block)
    : ExtState(ff, LRModel::Forward, offset, block), m_first(true), m_coverage(NULL) {}

  void Init(const SentenceRows *rows, const OptionRows &row, const InputPathBase &path, bool first,
            const Bitmap *coverage, const SCORE *context) {
    Set(rows, row, path, context);
    m_first = first;
    m_coverage = coverage;
  }
  size_t hash() const {
    size_t ret = hash_value(m_prevPath->range);
    CombinePrevScores(ret);
    return ret;
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
    static_cast<HierForwardState&>(next).Init(m_rows, row, hypo.GetInputPath(), false, &cov, NextContext(row));
  }

private:
  bool m_first;
  const Bitmap *m_coverage;
};

class BidirectionalState : public ExtState
{
public:
  BidirectionalState(const ExternalReordering &ff, ExtState *backward, ExtState *forward)
    : ExtState(ff, LRModel::Bidirectional, 0, 0), m_backward(backward), m_forward(forward) {}

  void Init(const SentenceRows *rows, const OptionRows &row, const InputPathBase &path, bool first,
            const Bitmap *coverage, const SCORE *context) {
    Set(rows, row, path, context);
    m_backward->Init(rows, row, path, first, coverage, context);
    m_forward->Init(rows, row, path, first, coverage, context);
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
    nextState.Set(m_rows, row, hypo.GetInputPath(), NextContext(row));
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
  // with collapseff; a context model's block of a direction is a full block of classes.
  const LRModel &config = *m_configuration;
  const size_t classes = config.GetNumberOfTypes(), scores = config.CollapseScores() ? 1 : classes;
  ExtState *backward = NULL, *forward = NULL;
  size_t offset = 0, column = 0;
  if (config.GetDirection() != LRModel::Forward) {
    if (config.IsPhraseBased())
      backward = new (pool.Allocate<PhraseState>()) PhraseState(*this, LRModel::Backward, offset, column);
    else
      backward = new (pool.Allocate<HierBackwardState>()) HierBackwardState(pool, *this, offset, column);
    offset += scores;
    column += classes;
    if (config.GetDirection() == LRModel::Backward) return backward;
  }
  if (config.IsPhraseBased())
    forward = new (pool.Allocate<PhraseState>()) PhraseState(*this, LRModel::Forward, offset, column);
  else
    forward = new (pool.Allocate<HierForwardState>()) HierForwardState(*this, offset, column);
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
  static_cast<ExtState&>(state).Init(rows, OptionRows(), hypo.GetInputPath(), true, &hypo.GetBitmap(), NULL);
}

void ExternalReordering::EvaluateWhenApplied(const ManagerBase &mgr, const Hypothesis &hypo,
    const FFState &prevState, Scores &scores, FFState &state) const
{
  const ExtState &prev = static_cast<const ExtState&>(prevState);
  const TargetPhrase<Moses2::Word> &tp = hypo.GetTargetPhrase();
  const SentenceRows *rows = prev.Rows();
  const SCORE *const *neighbours = NULL;
  const SCORE *model = rows ? rows->Find(&hypo.GetInputPath(), static_cast<const void*>(&tp), &neighbours) : NULL;
  OptionRows row(HasTable() ? static_cast<const SCORE*>(tp.ffData[m_PhraseTableInd]) : NULL, model,
                 model && rows->Context() && tp.GetSize() > 0 ? neighbours : NULL);
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
  if (scored.Context()) rows->SetContext(scored.Boundary(), scored.Outputs());
  for (size_t p = 0; p < options.size(); ++p)
    rows->Add(options[p].first, options[p].second, scored.Row(p), scored.Width());
  if (scored.Context()) {
    const size_t classes = m_configuration->GetNumberOfTypes();
    rows->Canonicalize(classes, scored.Outputs() / classes, Moses2Score);
  }
  return rows;
}

void SentenceRows::Canonicalize(size_t classes, size_t directions, reordering::ScoreTransform transform)
{
  m_directions = directions;
  const size_t width = 2 * m_outputs, rows = width ? m_values.size() / width : 0;
  m_canonical.assign(rows * directions, NULL);
  size_t size = 16;
  while (size < 2 * rows * directions) size *= 2;
  vector<const SCORE*> seen(size, NULL);  // open addressing on the blocks' bits
  for (size_t r = 0; r < rows; ++r) {
    for (size_t d = 0; d < directions; ++d) {
      const SCORE *block = &m_values[r * width + m_outputs + d * classes];
      uint64_t h = 0;
      for (size_t j = 0; j < classes; ++j) {
        uint32_t bits;
        std::memcpy(&bits, block + j, sizeof bits);
        h = (h ^ bits) * 0x9E3779B97F4A7C15ULL;
      }
      size_t i = (size_t) (h ^ (h >> 29)) & (size - 1);
      while (seen[i] && std::memcmp(seen[i], block, classes * sizeof(SCORE)) != 0) i = (i + 1) & (size - 1);
      if (!seen[i]) seen[i] = block;
      m_canonical[r * directions + d] = seen[i];
    }
  }
  m_cache.Init(classes, transform);
}

}
