"""gguf_py - a small, self-contained GGUF (v2/v3) reader and writer in numpy.

Used by the test scripts (gen_model.py, ref_forward.py); needs only numpy
(and, for MXFP4 tensors, the reference next to it: mxfp4_ref.py).

Layout (little-endian throughout):
    "GGUF"  u32 version  u64 n_tensors  u64 n_kv
    n_kv x   { string key, u32 value_type, value }
    n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type,
                  u64 offset }
    zero padding to `alignment` (general.alignment, default 32)
    tensor data, each tensor starting at an offset (relative to the data
    section) that is a multiple of `alignment`
A string is u64 byte length + UTF-8 bytes (no NUL). An array value is
u32 element_type + u64 count + elements.

Dimensions are ne0-first (ne[0] is the innermost, contiguous dimension), so a
numpy array of shape (a, b, c) is stored with ne = [c, b, a] and its row-major
bytes. read_gguf() returns arrays already in numpy order (shape = ne reversed).
"""

import struct
import numpy as np

import mxfp4_ref

# metadata value types
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, \
    UINT64, INT64, FLOAT64 = range(13)

_SCALAR_FMT = {
    UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I",
    INT32: "<i", FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q",
    FLOAT64: "<d",
}
_SCALAR_NP = {
    UINT8: "<u1", INT8: "<i1", UINT16: "<u2", INT16: "<i2", UINT32: "<u4",
    INT32: "<i4", FLOAT32: "<f4", BOOL: "<u1", UINT64: "<u8", INT64: "<i8",
    FLOAT64: "<f8",
}
VTYPE_NAMES = ["UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32",
               "FLOAT32", "BOOL", "STRING", "ARRAY", "UINT64", "INT64",
               "FLOAT64"]

# ggml tensor types handled here
T_F32, T_F16, T_Q8_0, T_BF16, T_MXFP4 = 0, 1, 8, 30, mxfp4_ref.T_MXFP4
TYPE_NAMES = {T_F32: "F32", T_F16: "F16", T_Q8_0: "Q8_0", T_BF16: "BF16",
              T_MXFP4: "MXFP4"}
# (block size in elements, bytes per block)
_BLOCK = {T_F32: (1, 4), T_F16: (1, 2), T_Q8_0: (32, 34), T_BF16: (1, 2),
          T_MXFP4: (mxfp4_ref.QK, mxfp4_ref.BLOCK_BYTES)}

DEFAULT_ALIGNMENT = 32
GGUF_MAGIC = b"GGUF"


class GGUFError(Exception):
    pass


def _pad(n, align):
    return (align - n % align) % align


# ---------------------------------------------------------------- conversions

def f32_to_bf16_bits(a):
    """float32 array -> uint16 bf16 bits, round to nearest even."""
    u = np.ascontiguousarray(a, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(a, dtype=np.float32))
    out = rounded.astype(np.uint16)
    out[nan] = 0x7FC0
    return out


def bf16_bits_to_f32(bits):
    u = np.asarray(bits, dtype="<u2").astype("<u4") << 16
    return u.view("<f4")


def quantize_q8_0(a):
    """float array with last dim a multiple of 32 -> raw Q8_0 bytes
    (per block of 32: f16 scale d = amax/127, 32 x int8 round(x/d))."""
    x = np.asarray(a, dtype=np.float32).reshape(-1, 32)
    amax = np.max(np.abs(x), axis=1)
    d = amax / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0)
    q = np.round(x * inv[:, None]).astype(np.int8)
    blocks = np.zeros(x.shape[0], dtype=[("d", "<f2"), ("q", "i1", (32,))])
    blocks["d"] = d.astype(np.float16)
    blocks["q"] = q
    return blocks.tobytes()


