#!/usr/bin/env bash
# callgrind-drain.sh: how many CPU instructions a full sweep_due batch of the
# drain costs the database backend, and where they go. valgrind's callgrind
# counts the instructions of a single-user backend (postgres --single) that
# calls sweep_due(1000) once, then three times, each time on a fresh copy of
# the same data directory holding 4,000 due orders (2 items each, over the
# workload's 100 SKUs, created through create_order, then VACUUM ANALYZE);
# the difference, halved, is one batch of 1,000 cancels without the
# start-up. Instruction counts do not move with the machine's load. The
# three-call profile is kept for callgrind_annotate. Takes about 2 minutes.
#
# Usage (from the repository root): tests/bench/callgrind-drain.sh [OUT]
#   OUT: where to copy the three-call profile (default .cache/callgrind-drain.out).
# Environment:
#   CALLGRIND_PATCH  a SQL file run on the database after its migrations, as in
#                    callgrind-create.sh: the cost of a change tried by hand.
# Needs valgrind and the migrate CLI (built into .cache/bin by ensure_migrate).
set -euo pipefail
patch="${CALLGRIND_PATCH:-}"
if [[ -n $patch ]]; then
	[[ -f $patch && -r $patch ]] || { echo "callgrind-drain.sh: CALLGRIND_PATCH=$patch is not a readable file" >&2; exit 2; }
	patch="$(realpath -- "$patch")"
fi
# shellcheck source=tests/lib/pg.sh
source "$(dirname "$0")/../lib/pg.sh"
cd "$ROOT"
command -v valgrind >/dev/null 2>&1 || die "valgrind not found (apt-get install valgrind)"
ensure_migrate
out="${1:-$ROOT/.cache/callgrind-drain.out}"
mkdir -p "$(dirname "$out")"
private_cluster callgrind-drain
psql=("$(pgtool psql)" -X -q -v ON_ERROR_STOP=1)
"${psql[@]}" "$url/postgres" -c "CREATE DATABASE drain"
run_quiet "$MIGRATE" -path migrations -database "pgx5://postgres@127.0.0.1:$port/drain" up
if [[ -n $patch ]]; then
	"${psql[@]}" "$url/drain" -f "$patch" >/dev/null
fi
"${psql[@]}" "$url/drain" -c "SELECT ordertimeout.put_stock(format('sku-%s', lpad(n::text, 3, '0')), 1000000000) FROM generate_series(1, 100) AS n" >/dev/null
# No grace: an order is due as soon as its 1 ms timeout has passed.
"${psql[@]}" "$url/drain" -c "SELECT ordertimeout.configure(grace => interval '0')" >/dev/null
"${psql[@]}" "$url/drain" -c "SELECT count(ordertimeout.create_order('o-' || n,
	jsonb_build_array(jsonb_build_object('sku', format('sku-%s', lpad((1 + n % 50)::text, 3, '0')), 'qty', 1),
	                  jsonb_build_object('sku', format('sku-%s', lpad((51 + n % 50)::text, 3, '0')), 'qty', 2)),
	interval '1 millisecond')) FROM generate_series(1, 4000) AS n" >/dev/null
"${psql[@]}" "$url/drain" -c "SELECT pg_sleep(0.1)" -c "VACUUM ANALYZE" >/dev/null
"${as_pg[@]}" "$PGBIN/pg_ctl" -D "$dir/data" -w stop >/dev/null

declare -A total
for n in 1 3; do
	for ((i = 0; i < n; i++)); do echo "SELECT * FROM ordertimeout.sweep_due(1000);"; done >"$dir/sweeps.sql"
	rm -rf "$dir/copy"
	cp -a "$dir/data" "$dir/copy"
	chmod a+r "$dir/sweeps.sql"
	"${as_pg[@]}" valgrind --tool=callgrind --callgrind-out-file="$dir/cg$n.out" \
		"$PGBIN/postgres" --single -D "$dir/copy" -c synchronous_commit=off drain <"$dir/sweeps.sql" >"$dir/out$n.txt" 2>"$dir/valgrind$n.log"
	cancelled="$(grep -c 'cancelled = "1000"' "$dir/out$n.txt" || true)"
	((cancelled == n)) || die "expected $n full batches of 1,000 cancels, got $cancelled: $(cat "$dir/out$n.txt")"
	total[$n]="$(sed -n 's/^summary: //p' "$dir/cg$n.out")"
done
cp "$dir/cg3.out" "$out"
printf 'sweep_due(1000), a full batch of the drain%s: %d instructions per batch, %d per cancelled order\n' \
	"${patch:+, patched}" $(((total[3] - total[1]) / 2)) $(((total[3] - total[1]) / 2000))
printf 'profile of three batches: %s (callgrind_annotate --inclusive=yes %s)\n' "$out" "$out"
