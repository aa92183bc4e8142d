package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/migrations"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecar"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
	"github.com/ordertimeout/ordertimeout/sidecar/timer"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// build compiles the binary into a temporary directory of the test.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ordertimeout")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// start runs `bin run` against databaseURL with the given extra flags; the
// process is killed when the test ends if still running, and its output
// logged if the test failed.
func start(t *testing.T, bin, databaseURL, gatewayURL, name string, flags ...string) *sidecarproc.Process {
	t.Helper()
	args := append([]string{"run",
		"--name", name,
		"--gateway-url", gatewayURL,
		"--http", "-",
		"--max-sleep", "200ms",
		"--fetch-poll-interval", "20ms",
		"--listen-reconnect", "200ms",
		// These tests count the jobs in flight against --max-workers; the
		// periodic reconciliation (tested in package sidecar) would take a
		// worker slot.
		"--reconcile-every", "0",
	}, flags...)
	out := &sidecarproc.Buffer{}
	p, err := sidecarproc.Start(sidecarproc.Command{Name: "sidecar " + name, Bin: bin, Args: args,
		Env: []string{"DATABASE_URL=" + databaseURL}, Output: out})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = p.Kill()
		if t.Failed() {
			t.Logf("output of sidecar %s:\n%s", name, out.String())
		}
	})
	return p
}

func count(t *testing.T, db *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	return sidecartest.Int(t, db, sql, args...)
}

// kill -9 in the middle of a drain loses nothing and cancels nothing twice:
// a restarted sidecar finishes the work, and every order is cancelled exactly
// once with its reservation released exactly once.
func TestKillDuringDrain(t *testing.T) {
	t.Parallel()
	const orders = 10000
	bin := build(t)
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	_, gw := sidecartest.Fake(t, nil)
	sidecartest.CreateMany(t, db, "o", orders, 10, time.Second)
	sidecartest.Eventually(t, time.Minute, "every order due", func() (bool, error) {
		return count(t, db, "SELECT due_timers FROM ordertimeout.sweep_stats") == orders, nil
	})

	// Small batches, one session: the drain takes a while.
	first := start(t, bin, url, gw, "k1", "--sweep-batch", "10", "--sweep-sessions", "1")
	sidecartest.Eventually(t, 30*time.Second, "the drain to be under way", func() (bool, error) {
		return count(t, db, "SELECT count(*) FROM ordertimeout.orders WHERE status = 'CANCELLED'") >= 500, nil
	})
	require.NoError(t, first.Kill())
	// A sweep the dead process had sent may still commit: wait for its
	// sessions to end before counting.
	sidecartest.Eventually(t, 30*time.Second, "the killed sidecar's sessions to end", func() (bool, error) {
		return count(t, db, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", sidecar.ApplicationName("k1")) == 0, nil
	})
	atKill := count(t, db, "SELECT count(*) FROM ordertimeout.orders WHERE status = 'CANCELLED'")
	require.Less(t, atKill, int64(orders), "the drain must be interrupted")
	t.Logf("killed after %d of %d cancels", atKill, orders)

	start(t, bin, url, gw, "k2")
	sidecartest.Eventually(t, time.Minute, "every order cancelled", func() (bool, error) {
		return count(t, db, "SELECT count(*) FROM ordertimeout.orders WHERE status = 'CANCELLED'") == orders, nil
	})

	require.EqualValues(t, orders, count(t, db, "SELECT count(*) FROM ordertimeout.events WHERE to_status = 'CANCELLED'"))
	require.EqualValues(t, orders, count(t, db, "SELECT count(DISTINCT order_id) FROM ordertimeout.events WHERE to_status = 'CANCELLED'"))
	require.EqualValues(t, orders, count(t, db, "SELECT count(*) FROM ordertimeout.releases"))
	require.EqualValues(t, orders, count(t, db, "SELECT count(DISTINCT order_id) FROM ordertimeout.releases"))
	require.EqualValues(t, 0, count(t, db, "SELECT sum(reserved) FROM ordertimeout.stock WHERE sku LIKE 'S%'"))
	require.EqualValues(t, 10*orders, count(t, db, "SELECT sum(available) FROM ordertimeout.stock WHERE sku LIKE 'S%'"))
	require.EqualValues(t, atKill, count(t, db, "SELECT count(*) FROM ordertimeout.events WHERE to_status = 'CANCELLED' AND actor = 'sidecar:k1'"))
	require.EqualValues(t, orders-atKill, count(t, db, "SELECT count(*) FROM ordertimeout.events WHERE to_status = 'CANCELLED' AND actor = 'sidecar:k2'"))
	require.EqualValues(t, 0, count(t, db, "SELECT count(*) FROM river_job WHERE queue = $1", timer.Name))
}

// SIGTERM: the sidecar exits 0 within a few seconds. Jobs still running
// after --shutdown-timeout are handed back (not lost, not discarded); jobs
// that finish in time finish. A restarted sidecar completes the work.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	const orders = 20
	bin := build(t)
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	sidecartest.Exec(t, db, "SELECT ordertimeout.configure(precheck => 'always')")
	fake, gw := sidecartest.Fake(t, nil)
	require.NoError(t, fake.SetGateway(fakegateway.Behaviour{Behaviour: fakegateway.Slow, DelayMS: 30000}))
	sidecartest.CreateMany(t, db, "g", orders, 2, 100*time.Millisecond)
	// The gateway says each payment failed (a "none" would be asked about
	// again before a cancel: worker.NoneAsks).
	for i := 1; i <= orders; i++ {
		require.NoError(t, fake.Set(t.Context(), fmt.Sprintf("g%d", i), fakegateway.Behaviour{Behaviour: fakegateway.Decline, PaymentID: fmt.Sprintf("p%d", i)}))
	}

	running := func() int64 {
		return count(t, db, "SELECT count(*) FROM river_job WHERE kind = 'ordertimeout_precancel_check' AND state = 'running'")
	}

	// 1. Jobs stuck on a slow gateway are cancelled after the shutdown
	// timeout and handed back.
	p := start(t, bin, url, gw, "g1", "--shutdown-timeout", "1s", "--gateway-timeout", "60s", "--max-workers", "5")
	sidecartest.Eventually(t, 30*time.Second, "checks in flight", func() (bool, error) { return running() == 5, nil })
	begin := time.Now()
	require.NoError(t, p.Stop(10*time.Second), "SIGTERM: exit code 0 within 10 s")
	require.Less(t, time.Since(begin), 5*time.Second)
	require.Zero(t, running(), "no job left running")
	require.EqualValues(t, orders, count(t, db, `SELECT count(*) FROM river_job
	   WHERE kind = 'ordertimeout_precancel_check' AND state = 'available'`), "every check handed back")
	require.EqualValues(t, 5, count(t, db, `SELECT count(*) FROM river_job
	   WHERE kind = 'ordertimeout_precancel_check' AND (metadata->>'snoozes')::int = 1 AND attempt = 0`),
		"the interrupted checks snoozed without using up an attempt")
	require.EqualValues(t, orders, count(t, db, "SELECT count(*) FROM ordertimeout.orders WHERE status = 'PENDING'"))

	// 2. Jobs that finish within the shutdown timeout finish.
	require.NoError(t, fake.SetGateway(fakegateway.Behaviour{Behaviour: fakegateway.Slow, DelayMS: 700}))
	p = start(t, bin, url, gw, "g2", "--shutdown-timeout", "10s", "--max-workers", "5")
	sidecartest.Eventually(t, 30*time.Second, "checks in flight", func() (bool, error) { return running() >= 1, nil })
	begin = time.Now()
	require.NoError(t, p.Stop(10*time.Second), "SIGTERM: exit code 0 within 10 s")
	require.Less(t, time.Since(begin), 5*time.Second)
	require.Zero(t, running(), "no job left running")
	require.Positive(t, count(t, db, "SELECT count(*) FROM ordertimeout.orders WHERE status = 'CANCELLED'"))
	require.Zero(t, count(t, db, "SELECT count(*) FROM river_job WHERE state = 'discarded'"))

	// 3. A restart finishes the work: every order cancelled, exactly once.
	require.NoError(t, fake.SetGateway(fakegateway.Behaviour{Behaviour: fakegateway.Normal}))
	start(t, bin, url, gw, "g3")
	sidecartest.Eventually(t, 30*time.Second, "every order cancelled", func() (bool, error) {
		return count(t, db, "SELECT count(*) FROM ordertimeout.orders WHERE status = 'CANCELLED'") == orders, nil
	})
	require.EqualValues(t, orders, count(t, db, "SELECT count(DISTINCT order_id) FROM ordertimeout.events WHERE to_status = 'CANCELLED'"))
	require.EqualValues(t, orders, count(t, db, "SELECT count(*) FROM ordertimeout.events WHERE to_status = 'CANCELLED'"))
}

