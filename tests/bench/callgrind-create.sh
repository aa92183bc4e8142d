#!/usr/bin/env bash
# callgrind-create.sh: how many CPU instructions one create_order (and one
# create + begin_payment + confirm_payment) costs the database backend,
# before and after the last migration, next to the ZSet baseline's
# transactions. valgrind's callgrind counts the
# instructions of a single-user backend (postgres --single) running N
# statements; the difference between N = 1200 and N = 200, divided by 1000,
# is the cost of one order without the start-up. An instruction count does
# not move with the load of the machine, so two versions can be compared on
# a busy box, where the CPU seconds of tests/bench/profile.sh and `make
# bench` swing by 2x. It counts the backend only: not the client, not the
# WAL writer, not the fsync (the kernel's).
#
# Each order has two items of distinct SKUs (1..50 and 51..100, quantity 1
# to 3, the same pseudo-random sequence for every database) and a one-hour
# timeout. The ZSet transaction is the baseline's (BEGIN; order row; items;
# one conditional stock UPDATE per item; COMMIT), sent as plain statements:
# unlike the bench's prepared statements, they are parsed and planned each
# time, so its figure is an upper bound. Its payment is the baseline's
# begin (a conditional UPDATE) and confirm (the order's UPDATE, its items,
# one stock UPDATE per item).
#
# Usage (from the repository root): tests/bench/callgrind-create.sh [BASE]
#   BASE: the migration version to compare with (default: the last but one).
# Environment:
#   CALLGRIND_PATCH  a SQL file run on the head database after its migrations
#                    (CREATE OR REPLACE FUNCTION ..., ALTER TABLE ...): the
#                    cost of a change tried by hand, before it becomes a
#                    migration. The head lines then say "patched".
#   CALLGRIND_RUNS   which lines to measure, space-separated (default: all
#                    six): ot-base ot-head zset-head otpay-base otpay-head
#                    zsetpay-head. Each takes about a minute.
# Needs valgrind (apt-get install valgrind) and the migrate CLI (built into
# .cache/bin by tests/lib/pg.sh's ensure_migrate). Takes about 6 minutes.
set -euo pipefail
patch="${CALLGRIND_PATCH:-}"
if [[ -n $patch ]]; then
	[[ -f $patch && -r $patch ]] || { echo "callgrind-create.sh: CALLGRIND_PATCH=$patch is not a readable file" >&2; exit 2; }
	patch="$(realpath -- "$patch")"
fi
# shellcheck source=tests/lib/pg.sh
source "$(dirname "$0")/../lib/pg.sh"
runs="${CALLGRIND_RUNS:-ot-base ot-head zset-head otpay-base otpay-head zsetpay-head}"
for run in $runs; do
	case "$run" in
	ot-base | ot-head | zset-head | otpay-base | otpay-head | zsetpay-head) ;;
	*) die "CALLGRIND_RUNS: unknown line \"$run\" (ot-base ot-head zset-head otpay-base otpay-head zsetpay-head)" ;;
	esac
done
cd "$ROOT"
command -v valgrind >/dev/null 2>&1 || die "valgrind not found (apt-get install valgrind)"
ensure_migrate

last="$(find migrations -name '*.up.sql' | sed 's|.*/0*\([0-9]*\)_.*|\1|' | sort -n | tail -1)"
base="${1:-$((last - 1))}"
private_cluster callgrind-create
psql=("$(pgtool psql)" -X -q -v ON_ERROR_STOP=1)

zset_schema="$(sed -n '/^const zsetSchema = `/,/^`/p' tests/bench/zset.go | sed '1d;$d')"
for db in base head; do
	"${psql[@]}" "$url/postgres" -c "CREATE DATABASE $db"
	if [[ $db == base ]]; then
		run_quiet "$MIGRATE" -path migrations -database "pgx5://postgres@127.0.0.1:$port/$db" goto "$base"
	else
		run_quiet "$MIGRATE" -path migrations -database "pgx5://postgres@127.0.0.1:$port/$db" up
		if [[ -n $patch ]]; then
			"${psql[@]}" "$url/$db" -f "$patch" >/dev/null
		fi
	fi
	"${psql[@]}" "$url/$db" -c "SELECT ordertimeout.put_stock(format('sku-%s', lpad(n::text, 3, '0')), 1000000000) FROM generate_series(1, 100) AS n" >/dev/null
	"${psql[@]}" "$url/$db" -c "$zset_schema"
	"${psql[@]}" "$url/$db" -c "INSERT INTO zset.stock (sku, available) SELECT format('sku-%s', lpad(n::text, 3, '0')), 1000000000 FROM generate_series(1, 100) AS n"
