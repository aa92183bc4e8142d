package cron_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/migrations"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/tests/internal/pgcluster"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The README's statements, character for character (README.md, "Without the
// sidecar (pg_cron)").
const (
	readmeSetup = `CREATE EXTENSION pg_cron;
CREATE ROLE shop_cron LOGIN IN ROLE ordertimeout_sidecar;
GRANT USAGE ON SCHEMA cron TO shop_cron;
SELECT ordertimeout.configure(precheck => 'never');`
	readmeSchedule = `SELECT cron.schedule('ordertimeout-sweep', '* * * * *', 'CALL ordertimeout.run_sweeper()');`
)

// readmeHousekeeping are the README's other schedules, also run as shop_cron.
var readmeHousekeeping = []string{
	`SELECT cron.schedule('ordertimeout-close', '*/10 * * * *',
                     $$SELECT ordertimeout.close_cancelled('30 days', 100000)$$);`,
	`SELECT cron.schedule('ordertimeout-purge', '*/10 * * * *',
                     $$SELECT ordertimeout.purge_orders('90 days', 100000, paid_older_than => '400 days')$$);`,
	`SELECT cron.schedule('cron-log-trim', '0 4 * * *',
                     $$DELETE FROM cron.job_run_details WHERE end_time < now() - interval '7 days'$$);`,
	`SELECT cron.schedule('river-job-trim', '0 4 * * *',
                     $$DELETE FROM public.river_job WHERE queue = 'ordertimeout' AND scheduled_at < now() - interval '7 days'$$);`,
}

// maxLag is how late, at most, a timeout may be cancelled in this mode.
const maxLag = 2 * time.Second

// handovers is how many further minute boundaries TestPgCron watches, where
// one run of the job ends and the next begins. Each costs a minute, so make
// test watches none:
//
//	tests/bin/withpg go test -count=1 -v -run TestPgCron ./tests/cron -cron.handovers 3
var handovers = flag.Int("cron.handovers", 0, "further minute boundaries TestPgCron watches (a minute each)")