// The subcommands other than run, in process.
func TestSubcommands(t *testing.T) { // not parallel: it sets the environment
	ctx := t.Context()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "A1", time.Hour, "")

	require.NoError(t, realMain(ctx, []string{"migrate", "version", "--database-url", url}))
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	require.Error(t, realMain(ctx, []string{"migrate", "down", "--database-url", url}), "down without a count or --all")
	require.NoError(t, realMain(ctx, []string{"status", "--database-url", url, "--window", "5m"}))
	require.NoError(t, realMain(ctx, []string{"pause", "--database-url", url, "--actor", "ops:test"}))
	var paused bool
	var by string
	require.NoError(t, db.QueryRow(ctx, "SELECT paused, paused_by FROM ordertimeout.settings").Scan(&paused, &by))
	require.True(t, paused)
	require.Equal(t, "ops:test", by)
	require.NoError(t, realMain(ctx, []string{"status", "--database-url", url}))
	require.ErrorContains(t, realMain(ctx, []string{"pause", "--database-url", url, "--actor", "bad\nactor"}), sqlstate.InvalidActor)
	require.NoError(t, realMain(ctx, []string{"resume", "--database-url", url}))
	require.NoError(t, db.QueryRow(ctx, "SELECT paused FROM ordertimeout.settings").Scan(&paused))
	require.False(t, paused)
	require.ErrorContains(t, realMain(ctx, []string{"run", "--database-url", url}), "gateway URL is required")
	// The Stripe key is read from the environment variable --stripe-key-env
	// names, never from a flag.
	t.Setenv("OT_TEST_NO_STRIPE_KEY", "")
	require.ErrorContains(t, realMain(ctx, []string{"run", "--database-url", url, "--gateway", "stripe", "--stripe-key-env", "OT_TEST_NO_STRIPE_KEY"}),
		"needs Stripe's secret API key in the environment")
	require.ErrorContains(t, realMain(ctx, []string{"run", "--database-url", url, "--gateway", "paypal"}), "gateway must be http or stripe")
	require.ErrorContains(t, realMain(ctx, []string{"run", "--database-url", url, "--gateway-url", "http://127.0.0.1:1", "--gateway-rate", "-1"}),
		"must not be negative")
	require.ErrorContains(t, realMain(ctx, []string{"nonsense"}), "unknown subcommand")
	for _, cmd := range []string{"run", "status", "pause", "resume", "reconcile"} {
		require.ErrorIs(t, realMain(ctx, []string{cmd, "--help"}), flag.ErrHelp)
	}
	t.Setenv("ORDERTIMEOUT_SWEEP_BATCH", "not a number")
	require.ErrorContains(t, realMain(ctx, []string{"run"}), "ORDERTIMEOUT_SWEEP_BATCH")
	// migrate down --all drops every table: a variable left in the
	// environment must not give it.
	t.Setenv("ORDERTIMEOUT_ALL", "true")
	require.ErrorContains(t, realMain(ctx, []string{"migrate", "down", "--database-url", url}), "give a number of migrations, or --all")
	require.NoError(t, db.QueryRow(ctx, "SELECT paused FROM ordertimeout.settings").Scan(&paused), "nothing dropped")
}

