// Driver for tests/client/test_type_spelling.py: the C++ type parser of ExternalReordering
// (ReorderingType.h) on every spelling the test feeds it, one per line on stdin:
//   TYPE            -> "OK <canonical> <outputs> <classes,...> <directions,...>" or "ERR <why>"
//   SAME MINE SERVED -> "1" when a feature of type MINE accepts a model of type SERVED, else "0"
#include <iostream>
#include <sstream>
#include <string>

#include "../ReorderingType.h"

namespace
{
std::string Join(const std::vector<std::string> &v)
{
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + v[i];
  return out;
}
}  // namespace

int main()
{
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string first, mine, served, error;
    words >> first;
    if (first == "SAME" && words >> mine >> served) {
      reordering_type::Schema a, b;
      bool ok = reordering_type::Parse(mine, &a, &error) && reordering_type::Parse(served, &b, &error);
      std::cout << (ok && reordering_type::SameModel(a, b) ? "1" : "0") << "\n";
      continue;
    }
    reordering_type::Schema s;
    if (reordering_type::Parse(line, &s, &error))
      std::cout << "OK " << s.Canonical() << " " << s.NumOutputs() << " " << Join(s.Classes()) << " "
                << Join(s.Directions()) << "\n";
    else
      std::cout << "ERR " << error << "\n";
  }
  return 0;
}
