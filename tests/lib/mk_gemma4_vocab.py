#!/usr/bin/env python3
"""mk_gemma4_vocab.py - a toy "gemma4" vocabulary and its test strings.

Writes tests/data/vocab/ggml-vocab-gemma4-toy.gguf (tokenizer keys only, as
llama.cpp's vocab-only test files are) and its .inp (test strings separated
by "\\n__ggml_vocab_test__\\n", the convention of llama.cpp's
tests/test-tokenizer-0). The vocabulary has Gemma-4's shape at a tiny size:
control tokens <pad> <eos> <bos> <|turn> <turn|> ..., an <unk>, the 256
<0xXX> byte tokens, single characters, a U+2581-prefixed word or two, runs of
newlines, and merges over raw UTF-8 (one merge, "a b", whose result is not a
token, so its pieces fall back to bytes), then the tool-call markers
<|tool_call> <tool_call|> <|"|> as control tokens. tokenizer.ggml.add_bos_token is
false on purpose: llama.cpp adds BOS for gemma4 regardless.

The two expected-id files beside them are llama.cpp's answers (its
llama-tokenize tool, one string at a time from a file of its exact bytes):
    .out          --ids --no-bos --no-parse-special   (add_special 0, parse_special 0)
    .out-special  --ids                               (add_special 1, parse_special 1)
`--outputs PATH/TO/llama-tokenize` regenerates them with a given binary.

Usage: python3 tests/lib/mk_gemma4_vocab.py [--outputs LLAMA_TOKENIZE]
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_py  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "vocab", "ggml-vocab-gemma4-toy.gguf")
SEP = b"\n__ggml_vocab_test__\n"
SP = "\u2581"

CONTROL = ["<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>", "<|channel>",
           "<channel|>", "<|tool_response>", "<tool_response|>", "<|think|>", "<mask>"]
# the tool-call markers, control tokens as older conversions have them (the
# last ids: the others keep theirs)
LATE_CONTROL = ["<|tool_call>", "<tool_call|>", '<|"|>']
MERGES = [
    (SP, SP), ("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (SP, "hello"),
    (SP, "w"), ("o", "r"), (SP + "w", "or"), (SP + "wor", "l"), (SP + "worl", "d"),
    ("\n", "\n"), (SP + SP, SP + SP), (SP, "\u00e9"), ("c", "a"), ("ca", "f"),
    ("caf", "\u00e9"), ("a", "b"), ("t", "h"), (SP, "th"), (SP + "th", "e"),
]
CHARS = [chr(c) for c in range(0x21, 0x7F)] + [SP, "\n", "\u00e9", "\u65e5"]
EXTRA = ["\n\n\n"]   # a newline run without a merge path: found only whole

STRINGS = [
    "", " ", "  ", "   ", "    ", "\n", "\n\n", "\n\n\n", "\n\n\n\n", "\n\n\n\n\n",
    "hello", " hello", "hello world", " hello  world ", "hello\nworld", "hello\n\n\nworld\n",
    "Hello World!", "the the", "\t tab", "\u00e9", " \u00e9", "caf\u00e9 au lait",
    "\u65e5\u672c", "\U0001F600 ok", "ab", "abc", b"x\xffy",   # 0xFF is never UTF-8
    "<|turn>user\nhello<turn|>\n<|turn>model\n", "<bos>hi<eos>", "<0x41>",
    SP + "hello", "a\r\nb", "tabs\t\tand  \n  spaces",
    # as llama.cpp decodes: overlong forms read as their code point, a
    # surrogate kept, a stray continuation byte or a cut sequence U+FFFD
    b"\xc1\x81 \xe0\x81\x81\xf0\x80\x81\x81", b"\xc0\x80z", b"\xed\xa0\x80", b"a\x80b\xe6\x97", b"\xf8\xc3",
]


def build():
    toks, types = [], []
    for t in CONTROL:
        toks.append(t)
        types.append(2 if t == "<unk>" else 3)
    for b in range(256):
        toks.append("<0x%02X>" % b)
        types.append(6)
    seen = set(toks)
    merged = [a + b for a, b in MERGES if a + b != "ab"]
    for t in CHARS + merged + EXTRA:
        if t not in seen:
            seen.add(t)
            toks.append(t)
            types.append(1)
    toks += LATE_CONTROL
    types += [3] * len(LATE_CONTROL)
    w = gguf_py.GGUFWriter()
    w.add_str("general.architecture", "gemma4")
    w.add_str("general.name", "gemma4-toy-vocab")
    w.add_str("tokenizer.ggml.model", "gemma4")
    w.add("tokenizer.ggml.tokens", toks, gguf_py.ARRAY, gguf_py.STRING)
    w.add("tokenizer.ggml.scores", [0.0] * len(toks), gguf_py.ARRAY, gguf_py.FLOAT32)
    w.add("tokenizer.ggml.token_type", types, gguf_py.ARRAY, gguf_py.INT32)
    w.add("tokenizer.ggml.merges", ["%s %s" % m for m in MERGES], gguf_py.ARRAY, gguf_py.STRING)
    w.add_u32("tokenizer.ggml.bos_token_id", 2)
    w.add_u32("tokenizer.ggml.eos_token_id", 1)
    w.add_u32("tokenizer.ggml.unknown_token_id", 3)
    w.add_u32("tokenizer.ggml.padding_token_id", 0)
    w.add_bool("tokenizer.ggml.add_bos_token", False)
    w.add_bool("tokenizer.ggml.add_space_prefix", False)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    w.write(OUT)
    raw = [s if isinstance(s, bytes) else s.encode() for s in STRINGS]
    with open(OUT + ".inp", "wb") as f:
        f.write(SEP.join(raw))
    return raw


def outputs(tool, raw):
    for suffix, flags in ((".out", ["--no-bos", "--no-parse-special"]), (".out-special", [])):
        lines = []
        for s in raw:
            with tempfile.NamedTemporaryFile(delete=False) as tf:
                tf.write(s)
            try:
                r = subprocess.run([tool, "-m", OUT, "-f", tf.name, "--no-escape", "--ids",
                                    "--log-disable"] + flags, capture_output=True, check=True)
            finally:
                os.unlink(tf.name)
            line = r.stdout.decode().strip().splitlines()[-1]
            if not (line.startswith("[") and line.endswith("]")):
                raise SystemExit("unexpected llama-tokenize output: %r" % line)
            lines.append(" ".join(x.strip() for x in line[1:-1].split(",") if x.strip()))
        with open(OUT + suffix, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    raw = build()
    if len(sys.argv) == 3 and sys.argv[1] == "--outputs":
        outputs(sys.argv[2], raw)
    elif len(sys.argv) != 1:
        raise SystemExit(__doc__)