// status --window of zero or less is refused, naming the flag: it printed
// a report of cancel lags over no time at all.
func TestStatusRefusesAnEmptyWindow(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	for _, w := range []string{"-1h", "0s"} {
		require.ErrorContains(t, realMain(t.Context(), []string{"status", "--database-url", url, "--window", w}), "(--window)", w)
	}
	require.NoError(t, realMain(t.Context(), []string{"status", "--database-url", url, "--window", "1ns"}))
}

// migrate down N rolls back exactly N migrations and up brings them back;
// down --all leaves nothing of ordertimeout or River.
// migrationVersions returns the latest migration's version and how many of
// the migrations are ordertimeout's (River's versions are 1 to 8; ours start
// at 9).
func migrationVersions(t *testing.T) (latest, ours int) {
	t.Helper()
	ups, err := fs.Glob(migrations.FS, "*.up.sql")
	require.NoError(t, err)
	for _, name := range ups {
		v, err := strconv.Atoi(name[:6])
		require.NoError(t, err, name)
		latest = max(latest, v)
		if v >= 9 {
			ours++
		}
	}
	return latest, ours
}

// databaseAt returns a test database migrated down to version (from the
// latest, so that the down migrations run too), with sidecartest's stock and
// settings, and its URL for realMain's migrate.
func databaseAt(t *testing.T, version int) (*pgxpool.Pool, string) {
	t.Helper()
	db, url := migratedDownTo(t, version)
	sidecartest.Setup(t, db)
	return db, url
}

// migratedDownTo is databaseAt without sidecartest's setup, which needs the
// ordertimeout schema: also for River's versions (before 000009), whose
// downs drop data (--drop-data).
func migratedDownTo(t *testing.T, version int) (*pgxpool.Pool, string) {
	t.Helper()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	latest, _ := migrationVersions(t)
	require.Greater(t, latest, version)
	require.NoError(t, realMain(t.Context(), []string{"migrate", "up", "--database-url", url}))
	require.NoError(t, realMain(t.Context(), []string{"migrate", "down", strconv.Itoa(latest - version), "--drop-data", "--database-url", url}))
	db.Reset()
	return db, url
}

func TestMigrateDownAndUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	exists := func(name string) bool {
		var ok bool
		require.NoError(t, db.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&ok))
		return ok
	}
	version := func() int {
		var v int
		require.NoError(t, db.QueryRow(ctx, "SELECT version FROM schema_migrations").Scan(&v))
		return v
	}
	latest, ours := migrationVersions(t)
	hasColumn := func(table, column string) bool {
		var ok bool
		require.NoError(t, db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
			WHERE table_schema = 'ordertimeout' AND table_name = $1 AND column_name = $2)`, table, column).Scan(&ok))
		return ok
	}
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	require.Equal(t, latest, version())

	// Down to 000009 and up again over data: a late payment recorded under
	// 000009 (no currency, no conflict state) gets both on the way up.
	require.NoError(t, realMain(ctx, []string{"migrate", "down", strconv.Itoa(latest - 9), "--database-url", url}))
	require.Equal(t, 9, version())
	require.False(t, hasColumn("conflicts", "state"), "down to 9 undoes 000010")
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "before-10", time.Hour, `{"amount": 5, "currency": "EUR"}`)
	sidecartest.Exec(t, db, "SELECT ordertimeout.cancel_order('before-10')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('before-10', 'p-before-10', 5)")
	// 000009 accepted NaN: 000010 refuses to run until a person fixes it.
	sidecartest.CreateOrder(t, db, "nan-10", time.Hour, "")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('nan-10', 'p-nan-10', 'NaN')")
	require.ErrorContains(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}), "payment p-nan-10")
	require.Equal(t, 9, version(), "refused before golang-migrate started: not dirty")
	sidecartest.Exec(t, db, "UPDATE ordertimeout.payments SET amount = NULL WHERE payment_id = 'p-nan-10'")
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	require.Equal(t, latest, version())
	db.Reset()
	var state, currency string
	require.NoError(t, db.QueryRow(ctx, "SELECT state, currency FROM ordertimeout.conflicts WHERE payment_id = 'p-before-10'").Scan(&state, &currency))
	require.Equal(t, []string{"open", "EUR"}, []string{state, currency})

	// 000020 changes column types under the views that read them: a
	// materialized view over one makes it refuse before golang-migrate
	// starts, naming it; a view of a shop's own built on ours goes across
	// with its options and column comment.
	require.NoError(t, realMain(ctx, []string{"migrate", "down", strconv.Itoa(latest - 19), "--database-url", url}))
	require.Equal(t, 19, version())
	sidecartest.Exec(t, db, "CREATE MATERIALIZED VIEW public.counts_mv AS SELECT * FROM ordertimeout.order_counts")
	sidecartest.Exec(t, db, "CREATE VIEW public.lag_view WITH (security_barrier) AS SELECT * FROM ordertimeout.cancel_lag")
	sidecartest.Exec(t, db, "COMMENT ON COLUMN public.lag_view.cause IS 'why it was cancelled'")
	require.ErrorContains(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}), "materialized view counts_mv")
	require.Equal(t, 19, version(), "refused before golang-migrate started: not dirty")
	sidecartest.Exec(t, db, "DROP MATERIALIZED VIEW public.counts_mv")
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	require.Equal(t, latest, version())
	db.Reset()
	var options []string
	var comment, causeType string
	require.NoError(t, db.QueryRow(ctx, `
		SELECT c.reloptions, col_description(c.oid, a.attnum), format_type(a.atttypid, a.atttypmod)
		FROM pg_class AS c JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attname = 'cause'
		WHERE c.oid = 'public.lag_view'::regclass`).Scan(&options, &comment, &causeType))
	require.Equal(t, []string{"security_barrier=true"}, options)
	require.Equal(t, "why it was cancelled", comment)
	require.Equal(t, "ordertimeout.event_cause", causeType)
	sidecartest.Exec(t, db, "DROP VIEW public.lag_view")

	// 000021 forgets the "0 rows" statistics 000020's ANALYZE leaves on
	// empty tables (the plans cached while the tables are small would scan
	// them), and analyzes a table whose statistics say 0 rows but which has
	// rows; it keeps every row.
	statsOf := func() map[string]float64 {
		rows, err := db.Query(ctx, `SELECT c.relname, c.reltuples FROM pg_class AS c
			WHERE c.relnamespace = 'ordertimeout'::regnamespace
			  AND c.relname IN ('orders', 'order_items', 'payments', 'conflicts', 'events', 'stock')`)
		require.NoError(t, err)
		stats := map[string]float64{}
		for rows.Next() {
			var name string
			var tuples float64
			require.NoError(t, rows.Scan(&name, &tuples))
			stats[name] = tuples
		}
		require.NoError(t, rows.Err())
		return stats
	}
	require.NoError(t, realMain(ctx, []string{"migrate", "down", strconv.Itoa(latest - 20), "--database-url", url}))
	require.Equal(t, 20, version())
	sidecartest.Exec(t, db, "DELETE FROM ordertimeout.events")
	sidecartest.Exec(t, db, "ANALYZE ordertimeout.events, ordertimeout.stock, ordertimeout.orders")
	sidecartest.Exec(t, db, "INSERT INTO ordertimeout.events (order_id, to_status, cause, actor, at) VALUES ('after-analyze', 'PENDING', 'requested', 'test', now())")
	require.Equal(t, 0.0, statsOf()["events"], "analyzed while empty")
	var orders, stock int
	require.NoError(t, db.QueryRow(ctx, "SELECT (SELECT count(*) FROM ordertimeout.orders), (SELECT count(*) FROM ordertimeout.stock)").Scan(&orders, &stock))
	require.Positive(t, orders)
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	require.Equal(t, latest, version())
	stats := statsOf()
	require.Equal(t, 1.0, stats["events"], "analyzed again: it has a row")
	require.Equal(t, float64(orders), stats["orders"], "real statistics are kept")
	var ordersAfter, stockAfter, eventsAfter int
	require.NoError(t, db.QueryRow(ctx, "SELECT (SELECT count(*) FROM ordertimeout.orders), (SELECT count(*) FROM ordertimeout.stock), (SELECT count(*) FROM ordertimeout.events)").Scan(&ordersAfter, &stockAfter, &eventsAfter))
	require.Equal(t, []int{orders, stock, 1}, []int{ordersAfter, stockAfter, eventsAfter}, "no row lost")

	// Orders are data: the rollback is refused, naming 000009, until
	// --drop-data (command line only, like --all).
	err := realMain(ctx, []string{"migrate", "down", strconv.Itoa(ours), "--database-url", url})
	require.ErrorContains(t, err, "000009 drops the ordertimeout schema")
	require.ErrorContains(t, err, "nothing was rolled back (give --drop-data to roll back anyway)")
	require.Equal(t, latest, version())
	require.NoError(t, realMain(ctx, []string{"migrate", "down", strconv.Itoa(ours), "--drop-data", "--database-url", url}))
	require.Equal(t, 8, version())
	require.False(t, exists("ordertimeout.orders"), "down %d removes ordertimeout", ours)
	require.True(t, exists("public.river_job"), "and keeps River's tables")

	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	require.Equal(t, latest, version())
	require.True(t, exists("ordertimeout.orders"))
	stats = statsOf()
	require.Len(t, stats, 6)
	for name, tuples := range stats {
		require.Equal(t, -1.0, tuples, "a fresh install leaves %s never analyzed", name)
	}
	var analyzedEmpty []string
	require.NoError(t, db.QueryRow(ctx, `SELECT coalesce(array_agg(c.oid::regclass::text ORDER BY 1), '{}')
		FROM pg_class AS c
		WHERE c.relnamespace IN ('ordertimeout'::regnamespace, 'public'::regnamespace)
		  AND c.relkind = 'r' AND c.reltuples = 0`).Scan(&analyzedEmpty))
	require.Empty(t, analyzedEmpty, "no migration may leave a table analyzed while empty")
	db.Reset() // the pool's prepared statements name the types that down dropped
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "after-up", time.Hour, "")

	require.ErrorContains(t, realMain(ctx, []string{"migrate", "down", "0", "--database-url", url}), "not a positive number")
	require.NoError(t, realMain(ctx, []string{"migrate", "down", "--all", "--database-url", url}))
	require.False(t, exists("ordertimeout.orders"))
	require.False(t, exists("public.river_job"), "down --all removes River's tables too")
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	require.Equal(t, latest, version())
}

// migrate down N with N larger than the applied migrations, down N --all and
// force of a version no migration has are refused before anything runs:
// golang-migrate's Steps(-N) rolled back every applied migration before it
// reported the shortfall, and Force records any number.
func TestMigrateRefusesWhatItCannotDo(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	latest, _ := migrationVersions(t)
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	version := func() int {
		var v int
		require.NoError(t, db.QueryRow(ctx, "SELECT version FROM schema_migrations").Scan(&v))
		return v
	}

	require.ErrorContains(t, realMain(ctx, []string{"migrate", "down", strconv.Itoa(latest + 1), "--database-url", url}),
		"nothing was rolled back")
	require.Equal(t, latest, version(), "down more than applied rolls back nothing")
	require.ErrorContains(t, realMain(ctx, []string{"migrate", "down", "2", "--all", "--database-url", url}), "not both")
	require.Equal(t, latest, version(), "down N --all rolls back nothing")
	require.ErrorContains(t, realMain(ctx, []string{"migrate", "force", "1", "--all", "--database-url", url}), "down only")
	require.Equal(t, latest, version(), "force --all records nothing")

	require.ErrorContains(t, realMain(ctx, []string{"migrate", "force", strconv.Itoa(latest + 1), "--database-url", url}),
		fmt.Sprintf("1 to %d", latest))
	require.ErrorContains(t, realMain(ctx, []string{"migrate", "force", "1000", "--database-url", url}), "no migration has version 1000")
	require.Equal(t, latest, version(), "force of a version no migration has records nothing")
	require.NoError(t, realMain(ctx, []string{"migrate", "force", strconv.Itoa(latest), "--database-url", url}))
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	// force 0 is "none applied": up then applies every migration again.
	require.NoError(t, realMain(ctx, []string{"migrate", "down", "--all", "--database-url", url}))
	require.NoError(t, realMain(ctx, []string{"migrate", "force", "0", "--database-url", url}))
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	require.Equal(t, latest, version(), "up after force 0")

	// Down exactly what is applied still works (from a lower version, so
	// that the count is of the applied ones, not of every migration).
	require.NoError(t, realMain(ctx, []string{"migrate", "down", strconv.Itoa(latest - 9), "--database-url", url}))
	require.Equal(t, 9, version())
	require.ErrorContains(t, realMain(ctx, []string{"migrate", "down", "10", "--database-url", url}), "9 migrations are applied")
	require.Equal(t, 9, version())
	require.NoError(t, realMain(ctx, []string{"migrate", "down", "9", "--database-url", url}))
	require.Zero(t, count(t, db, "SELECT count(*) FROM schema_migrations"), "down what is applied rolls back all of it")
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	require.Equal(t, latest, version())
}

// A payment confirmed while a deploy runs its migrations is not lost to a
// function the migration replaced: migration 000023 drops _consume(text,
// timestamptz) for a version with two more arguments, and a confirm_payment of
// the version before, already running when the migration commits, calls the
// old signature after the commit. Its new arguments have defaults (the old
// behaviour), so that call still pays the order.
func TestConfirmPaymentAcrossMigration23(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, url := databaseAt(t, 22)
	sidecartest.CreateOrder(t, db, "mid-deploy", time.Hour, "")
	sidecartest.Exec(t, db, "SELECT ordertimeout.begin_payment('mid-deploy', 'p-mid-deploy')")

	// Another session holds the payment row: confirm_payment stops at its
	// UPDATE of it, after the order's, before it calls _consume.
	holder, err := db.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, "SELECT 1 FROM ordertimeout.payments WHERE payment_id = 'p-mid-deploy' FOR UPDATE")
	require.NoError(t, err)

	type answer struct {
		result string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		a.err = db.QueryRow(ctx, "SELECT ordertimeout.confirm_payment('mid-deploy', 'p-mid-deploy')").Scan(&a.result)
		done <- a
	}()
	sidecartest.Eventually(t, 10*time.Second, "confirm_payment waiting for the payment row", func() (bool, error) {
		var waiting bool
		err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE query LIKE '%confirm_payment(''mid-deploy''%' AND wait_event_type = 'Lock')`).Scan(&waiting)
		return waiting, err
	})

	// Up to the head, which may hold later migrations that wait for the
	// lock on conflicts (000039's view reads the table): the lock is
	// released once 000031 has committed, then both finish.
	migrated := make(chan error, 1)
	go func() { migrated <- realMain(ctx, []string{"migrate", "up", "--database-url", url}) }()
	sidecartest.Eventually(t, 30*time.Second, "migration 000031 committed", func() (bool, error) {
		select {
		case err := <-migrated:
			migrated <- err
			return true, nil
		default:
		}
		var committed bool
		err := db.QueryRow(ctx, `SELECT version > 31 OR (version = 31 AND NOT dirty) FROM schema_migrations`).Scan(&committed)
		return committed, err
	})
	require.NoError(t, holder.Commit(ctx))
	select {
	case err := <-migrated:
		require.NoError(t, err, "migrate up")
	case <-time.After(60 * time.Second):
		t.Fatal("migrate up did not return within 60 s of the lock's release")
	}
	select {
	case a := <-done:
		require.NoError(t, a.err, "the confirm_payment that ran across the migration")
		require.Equal(t, "paid", a.result)
	case <-time.After(30 * time.Second):
		t.Fatal("confirm_payment did not return within 30 s of the lock's release")
	}
	require.Equal(t, "PAID", sidecartest.Status(t, db, "mid-deploy"))
	require.Equal(t, int64(1), count(t, db, "SELECT sold FROM ordertimeout.stock WHERE sku = 'A'"))
}

