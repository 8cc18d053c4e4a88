/* fuzz_quant.c - libFuzzer harness: quantize / dequantize round trips of
 * every computable type on arbitrary floats (the input's bytes read as
 * float32 bits, so NaN, Inf, denormals and huge values all occur; the first
 * byte picks the type and a scale).
 *
 * For each type: the reference from_float then to_float, and the selected
 * kernel table's activation quantizer where it has one. Findings: a crash or
 * sanitizer report; a non-finite output from a block whose inputs are all
 * finite and within the range the type's fp16 scales can represent
 * (|x| <= 65504: F16 and every fp16-scaled block); an F32 / BF16 round trip
 * that changes a finite value by more than the format's rounding.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "quant/quant.h"

#define MAXN 1024

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const int type = data[0] % PK_TYPE_COUNT;
    const pk_type_traits *tt = pk_type_get(type);
    if (!tt || !tt->from_float || !tt->to_float) return 0;
    static const float scales[8] = {1.0f, 1e-3f, 1e3f, 1e-30f, 1e30f, 65504.0f, 1e-40f, -1.0f};
    const float scale = scales[data[1] % 8];
    data += 2;
    size -= 2;
    int64_t n = (int64_t)(size / 4);
    if (n > MAXN) n = MAXN;
    n -= n % tt->blck;
    if (n <= 0) return 0;
    float x[MAXN], y[MAXN];
    memcpy(x, data, (size_t)n * 4);
    for (int64_t i = 0; i < n; i++) x[i] *= scale;
    uint8_t *q = malloc(pk_row_size(type, n) + 1);
    if (!q) abort();
    tt->from_float(x, q, n);
    tt->to_float(q, y, n);
    for (int64_t b = 0; b < n; b += tt->blck) {
        int finite = 1;
        for (int j = 0; j < tt->blck; j++) finite &= isfinite(x[b + j]) && fabsf(x[b + j]) <= 65504.0f;
        if (!finite) continue;
        for (int j = 0; j < tt->blck; j++)
            if (!isfinite(y[b + j])) {
                fprintf(stderr, "%s: finite block %lld gives element %d = %g (input %g)\n", tt->name,
                        (long long)(b / tt->blck), j, y[b + j], x[b + j]);
                abort();
            }
    }
    if (type == PK_TYPE_F32 || type == PK_TYPE_BF16)
        for (int64_t i = 0; i < n; i++) {
            /* BF16: half an ulp, 8 bits of mantissa; absolute 2^-134 below the normals */
            float tol = type == PK_TYPE_F32 ? 0.0f : fmaxf(fabsf(x[i]) * (1.0f / 256), 0x1p-134f);
            if (isfinite(x[i]) && fabsf(x[i]) < 3e38f && !(fabsf(y[i] - x[i]) <= tol)) {
                fprintf(stderr, "%s: %g -> %g\n", tt->name, x[i], y[i]);
                abort();
            }
        }
    /* the activation quantizer of the selected kernels, for activation types */
    const pk_kernels *k = pk_kernels_get();
    if (k->quantize[type]) {
        k->quantize[type](x, q, n);
        tt->to_float(q, y, n);
    }
    free(q);
    return 0;
}
