#include "cron/schedule.h"