// TestPgCron: pg_cron 1.4 runs CALL ordertimeout.run_sweeper() every minute,
// as the README says; with no sidecar anywhere, orders due in the seconds
// after the first run starts are cancelled within maxLag of cancel_at, also
// orders created while the run sleeps and due sooner than anything it saw,
// and a paid order is not.
func TestPgCron(t *testing.T) {
	t.Parallel()
	lib := filepath.Join(pgcluster.DefaultBin, "..", "lib", "pg_cron.so")
	if bin := os.Getenv("PGBIN"); bin != "" {
		lib = filepath.Join(bin, "..", "lib", "pg_cron.so")
	}
	if _, err := os.Stat(lib); err != nil {
		t.Fatalf("pg_cron is not installed (%v): run tests/bin/ensure-deps as root, or apt-get install postgresql-15-cron", err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	for _, stmt := range append([]string{readmeSetup, readmeSchedule}, readmeHousekeeping...) {
		require.Contains(t, string(readme), stmt, "the README says what this test runs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(3+*handovers)*time.Minute)
	defer cancel()

	srv := pgcluster.New(t, pgcluster.Options{Settings: []string{
		"shared_preload_libraries=pg_cron",
		"cron.database_name=shop",
	}})
	admin, err := pgx.Connect(ctx, srv.URL())
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE DATABASE shop")
	require.NoError(t, err)
	require.NoError(t, admin.Close(ctx))
	require.NoError(t, migrations.Up(srv.DatabaseURL("shop")))

	db, err := pgxpool.New(ctx, srv.DatabaseURL("shop"))
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(ctx, readmeSetup)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `SELECT ordertimeout.put_stock('A', 1000000);
		SELECT ordertimeout.configure(grace => interval '0')`)
	require.NoError(t, err)

	// pg_cron starts a job at the first minute boundary its scheduler sees
	// after it has read the job, and it reads new jobs about once a second,
	// waking up to a second late: a job scheduled close to a boundary, on
	// either side, may or may not run at it. Schedule between 3 s and 50 s
	// into a minute (waiting for that, at most 13 s, on the database's
	// clock): the first run is then at the next boundary.
	var boundary time.Time
	waitFor(t, ctx, 15*time.Second, "a moment 3 s to 50 s into a minute", func() (bool, error) {
		var second float64
		err := db.QueryRow(ctx, `SELECT extract(second FROM t), date_trunc('minute', t) + interval '1 minute'
		                           FROM clock_timestamp() AS t`).Scan(&second, &boundary)
		return second >= 3 && second < 50, err
	})

	// Scheduled as the README's role, so the job runs with its rights only.
	cronURL := srv.DatabaseURL("shop")
	cronConfig, err := pgx.ParseConfig(cronURL)
	require.NoError(t, err)
	cronConfig.User = "shop_cron"
	cronConn, err := pgx.ConnectConfig(ctx, cronConfig)
	require.NoError(t, err)
	var jobID int64
	require.NoError(t, cronConn.QueryRow(ctx, readmeSchedule).Scan(&jobID))
	for _, stmt := range readmeHousekeeping {
		_, err := cronConn.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	// What the housekeeping jobs run works for the role that runs them.
	for _, stmt := range []string{
		"SELECT ordertimeout.close_cancelled('30 days', 100000)",
		"SELECT ordertimeout.purge_orders('90 days', 100000, paid_older_than => '400 days')",
		"DELETE FROM cron.job_run_details WHERE end_time < now() - interval '7 days'",
		"DELETE FROM public.river_job WHERE queue = 'ordertimeout' AND scheduled_at < now() - interval '7 days'",
	} {
		_, err := cronConn.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	require.NoError(t, cronConn.Close(ctx))
	var jobs []string
	rows, err := db.Query(ctx, "SELECT jobname || ' ' || schedule || ' ' || username FROM cron.job ORDER BY jobid")
	require.NoError(t, err)
	for rows.Next() {
		var j string
		require.NoError(t, rows.Scan(&j))
		jobs = append(jobs, j)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"ordertimeout-sweep * * * * * shop_cron", "ordertimeout-close */10 * * * * shop_cron",
		"ordertimeout-purge */10 * * * * shop_cron", "cron-log-trim 0 4 * * * shop_cron",
		"river-job-trim 0 4 * * * shop_cron"}, jobs)

	var scheduled time.Time
	require.NoError(t, db.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&scheduled))
	require.True(t, scheduled.Before(boundary.Add(-2*time.Second)), "scheduled at %s, too close to the boundary %s", scheduled, boundary)
	t.Logf("job %d scheduled; first run at %s", jobID, boundary.UTC().Format(time.RFC3339))

	// Orders due 3 s to 8.7 s after the minute begins, created now: pg_cron
	// starts the very first run up to a couple of seconds late (seen: 1.6 s
	// on a busy machine), and orders due before any run sweeps are late by
	// that, whatever the sweeper does. Later runs follow the last one at
	// once (see handovers).
	const early = 20
	for i := range early {
		_, err := db.Exec(ctx, `SELECT ordertimeout.create_order($1, '[{"sku":"A","qty":1}]',
			$2::timestamptz + ($3::bigint * interval '1 millisecond') - clock_timestamp())`,
			fmt.Sprintf("early-%02d", i), boundary, 3000+i*300)
		require.NoError(t, err)
	}
	// One of them is paid before it is due: never cancelled.
	_, err = db.Exec(ctx, `SELECT ordertimeout.confirm_payment('early-10', 'pay-10')`)
	require.NoError(t, err)

	// Wait for the run (a poll with a deadline: the boundary is at most a
	// minute away).
	// pg_cron records the run's start_time in its own transaction, which can
	// commit after the CALL shows as active: wait for both.
	waitFor(t, ctx, time.Until(boundary)+20*time.Second, "pg_cron to start run_sweeper", func() (bool, error) {
		var running bool
		err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
		                                         WHERE query = 'CALL ordertimeout.run_sweeper()'
		                                           AND state = 'active' AND usename = 'shop_cron')
		                            AND EXISTS (SELECT 1 FROM cron.job_run_details
		                                         WHERE jobid = $1 AND start_time IS NOT NULL)`, jobID).Scan(&running)
		return running, err
	})
	var started time.Time
	require.NoError(t, db.QueryRow(ctx, `SELECT start_time FROM cron.job_run_details WHERE jobid = $1
	                                      ORDER BY runid LIMIT 1`, jobID).Scan(&started))
	t.Logf("run started %s after the minute began", started.Sub(boundary))
	require.True(t, !started.Before(boundary) && started.Before(boundary.Add(30*time.Second)),
		"the first run started at %s, not at the boundary %s", started, boundary)

	// Orders created while the run sleeps, due sooner than any timer it saw
	// (the early orders are due 3 s to 8.7 s after the boundary).
	const late = 5
	for i := range late {
		_, err := db.Exec(ctx, `SELECT ordertimeout.create_order($1, '[{"sku":"A","qty":1}]', interval '500 milliseconds')`,
			fmt.Sprintf("late-%d", i))
		require.NoError(t, err)
	}

	waitFor(t, ctx, 20*time.Second, "every unpaid order to be cancelled", func() (bool, error) {
		var pending int
		err := db.QueryRow(ctx, "SELECT count(*) FROM ordertimeout.orders WHERE status = 'PENDING'").Scan(&pending)
		return pending == 0, err
	})

	rows, err = db.Query(ctx, `SELECT o.order_id, o.status, o.cancel_cause, e.actor,
	                                   extract(epoch FROM o.cancelled_at - o.cancel_at)::float8
	                              FROM ordertimeout.orders AS o
	                              LEFT JOIN ordertimeout.events AS e ON e.order_id = o.order_id AND e.to_status = 'CANCELLED'
	                             ORDER BY o.order_id`)
	require.NoError(t, err)
	var cancelled int
	var worst float64
	for rows.Next() {
		var id, status string
		var cause, actor *string
		var lag *float64
		require.NoError(t, rows.Scan(&id, &status, &cause, &actor, &lag))
		if id == "early-10" {
			require.Equal(t, "PAID", status, "the paid order")
			continue
		}
		require.Equal(t, "CANCELLED", status, id)
		require.Equal(t, "timeout", *cause, "%s: cancelled by its timer", id)
		require.Equal(t, "shop_cron", *actor, "%s: by the pg_cron job's role", id)
		require.Less(t, *lag, maxLag.Seconds(), "%s: cancelled within %s of cancel_at", id, maxLag)
		require.GreaterOrEqual(t, *lag, 0.0, id)
		cancelled++
		worst = max(worst, *lag)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, early+late-1, cancelled)
	t.Logf("%d orders cancelled by pg_cron's run_sweeper, worst lag %.0f ms", cancelled, worst*1000)

	// The run is still the first one, sweeping: it stops 5 s into the next
	// minute.
	var status string
	require.NoError(t, db.QueryRow(ctx, `SELECT status FROM cron.job_run_details WHERE jobid = $1
	                                      ORDER BY runid LIMIT 1`, jobID).Scan(&status))
	require.Equal(t, "running", status)

	// At each further boundary, orders due every 100 ms from 2 s before to
	// 8 s after it (the old run ends 5 s after it, and the next one starts
	// then) are all cancelled in time.
	for k := 1; k <= *handovers; k++ {
		at := boundary.Add(time.Duration(k) * time.Minute)
		prefix := fmt.Sprintf("handover%d-", k)
		_, err := db.Exec(ctx, `
			SELECT ordertimeout.create_order($1 || g, '[{"sku":"A","qty":1}]',
			       $2::timestamptz + (g * 100 - 2000) * interval '1 millisecond' - clock_timestamp())
			FROM generate_series(0, 99) AS g`, prefix, at)
		require.NoError(t, err)
		waitFor(t, ctx, time.Until(at)+20*time.Second, "the orders around boundary "+fmt.Sprint(k), func() (bool, error) {
			var pending int
			err := db.QueryRow(ctx, "SELECT count(*) FROM ordertimeout.orders WHERE status = 'PENDING'").Scan(&pending)
			return pending == 0, err
		})
		var worst float64
		require.NoError(t, db.QueryRow(ctx, `SELECT max(extract(epoch FROM cancelled_at - cancel_at))::float8
		                                      FROM ordertimeout.orders WHERE order_id LIKE $1 || '%'`, prefix).Scan(&worst))
		var ended, next time.Time
		require.NoError(t, db.QueryRow(ctx, `
			WITH r AS (SELECT d.start_time, d.end_time, row_number() OVER (ORDER BY d.runid) AS n
			             FROM cron.job_run_details AS d
			            WHERE d.jobid = $1)
			SELECT a.end_time, b.start_time FROM r AS a JOIN r AS b ON b.n = a.n + 1 WHERE a.n = $2`,
			jobID, k).Scan(&ended, &next))
		t.Logf("boundary %d: run %d ended %s after it, run %d started %s later; 100 orders, worst lag %.0f ms",
			k, k, ended.Sub(at), k+1, next.Sub(ended), worst*1000)
		require.Less(t, worst, maxLag.Seconds(), "boundary %d", k)
	}
}

// waitFor polls cond every 20 ms until it reports true, failing the test if
// it has not within d or if it returns an error.
func waitFor(t *testing.T, ctx context.Context, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		require.NoError(t, err, "waiting for %s", what)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not reached within %s", what, d)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