// TestPurgedSalesAcrossMigration31: paid orders purged before migration
// 000031 left their units in stock.sold with no order to account for them,
// and the invariant checks failed on every database with paid retention on.
// The migration fills purged_sales from what sold has beyond the paid orders
// left, and the checks pass again; a purge after it adds its own.
func TestPurgedSalesAcrossMigration31(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, url := databaseAt(t, 30)
	pay := func(id string) {
		t.Helper()
		sidecartest.CreateOrder(t, db, id, time.Hour, "")
		sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment($1, 'p-' || $1)", id)
	}
	for _, id := range []string{"old-1", "old-2", "kept"} {
		pay(id)
	}
	sidecartest.Exec(t, db, "UPDATE ordertimeout.orders SET paid_at = paid_at - interval '2 days' WHERE order_id LIKE 'old-%'")
	require.Equal(t, int64(2), count(t, db, "SELECT ordertimeout.purge_orders('1 day', 1000, '1 day')"))
	// The purge had no table to write to yet: sold 3, one paid order left.
	require.Equal(t, int64(3), count(t, db, "SELECT sold FROM ordertimeout.stock WHERE sku = 'A'"))
	require.Equal(t, int64(1), count(t, db, "SELECT count(*) FROM ordertimeout.orders WHERE status = 'PAID'"))

	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	db.Reset()
	require.Equal(t, int64(2), count(t, db, "SELECT qty FROM ordertimeout.purged_sales WHERE sku = 'A'"))
	totals := invariant.Options{StockTotals: map[string]int64{"A": 1_000_000}}
	report, err := invariant.Check(ctx, db, totals)
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())

	sidecartest.Exec(t, db, "UPDATE ordertimeout.orders SET paid_at = paid_at - interval '2 days' WHERE order_id = 'kept'")
	require.Equal(t, int64(1), count(t, db, "SELECT ordertimeout.purge_orders('1 day', 1000, '1 day')"))
	require.Equal(t, int64(3), count(t, db, "SELECT qty FROM ordertimeout.purged_sales WHERE sku = 'A'"))
	report, err = invariant.Check(ctx, db, totals)
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())
}

