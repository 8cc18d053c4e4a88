/* info_fit.h - pocket info's advice: which builds of a model fit a memory
 * budget (tools/info_fit.c). */
#ifndef POCKET_INFO_FIT_H
#define POCKET_INFO_FIT_H

#include <stdint.h>
#include "pocket.h"

/* Print, for m (loaded from path) and a budget of mem bytes (> 0), whether
 * it fits held whole and, if not (or all), which builds would, best first:
 * the ten best, or every one with all; json: one JSON object with every
 * build instead.
 * plan_error: why m's own plan failed under mem (NULL: it did not). */
void info_fit(const pk_model *m, const char *path, uint64_t mem, int all, int json, const char *plan_error);

#endif
