# node.sh - sourced by tests that drive `pocket serve` with npm clients.
# node_packages DIR PKG@VER...: node is installed and each PKG is in
# DIR/node_modules (installed there with npm when missing); otherwise one line
# saying why on stdout and status 1.
node_packages() {
    nd=$1; shift
    command -v node >/dev/null || { echo "node is not installed (Node.js 20 is needed for this test)"; return 1; }
    missing=""
    for p in "$@"; do [ -f "$nd/node_modules/${p%@*}/package.json" ] || missing="$missing $p"; done
    [ -z "$missing" ] && return 0
    command -v npm >/dev/null || { echo "npm is not installed (needed for:$missing)"; return 1; }
    mkdir -p "$nd"
    [ -f "$nd/package.json" ] || echo '{"name":"pocket-serve-tests","private":true}' >"$nd/package.json"
    echo "installing$missing into $nd"
    # shellcheck disable=SC2086
    (cd "$nd" && npm install --no-audit --no-fund --loglevel=error $missing) ||
        { echo "npm install of$missing failed (is the npm registry reachable?)"; return 1; }
}
