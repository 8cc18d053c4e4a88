#!/usr/bin/env python3
"""mk_template_model.py OUT TEMPLATE [ADD_BOS] - a small random qwen3moe model
(tests/lib/gen_model.py, seed 3) whose GGUF carries a chat template:
TEMPLATE is the tokenizer.chat_template text, or @FILE for a file's text.
With ADD_BOS (0 or 1), token 256 - the BOS - is a control token
<|begin_of_text|> and tokenizer.ggml.add_bos_token is ADD_BOS, so a
template's {{ bos_token }} is a special token that the tokenizer adds by
itself (1) or not (0). Used by tests/cli/t_chat.sh and t_jinja.sh."""
import sys

import numpy as np

sys.path.insert(0, "tests/lib")
import gen_model as g  # noqa: E402


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__.strip().splitlines()[0])
    out, template = argv[0], argv[1]
    if template.startswith("@"):
        with open(template[1:], encoding="utf-8") as f:
            template = f.read()
    a, cfg = g.parse_args(["qwen3moe", out, "--seed", "3"])
    w = g.build(a, cfg)
    w.add_str("tokenizer.chat_template", template)
    if len(argv) > 2:
        kv = []
        for key, vt, val, at in w.kv:
            if key == "tokenizer.ggml.tokens":
                val = list(val)
                val[256] = "<|begin_of_text|>"
            elif key == "tokenizer.ggml.token_type":
                val = np.array(val)
                val[256] = 3
            elif key == "tokenizer.ggml.add_bos_token":
                val = argv[2] == "1"
            kv.append((key, vt, val, at))
        w.kv = kv
    w.write(a.out)


if __name__ == "__main__":
    main(sys.argv[1:])
