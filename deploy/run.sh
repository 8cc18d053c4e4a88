#!/bin/sh
# deploy/run.sh - N `pocket serve` replicas behind nginx, each conversation
# sent back to the replica that holds its prompt cache (docs/deploy.md).
#
#   deploy/run.sh start [options] [-- pocket serve options]
#   deploy/run.sh stop [--state DIR]
#   deploy/run.sh status [--state DIR]
#
# start: each replica is `pocket serve --host 127.0.0.1 --port 0 OPTIONS`
# (its port read from its log), then nginx is configured from
# deploy/nginx.conf.in and started. Everything it writes is in the state
# directory: replica-I.log, replicas ("I PID PORT" lines), nginx.conf,
# nginx.pid, nginx-error.log, access.log. With --foreground it stays until
# Ctrl-C or SIGTERM and then stops everything; otherwise it returns once all
# are up, and `stop` ends them (SIGTERM, then SIGKILL after 60 s).
set -u
here=$(cd "$(dirname "$0")" && pwd)
usage() {
    cat <<EOF
usage: deploy/run.sh start [options] [-- pocket serve options]
       deploy/run.sh stop|status [--state DIR]

  -n, --replicas N      pocket serve replicas (default 2)
      --listen ADDR     where nginx listens, [HOST:]PORT (default 127.0.0.1:8080)
      --state DIR       logs, pids, nginx.conf (default ./pocket-deploy)
      --pocket BIN      the pocket binary (default: build/pocket of this tree, else pocket on PATH)
      --nginx BIN       the nginx binary (default: nginx on PATH, else /usr/sbin/nginx)
      --read-timeout S  longest wait for a replica's next bytes, prompt processing included
                        (default 3600)
      --start-timeout S longest wait for a replica to load its model and listen (default 600)
      --foreground      stay in the foreground; Ctrl-C or SIGTERM stops everything

The pocket serve options go to every replica (--host and --port are set here).
--max-body is read from them for nginx's client_max_body_size (default 1048576);
--cache-dir DIR becomes DIR/replica-I (one directory per replica).
Clients choose their conversation's replica with the X-Session-Id header (or
prompt_cache_key / user in the body): docs/deploy.md.
EOF
}
die() { echo "deploy/run.sh: $*" >&2; exit 1; }

cmd=${1:-}
[ -n "$cmd" ] || { usage >&2; exit 2; }
shift
case $cmd in start|stop|status) ;; -h|--help) usage; exit 0 ;; *) usage >&2; exit 2 ;; esac

n=2 listen=127.0.0.1:8080 state=./pocket-deploy pocket="" nginx="" read_timeout=3600 start_timeout=600 fg=0
number() { case $2 in ''|*[!0-9]*) die "$1 needs a whole number, got '$2'" ;; esac; }
while [ $# -gt 0 ]; do
    case $1 in
    --) shift; break ;;
    -h|--help) usage; exit 0 ;;
    -n|--replicas|--listen|--state|--pocket|--nginx|--read-timeout|--start-timeout)
        [ $# -ge 2 ] || die "$1 needs a value"
        case $1 in
        -n|--replicas) number "$1" "$2"; n=$2 ;;
        --listen) listen=$2 ;;
        --state) state=$2 ;;
        --pocket) pocket=$2 ;;
        --nginx) nginx=$2 ;;
        --read-timeout) number "$1" "$2"; read_timeout=$2 ;;
        --start-timeout) number "$1" "$2"; start_timeout=$2 ;;
        esac
        shift 2 ;;
    --foreground) fg=1; shift ;;
    *) die "unknown option '$1' (pocket serve options go after --)" ;;
    esac
