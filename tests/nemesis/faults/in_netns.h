// Running a piece of code inside a named network namespace (`ip netns add NAME`).
// A socket keeps the namespace it was created in, so code run this way can create a
// listening or connecting socket there and hand it back to a thread of the caller's
// namespace. Thread-safe: the caller's threads never change namespace.
#pragma once

#include <functional>
#include <string>

#include "base/error.h"

namespace tickd::nemesis {

// Runs `fn` on a new thread that first joined the network namespace /run/netns/<name>,
// and waits for it. Errors: no such namespace, setns refused (not root), no thread;
// `fn` did not run then. "" runs `fn` on a new thread in the caller's namespace.
Result<void> RunInNetns(const std::string& name, const std::function<void()>& fn);

}  // namespace tickd::nemesis
