#!/bin/sh
# The load-time limits on a model's shape (src/model/model.c): at each limit
# a crafted file loads and `pocket run` decodes with it; one past the limit
# the run stops with exit status 1 and one error line naming the key and the
# value, never a crash. Decoding's working memory comes from the context
# (sized from the plan), never from stack arrays sized by the file, so the
# runs at the limits are made with a 1 MB stack (ulimit -s: the main thread
# and, with glibc, the pool's threads).
# The files are tiny: every other dimension is as small as the shape allows
# (tests/lib/gen_model.py), and the past-the-limit files are the same files
# with one key raised in place (tests/lib/gguf_setkv.py). Not run at the
# limit (listed so that a reader knows): block_count 4096 (the generator
# takes a minute for 4096 layers) and embedding_length 2^20 (a token table of
# at least 256 x 2^20 elements); their past-the-limit errors are checked.
set -u
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
P="$BUILD/pocket"
G="$PYTHON tests/lib/gen_model.py"
SET="$PYTHON tests/lib/gguf_setkv.py"
tmp="$BUILD/tmp/limits"; rm -rf "$tmp"; mkdir -p "$tmp"
fail=0

# at_limit NAME FILE [pocket run options]: loads and decodes, exit 0
at_limit() {
    name=$1; f=$2; shift 2
    (ulimit -s 1024; "$P" run -m "$f" -p "abcdefghij" -n 2 -t 2 --temp 0 "$@" >"$tmp/out" 2>"$tmp/err")
    rc=$?
    if [ $rc -eq 0 ]; then
        echo "ok   at the limit: $name"
    else
        echo "FAIL at the limit: $name: exit $rc, stderr:"; sed 's/^/    /' "$tmp/err"; fail=1
    fi
}

# past_limit NAME FILE KEY=VALUE WANT: FILE with KEY raised to VALUE gives
# exit 1 and one line on stderr containing WANT
past_limit() {
    name=$1; f=$2; kv=$3; want=$4
    cp "$f" "$tmp/past.gguf"
    $SET "$tmp/past.gguf" "$kv" || { echo "FAIL past the limit: $name: cannot set $kv"; fail=1; return; }
    "$P" run -m "$tmp/past.gguf" -p "abcdefghij" -n 2 -t 2 --temp 0 >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF -- "$want" "$tmp/err"; then
        echo "ok   past the limit: $name: $(cat "$tmp/err")"
    else
        echo "FAIL past the limit: $name: exit $rc (want 1 and one line with '$want'), stderr:"
        sed 's/^/    /' "$tmp/err"; fail=1
    fi
}

gen() { out=$1; shift; $G "$@" "$out" >/dev/null || { echo "FAIL gen_model.py $*"; exit 1; }; }

# 65536 experts (expert_count's limit), 64 used (expert_used_count's): one
# round over all the experts, and under an expert cache of 64 slots
gen "$tmp/experts.gguf" qwen3moe --layers 1 --embd 2 --heads 1 --heads-kv 1 --head-dim 2 --experts 65536 \
    --used 64 --expert-ff 1 --type f16
at_limit "expert_count 65536, expert_used_count 64" "$tmp/experts.gguf"
at_limit "expert_count 65536, expert_used_count 64, 64 expert slots" "$tmp/experts.gguf" --expert-slots 64
past_limit "expert_count 65537" "$tmp/experts.gguf" qwen3moe.expert_count=65537 \
    "key 'qwen3moe.expert_count' = 65537 is out of range [0, 65536]"
past_limit "expert_used_count 65" "$tmp/experts.gguf" qwen3moe.expert_used_count=65 \
    "qwen3moe.expert_used_count 65: at most 64 supported"

# an expert hidden size of 2^20 with expert biases (gpt-oss): the bias rows
# are 2^20 floats
gen "$tmp/expert-ff.gguf" gpt-oss --layers 1 --embd 2 --heads 1 --heads-kv 1 --head-dim 2 --experts 1 --used 1 \
    --expert-ff 1048576 --type f16
