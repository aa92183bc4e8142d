#!/usr/bin/env bash
# create-price-list.sh: what each part of create_order costs the database
# backend, in instructions per order (tests/bench/callgrind-create.sh), by
# taking it away on a copy: River's CHECK constraints on its job table, our
# CHECK constraints on orders, order_items and stock, the timer row (River's
# job row, with its CHECKs and indexes), the PENDING event row, the two
# foreign keys, and all of them at once; next to the ZSet baseline's create
# transaction. Every patch in tests/bench/price-list/ breaks something the
# design keeps (the timer in the order's transaction, the audit trail, the
# invariants as constraints): the list says what the design's parts cost,
# not a change to make. Instruction counts do not move with the machine's
# load. Takes about 8 minutes.
#
# Usage (from the repository root): tests/bench/create-price-list.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="$(mktemp -d -t create-price-list.XXXXXX)"
trap 'rm -rf "$dir"' EXIT
CALLGRIND_RUNS="ot-head zset-head" tests/bench/callgrind-create.sh
for patch in tests/bench/price-list/[0-9]-*.sql; do
	printf -- '-- without %s\n' "$(basename "$patch" .sql | cut -d- -f2-)"
	CALLGRIND_PATCH="$patch" CALLGRIND_RUNS="ot-head" tests/bench/callgrind-create.sh
done
cat tests/bench/price-list/[0-9]-*.sql >"$dir/all.sql"
printf -- '-- without all of them\n'
CALLGRIND_PATCH="$dir/all.sql" CALLGRIND_RUNS="ot-head" tests/bench/callgrind-create.sh