// TestPurgeAcrossMigration31: a purge_orders of the version before 000031,
// which counts nothing in purged_sales, began before the migration and
// deletes its paid order's items after the migration has committed. The
// trigger of 000031 counts them (a statement of the new purge_orders would
// not have run in the old body): sold still adds up. The old purge is held
// before its deletes by a lock on conflicts, which its first query reads.
func TestPurgeAcrossMigration31(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, url := databaseAt(t, 30)
	sidecartest.CreateOrder(t, db, "mid-purge", time.Hour, "")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('mid-purge', 'p-mid-purge')")
	sidecartest.Exec(t, db, "UPDATE ordertimeout.orders SET paid_at = paid_at - interval '2 days'")

	holder, err := db.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, "LOCK TABLE ordertimeout.conflicts IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	type answer struct {
		purged int64
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		a.err = db.QueryRow(ctx, "SELECT ordertimeout.purge_orders('1 day', 1000, '1 day')").Scan(&a.purged)
		done <- a
	}()
	sidecartest.Eventually(t, 10*time.Second, "the old purge waiting on conflicts", func() (bool, error) {
		var waiting bool
		err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE query LIKE '%purge_orders(''1 day''%' AND wait_event_type = 'Lock')`).Scan(&waiting)
		return waiting, err
	})

	// Up to the head, which may hold later migrations that wait for the
	// lock on conflicts (000039's view reads the table): the lock is
	// released once 000031 has committed, then both finish.
	migrated := make(chan error, 1)
	go func() { migrated <- realMain(ctx, []string{"migrate", "up", "--database-url", url}) }()
	sidecartest.Eventually(t, 30*time.Second, "migration 000031 committed", func() (bool, error) {
		select {
		case err := <-migrated:
			migrated <- err
			return true, nil
		default:
		}
		var committed bool
		err := db.QueryRow(ctx, `SELECT version > 31 OR (version = 31 AND NOT dirty) FROM schema_migrations`).Scan(&committed)
		return committed, err
	})
	require.NoError(t, holder.Commit(ctx))
	select {
	case err := <-migrated:
		require.NoError(t, err, "migrate up")
	case <-time.After(60 * time.Second):
		t.Fatal("migrate up did not return within 60 s of the lock's release")
	}
	select {
	case a := <-done:
		require.NoError(t, a.err, "the purge that ran across the migration")
		require.Equal(t, int64(1), a.purged)
	case <-time.After(30 * time.Second):
		t.Fatal("purge_orders did not return within 30 s of the lock's release")
	}
	db.Reset()
	require.Equal(t, int64(1), count(t, db, "SELECT qty FROM ordertimeout.purged_sales WHERE sku = 'A'"),
		"the old purge's delete was counted by the trigger")
	report, err := invariant.Check(ctx, db, invariant.Options{StockTotals: map[string]int64{"A": 1_000_000}})
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())
}

// TestStoredIntervalsAcrossMigration33: a setting stored before 000029 with
// a negative part stops migration 000033, which names it, until it is set
// again; then the migration runs.
func TestStoredIntervalsAcrossMigration33(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, url := databaseAt(t, 32)
	sidecartest.Exec(t, db, "UPDATE ordertimeout.settings SET grace = '1 day -23:59:00'")
	err := realMain(ctx, []string{"migrate", "up", "--database-url", url})
	require.ErrorContains(t, err, "settings.grace = 1 day -23:59:00 has a month or a negative part")
	require.ErrorContains(t, err, "migration 33 rolled back, and version 32 is recorded")
	// The failed migration rolled back, and its dirty mark was settled:
	// fix the value, migrate again.
	require.NoError(t, realMain(ctx, []string{"migrate", "version", "--database-url", url}))
	require.EqualValues(t, 32, count(t, db, "SELECT version FROM schema_migrations WHERE NOT dirty"))
	db.Reset()
	sidecartest.Exec(t, db, "SELECT ordertimeout.configure(grace => '60 seconds')")
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	db.Reset()
	var n int64
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_constraint
		WHERE conname LIKE '%plain_duration'`).Scan(&n))
	require.Equal(t, int64(5), n)
}

// TestPaymentMethodsAcrossMigration59: migration 000059 gives the payments
// recorded before it of orders with more than one payment the method their
// begin_payment logged in the PAYING event (none when it logged none), when
// that method is still a known one; every other payment keeps
// method_recorded false and reads as its order's method, as before, so the
// migration rewrites only those orders' rows. Going down loses nothing for
// good (up fills them again), so it is not refused; going below 000058
// while a conflict is handed to a person is.
func TestPaymentMethodsAcrossMigration59(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, url := databaseAt(t, 58)
	sidecartest.Exec(t, db, "SELECT ordertimeout.put_payment_method('wire', interval '1 day', false)")
	attempts := []struct {
		order, payment, method string
		fail                   bool
	}{
		{"mix", "p-card", "card", true},
		{"mix", "p-bank", "bank_transfer", false},
		{"gone", "p-wire", "wire", true},
		{"gone", "p-card-2", "card", false},
		{"unnamed", "p-unnamed", "", true},
		{"unnamed", "p-qr", "qr", false},
		{"single", "p-single", "qr", false},
	}
	for _, a := range attempts {
		if count(t, db, "SELECT count(*) FROM ordertimeout.orders WHERE order_id = $1", a.order) == 0 {
			sidecartest.CreateOrder(t, db, a.order, time.Hour, "")
		}
		sidecartest.Exec(t, db, "SELECT ordertimeout.begin_payment($1, $2, method => nullif($3, ''))", a.order, a.payment, a.method)
		if a.fail {
			sidecartest.Exec(t, db, "SELECT ordertimeout.fail_payment($1, $2)", a.order, a.payment)
		}
	}
	sidecartest.CreateOrder(t, db, "no-begin", time.Hour, "")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('no-begin', 'p-no-begin')")
	// wire is no order's method any more: a person deleted it.
	sidecartest.Exec(t, db, "DELETE FROM ordertimeout.payment_methods WHERE method = 'wire'")

	payments := func() []string {
		t.Helper()
		rows, err := db.Query(ctx, `SELECT payment_id || '=' || coalesce(method, '-') || CASE WHEN method_recorded THEN '' ELSE ' (order''s)' END
			FROM ordertimeout.payments ORDER BY payment_id COLLATE "C"`)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return got
	}
	want := []string{
		"p-bank=bank_transfer", "p-card=card", "p-card-2=card",
		"p-no-begin=- (order's)", "p-qr=qr", "p-single=- (order's)", "p-unnamed=-", "p-wire=- (order's)",
	}
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	db.Reset()
	require.Equal(t, want, payments())
	// What decides: the order's method where the attempt's is not known.
	var single string
	require.NoError(t, db.QueryRow(ctx, "SELECT method FROM ordertimeout.order_payments('single')").Scan(&single))
	require.Equal(t, "qr", single)

	latest, _ := migrationVersions(t)
	require.NoError(t, realMain(ctx, []string{"migrate", "down", strconv.Itoa(latest - 58), "--database-url", url}),
		"nothing of 000059 is lost for good")
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	db.Reset()
	require.Equal(t, want, payments())

	// A conflict handed to a person: 000058's down would forget it.
	sidecartest.Exec(t, db, "SELECT ordertimeout.fail_payment('mix', 'p-bank')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.cancel_order('mix', 'shop')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('mix', 'p-card')")
	sidecartest.Exec(t, db, `SELECT ordertimeout.hand_over_conflict(conflict_id, 'the gateway would not tell')
		FROM ordertimeout.conflicts WHERE payment_id = 'p-card'`)
	down := strconv.Itoa(latest - 57)
	err := realMain(ctx, []string{"migrate", "down", down, "--database-url", url})
	require.ErrorContains(t, err, "000058 drops which conflicts the sidecar handed to a person")
	require.ErrorContains(t, err, "nothing was rolled back")
	require.EqualValues(t, latest, count(t, db, "SELECT version FROM schema_migrations"))

	require.NoError(t, realMain(ctx, []string{"migrate", "down", down, "--drop-data", "--database-url", url}))
	require.EqualValues(t, 57, count(t, db, "SELECT version FROM schema_migrations"))
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
}