def dequantize_q8_0(raw, n):
    blocks = np.frombuffer(raw, dtype=[("d", "<f2"), ("q", "i1", (32,))],
                           count=n // 32)
    return (blocks["d"].astype(np.float32)[:, None] *
            blocks["q"].astype(np.float32)).reshape(-1)


# --------------------------------------------------------------------- writer

class GGUFWriter:
    """Collects metadata and tensors, then write(path) produces the file.

    Metadata: add(key, value, vtype=None, arr_type=None). Without vtype the
    type is inferred: bool -> BOOL, int -> INT32 (UINT64/INT64 when large),
    float -> FLOAT32, str -> STRING, list/tuple/ndarray -> ARRAY (elements
    inferred the same way unless arr_type is given). Helpers add_u32,
    add_f32, add_str, ... fix the type explicitly.

    Tensors: add_tensor(name, array, ttype=T_F32); array in numpy order
    (shape (out, in) for a matrix -> ne = [in, out]).
    """

    def __init__(self, alignment=DEFAULT_ALIGNMENT, version=3):
        self.kv = []          # (key, vtype, value, arr_type)
        self.tensors = []     # (name, ne, ttype, raw bytes)
        self.alignment = alignment
        self.version = version
        if alignment != DEFAULT_ALIGNMENT:
            self.add("general.alignment", alignment, UINT32)

    # -- metadata
    @staticmethod
    def _infer(v):
        if isinstance(v, (bool, np.bool_)):
            return BOOL
        if isinstance(v, (int, np.integer)):
            if -2**31 <= v < 2**31:
                return INT32
            return UINT64 if v >= 0 else INT64
        if isinstance(v, (float, np.floating)):
            return FLOAT32
        if isinstance(v, str):
            return STRING
        if isinstance(v, (list, tuple, np.ndarray)):
            return ARRAY
        raise GGUFError("cannot infer GGUF type of %r" % (v,))

    def add(self, key, value, vtype=None, arr_type=None):
        if vtype is None:
            vtype = self._infer(value)
        if vtype == ARRAY and arr_type is None:
            if isinstance(value, np.ndarray):
                m = {np.dtype("u1"): UINT8, np.dtype("i1"): INT8,
                     np.dtype("u2"): UINT16, np.dtype("i2"): INT16,
                     np.dtype("u4"): UINT32, np.dtype("i4"): INT32,
                     np.dtype("f4"): FLOAT32, np.dtype("u8"): UINT64,
                     np.dtype("i8"): INT64, np.dtype("f8"): FLOAT64,
                     np.dtype("bool"): BOOL}
                arr_type = m.get(value.dtype.newbyteorder("="))
                if arr_type is None:
                    raise GGUFError("unsupported array dtype %s" % value.dtype)
            elif len(value) == 0:
                arr_type = STRING   # an empty list: default to strings
            else:
                arr_type = self._infer(value[0])
        if arr_type == ARRAY:
            raise GGUFError("nested arrays are not supported")
        self.kv.append((key, vtype, value, arr_type))

    def add_u32(self, k, v): self.add(k, int(v), UINT32)
    def add_i32(self, k, v): self.add(k, int(v), INT32)
    def add_u64(self, k, v): self.add(k, int(v), UINT64)
    def add_f32(self, k, v): self.add(k, float(v), FLOAT32)
    def add_f64(self, k, v): self.add(k, float(v), FLOAT64)
    def add_bool(self, k, v): self.add(k, bool(v), BOOL)
    def add_str(self, k, v): self.add(k, str(v), STRING)
    def add_arr(self, k, v, arr_type): self.add(k, v, ARRAY, arr_type)

    # -- tensors
    def add_tensor(self, name, array, ttype=T_F32):
        a = np.asarray(array)
        if a.ndim < 1 or a.ndim > 4:
            raise GGUFError("%s: %d dims" % (name, a.ndim))
        ne = list(reversed(a.shape))
        if ttype == T_F32:
            raw = np.ascontiguousarray(a, dtype="<f4").tobytes()
        elif ttype == T_F16:
            raw = np.ascontiguousarray(a, dtype="<f2").tobytes()
        elif ttype == T_BF16:
            raw = f32_to_bf16_bits(a).astype("<u2").tobytes()
        elif ttype in (T_Q8_0, T_MXFP4):
            if ne[0] % 32:
                raise GGUFError("%s: %s needs ne0 %% 32 == 0, ne0=%d"
                                % (name, TYPE_NAMES[ttype], ne[0]))
            raw = quantize_q8_0(a) if ttype == T_Q8_0 else mxfp4_ref.quantize(a)
        else:
            raise GGUFError("%s: unsupported tensor type %d" % (name, ttype))
        if any(t[0] == name for t in self.tensors):
            raise GGUFError("duplicate tensor %s" % name)
        self.tensors.append((name, ne, ttype, raw))

    def add_raw_tensor(self, name, ne, ttype, raw):
        """A tensor of any ggml type id as its bytes (ne: ne0-first), for
        files with types this module does not encode."""
        if any(t[0] == name for t in self.tensors):
            raise GGUFError("duplicate tensor %s" % name)
        self.tensors.append((name, list(ne), ttype, bytes(raw)))

    # -- output
    @staticmethod
    def _str(s):
        b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
        return struct.pack("<Q", len(b)) + b

    def _scalar(self, vtype, v):
        if vtype == STRING:
            return self._str(v)
        return struct.pack(_SCALAR_FMT[vtype], v)

    def _value(self, vtype, v, arr_type):
        if vtype != ARRAY:
            return self._scalar(vtype, v)
        out = [struct.pack("<IQ", arr_type, len(v))]
        if arr_type == STRING:
            out.extend(self._str(s) for s in v)
        else:
            out.append(np.asarray(v).astype(_SCALAR_NP[arr_type]).tobytes())
        return b"".join(out)

    def to_bytes(self):
        al = self.alignment
        out = [GGUF_MAGIC,
               struct.pack("<IQQ", self.version, len(self.tensors),
                           len(self.kv))]
        for key, vtype, v, arr_type in self.kv:
            out.append(self._str(key))
            out.append(struct.pack("<I", vtype))
            out.append(self._value(vtype, v, arr_type))
        offset = 0
        offsets = []
        for name, ne, ttype, raw in self.tensors:
            offsets.append(offset)
            out.append(self._str(name))
            out.append(struct.pack("<I", len(ne)))
            out.append(struct.pack("<%dQ" % len(ne), *ne))
            out.append(struct.pack("<IQ", ttype, offset))
            offset += len(raw) + _pad(len(raw), al)
        head = b"".join(out)
        parts = [head, b"\0" * _pad(len(head), al)]
        for (name, ne, ttype, raw) in self.tensors:
            parts.append(raw)
            parts.append(b"\0" * _pad(len(raw), al))
        return b"".join(parts)

    def write(self, path):
        with open(path, "wb") as f:
            f.write(self.to_bytes())


# --------------------------------------------------------------------- reader

class GGUFFile:
    """Result of read_gguf().

    kv:        dict key -> value (python int/float/bool/str, or a list for
               arrays of strings, or a numpy array for arrays of numbers)
    kv_types:  dict key -> (vtype, arr_type or None)
    tensors:   dict name -> numpy array in numpy order: F32 as float32, F16
               as float16 (exact), BF16, Q8_0 and MXFP4 dequantised to float32
    raw:       dict name -> the tensor's bytes as stored
    tinfo:     dict name -> dict(ne=[...], type=int, offset=int, nbytes=int)
    """

    def __init__(self):
        self.version = 0
        self.kv = {}
        self.kv_types = {}
        self.kv_order = []
        self.tensors = {}
        self.raw = {}
        self.tinfo = {}
        self.tensor_order = []
        self.alignment = DEFAULT_ALIGNMENT
        self.data_offset = 0

    def get(self, key, default=None):
        return self.kv.get(key, default)

    def tensor(self, name, dtype=np.float64):
        """Tensor converted to dtype (float64 by default), or None."""
        t = self.tensors.get(name)
        return None if t is None else np.asarray(t, dtype=dtype)


class _Buf:
    def __init__(self, data):
        self.d = data
        self.p = 0

    def take(self, n):
        if n < 0 or self.p + n > len(self.d):
            raise GGUFError("truncated file at offset %d (need %d bytes)"
                            % (self.p, n))
        b = self.d[self.p:self.p + n]
        self.p += n
        return b

    def unpack(self, fmt):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))

    def u32(self): return self.unpack("<I")[0]
    def u64(self): return self.unpack("<Q")[0]

    def string(self):
        n = self.u64()
        return bytes(self.take(n)).decode("utf-8")


