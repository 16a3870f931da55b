// Starts and stops the real Python scoring server for the client tests.
//
// The fixture directory holds serve_command.txt: the server's argv, one argument per
// line, with "{port}" where the loopback port goes. The tests never fake the server.
#ifndef MOSES_FF_CLIENT_TESTS_SERVER_PROCESS_H_
#define MOSES_FF_CLIENT_TESTS_SERVER_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace reordering {
namespace testing_support {

// A loopback TCP port that was free a moment ago.
int FreeLoopbackPort();

class ServerProcess {
 public:
  // argv with "{port}" replaced by `port`; stdout/stderr go to `log_path`.
  ServerProcess(std::vector<std::string> argv_template, int port, std::string log_path);
  ~ServerProcess();

  void Start();
  // SIGTERM, then SIGKILL after 5 s; waits for the process.
  void Stop();
  // Polls GetModel(model) until it answers or `timeout_ms` passes; throws with the
  // server's log tail if it never does or the process died. A server started with
  // --tls-cert is asked over TLS with `tls_root_certs_file` as the root.
  void WaitReady(const std::string &model, int timeout_ms, const std::string &tls_root_certs_file = "");
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string LogTail() const;

 private:
  std::vector<std::string> argv_template_;
  int port_;
  std::string log_path_;
  pid_t pid_ = -1;
};

std::vector<std::string> ReadLines(const std::string &path);

}  // namespace testing_support
}  // namespace reordering

#endif  // MOSES_FF_CLIENT_TESTS_SERVER_PROCESS_H_