// holdConflicts locks table conflicts in a transaction it returns, which is
// rolled back when the test ends: 000039's CREATE VIEW waits for it, as for
// any transaction that holds conflicts more strongly than it reads it.
func holdConflicts(t *testing.T, db *pgxpool.Pool) pgx.Tx {
	t.Helper()
	holder, err := db.Begin(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback(context.WithoutCancel(t.Context())) })
	_, err = holder.Exec(t.Context(), "LOCK TABLE ordertimeout.conflicts IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	return holder
}

// TestMigrateKilledWhileWaiting: `ordertimeout migrate up` killed (kill -9)
// while its migration waits for a lock that live traffic holds. The README
// says what to do then: `migrate up` again, which finds the schema is the
// version's before it and goes on from there. That holds only if the killed
// client's migration does not go on without it: PostgreSQL does not notice
// a vanished client while it waits for a lock, so the backend took the lock
// once it was free, ran the rest of 000039 and committed it, the version
// marked dirty, possibly after the next `up` had read the schema as 38's.
// The migration's backend now ends within a second of its client, while it
// still waits.
func TestMigrateKilledWhileWaiting(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bin := build(t)
	db, url := databaseAt(t, 38)

	holder := holdConflicts(t, db)

	cmd := exec.Command(bin, "migrate", "up", "--database-url", url)
	out := &sidecarproc.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	defer func() {
		if t.Failed() {
			t.Logf("output of migrate up:\n%s", out.String())
		}
	}()
	waitingPid := func() (int, error) {
		var pid int
		err := db.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%read_conflicts_to_resolve%' AND wait_event_type = 'Lock'`).Scan(&pid)
		return pid, err
	}
	var backend int
	sidecartest.Eventually(t, 30*time.Second, "migration 000039 waiting for the lock", func() (bool, error) {
		pid, err := waitingPid()
		backend = pid
		return pid != 0, err
	})
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()

	// The killed client's migration ends while it still waits: it must
	// not outlive its client and commit once the lock is free.
	sidecartest.Eventually(t, 20*time.Second, "the killed client's backend gone while the lock is held", func() (bool, error) {
		var alive bool
		err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, backend).Scan(&alive)
		return !alive, err
	})
	require.NoError(t, holder.Commit(ctx))
	var version int
	var dirty bool
	require.NoError(t, db.QueryRow(ctx, "SELECT version, dirty FROM schema_migrations").Scan(&version, &dirty))
	require.Equal(t, 39, version)
	require.True(t, dirty, "golang-migrate marks the version dirty before it runs it")

	// migrate version tells what the schema is, and records nothing.
	diagnosis, err := exec.Command(bin, "migrate", "version", "--database-url", url).Output()
	require.Error(t, err, "exit status 1 while dirty")
	require.Contains(t, string(diagnosis), "version 39 (dirty: version 39 was marked dirty; the schema is version 38's: migration 39 did not commit")
	require.NoError(t, db.QueryRow(ctx, "SELECT version, dirty FROM schema_migrations").Scan(&version, &dirty))
	require.Equal(t, 39, version)
	require.True(t, dirty)

	// What the README says to do: migrate up again, which tells by the
	// schema's fingerprint that 000039 did not commit.
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}),
		"the documented recovery after a migration killed midway")
	db.Reset()
	require.Equal(t, int64(1), count(t, db, "SELECT count(*) FROM pg_proc WHERE proname = 'conflicts_to_resolve'"))
}

