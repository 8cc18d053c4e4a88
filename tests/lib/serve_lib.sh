# serve_lib.sh - sourced by the tests that start `pocket serve` (tests/cli/t_serve*.sh).
# port_of LOG PID: the port a server started with --port 0 listens on, read
# from its log (up to 30 s; empty if it exits or never says)
port_of() {
    j=0
    while [ $j -lt 300 ] && kill -0 "$2" 2>/dev/null; do
        p=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$1" 2>/dev/null)
        [ -n "$p" ] && { echo "$p"; return; }
        sleep 0.1; j=$((j + 1))
    done
}

fail() { echo "FAIL: $*"; exit 1; }

# need_node_packages DIR: node, and the npm packages the serve tests use
# (openai, playwright-core) installed in DIR/node_modules when missing;
# fails saying why when they cannot be had
need_node_packages() {
    command -v node >/dev/null || fail "node is not installed (Node.js 20 is needed for this test)"
    [ -f "$1/node_modules/openai/package.json" ] && [ -f "$1/node_modules/playwright-core/package.json" ] && return
    command -v npm >/dev/null || fail "npm is not installed"
    mkdir -p "$1"
    [ -f "$1/package.json" ] || echo '{"name":"pocket-serve-tests","private":true}' >"$1/package.json"
    echo "installing openai and playwright-core into $1"
    (cd "$1" && npm install --no-audit --no-fund --loglevel=error openai@6 playwright-core@1) ||
        fail "npm install of openai and playwright-core failed (is the npm registry reachable?)"
}
