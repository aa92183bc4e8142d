#!/usr/bin/env bash
# held-order.sh: what one due order that another transaction holds for long
# costs a sidecar that has nothing else to do. A session takes the order's
# row (FOR NO KEY UPDATE, as a payment's transaction left open would) and
# sleeps in its transaction; the sidecar built from REV runs against the
# database. After a 5-second warm-up the script counts, over 10 seconds, the
# sidecar's sweeps (ordertimeout_sweep_batches_total), the CPU time of every
# process of the private PostgreSQL server (/proc, the pids of
# pg_stat_activity) and of the sidecar. Then it lets the order go and waits
# for its cancel.
#
# Usage (from the repository root): tests/bench/held-order.sh [REV]
#   REV: the commit whose sidecar and migrations to run (default HEAD);
#   e.g. 13f733d for the sidecar before migration 000050.
# Takes about 30 seconds plus the build. Needs the migrate CLI (built into
# .cache/bin by ensure_migrate) and curl.
set -euo pipefail
# shellcheck source=tests/lib/pg.sh
source "$(dirname "$0")/../lib/pg.sh"
cd "$ROOT"
command -v curl >/dev/null 2>&1 || die "curl not found"
rev="${1:-HEAD}"
git rev-parse --verify --quiet "$rev^{commit}" >/dev/null || die "unknown revision: $rev"
ensure_migrate

private_cluster held-order
holder_pid='' sidecar_pid=''
cleanup() {
	[[ -n $sidecar_pid ]] && kill "$sidecar_pid" 2>/dev/null && wait "$sidecar_pid" 2>/dev/null
	[[ -n $holder_pid ]] && kill "$holder_pid" 2>/dev/null # its backend ends with the server
	git worktree remove --force "$dir/src" >/dev/null 2>&1 || true
	stop_cluster
}
trap cleanup EXIT
if ((EUID == 0)); then chmod 777 "$dir"; fi

sidecar_at "$rev" held
psql=("$(pgtool psql)" -X -q -v ON_ERROR_STOP=1)
"${psql[@]}" "$db" -c "SELECT ordertimeout.put_stock('A', 100)" \
	-c "SELECT ordertimeout.configure(grace => interval '0')" \
	-c "SELECT ordertimeout.create_order('held', '[{\"sku\": \"A\", \"qty\": 1}]', interval '1 millisecond')" >/dev/null

# The holder: the order's row, in a transaction that sleeps.
"${psql[@]}" "$db" -c "BEGIN" \
	-c "SELECT 1 FROM ordertimeout.orders WHERE order_id = 'held' FOR NO KEY UPDATE" \
	-c "SELECT pg_sleep(3600)" >/dev/null 2>&1 &
holder_pid=$!
q() { "${psql[@]}" -At "$db" -c "$1"; }
held_now() { [[ $(q "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(3600)'") == 1 ]]; }
wait_for "the holder to take the order's row" 10 held_now

http="127.0.0.1:$((20000 + RANDOM % 40000))"
"$dir/ordertimeout" run --database-url "$db" --http "$http" --gateway-url http://127.0.0.1:9/ >"$dir/sidecar.log" 2>&1 &
sidecar_pid=$!
batches() { curl -fsS "http://$http/metrics" 2>/dev/null | awk '$1 == "ordertimeout_sweep_batches_total" {print $2}'; }
swept() { [[ -n $(batches) ]]; }
wait_for "the sidecar's first sweep (log: $dir/sidecar.log)" 30 swept
# CPU ticks (utime + stime) of the server's processes and of the sidecar.
ticks() {
	local pids
	pids="$(q "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity") $sidecar_pid"
	for p in $pids; do
		awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$p/stat" 2>/dev/null || true
	done | awk '{s += $1} END {print s + 0}'
}
sidecar_ticks() { awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$sidecar_pid/stat"; }
sleep 5 # warm-up: the measured window starts 5 s after the first sweep
b0=$(batches) t0=$(ticks) s0=$(sidecar_ticks) w0=$(date +%s.%N)
sleep 10 # the measured window
b1=$(batches) t1=$(ticks) s1=$(sidecar_ticks) w1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
awk -v b="$((b1 - b0))" -v t="$((t1 - t0))" -v s="$((s1 - s0))" -v w0="$w0" -v w1="$w1" -v hz="$hz" -v rev="$rev" 'BEGIN {
	w = w1 - w0
	printf "held-order: sidecar of %s, one due order held, %.1f s measured\n", rev, w
	printf "  sweeps per second:        %.1f\n", b / w
	printf "  CPU, server + sidecar:    %.3f cores\n", t / hz / w
	printf "  CPU, sidecar alone:       %.3f cores\n", s / hz / w
}'
[[ $(q "SELECT status FROM ordertimeout.orders WHERE order_id = 'held'") == PENDING ]] || die "the held order was not PENDING"
# Let go: end the holder's backend (its client's exit would not stop the
# sleep).
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(3600)'" >/dev/null
wait "$holder_pid" 2>/dev/null || true
holder_pid=''
cancelled() { [[ $(q "SELECT status FROM ordertimeout.orders WHERE order_id = 'held'") == CANCELLED ]]; }
start=$SECONDS
wait_for "the order's cancel once let go" 30 cancelled
echo "  let go, cancelled within: $((SECONDS - start + 1)) s"