// ordertimeout pause prints configure's warning when a transaction left open
// after its sweep still holds timeout cancels made before the pause, and
// names its backend; the pause itself is in force.
func TestPausePrintsTheCancelsItCouldNotWaitFor(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bin := build(t)
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "A1", time.Millisecond, "")
	sidecartest.Eventually(t, 10*time.Second, "the order to come due", func() (bool, error) {
		return count(t, db, "SELECT count(*) FROM ordertimeout.preview_due()") == 1, nil
	})
	open, err := db.Begin(ctx)
	require.NoError(t, err)
	defer open.Rollback(ctx) //nolint:errcheck // the test's end
	var cancelled, pid int
	require.NoError(t, open.QueryRow(ctx, "SELECT cancelled, pg_backend_pid() FROM ordertimeout.sweep_due()").Scan(&cancelled, &pid))
	require.Equal(t, 1, cancelled)

	stdout, stderr, err := runPause(ctx, bin, url)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stderr: %s", stderr)
	require.Equal(t, 2, exit.ExitCode(), "paused, but a person must look: exit status 2")
	require.Contains(t, stdout, "paused: no timeout cancels since")
	require.Contains(t, stderr, "pause: warning: paused, but timeout cancels made before the pause are still not committed after 2s")
	require.Contains(t, stderr, "ordertimeout: pause: paused, but timeout cancels made before the pause may still commit")
	require.Contains(t, stderr, fmt.Sprintf("(backend pid %d)", pid))
	require.EqualValues(t, 1, count(t, db, "SELECT count(*) FROM ordertimeout.settings WHERE paused"))
}

// Only the pause's own warning makes pause exit 2: a warning about something
// else (here a misspelt plpgsql setting in the database's configuration,
// which PostgreSQL warns about when plpgsql loads) is printed, and the pause
// exits 0. Before, any WARNING made it exit 2 and claim that cancels made
// before the pause might still commit.
func TestPauseExitsZeroOnAnotherWarning(t *testing.T) {
	t.Parallel()
	bin := build(t)
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	sidecartest.WarnOnPlpgsqlLoad(t, url)
	stdout, stderr, err := runPause(t.Context(), bin, url)
	require.NoError(t, err, "stderr: %s", stderr)
	require.Contains(t, stdout, "paused: no timeout cancels since")
	require.Contains(t, stderr, `pause: warning: invalid configuration parameter name "plpgsql.variable_conflit"`,
		"the warning is printed, so the test does meet one")
	require.NotContains(t, stderr, "may still commit")
}

// runPause runs the built binary's pause on url as ops:test.
func runPause(ctx context.Context, bin, url string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, bin, "pause", "--database-url", url, "--actor", "ops:test")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// migrate down refuses to roll back a migration whose down drops data the
// database holds, naming what would be lost, unless --drop-data: a review
// rolled back 000055 with "down 1" and up again, and the payment ids of the
// purged orders were gone, with them the refusal of an old payment that now
// paid a new order given the purged one's id.
func TestMigrateDownKeepsData(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	version := func() int {
		var v int
		require.NoError(t, db.QueryRow(ctx, "SELECT version FROM schema_migrations").Scan(&v))
		return v
	}
	latest, _ := migrationVersions(t)
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	require.Equal(t, latest, version())
	require.GreaterOrEqual(t, latest, 56)
	// Nothing held yet: the last two roll back and come back.
	require.NoError(t, realMain(ctx, []string{"migrate", "down", strconv.Itoa(latest - 54), "--database-url", url}))
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))

	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "X1", time.Hour, "")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('X1', 'P-old')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.purge_orders(interval '0', paid_older_than => interval '0')")
	require.EqualValues(t, 1, count(t, db, "SELECT count(*) FROM ordertimeout.purged_payments"))

	err := realMain(ctx, []string{"migrate", "down", strconv.Itoa(latest - 54), "--database-url", url})
	require.ErrorContains(t, err, "000055 drops the payment ids of purged orders (purged_payments)")
	require.ErrorContains(t, err, "nothing was rolled back")
	require.Equal(t, latest, version())
	require.EqualValues(t, 1, count(t, db, "SELECT count(*) FROM ordertimeout.purged_payments"))
	require.ErrorContains(t, realMain(ctx, []string{"migrate", "up", "--drop-data", "--database-url", url}), "--drop-data goes with down only")

	require.NoError(t, realMain(ctx, []string{"migrate", "down", strconv.Itoa(latest - 54), "--drop-data", "--database-url", url}))
	require.Equal(t, 54, version())

	// Any row of any table is data to 000009: points balances alone (a
	// review saw them dropped while the check looked at orders and stock
	// only), or a payment method of the shop's own.
	sidecartest.Exec(t, db, "DELETE FROM ordertimeout.events")
	sidecartest.Exec(t, db, "TRUNCATE ordertimeout.orders, ordertimeout.order_items, ordertimeout.stock, ordertimeout.releases, ordertimeout.purged_sales CASCADE")
	for _, held := range []string{
		"INSERT INTO ordertimeout.points_accounts (account_id, balance) VALUES ('cust-1', 5000)",
		"SELECT ordertimeout.put_payment_method('wire', interval '1 day')",
	} {
		sidecartest.Exec(t, db, held)
		err := realMain(ctx, []string{"migrate", "down", "54", "--database-url", url})
		require.ErrorContains(t, err, "000009 drops the ordertimeout schema", held)
		require.Equal(t, 54, version())
		sidecartest.Exec(t, db, "TRUNCATE ordertimeout.points_accounts CASCADE")
		sidecartest.Exec(t, db, "DELETE FROM ordertimeout.payment_methods WHERE method = 'wire'")
	}
	// To 9 too: 000010 drops the payment methods (a review saw the shop's
	// own dropped without a word), and a seed the shop changed counts.
	for _, held := range []string{
		"SELECT ordertimeout.put_payment_method('wire', interval '1 day')",
		"SELECT ordertimeout.put_payment_method('card', interval '20 minutes')",
	} {
		sidecartest.Exec(t, db, held)
		err := realMain(ctx, []string{"migrate", "down", "45", "--database-url", url})
		require.ErrorContains(t, err, "000010 drops the reconciliation watermarks, the payment methods", held)
		require.Equal(t, 54, version())
		sidecartest.Exec(t, db, "DELETE FROM ordertimeout.payment_methods WHERE method = 'wire'")
		sidecartest.Exec(t, db, "SELECT ordertimeout.put_payment_method('card', interval '15 minutes')")
	}
	require.NoError(t, realMain(ctx, []string{"migrate", "down", "45", "--database-url", url}), "the seeds as seeded")
	require.Equal(t, 9, version())
	require.NoError(t, realMain(ctx, []string{"migrate", "down", "9", "--database-url", url}), "nothing held but what every install has")
	require.Equal(t, 0, int(count(t, db, "SELECT count(*) FROM schema_migrations")))
}
