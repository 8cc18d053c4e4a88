"""mxfp4_ref - an independent numpy reference of ggml's MXFP4 weight type
(GGML_TYPE_MXFP4 = 39), written from the format's description, not from
pocket's C code:

    block of 32 weights, 17 bytes: byte 0 = E (E8M0 exponent), bytes 1..16
    = qs. Weight j (j < 16) is KV[qs[j] & 15] * d, weight j + 16 is
    KV[qs[j] >> 4] * d, with KV = 2 x the E2M1 values {0, .5, 1, 1.5, 2, 3,
    4, 6} and their negatives (code 8 = -0), d = 2^(E - 128) as a float32
    (E = 0, 1: the subnormals 2^-128, 2^-127).

    ggml's quantize_row_mxfp4_ref: per block amax = max |x| (NaN ignored),
    E = floorf(log2f(amax)) - 2 + 127 (0 if amax == 0), then each weight
    the code of least float32 |KV[code] * d - x|, the first such code
    scanning 0..15. The float -> uint8 conversion of E is the x86-64 one
    (low byte of the int32 conversion) for the out-of-range exponents of
    amax < 2^-125.

    Products (ggml_vec_dot_mxfp4_q8_0): activations rounded to Q8_0 first,
    per block sum d_x * d_w * (exact integer dot of KV levels and q).

Used by tests/ref/t_mxfp4.sh (pocket's dequantizer and quantizer against this,
byte for byte) and by gguf_py for MXFP4 tensors.
"""

import numpy as np

T_MXFP4 = 39
QK = 32
BLOCK_BYTES = 17
KV = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12],
              dtype=np.float32)
BLOCK_DTYPE = np.dtype([("e", "u1"), ("qs", "u1", (16,))])


def e8m0_half(e):
    """uint8 exponents -> float32 2^(e - 128), exact (subnormals included)."""
    return np.ldexp(np.float32(1.0), np.asarray(e).astype(np.int32) - 128).astype(np.float32)


def dequantize(raw, n):
    """n weights (a multiple of 32) from raw MXFP4 bytes -> float32 array."""
    if n % QK:
        raise ValueError("MXFP4 needs a multiple of 32 weights, got %d" % n)
    b = np.frombuffer(raw, dtype=BLOCK_DTYPE, count=n // QK)
    d = e8m0_half(b["e"])[:, None]
    with np.errstate(over="ignore"):                           # 8, 12 at E >= 254: inf
        lo = KV[b["qs"] & 15] * d
        hi = KV[b["qs"] >> 4] * d
    return np.concatenate([lo, hi], axis=1).astype(np.float32).reshape(-1)


def log2f(a):
    """float32 log2, correctly rounded (float64 log2 rounded once)."""
    return np.log2(np.asarray(a, dtype=np.float64)).astype(np.float32)


def exponents(amax):
    """E of each block from its float32 amax, as ggml computes it on x86-64."""
    amax = np.asarray(amax, dtype=np.float32)
    pos = amax > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        ef = np.floor(log2f(np.where(pos, amax, np.float32(1)))) - np.float32(2) + np.float32(127)
    ei = np.where(np.isfinite(ef), ef, -2**31).astype(np.int64)   # inf: cvttss2si = INT_MIN
    return np.where(pos, ei & 0xFF, 0).astype(np.uint8)


def quantize(x):
    """float32 weights (a multiple of 32) -> raw MXFP4 bytes, as ggml's
    quantize_row_mxfp4_ref writes them."""
    x = np.asarray(x, dtype=np.float32).reshape(-1, QK)
    ax = np.abs(x)
    amax = np.where(np.isnan(ax), np.float32(0), ax).max(axis=1)
    e = exponents(amax)
    d = e8m0_half(e)
    with np.errstate(invalid="ignore", over="ignore"):
        levels = KV[None, :] * d[:, None]                      # (nb, 16), exact or inf
        err = np.abs(levels[:, None, :] - x[:, :, None])       # (nb, 32, 16), float32
    codes = np.argmin(err, axis=2).astype(np.uint8)            # the first least
    out = np.zeros(x.shape[0], dtype=BLOCK_DTYPE)
    out["e"] = e
    out["qs"] = codes[:, :16] | (codes[:, 16:] << 4)
    return out.tobytes()


def dot_q8_0(w_raw, xq, xd, n):
    """ggml's MXFP4 x Q8_0 product of one row in float64: w_raw the row's
    MXFP4 bytes, xq (n,) int8 activations, xd (n / 32,) their float32
    scales. Exact per block, summed in float64."""
    b = np.frombuffer(w_raw, dtype=BLOCK_DTYPE, count=n // QK)
    lv = np.concatenate([KV[b["qs"] & 15], KV[b["qs"] >> 4]], axis=1).astype(np.int64)
    isum = (lv * np.asarray(xq, dtype=np.int64).reshape(-1, QK)).sum(axis=1)
    return float((isum * e8m0_half(b["e"]).astype(np.float64) * np.asarray(xd, np.float64)).sum())
