#include "jobs/execution.h"
