# node_openai.sh - sourced, not run. need_openai DIR: fails (via fail, which
# the sourcing test defines) unless node is installed and the official
# `openai` npm package is in DIR/node_modules, installing it there when it
# is missing.
need_openai() {
    command -v node >/dev/null || fail "node is not installed (Node.js 20 is needed for this test)"
    [ -f "$1/node_modules/openai/package.json" ] && return 0
    command -v npm >/dev/null || fail "npm is not installed"
    mkdir -p "$1"
    [ -f "$1/package.json" ] || echo '{"name":"pocket-serve-tests","private":true}' >"$1/package.json"
    (cd "$1" && npm install --no-audit --no-fund --loglevel=error openai@6) || fail "npm install openai failed"
}
