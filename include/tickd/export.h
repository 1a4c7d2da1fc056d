// TICKD_API marks what libtickd.so exports. The library is built with
// -fvisibility=hidden and a version script (lib/libtickd.map): everything else in it,
// the engine and the store clients included, stays private to the library.
#pragma once

#define TICKD_API __attribute__((visibility("default")))
