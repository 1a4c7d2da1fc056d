#include "lock/registry.h"