def _read_value(b, vtype):
    if vtype == STRING:
        return b.string(), None
    if vtype == ARRAY:
        at = b.u32()
        n = b.u64()
        if at == STRING:
            return [b.string() for _ in range(n)], at
        if at not in _SCALAR_NP:
            raise GGUFError("bad array element type %d" % at)
        dt = np.dtype(_SCALAR_NP[at])
        arr = np.frombuffer(b.take(n * dt.itemsize), dtype=dt).copy()
        if at == BOOL:
            arr = arr.astype(bool)
        return arr, at
    if vtype not in _SCALAR_FMT:
        raise GGUFError("bad value type %d" % vtype)
    v = b.unpack(_SCALAR_FMT[vtype])[0]
    if vtype in (FLOAT32, FLOAT64):
        v = float(v)
    elif vtype == BOOL:
        v = bool(v)
    return v, None


def read_gguf(path_or_bytes, load_data=True):
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes)
    else:
        with open(path_or_bytes, "rb") as f:
            data = f.read()
    b = _Buf(data)
    g = GGUFFile()
    if b.take(4) != GGUF_MAGIC:
        raise GGUFError("bad magic")
    g.version = b.u32()
    if g.version not in (2, 3):
        raise GGUFError("unsupported version %d" % g.version)
    n_tensors = b.u64()
    n_kv = b.u64()
    for _ in range(n_kv):
        key = b.string()
        vtype = b.u32()
        v, at = _read_value(b, vtype)
        if key in g.kv:
            raise GGUFError("duplicate key %s" % key)
        g.kv[key] = v
        g.kv_types[key] = (vtype, at)
        g.kv_order.append(key)
    if "general.alignment" in g.kv:
        g.alignment = int(g.kv["general.alignment"])
        if g.alignment <= 0 or g.alignment & (g.alignment - 1):
            raise GGUFError("bad alignment %d" % g.alignment)
    for _ in range(n_tensors):
        name = b.string()
        nd = b.u32()
        if nd < 1 or nd > 4:
            raise GGUFError("%s: n_dims %d" % (name, nd))
        ne = list(b.unpack("<%dQ" % nd))
        ttype, off = b.unpack("<IQ")
        if name in g.tinfo:
            raise GGUFError("duplicate tensor %s" % name)
        if off % g.alignment:
            raise GGUFError("%s: offset %d not aligned" % (name, off))
        n = int(np.prod(ne, dtype=np.uint64))
        if ttype not in _BLOCK:
            nbytes = None
        else:
            bs, bb = _BLOCK[ttype]
            if ne[0] % bs:
                raise GGUFError("%s: ne0 %d not a multiple of %d"
                                % (name, ne[0], bs))
            nbytes = n // bs * bb
        g.tinfo[name] = dict(ne=ne, type=ttype, offset=off, nbytes=nbytes,
                             n=n)
        g.tensor_order.append(name)
    g.data_offset = b.p + _pad(b.p, g.alignment)
    if not load_data:
        return g
    for name in g.tensor_order:
        ti = g.tinfo[name]
        if ti["nbytes"] is None:
            raise GGUFError("%s: unsupported tensor type %d"
                            % (name, ti["type"]))
        start = g.data_offset + ti["offset"]
        if start + ti["nbytes"] > len(data):
            raise GGUFError("%s: data beyond end of file" % name)
        raw = data[start:start + ti["nbytes"]]
        shape = tuple(reversed(ti["ne"]))
        t, n = ti["type"], ti["n"]
        if t == T_F32:
            a = np.frombuffer(raw, dtype="<f4", count=n)
        elif t == T_F16:
            a = np.frombuffer(raw, dtype="<f2", count=n)
        elif t == T_BF16:
            a = bf16_bits_to_f32(np.frombuffer(raw, dtype="<u2", count=n))
        elif t == T_MXFP4:
            a = mxfp4_ref.dequantize(raw, n)
        else:  # Q8_0
            a = dequantize_q8_0(raw, n)
        g.tensors[name] = a.reshape(shape)
        g.raw[name] = raw
    return g


