// Package restart restarts PostgreSQL under load: orders are created, paid
// and swept while the server is shut down fast, then crashed (immediate
// shutdown, recovery from the WAL), and the work must resume by itself with
// nothing lost and nothing done twice.
//
// DATABASE_URL gives no control over its server, so the test runs a private
// PostgreSQL cluster of its own (initdb, pg_ctl), as user postgres when run
// as root. It is skipped, saying why, where that is impossible, and in -short
// mode. PGBIN names the PostgreSQL binaries (default
// /usr/lib/postgresql/15/bin).
package restart