done
[ "$cmd" = start ] || [ $# -eq 0 ] || die "$cmd takes no pocket serve options"
mkdir -p "$state" 2>/dev/null || die "cannot make the state directory $state"
state=$(cd "$state" && pwd)

# alive PID NAME: PID is a running process whose command is NAME (a pid
# file left by a process that is gone may name another process by now)
alive() {
    kill -0 "$1" 2>/dev/null || return 1
    [ -r "/proc/$1/comm" ] || return 0
    [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]
}
nginx_pid() { [ -s "$state/nginx.pid" ] && cat "$state/nginx.pid"; }

# ---- stop ------------------------------------------------------------------------------
# SIGTERM to nginx (open streams are closed, so the replicas cancel them),
# then to every replica (each saves its --cache-dir states); SIGKILL for
# any still there after 60 s.
stop_all() {
    pids=""
    p=$(nginx_pid) && alive "$p" nginx && { kill -TERM "$p"; pids="$p:nginx"; }
    if [ -f "$state/replicas" ]; then
        while read -r i p port comm; do
            alive "$p" "$comm" && { kill -TERM "$p"; pids="$pids $p:$comm"; }
        done <"$state/replicas"
    fi
    [ -n "$pids" ] || { echo "deploy/run.sh: nothing running in $state"; return 0; }
    waited=0
    for pn in $pids; do
        p=${pn%%:*} name=${pn#*:}
        while alive "$p" "$name" && [ $waited -lt 600 ]; do sleep 0.1; waited=$((waited + 1)); done
        if alive "$p" "$name"; then
            echo "deploy/run.sh: $name (pid $p) still running after 60 s: SIGKILL" >&2
            kill -KILL "$p" 2>/dev/null
        fi
    done
    rm -f "$state/nginx.pid"
    echo "deploy/run.sh: stopped ($(echo $pids | wc -w) processes)"
}

if [ "$cmd" = stop ]; then stop_all; exit 0; fi

if [ "$cmd" = status ]; then
    up=0 down=0
    if p=$(nginx_pid) && alive "$p" nginx; then echo "nginx: pid $p, $(sed -n 's/^ *listen \(.*\);/\1/p' "$state/nginx.conf")"; up=$((up + 1))
    else echo "nginx: not running"; down=$((down + 1)); fi
    [ -f "$state/replicas" ] || { echo "no replicas started from $state"; exit 1; }
    while read -r i p port comm; do
        if alive "$p" "$comm"; then echo "replica $i: pid $p, http://127.0.0.1:$port/"; up=$((up + 1))
        else echo "replica $i: not running (was pid $p, port $port; log $state/replica-$i.log)"; down=$((down + 1)); fi
    done <"$state/replicas"
    [ $down -eq 0 ]
    exit
fi

# ---- start -----------------------------------------------------------------------------
[ "$n" -ge 1 ] || die "--replicas must be at least 1"
if [ -z "$pocket" ]; then
    if [ -x "$here/../build/pocket" ]; then pocket="$here/../build/pocket"; else pocket=$(command -v pocket) || die "no pocket binary: build it (make) or pass --pocket BIN"; fi
fi
[ -x "$pocket" ] || die "$pocket is not an executable"
if [ -z "$nginx" ]; then
    nginx=$(command -v nginx) || nginx=/usr/sbin/nginx
fi
[ -x "$nginx" ] || die "nginx not found (Debian: apt-get install nginx; make installs it as root) or pass --nginx BIN"
case $listen in *:*) ;; *[!0-9]*|'') die "--listen must be [HOST:]PORT, got '$listen'" ;; esac
if p=$(nginx_pid) && alive "$p" nginx; then die "nginx (pid $p) is already running from $state: deploy/run.sh stop --state $state"; fi
if [ -f "$state/replicas" ]; then
    while read -r i p port comm; do
        alive "$p" "$comm" && die "replica $i (pid $p) is still running from $state: deploy/run.sh stop --state $state"
    done <"$state/replicas"
fi

# The replicas' options: --host/--port are ours; --max-body is nginx's
# limit too; --cache-dir gets one directory per replica.
max_body=1048576 cache_dir="" next=""
for a in "$@"; do
    case $next in
    max) number --max-body "$a"; max_body=$a ;;
    cache) cache_dir=$a ;;
    esac
    next=""
    case $a in
    --host|--port) die "$a is set by deploy/run.sh (replicas listen on 127.0.0.1, ports of their own; --listen is nginx's)" ;;
    --max-body) next=max ;;
    --cache-dir) next=cache ;;
    esac