def describe(g):
    """Human-readable dump (keys, short values, tensors)."""
    lines = ["GGUF v%d, %d keys, %d tensors, alignment %d"
             % (g.version, len(g.kv), len(g.tinfo), g.alignment)]
    for k in g.kv_order:
        v = g.kv[k]
        vt, at = g.kv_types[k]
        if vt == ARRAY:
            s = "[%s x %d] %s" % (VTYPE_NAMES[at], len(v),
                                  repr(list(v[:6])) + ("..." if len(v) > 6
                                                       else ""))
        else:
            s = "%s %r" % (VTYPE_NAMES[vt], v)
        lines.append("  %s = %s" % (k, s))
    for n in g.tensor_order:
        ti = g.tinfo[n]
        lines.append("  %-28s %-5s ne=%s off=%d" % (
            n, TYPE_NAMES.get(ti["type"], str(ti["type"])), ti["ne"],
            ti["offset"]))
    return "\n".join(lines)


def selftest():
    """Write a file with every value type and tensor type, read it back."""
    rng = np.random.default_rng(0)
    for align in (32, 64):
        w = GGUFWriter(alignment=align)
        scal = [("u8", 200, UINT8), ("i8", -100, INT8), ("u16", 60000, UINT16),
                ("i16", -30000, INT16), ("u32", 4000000000, UINT32),
                ("i32", -2000000000, INT32), ("f32", 0.5, FLOAT32),
                ("b", True, BOOL), ("s", "h\u00e9llo \u4e16", STRING),
                ("u64", 2**63 + 5, UINT64), ("i64", -2**62, INT64),
                ("f64", 1e-300, FLOAT64)]
        for k, v, t in scal:
            w.add(k, v, t)
        w.add_arr("as", ["a", "", "\u0120the"], STRING)
        w.add_arr("ae", [], STRING)
        w.add_arr("ai", [1, -2, 3], INT32)
        w.add_arr("au", np.arange(5, dtype=np.uint64), UINT64)
        w.add_arr("af", [0.25, -1.5], FLOAT32)
        w.add_arr("ab", [True, False], BOOL)
        t32 = rng.standard_normal((3, 5)).astype(np.float32)
        t16 = rng.standard_normal((2, 3, 7)).astype(np.float16)
        tb = rng.standard_normal((4, 3)).astype(np.float32)
        tq = rng.standard_normal((2, 64)).astype(np.float32)
        w.add_tensor("a.f32", t32, T_F32)
        w.add_tensor("b.f16", t16, T_F16)
        w.add_tensor("c.bf16", tb, T_BF16)
        w.add_tensor("d.q8", tq, T_Q8_0)
        w.add_tensor("f.mxfp4", tq, T_MXFP4)
        w.add_tensor("e.vec", np.arange(3, dtype=np.float32), T_F32)
        raw = w.to_bytes()
        g = read_gguf(raw)
        for k, v, t in scal:
            assert g.kv[k] == v and g.kv_types[k] == (t, None), (k, g.kv[k])
        assert g.kv["as"] == ["a", "", "\u0120the"] and g.kv["ae"] == []
        assert g.kv_types["ae"] == (ARRAY, STRING)
        assert list(g.kv["ai"]) == [1, -2, 3] and g.kv["ai"].dtype == "<i4"
        assert list(g.kv["au"]) == list(range(5))
        assert list(g.kv["af"]) == [0.25, -1.5]
        assert list(g.kv["ab"]) == [True, False]
        assert g.alignment == align
        assert (align == 32) == ("general.alignment" not in g.kv)
        assert g.data_offset % align == 0
        for n in g.tensor_order:
            assert g.tinfo[n]["offset"] % align == 0
        assert g.tinfo["a.f32"]["ne"] == [5, 3]
        assert g.tinfo["b.f16"]["ne"] == [7, 3, 2]
        assert np.array_equal(g.tensors["a.f32"], t32)
        assert np.array_equal(g.tensors["b.f16"], t16)
        assert np.max(np.abs(g.tensors["c.bf16"] - tb)) <= \
            np.max(np.abs(tb)) * 2.0**-8
        assert np.max(np.abs(g.tensors["d.q8"] - tq)) <= \
            np.max(np.abs(tq)) / 127 * 0.51 + 1e-3
        assert np.array_equal(g.tensors["e.vec"], [0, 1, 2])
        # MXFP4: off by at most a quarter of the block's largest magnitude
        # (4 d, d = 2^(E - 128), next to amax < 16 d; 2 d between 8 and 12)
        assert g.tinfo["f.mxfp4"]["nbytes"] == 2 * 2 * 17
        assert np.max(np.abs(g.tensors["f.mxfp4"] - tq)) <= \
            np.max(np.abs(tq)) / 4
        assert g.raw["f.mxfp4"] == mxfp4_ref.quantize(tq)
        # row-major bytes of a (out, in) matrix with ne = [in, out]
        start = g.data_offset + g.tinfo["a.f32"]["offset"]
        assert raw[start:start + 60] == t32.astype("<f4").tobytes()
        assert len(raw) % align == 0
    # bf16 rounding: round to nearest even
    assert f32_to_bf16_bits(np.float32([1.0]))[0] == 0x3F80
    assert bf16_bits_to_f32(f32_to_bf16_bits(np.float32([3.140625])))[0] \
        == np.float32(3.140625)
    print("gguf_py selftest ok")


if __name__ == "__main__":
    import sys
    if len(sys.argv) == 2 and sys.argv[1] == "--selftest":
        selftest()
        sys.exit(0)
    if len(sys.argv) != 2:
        sys.stderr.write("usage: gguf_py.py FILE.gguf   (prints a summary)\n"
                         "       gguf_py.py --selftest\n")
        sys.exit(2)
    print(describe(read_gguf(sys.argv[1], load_data=False)))