done
"${as_pg[@]}" "$PGBIN/pg_ctl" -D "$dir/data" -w stop >/dev/null

# statements KIND N PREFIX: N orders as create_order calls or ZSet transactions.
statements() {
	awk -v kind="$1" -v n="$2" -v p="$3" 'BEGIN {
		srand(7)
		for (i = 0; i < n; i++) {
			a = 1 + int(rand() * 50); qa = 1 + int(rand() * 3); b = 51 + int(rand() * 50); qb = 1 + int(rand() * 3)
			id = p i
			if (kind ~ /^ot/) {
				printf "SELECT FROM ordertimeout.create_order(\x27%s\x27, \x27[{\"sku\":\"sku-%03d\",\"qty\":%d},{\"sku\":\"sku-%03d\",\"qty\":%d}]\x27, interval \x271 hour\x27);\n", id, a, qa, b, qb
				if (kind == "otpay") {
					printf "SELECT FROM ordertimeout.begin_payment(\x27%s\x27, \x27pay-%s\x27);\n", id, id
					printf "SELECT ordertimeout.confirm_payment(\x27%s\x27, \x27pay-%s\x27);\n", id, id
				}
			} else {
				print "BEGIN;"
				printf "INSERT INTO zset.orders (order_id, status, expire_at) VALUES (\x27%s\x27, \x27PENDING\x27, clock_timestamp() + interval \x271 hour\x27) RETURNING expire_at;\n", id
				printf "INSERT INTO zset.order_items (order_id, sku, qty) VALUES (\x27%s\x27, \x27sku-%03d\x27, %d), (\x27%s\x27, \x27sku-%03d\x27, %d);\n", id, a, qa, id, b, qb
				printf "UPDATE zset.stock SET available = available - %d, reserved = reserved + %d WHERE sku = \x27sku-%03d\x27 AND available >= %d;\n", qa, qa, a, qa
				printf "UPDATE zset.stock SET available = available - %d, reserved = reserved + %d WHERE sku = \x27sku-%03d\x27 AND available >= %d;\n", qb, qb, b, qb
				print "COMMIT;"
				if (kind == "zsetpay") {
					printf "UPDATE zset.orders SET status = \x27PAYING\x27, payment_id = \x27pay-%s\x27 WHERE order_id = \x27%s\x27 AND status = \x27PENDING\x27;\n", id, id
					print "BEGIN;"
					printf "UPDATE zset.orders SET status = \x27PAID\x27, paid_at = clock_timestamp() WHERE order_id = \x27%s\x27 AND status = \x27PAYING\x27 AND payment_id = \x27pay-%s\x27;\n", id, id
					printf "SELECT sku, qty FROM zset.order_items WHERE order_id = \x27%s\x27 ORDER BY sku;\n", id
					printf "UPDATE zset.stock SET reserved = reserved - %d, sold = sold + %d WHERE sku = \x27sku-%03d\x27;\n", qa, qa, a
					printf "UPDATE zset.stock SET reserved = reserved - %d, sold = sold + %d WHERE sku = \x27sku-%03d\x27;\n", qb, qb, b
					print "COMMIT;"
				}
			}
		}
	}'
}

# instructions DB FILE prints callgrind's instruction count of a
# single-user backend of database DB running the statements of FILE.
instructions() {
	"${as_pg[@]}" valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
		"$PGBIN/postgres" --single -D "$dir/data" -c synchronous_commit=off "$1" <"$2" >/dev/null 2>"$dir/valgrind.log"
	sed -n 's/^summary: //p' "$dir/cg.out"
}

for run in $runs; do
	kind="${run%-*}" db="${run#*-}"
	statements "$kind" 200 "${kind}s" >"$dir/small.sql"
	statements "$kind" 1200 "${kind}l" >"$dir/large.sql"
	chmod a+r "$dir"/*.sql
	small="$(instructions "$db" "$dir/small.sql")"
	large="$(instructions "$db" "$dir/large.sql")"
	case "$kind $db" in
	"ot base") label="create_order, migration $base" ;;
	"ot head") label="create_order, migration $last${patch:+, patched}" ;;
	"zset head") label="ZSet create transaction" ;;
	"otpay base") label="create + begin + confirm, migration $base" ;;
	"otpay head") label="create + begin + confirm, migration $last${patch:+, patched}" ;;
	*) label="ZSet create + begin + confirm" ;;
	esac
	printf '%-52s %9d instructions per order\n' "$label" $(((large - small) / 1000))
done
