#!/bin/sh
# deploy/run.sh end to end, on loopback: two `pocket serve` replicas of the
# bundled model behind Debian's nginx, driven through the official `openai`
# npm client (tests/cli/serve/deploy.mjs: every way a client names its
# conversation lands on the same replica; precedence and the fallback to the
# client's address; concurrent conversations each stay on their replica,
# whose prompt cache serves their next turn, and both replicas get some;
# streams pass unbuffered and a client that leaves cancels the generation on
# its replica; nginx's own errors as OpenAI JSON; a replica that dies: its
# conversations go to the other). Then: `stop` ends every process; bad
# options and a replica that cannot start are refused and leave nothing
# running; --foreground stops everything on SIGTERM.
# Needs nginx (Makefile DEB_PKGS installs it as root), node + npm.
set -u
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
P="$BUILD/pocket"
tmp="$BUILD/tmp/deploy"; rm -rf "$tmp"; mkdir -p "$tmp"
NODE_DIR="$BUILD/tmp/node"
. tests/lib/serve_node.sh   # fail, need_npm, start_server
KEY="pocket-deploy-key-$$"
need_npm openai@7
{ command -v nginx || [ -x /usr/sbin/nginx ]; } >/dev/null 2>&1 ||
    fail "nginx is not installed: 'make' installs it as root (DEB_PKGS), or: sudo apt-get install nginx"
free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
# gone PID...: none of them is running any more
gone() { for p in "$@"; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
pids_of() { awk '{ print $2 }' "$1/replicas" 2>/dev/null; [ -s "$1/nginx.pid" ] && cat "$1/nginx.pid"; }

# ---- two replicas behind nginx ----------------------------------------------------------
S="$tmp/state"
PORT=$(free_port)
started=""
AT_EXIT='[ -n "$started" ] && sh deploy/run.sh stop --state "$S" >/dev/null 2>&1'
sh deploy/run.sh start -n 2 --listen "127.0.0.1:$PORT" --state "$S" --pocket "$P" -- \
    -m models/kjv-moe-f16.gguf -c 1024 -t 1 --parallel 2 --queue 32 --cache-ram 256M --chat-template chatml \
    --max-body 65536 --api-key "$KEY" >"$tmp/start.log" 2>&1 || { cat "$tmp/start.log"; fail "deploy/run.sh start"; }
started=1
cat "$tmp/start.log"
all=$(pids_of "$S")
[ "$(echo $all | wc -w)" -eq 3 ] || fail "expected 2 replicas and nginx: $all"
sh deploy/run.sh status --state "$S" >"$tmp/status.log" 2>&1 && [ "$(grep -c 'pid' "$tmp/status.log")" -eq 3 ] &&
    ok "status: nginx and 2 replicas running" || { cat "$tmp/status.log"; bad "status while running"; }

if POCKET_URL="http://127.0.0.1:$PORT" POCKET_KEY="$KEY" POCKET_STATE="$S" POCKET_NODE_DIR="$(cd "$NODE_DIR" && pwd)" \
   node tests/cli/serve/deploy.mjs; then ok "deploy.mjs"; else bad "deploy.mjs (logs in $S)"; fi

# deploy.mjs stopped both replicas (the failover check): status says so
sh deploy/run.sh status --state "$S" >"$tmp/status.log" 2>&1 && bad "status with the replicas gone exits 0" ||
    { [ "$(grep -c 'not running' "$tmp/status.log")" -eq 2 ] && ok "status: the replicas gone" || { cat "$tmp/status.log"; bad "status"; }; }
sh deploy/run.sh stop --state "$S" >"$tmp/stop.log" 2>&1 && started="" || bad "stop"
cat "$tmp/stop.log"
gone $all && ok "stop: nginx and the replicas are gone" || bad "stop left processes: $all"
grep -q 'nothing running' "$tmp/stop.log" && bad "stop found nothing running" || true
sh deploy/run.sh stop --state "$S" | grep -q 'nothing running' && ok "stop again: nothing running" || bad "stop again"

# ---- refusals: nothing left behind --------------------------------------------------------
S2="$tmp/state2"
out=$(sh deploy/run.sh start --state "$S2" --pocket "$P" -- -m models/kjv-moe-f16.gguf --port 9 2>&1) &&
    bad "--port in the replicas' options accepted" ||
    { echo "$out" | grep -q -- '--port is set by deploy/run.sh' && ok "refused: $out" || bad "--port: $out"; }
out=$(sh deploy/run.sh start --replicas two --state "$S2" 2>&1) && bad "--replicas two accepted" ||
    { echo "$out" | grep -q "whole number, got 'two'" && ok "refused: $out" || bad "--replicas two: $out"; }
out=$(sh deploy/run.sh start -n 2 --listen "127.0.0.1:$(free_port)" --state "$S2" --pocket "$P" -- -m "$tmp/no-such.gguf" 2>&1) &&
    bad "a replica that cannot load its model: start succeeded" ||
    { echo "$out" | grep -q 'replica 0 exited at start' && ok "refused: a replica that cannot start" || bad "no model: $out"; }
[ ! -s "$S2/nginx.pid" ] && gone $(pids_of "$S2") && ok "a failed start leaves nothing running" || bad "a failed start left processes"
# nginx cannot listen (the port is taken by a replica of the run below): the replicas are stopped
S3="$tmp/state3"
start_server "$tmp/blocker.log" -m models/kjv-moe-f16.gguf -c 256 -t 1
blocker=$SERVER_PID taken=$SERVER_PORT
out=$(sh deploy/run.sh start -n 1 --listen "127.0.0.1:$taken" --state "$S3" --pocket "$P" -- -m models/kjv-moe-f16.gguf -c 256 -t 1 2>&1) &&
    bad "nginx on a taken port: start succeeded" ||
    { echo "$out" | grep -q 'nginx did not start' && gone $(pids_of "$S3") && ok "nginx cannot listen: refused, the replica stopped" || bad "taken port: $out"; }
stop_server "$blocker" 2>/dev/null

# ---- --foreground: SIGTERM stops everything -----------------------------------------------
S4="$tmp/state4"
PORT4=$(free_port)
sh deploy/run.sh start --foreground -n 1 --listen "127.0.0.1:$PORT4" --state "$S4" --pocket "$P" -- \
    -m models/kjv-moe-f16.gguf -c 256 -t 1 >"$tmp/fg.log" 2>&1 &
fg=$!
i=0
while [ $i -lt 300 ] && ! grep -q 'Ctrl-C stops everything' "$tmp/fg.log"; do sleep 0.1; i=$((i + 1)); done
code=$(node -e "fetch('http://127.0.0.1:$PORT4/health').then(r => console.log(r.status, r.headers.get('x-pocket-replica')), e => console.log('error', e.cause ? e.cause.code : e))")
case $code in "200 127.0.0.1:"*) ok "--foreground: /health through nginx: $code" ;; *) cat "$tmp/fg.log"; bad "--foreground: /health: $code" ;; esac
fgpids=$(pids_of "$S4")
kill -TERM "$fg"; wait "$fg"; rc=$?
[ $rc -eq 0 ] && gone $fgpids && ok "--foreground: SIGTERM stopped nginx and the replica (exit 0)" || { cat "$tmp/fg.log"; bad "--foreground: exit $rc, pids $fgpids"; }

[ $fails -eq 0 ] || exit 1
echo "t_deploy: all passed"
