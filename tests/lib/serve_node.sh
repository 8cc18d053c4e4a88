# serve_node.sh - sourced by the `pocket serve` end-to-end tests
# (tests/cli/t_serve*.sh): the server's port, and the npm client packages.
# Needs NODE_DIR (where the packages go: $BUILD/tmp/node).

fail() { echo "FAIL: $*"; exit 1; }

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

# need_npm NAME@VERSION...: node, and these packages in $NODE_DIR (installed
# with npm when one is missing), or a FAIL line saying why not
need_npm() {
    command -v node >/dev/null || fail "node is not installed (Node.js 20 is needed for this test)"
    missing=""
    for pkg in "$@"; do
        case $pkg in @*) rest=${pkg#@}; name="@${rest%@*}";; *) name=${pkg%@*};; esac
        [ -f "$NODE_DIR/node_modules/$name/package.json" ] || missing="$missing $pkg"
    done
    [ -z "$missing" ] && return
    command -v npm >/dev/null || fail "npm is not installed"
    mkdir -p "$NODE_DIR"
    [ -f "$NODE_DIR/package.json" ] || echo '{"name":"pocket-serve-tests","private":true}' >"$NODE_DIR/package.json"
    echo "installing$missing into $NODE_DIR"
    (cd "$NODE_DIR" && npm install --no-audit --no-fund --loglevel=error $missing) ||
        fail "npm install of$missing failed (is the npm registry reachable?)"
}
