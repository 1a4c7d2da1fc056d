// Certificates for the TLS tests of every backend, made at test time with the openssl
// CLI (Debian's openssl package) in a temporary folder: a CA, a server certificate for
// localhost and 127.0.0.1 (what verify-full and curl check against a loopback URL),
// and client certificates, whose CN is the user they authenticate (PostgreSQL `cert`)
// or absent (etcd: its JSON gateway, which tickd spoke before 2026-11-28, refused a
// client certificate that has a CN with authentication on, CVE-2018-16886; over gRPC
// both work). The server's certificate has no CN either and may serve as a client one
// (etcd's gateway dials its own gRPC server with it). P-256 keys: quick to make, accepted by every server here.
// Keys are mode 0600 (libpq refuses a client key that group or others can read).
// Header-only; nothing is downloaded, nothing outlives the object.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "tests/lock/temp_dir.h"

namespace tickd::testing {

class TestPki {
 public:
  static constexpr const char* kOpenssl = "/usr/bin/openssl";

  struct KeyPair {
    std::string cert;  // PEM certificate, signed by the CA
    std::string key;   // PEM private key, mode 0600
  };

  // Makes the CA (named `ca_name`) and the server's certificate. ok() says whether
  // it worked; log() holds openssl's output when it did not.
  explicit TestPki(std::string ca_name = "tickd-test-ca") {
    if (!Available() || dir_.path().empty()) return;
    ok_ = Run("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2"
              " -subj '/CN=" + ca_name + "' -keyout " + Path("ca.key") + " -out " +
              Path("ca.crt")) &&
          Sign("server", "/O=tickd-test-server", "DNS:localhost,IP:127.0.0.1",
               "serverAuth,clientAuth")
              .has_value();
    server_ = {Path("server.crt"), Path("server.key")};
  }

  static bool Available() { return ::access(kOpenssl, X_OK) == 0; }

  bool ok() const { return ok_; }
  const std::string& dir() const { return dir_.path(); }
  std::string ca_file() const { return Path("ca.crt"); }
  const KeyPair& server() const { return server_; }
  std::string log() const {
    std::ifstream in(Path("openssl.log"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // A client certificate with CN = `user` (files client-<user>.crt/.key), or nullopt.
  std::optional<KeyPair> Client(const std::string& user) {
    return Sign("client-" + user, "/CN=" + user, "", "clientAuth");
  }
  // A client certificate without a CN (for etcd with authentication).
  std::optional<KeyPair> AnonymousClient() {
    return Sign("client", "/O=tickd-test-client", "", "clientAuth");
  }

 private:
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  bool Run(const std::string& args) const {
    const std::string command = std::string(kOpenssl) + " " + args + " >>" +
                                Path("openssl.log") + " 2>&1";
    return std::system(command.c_str()) == 0;
  }

  // A key and a certificate for `subject` signed by the CA, with the SANs and the
  // extended key usage given.
  std::optional<KeyPair> Sign(const std::string& name, const std::string& subject,
                              const std::string& san, const std::string& usage) {
    const KeyPair pair{Path(name + ".crt"), Path(name + ".key")};
    {
      std::ofstream ext(Path(name + ".ext"));
      ext << "basicConstraints=CA:FALSE\nextendedKeyUsage=" << usage << "\n";
      if (!san.empty()) ext << "subjectAltName=" << san << "\n";
    }
    const bool made =
        Run("req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj '" +
            subject + "' -keyout " + pair.key + " -out " + Path(name + ".csr")) &&
        Run("x509 -req -days 2 -in " + Path(name + ".csr") + " -CA " + Path("ca.crt") +
            " -CAkey " + Path("ca.key") + " -CAcreateserial -extfile " + Path(name + ".ext") +
            " -out " + pair.cert) &&
        ::chmod(pair.key.c_str(), 0600) == 0;
    if (!made) return std::nullopt;
    return pair;
  }

  TempDir dir_;
  bool ok_ = false;
  KeyPair server_;
};

}  // namespace tickd::testing