done

mkdir -p "$state/tmp" || die "cannot write in $state"
rm -f "$state/replicas" "$state/nginx.conf"
for f in "$state"/replica-*.log; do [ -e "$f" ] && rm -f "$f"; done
fail_start() { echo "deploy/run.sh: $*" >&2; stop_all >/dev/null; exit 1; }
trap 'fail_start interrupted' INT TERM

i=0
while [ $i -lt "$n" ]; do
    log="$state/replica-$i.log"
    : >"$log"
    (
        if [ -n "$cache_dir" ]; then   # --cache-dir DIR -> DIR/replica-$i
            next=""
            for a in "$@"; do
                shift
                if [ "$next" = cache ]; then set -- "$@" "$cache_dir/replica-$i"; next=""; continue; fi
                [ "$a" = --cache-dir ] && next=cache
                set -- "$@" "$a"
            done
            mkdir -p "$cache_dir/replica-$i" || exit 1
        fi
        exec "$pocket" serve --host 127.0.0.1 --port 0 "$@"
    ) >"$log" 2>&1 </dev/null &
    pid=$!
    j=0 port=""
    while [ $j -lt $((start_timeout * 10)) ]; do
        kill -0 "$pid" 2>/dev/null || { tail -n 5 "$log" >&2; fail_start "replica $i exited at start (log: $log)"; }
        port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$log")
        [ -n "$port" ] && break
        sleep 0.1; j=$((j + 1))
    done
    [ -n "$port" ] || fail_start "replica $i did not listen within $start_timeout s (log: $log)"
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || comm=pocket
    echo "$i $pid $port $comm" >>"$state/replicas"
    echo "replica $i: pid $pid, http://127.0.0.1:$port/"
    i=$((i + 1))
done

servers=$(awk '{ printf "        server 127.0.0.1:%s max_fails=1 fail_timeout=10s;\n", $3 }' "$state/replicas")
awk -v state="$state" -v listen="$listen" -v servers="$servers" -v max_body="$max_body" -v rt="$read_timeout" '
    /^#/ { print; next }
    $0 == "@SERVERS@" { print servers; next }
    { gsub(/@STATE@/, state); gsub(/@LISTEN@/, listen); gsub(/@MAX_BODY@/, max_body); gsub(/@READ_TIMEOUT@/, rt); print }
' "$here/nginx.conf.in" >"$state/nginx.conf" || fail_start "cannot write $state/nginx.conf"
"$nginx" -t -q -p "$state" -c "$state/nginx.conf" 2>"$state/nginx-test.log" ||
    { cat "$state/nginx-test.log" >&2; fail_start "nginx refused $state/nginx.conf"; }

if [ $fg -eq 0 ]; then
    "$nginx" -p "$state" -c "$state/nginx.conf" 2>>"$state/nginx-error.log" ||
        { tail -n 5 "$state/nginx-error.log" >&2; fail_start "nginx did not start (log: $state/nginx-error.log)"; }
    j=0
    while [ ! -s "$state/nginx.pid" ] && [ $j -lt 100 ]; do sleep 0.1; j=$((j + 1)); done
    echo "nginx: pid $(nginx_pid), listening on $listen (state: $state; stop: deploy/run.sh stop --state $state)"
    exit 0
fi
"$nginx" -p "$state" -c "$state/nginx.conf" -g 'daemon off;' 2>>"$state/nginx-error.log" &
ngx=$!
trap 'stop_all; exit 0' INT TERM
echo "nginx: pid $ngx, listening on $listen (Ctrl-C stops everything)"
wait $ngx
rc=$?
echo "deploy/run.sh: nginx exited (status $rc); stopping the replicas" >&2
stop_all >/dev/null
exit 1
