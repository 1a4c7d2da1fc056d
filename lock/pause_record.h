// The stored form of a Pause in the key-value stores (Redis, etcd, ZooKeeper): one
// JSON object per paused job, readable with the store's own tools
// (`{"since_ms":…,"until_ms":…|null,"by":"…","reason":"…"}`). The SQL stores keep the
// same fields as columns of tickd_pauses.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "lock/backend.h"

namespace tickd::lock {

std::string EncodePause(const Pause& pause);

// The pause of `job` stored as `text`; nullopt when it is not one (written by
// someone else: ignored rather than taken for a pause, and never an error that
// would stop the claims).
std::optional<Pause> DecodePause(std::string_view job, std::string_view text);

}  // namespace tickd::lock
