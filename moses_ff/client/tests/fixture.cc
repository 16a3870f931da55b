// See fixture.h.
#include "fixture.h"

#include <google/protobuf/util/json_util.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "reordering/v1/reordering.pb.h"

namespace reordering {
namespace testing_support {

Fixture *g_fixture = nullptr;
ServerProcess *g_server = nullptr;

namespace {

ScoreInput FromProto(const v1::ScoreRequest &r) {
  ScoreInput in;
  in.token_bytes = r.token_bytes();
  in.token_offsets.assign(r.token_offsets().begin(), r.token_offsets().end());
  in.source.assign(r.source().begin(), r.source().end());
  in.span_start.assign(r.span_start().begin(), r.span_start().end());
  in.span_end.assign(r.span_end().begin(), r.span_end().end());
  in.target_offsets.assign(r.target_offsets().begin(), r.target_offsets().end());
  in.target_tokens.assign(r.target_tokens().begin(), r.target_tokens().end());
  in.align_offsets.assign(r.align_offsets().begin(), r.align_offsets().end());
  in.align_source.assign(r.align_source().begin(), r.align_source().end());
  in.align_target.assign(r.align_target().begin(), r.align_target().end());
  return in;
}

std::vector<std::vector<float>> ReadFloatLines(const std::string &path) {
  std::vector<std::vector<float>> rows;
  for (const std::string &line : ReadLines(path)) {
    std::istringstream s(line);
    rows.emplace_back();
    for (float p; s >> p;) rows.back().push_back(p);
  }
  return rows;
}

Fixture *LoadFixture() {
  const char *dir = std::getenv("REORDERING_FIXTURE_DIR");
  if (!dir || !*dir) return nullptr;
  auto *f = new Fixture;
  f->dir = dir;
  for (const std::string &line : ReadLines(f->dir + "/fixture.txt")) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) f->keys[line.substr(0, eq)] = line.substr(eq + 1);
  }
  f->serve_argv = ReadLines(f->dir + "/serve_command.txt");
  for (const std::string &line : ReadLines(f->dir + "/requests.jsonl")) {
    v1::ScoreRequest r;
    auto st = google::protobuf::util::JsonStringToMessage(line, &r);
    if (!st.ok()) throw std::runtime_error("bad line in requests.jsonl: " + st.ToString());
    f->requests.push_back(FromProto(r));
  }
  std::istringstream versions(f->keys.at("versions"));
  for (uint64_t v; versions >> v;) {
    auto &rows = f->expected[v];
    rows = ReadFloatLines(f->dir + "/expected-v" + std::to_string(v) + ".txt");
    if (rows.size() != f->requests.size()) throw std::runtime_error("expected file and requests differ in length");
  }
  f->context_blocks = ReadFloatLines(f->dir + "/context-blocks.txt");
  f->context_next = ReadFloatLines(f->dir + "/context-next.txt");
  if (f->context_blocks.size() != f->requests.size() || f->context_next.size() != f->requests.size())
    throw std::runtime_error("context files and requests differ in length");
  return f;
}

class ServerEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    g_fixture = LoadFixture();
    if (!g_fixture) return;
    g_server = new ServerProcess(g_fixture->serve_argv, FreeLoopbackPort(), g_fixture->dir + "/server-main.log");
    g_server->Start();
    g_server->WaitReady(g_fixture->model(), kStartupMs);
    g_server->WaitReady(g_fixture->context_model(), kStartupMs);
  }
  void TearDown() override {
    delete g_server;
    g_server = nullptr;
  }
};

::testing::Environment *const kEnv = ::testing::AddGlobalTestEnvironment(new ServerEnvironment);

}  // namespace
}  // namespace testing_support
}  // namespace reordering
