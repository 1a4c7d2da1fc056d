// How tickd checks who a network store is, and proves who it is over TLS: the
// certificate files of `lock.tls` (docs/design.md §4). The user and password travel
// beside them in each backend's options; a password is never logged nor part of an
// Error. Which backends use TLS: docs/backends.md.
#pragma once

#include <string>

namespace tickd::lock {

// Paths of PEM files (absolute; checked readable when the job file was loaded).
struct TlsFiles {
  bool enabled = false;   // lock.tls is written (`tls: {}` = TLS checked against the system's CAs)
  std::string ca_file;    // the CA that signed the server's certificate ("" = the system's)
  std::string cert_file;  // the client certificate ("" = none), with key_file
  std::string key_file;
};

}  // namespace tickd::lock
