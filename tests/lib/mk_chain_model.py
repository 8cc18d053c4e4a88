#!/usr/bin/python3
"""mk_chain_model.py - a tiny "llama" model whose greedy answer is known.

usage: mk_chain_model.py OUT.gguf

Every layer adds nothing (attn_output and ffn_down are zero), token_embd is
the identity (one row per token, embedding size >= vocabulary), and
output.weight maps each token of a chain to the next one, so that under
greedy sampling the next token depends only on the current one. The chains
start at the last token of a template family's generation prompt and spell
out an answer with its reasoning, the markers cut across tokens, then end
with the end-of-sequence token (257):

  harmony  ... "assistant" -> <|channel|>analysis<|message|>Weigh it: 1 + 1.<|end|>
           <|start|>assistant<|channel|>final<|message|>Two.
  chatml   ... "assistant\\n" -> <think>\\nPondering the sum.\\n</think>\\n\\nIt is two.
  gemma4   ... "<channel|>" -> Sure<|channel>thought\\nhmm<channel|> done

tests/cli/t_serve.sh serves it with each template and checks the split of
message.content / reasoning_content, streamed and not. The tokenizer is
gen_model.py's GPT-2 byte-level one (no merges: a prompt is its bytes), with
the chain pieces as extra tokens.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model  # noqa: E402
import gguf_py as G  # noqa: E402

CHAINS = [
    ("t", ["<|channel|>analysis<|mess", "age|>Weigh it: ", "1 + 1.<|e",
           "nd|><|start|>assistant<|channel|>fi", "nal<|message|>Two."]),
    ("\n", ["<think>\nPondering", " the sum.\n</th", "ink>\n\nIt is ", "two."]),
    (">", ["Sure<|channel>thought\nhm", "m<channel|> done"]),
]
EOS = 257
FF = 6144   # a wide (zero-output) FFN: each token takes a few ms, so a stream gets
            # a chunk per token or so and the markers cut across tokens reach the splitter apart


def main(out):
    chars = gen_model.gpt2_byte_chars()     # printable bytes first, then the rest
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    order = printable + [b for b in range(256) if b not in printable]
    byte_char = {b: chars[i] for i, b in enumerate(order)}

    def encode(text):   # GPT-2 byte-level text of a piece
        return "".join(byte_char[b] for b in text.encode())

    tokens = list(chars) + ["tok256", "tok257"]
    succ = {}
    for start, pieces in CHAINS:
        prev = chars.index(encode(start))
        for p in pieces:
            tokens.append(encode(p))
            succ[prev] = len(tokens) - 1
            prev = len(tokens) - 1
        succ[prev] = EOS
    V = len(tokens)
    D = (V + 15) // 16 * 16
    a, cfg = gen_model.parse_args(["llama", out, "--vocab", str(V), "--embd", str(D), "--layers", "1",
                                   "--heads", "1", "--heads-kv", "1", "--ff", str(FF), "--ctx", "512"])
    w = gen_model.build(a, cfg)
    kv = []
    for key, vt, val, at in w.kv:
        if key == "tokenizer.ggml.tokens":
            val = tokens
        elif key == "general.name":
            val = "pocket-test-chain"
        kv.append((key, vt, val, at))
    w.kv = kv
    emb = np.zeros((V, D))
    emb[np.arange(V), np.arange(V)] = 1.0
    head = np.zeros((V, D))
    for t, n in succ.items():
        head[n, t] = 10.0
    replace = {"token_embd.weight": emb, "output.weight": head, "output_norm.weight": np.ones(D),
               "blk.0.attn_output.weight": np.zeros((D, D)), "blk.0.ffn_down.weight": np.zeros((D, FF))}
    old = w.tensors
    w.tensors = []
    for name, ne, ttype, raw in old:
        if name in replace:
            w.add_tensor(name, replace[name], ttype)
        else:
            w.tensors.append((name, ne, ttype, raw))
    w.write(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
