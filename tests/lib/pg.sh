# shellcheck shell=bash
# Helpers shared by the scripts in tests/bin. Source this file; do not run it.
#
# Environment:
#   PGBIN         PostgreSQL binaries (default /usr/lib/postgresql/15/bin);
#                 psql and pg_dump fall back to the ones on PATH.
#   DATABASE_URL  postgres://user@host:port/db?params of a superuser, for the
#                 scripts that create throwaway databases.

PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PROG="$(basename "$0")"

# MIGRATE_VERSION is the golang-migrate CLI built into .cache/bin/migrate.
MIGRATE_VERSION=v4.20.1
MIGRATE="$ROOT/.cache/bin/migrate"

say() { printf '%s: %s\n' "$PROG" "$*"; }
die() { printf '%s: %s\n' "$PROG" "$*" >&2; exit 1; }
# wait_for WHAT SECONDS COMMAND...: polls COMMAND every 0.1 s until it
# succeeds; dies naming WHAT after SECONDS.
wait_for() {
	local what=$1 deadline=$((SECONDS + $2))
	shift 2
	until "$@"; do
		((SECONDS < deadline)) || die "waiting for $what: not reached"
		sleep 0.1
	done
}

# pgtool NAME prints the path of PostgreSQL client NAME, from PGBIN first.
pgtool() {
	if [[ -x "$PGBIN/$1" ]]; then
		printf '%s\n' "$PGBIN/$1"
	elif command -v "$1" >/dev/null 2>&1; then
		command -v "$1"
	else
		die "$1 not found in $PGBIN nor on PATH (run tests/bin/ensure-deps)"
	fi
}

# run_quiet CMD... runs CMD and shows its output only when it fails.
run_quiet() {
	local out
	if ! out="$("$@" 2>&1)"; then
		printf '%s\n' "$out" >&2
		return 1
	fi
}

require_database_url() {
	[[ -n "${DATABASE_URL:-}" ]] ||
		die "DATABASE_URL is not set (a superuser's postgres:// URL); or run me through tests/bin/withpg"
	[[ "$DATABASE_URL" =~ ^postgres(ql)?:// ]] ||
		die "DATABASE_URL must be a postgres:// or postgresql:// URL"
	PSQL="$(pgtool psql)"
}

# url_with_db URL NAME prints URL with its database replaced by NAME, keeping
# user, host, port and query parameters.
url_with_db() {
	local re='^(postgres(ql)?://[^/?#]*)(/[^?#]*)?(\?[^#]*)?$'
	[[ "$1" =~ $re ]] || die "cannot parse database URL: $1"
	printf '%s/%s%s\n' "${BASH_REMATCH[1]}" "$2" "${BASH_REMATCH[4]}"
}

# pgx5_url URL prints URL with the pgx5:// scheme golang-migrate's pgx v5
# driver answers to.
pgx5_url() {
	printf 'pgx5://%s\n' "${1#*://}"
}

# admin_sql SQL runs SQL on DATABASE_URL's database.
admin_sql() {
	"$PSQL" -X -q -v ON_ERROR_STOP=1 -d "$DATABASE_URL" -c "$1"
}

# THROWAWAY_DBS lists the databases create_throwaway_db made; drop_throwaway_dbs
# drops them (call it from an EXIT trap).
THROWAWAY_DBS=()

# create_throwaway_db PREFIX creates an empty database with a name unique to
# this run and sets DB to its name.
create_throwaway_db() {
	DB="${1}_$$_${RANDOM}${RANDOM}"
	THROWAWAY_DBS+=("$DB")
	admin_sql "CREATE DATABASE \"$DB\""
}

drop_throwaway_dbs() {
	local db
	for db in "${THROWAWAY_DBS[@]}"; do
		admin_sql "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 ||
			printf '%s: could not drop database %s\n' "$PROG" "$db" >&2
	done
	THROWAWAY_DBS=()
}

# ensure_migrate builds golang-migrate's CLI (with the pgx5 driver) into
# .cache/bin unless the right version is already there.
ensure_migrate() {
	if [[ -x "$MIGRATE" ]]; then
		# Without Go, trust the cached binary; with Go, check its version.
		if ! command -v go >/dev/null 2>&1 ||
			go version -m "$MIGRATE" 2>/dev/null | grep -q "golang-migrate/migrate/v4[[:space:]]*${MIGRATE_VERSION}"; then
			return 0
		fi
	fi
	command -v go >/dev/null 2>&1 || die "go not found: Go is needed to build the migrate CLI"
	say "building migrate $MIGRATE_VERSION into ${MIGRATE#"$ROOT"/}"
	mkdir -p "$(dirname "$MIGRATE")"
	GOBIN="$(dirname "$MIGRATE")" run_quiet go install -tags 'pgx5' \
		"github.com/golang-migrate/migrate/v4/cmd/migrate@${MIGRATE_VERSION}" ||
		die "could not build the migrate CLI"
}

# migrate_cli URL ARG... runs the migrate CLI on the migrations folder against
# the database at postgres:// URL, quietly unless it fails.
migrate_cli() {
	local url="$1"
	shift
	run_quiet "$MIGRATE" -path "$ROOT/migrations" -database "$(pgx5_url "$url")" "$@"
}

# sidecar_at REV NAME, after private_cluster and ensure_migrate: checks REV
# out in $dir/src (a git worktree: the caller's EXIT trap removes it), builds
# its sidecar into $dir/ordertimeout, creates database NAME on the private
# cluster and migrates it with REV's migrations, and sets db to its URL. For
# the scripts that measure one commit's sidecar (tests/bench/held-order.sh,
# tests/bench/console-flood.sh).
sidecar_at() {
	git worktree add --quiet --detach "$dir/src" "$1"
	(cd "$dir/src" && go build -o "$dir/ordertimeout" ./sidecar/cmd/ordertimeout)
	"$(pgtool psql)" -X -q -v ON_ERROR_STOP=1 "$url/postgres" -c "CREATE DATABASE $2"
	run_quiet "$MIGRATE" -path "$dir/src/migrations" -database "pgx5://postgres@127.0.0.1:$port/$2" up
	db="$url/$2?sslmode=disable"
}

# private_cluster NAME initdbs a throwaway cluster in a new temporary
# directory named after NAME and starts it on a random port of 127.0.0.1,
# for the scripts that load it, stop it and run postgres --single on its data
# directory (tests/bench/callgrind-*.sh). It sets dir (the directory; the
# cluster is $dir/data), port, url (postgres://postgres@127.0.0.1:port, no
# database) and as_pg (the prefix that runs a command as postgres when this
# script runs as root), and sets stop_cluster as the EXIT trap (a script
# with an EXIT trap of its own calls stop_cluster from it, last).
private_cluster() {
	as_pg=()
	if ((EUID == 0)); then
		as_pg=(runuser -u postgres --)
	fi
	dir="$(mktemp -d -t "$1.XXXXXX")"
	trap stop_cluster EXIT
	if ((EUID == 0)); then chown postgres: "$dir"; fi
	"${as_pg[@]}" "$PGBIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C >"$dir/initdb.log"
	port=$((20000 + RANDOM % 40000))
	"${as_pg[@]}" "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
		-o "-c port=$port -c listen_addresses=127.0.0.1 -c unix_socket_directories='$dir'" start >/dev/null
	url="postgres://postgres@127.0.0.1:$port"
}

# stop_cluster stops private_cluster's server and removes its directory.
stop_cluster() {
	"${as_pg[@]}" "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	rm -rf "$dir"
}
