# serve_node.sh - sourced by the `pocket serve` end-to-end tests
# (tests/cli/t_serve*.sh, t_deploy.sh): servers started and stopped, and the
# npm client packages. Needs P (the pocket binary) for start_server and
# NODE_DIR (where the packages go: $BUILD/tmp/node) for need_npm. Sourcing it
# sets the test's EXIT trap (the servers stopped, then AT_EXIT run: what
# else the test leaves running) and makes INT and TERM exit 1.

fail() { echo "FAIL: $*"; exit 1; }

SERVERS=""      # the pids of the servers start_server started
AT_EXIT=""
trap 'stop_servers; eval "${AT_EXIT:-:}"' EXIT
trap 'exit 1' INT TERM

# start_server LOG ARGS...: `$P serve --host 127.0.0.1 --port 0 ARGS...` in
# the background, its output in LOG; returns when its log says where it
# listens, with SERVER_PID and SERVER_PORT set. A server that exits first, or
# says nothing for 120 s: LOG's tail and a FAIL line naming LOG, and the test
# exits 1. It is stopped when the test exits, unless stop_server stopped it.
# (The wait runs in this shell, not in a $(...): only the shell that started
# the server reaps it, and until then kill -0 finds it, exited or not.)
start_server() {
    _log=$1; shift
    "$P" serve --host 127.0.0.1 --port 0 "$@" >"$_log" 2>&1 &
    SERVER_PID=$!
    SERVERS="$SERVERS $SERVER_PID"
    SERVER_PORT=""
    _i=0
    while [ $_i -lt 1200 ] && kill -0 "$SERVER_PID" 2>/dev/null; do
        SERVER_PORT=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$_log")
        [ -n "$SERVER_PORT" ] && return 0
        sleep 0.1; _i=$((_i + 1))
    done
    echo "--- $_log (tail)"; tail -n 40 "$_log"
    if kill -0 "$SERVER_PID" 2>/dev/null; then fail "the server did not say its port in 120 s ($_log)"
    else fail "the server exited at start ($_log)"; fi
}

# stop_server PID: SIGTERM, and its exit status once it is gone.
stop_server() {
    kill -TERM "$1" 2>/dev/null
    wait "$1"; _rc=$?
    _left=""
    for _pid in $SERVERS; do [ "$_pid" = "$1" ] || _left="$_left $_pid"; done
    SERVERS=$_left
    return $_rc
}

# stop_servers: every server start_server started that is still running.
stop_servers() {
    for _pid in $SERVERS; do kill "$_pid" 2>/dev/null; done
    for _pid in $SERVERS; do wait "$_pid" 2>/dev/null; done
    SERVERS=""
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
