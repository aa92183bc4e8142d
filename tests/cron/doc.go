// Package cron tests the no-sidecar mode: ordertimeout.run_sweeper scheduled
// every minute by the pg_cron Debian ships (postgresql-15-cron, pg_cron 1.4,
// which has no second schedules), exactly as the README's section "Without
// the sidecar (pg_cron)" says, on a private cluster started with
// shared_preload_libraries = pg_cron; and two overlapping runs of
// run_sweeper, which must never cancel an order twice.
//
// TestPgCron waits for the first minute boundary after it schedules the job
// (at most a minute); it needs the PostgreSQL 15 binaries and pg_cron
// (tests/bin/ensure-deps installs both). The other tests need DATABASE_URL
// (run them through tests/bin/withpg). They wait on database conditions with
// deadlines, never on sleeps.
package cron
