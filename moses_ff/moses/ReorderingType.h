// -*- mode: c++; indent-tabs-mode: nil; tab-width:2  -*-
// The schema behind a Moses lexicalized-reordering type string, so that two spellings of
// one type compare equal.
//
// What it is for: ExternalReordering checks that the served model is the model its
// `type=` asks for. Moses accepts many spellings of one type (LRModel's constructor,
// moses/FF/LexicalReordering/LRModel.cpp): dash-separated parts in any order, the last
// part of each group wins, `wbe` when no kind is named (`msd-bidirectional-fe` is
// `wbe-msd-bidirectional-fe`), `backward` when no direction is named (`unidirectional`
// is its old name), `allff` (the default) or `collapseff`. The server names a model by
// its canonical spelling (training/moses/types.py). So we compare the schema: kind,
// orientation set (hence classes and their order), directions and conditioning.
// Collapsing is not part of it: with `collapseff` Moses collapses the full rows we
// return, exactly as it does a table's rows.
//
// What it must not do: depend on Moses or gRPC (it is compiled and tested on its own,
// tests/client/test_type_spelling.py), or accept a part Moses refuses.
#pragma once

#include <stddef.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace reordering_type
{

struct Schema {
  std::string kind;         // wbe | phrase | hier
  std::string orientation;  // msd | mslr | monotonicity | leftright
  std::string direction;    // backward | forward | bidirectional
  std::string language;     // f | fe
  bool collapse;            // collapseff (Moses collapses our rows; not part of the model)

  Schema() : kind("wbe"), direction("backward"), collapse(false) {}

  // Moses's column order per orientation set (MOSES-NOTES.md section 2).
  std::vector<std::string> Classes() const {
    static const char *const msd[] = {"mono", "swap", "disc"};
    static const char *const mslr[] = {"mono", "swap", "dleft", "dright"};
    static const char *const mono[] = {"mono", "nonmono"};
    static const char *const lr[] = {"right", "left"};
    if (orientation == "msd") return std::vector<std::string>(msd, msd + 3);
    if (orientation == "mslr") return std::vector<std::string>(mslr, mslr + 4);
    if (orientation == "monotonicity") return std::vector<std::string>(mono, mono + 2);
    return std::vector<std::string>(lr, lr + 2);
  }

  // Backward block first, as in Moses's score vector.
  std::vector<std::string> Directions() const {
    std::vector<std::string> out;
    if (direction != "forward") out.push_back("backward");
    if (direction != "backward") out.push_back("forward");
    return out;
  }

  // Columns of one full row (a table's row, a served model's row): classes x directions.
  size_t NumOutputs() const { return Classes().size() * Directions().size(); }

  // The server's spelling (training/moses/types.py MosesType.__str__); without the
  // collapse part, the type of the model this schema needs.
  std::string Canonical(bool with_collapse = true) const {
    return kind + "-" + orientation + "-" + direction + "-" + language +
           (collapse && with_collapse ? "-collapseff" : "");
  }
};

// Parses `type` as Moses's LRModel does; false (and *error says why) for a string Moses
// refuses: an unknown part, no orientation set, or no f/fe conditioning (LRModel leaves
// the conditioning unset and LexicalReordering's constructor then throws).
inline bool Parse(const std::string &type, Schema *out, std::string *error)
{
  Schema s;
  std::string part;
  for (size_t i = 0; i <= type.size(); ++i) {
    if (i < type.size() && type[i] != '-') {
      part += type[i];
      continue;
    }
    if (part.empty()) continue;  // Moses's Tokenize skips empty parts ("msd--fe")
    if (part == "wbe" || part == "phrase" || part == "hier") s.kind = part;
    else if (part == "msd" || part == "mslr" || part == "monotonicity" || part == "leftright")
      s.orientation = part;
    else if (part == "backward" || part == "unidirectional") s.direction = "backward";
    else if (part == "forward" || part == "bidirectional") s.direction = part;
    else if (part == "f" || part == "fe") s.language = part;
    else if (part == "collapseff" || part == "allff") s.collapse = part == "collapseff";
    else {
      if (error) *error = "unknown part '" + part + "' in reordering type '" + type + "'";
      return false;
    }
    part.clear();
  }
  if (s.orientation.empty() || s.language.empty()) {
    if (error) *error = "reordering type '" + type + "' names no " +
                        (s.orientation.empty() ? "orientation set (msd, mslr, monotonicity, leftright)"
                                               : "conditioning (f or fe)");
    return false;
  }
  *out = s;
  return true;
}

// Whether a model of schema `served` gives the scores a feature of schema `mine` needs.
inline bool SameModel(const Schema &mine, const Schema &served)
{
  return mine.kind == served.kind && mine.orientation == served.orientation &&
         mine.direction == served.direction && mine.language == served.language;
}

// The feature line without the keys in `ours` (a null-terminated list), which the decoder's
// own LexicalReordering would refuse; every key=value of the line goes to `found` if given.
// Tokens are split on blanks and at their first '=', as the decoders split a feature line;
// one implementation for the moses and the moses2 feature.
inline std::string StripKeys(const std::string &line, const char *const *ours,
                             std::vector<std::pair<std::string, std::string> > *found)
{
  std::istringstream in(line);
  std::string token, kept;
  bool first = true;
  while (in >> token) {
    bool strip = false;
    const size_t eq = token.find('=');
    if (!first && eq != std::string::npos && eq > 0 && eq + 1 < token.size()) {
      const std::string key = token.substr(0, eq);
      if (found) found->push_back(std::make_pair(key, token.substr(eq + 1)));
      for (const char *const *k = ours; *k && !strip; ++k) strip = key == *k;
    }
    if (!strip) kept += (kept.empty() ? "" : " ") + token;
    first = false;
  }
  return kept;
}

}  // namespace reordering_type
