/* engine/sampler.h - turning a vector of logits into the next token.
 *
 * A sampler is a chain of small steps applied in order to a candidate list
 * (after llama.cpp's sampler chain): repetition penalty, top-k, top-p, min-p,
 * temperature, then a final pick (greedy argmax, or a draw from the softmax
 * with a seeded RNG). temperature <= 0 means greedy.
 */
#ifndef PK_SAMPLER_H
#define PK_SAMPLER_H

#include <stdint.h>
#include "pocket.h"

/* The API (pk_sampler_params, pk_sampler_new, ...) is public: include/pocket.h. */

#endif