at_limit "expert_feed_forward_length 2^20 (with expert biases)" "$tmp/expert-ff.gguf"
past_limit "expert_feed_forward_length 2^20 + 1" "$tmp/expert-ff.gguf" gpt-oss.expert_feed_forward_length=1048577 \
    "key 'gpt-oss.expert_feed_forward_length' = 1048577 is out of range [1, 1048576]"

# 4096 query and key/value heads; the context_length limit (2^24) on the
# same file (the context then defaults to what its cache allows)
gen "$tmp/heads.gguf" qwen3 --layers 1 --embd 2 --heads 4096 --heads-kv 4096 --head-dim 2 --ff 1
at_limit "head_count 4096, head_count_kv 4096" "$tmp/heads.gguf"
past_limit "head_count 4097" "$tmp/heads.gguf" qwen3.attention.head_count=4097 \
    "key 'qwen3.attention.head_count' = 4097 is out of range [1, 4096]"
past_limit "head_count_kv 4097" "$tmp/heads.gguf" qwen3.attention.head_count_kv=4097 \
    "key 'qwen3.attention.head_count_kv' = 4097 is out of range [1, 4096]"
cp "$tmp/heads.gguf" "$tmp/ctx.gguf"
$SET "$tmp/ctx.gguf" qwen3.context_length=16777216
at_limit "context_length 2^24" "$tmp/ctx.gguf"
past_limit "context_length 2^24 + 1" "$tmp/heads.gguf" qwen3.context_length=16777217 \
    "key 'qwen3.context_length' = 16777217 is out of range [1, 16777216]"
past_limit "block_count 4097" "$tmp/heads.gguf" qwen3.block_count=4097 \
    "key 'qwen3.block_count' = 4097 is out of range [1, 4096]"
past_limit "embedding_length 2^20 + 1" "$tmp/heads.gguf" qwen3.embedding_length=1048577 \
    "key 'qwen3.embedding_length' = 1048577 is out of range [1, 1048576]"

# head size 65536 (key_length, value_length and the rope dims)
gen "$tmp/head-dim.gguf" qwen3 --layers 1 --embd 2 --heads 1 --heads-kv 1 --head-dim 65536 --ff 1
at_limit "key_length = value_length = rope.dimension_count = 65536" "$tmp/head-dim.gguf"
past_limit "key_length 65537" "$tmp/head-dim.gguf" qwen3.attention.key_length=65537 \
    "key 'qwen3.attention.key_length' = 65537 is out of range [1, 65536]"
past_limit "value_length 65537" "$tmp/head-dim.gguf" qwen3.attention.value_length=65537 \
    "key 'qwen3.attention.value_length' = 65537 is out of range [1, 65536]"

# a dense hidden size of 2^20
gen "$tmp/ff.gguf" qwen3 --layers 1 --embd 2 --heads 1 --heads-kv 1 --head-dim 2 --ff 1048576 --type f16
at_limit "feed_forward_length 2^20" "$tmp/ff.gguf"
past_limit "feed_forward_length 2^20 + 1" "$tmp/ff.gguf" qwen3.feed_forward_length=1048577 \
    "key 'qwen3.feed_forward_length' = 1048577 is out of range [0, 1048576]"

# a Gated DeltaNet state of 4096 x 4096 (ssm.state_size's limit, which the
# kernels' stack rows are sized for: PK_MAX_SSM_STATE); a prompt of 10
# tokens takes the chunked path, the generated tokens the recurrence
gen "$tmp/ssm.gguf" qwen35 --layers 2 --interval 2 --embd 2 --heads 1 --heads-kv 1 --head-dim 2 --n-rot 2 \
    --sections 1,0,0,0 --ff 1 --ssm-state 4096 --ssm-k-heads 1 --ssm-v-heads 1 --conv 4 --type f16
at_limit "ssm.state_size 4096" "$tmp/ssm.gguf"
past_limit "ssm.state_size 4097" "$tmp/ssm.gguf" qwen35.ssm.state_size=4097 \
    "key 'qwen35.ssm.state_size' = 4097 is out of range [1, 4096]"

[ $fail -eq 0 ] || exit 1
echo "t_limits: all passed"
