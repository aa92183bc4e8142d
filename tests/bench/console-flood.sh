#!/usr/bin/env bash
# console-flood.sh: what a flood of console requests does to the cancel lag
# of the sidecar built from REV. On a private PostgreSQL server (initdb's
# durable defaults) the sidecar sweeps with its console anonymous on loopback. First
# 50 orders come due 20 ms apart with nothing else going on; then 100 clients
# reload /console/ as fast as they can for 14 s (keep-alive, one connection
# each), and 3 s into that flood 50 more orders come due the same way. It
# prints the console's answers by status and, for each group of orders, the
# cancel lag (cancelled_at - cancel_at) median and worst.
#
# Usage (from the repository root): tests/bench/console-flood.sh [REV]
#   REV: the commit whose sidecar and migrations to run (default HEAD);
#   e.g. bb65234 for the sidecar before the HTTP server's limits.
# Takes about 30 seconds plus the build. Needs the migrate CLI (built into
# .cache/bin by ensure_migrate), curl and python3.
set -euo pipefail
# shellcheck source=tests/lib/pg.sh
source "$(dirname "$0")/../lib/pg.sh"
cd "$ROOT"
command -v curl >/dev/null 2>&1 || die "curl not found"
command -v python3 >/dev/null 2>&1 || die "python3 not found"
rev="${1:-HEAD}"
git rev-parse --verify --quiet "$rev^{commit}" >/dev/null || die "unknown revision: $rev"
ensure_migrate

private_cluster console-flood
sidecar_pid='' flood_pid=''
cleanup() {
	[[ -n $flood_pid ]] && kill "$flood_pid" 2>/dev/null
	[[ -n $sidecar_pid ]] && kill "$sidecar_pid" 2>/dev/null && wait "$sidecar_pid" 2>/dev/null
	git worktree remove --force "$dir/src" >/dev/null 2>&1 || true
	stop_cluster
}
trap cleanup EXIT
if ((EUID == 0)); then chmod 777 "$dir"; fi

sidecar_at "$rev" flood
psql=("$(pgtool psql)" -X -q -v ON_ERROR_STOP=1)
"${psql[@]}" "$db" -c "SELECT ordertimeout.put_stock('F', 1000000)" \
	-c "SELECT ordertimeout.configure(grace => interval '0', precheck => 'never')" >/dev/null
q() { "${psql[@]}" -At "$db" -c "$1"; }
due() { # due GROUP SECONDS: 50 orders named GROUP-n, due SECONDS from now, 20 ms apart
	q "SELECT count(ordertimeout.create_order('$1-' || g, '[{\"sku\": \"F\", \"qty\": 1}]',
	        interval '$2 seconds' + g * interval '20 milliseconds')) FROM generate_series(1, 50) AS g" >/dev/null
}

port_http=$((20000 + RANDOM % 40000))
"$dir/ordertimeout" run --database-url "$db" --http "127.0.0.1:$port_http" --gateway-url http://127.0.0.1:9/ \
	--reconcile-every 0 >"$dir/sidecar.log" 2>&1 &
sidecar_pid=$!
up() { curl -fsS -o /dev/null "http://127.0.0.1:$port_http/console/"; }
wait_for "the sidecar's console (log: $dir/sidecar.log)" 30 up
all_cancelled() { [[ $(q "SELECT count(*) FROM ordertimeout.orders WHERE order_id LIKE '$1-%' AND status = 'CANCELLED'") == 50 ]]; }

due quiet 2
wait_for "the quiet orders' cancels" 30 all_cancelled quiet

python3 - "$port_http" 14 100 >"$dir/flood.out" <<'PY' &
import http.client, sys, threading, time
port, seconds, clients = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
stop = time.time() + seconds
counts, lock = {}, threading.Lock()
def client():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while time.time() < stop:
        try:
            c.request("GET", "/console/")
            r = c.getresponse()
            r.read()
            key = str(r.status)
        except Exception as e:
            key = type(e).__name__
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        with lock:
            counts[key] = counts.get(key, 0) + 1
threads = [threading.Thread(target=client) for _ in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
print(" ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
PY
flood_pid=$!
sleep 3 # the flood has been going for 3 s
due flood 3
wait "$flood_pid"
flood_pid=''
wait_for "the flood orders' cancels" 60 all_cancelled flood

echo "console-flood: sidecar of $rev; 100 clients reloading /console/ for 14 s"
echo "  console answers by status: $(cat "$dir/flood.out")"
q "SELECT format('  %-6s  cancel lag p50 %s ms, worst %s ms', split_part(order_id, '-', 1),
          round(1000 * extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY cancelled_at - cancel_at))),
          round(1000 * extract(epoch FROM max(cancelled_at - cancel_at))))
   FROM ordertimeout.orders GROUP BY split_part(order_id, '-', 1) ORDER BY 1 DESC"
