package metrics_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/metrics"
	"github.com/ordertimeout/ordertimeout/sidecar/metricstest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/timer"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func exec(t *testing.T, db *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	_, err := db.Exec(context.Background(), sql, args...)
	require.NoError(t, err, sql)
}

func sum(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	v, found, err := metricstest.Sum(g, name, labels...)
	require.NoError(t, err)
	require.True(t, found, "%s%q is exported", name, labels)
	return v
}

// The collector reads the database at each scrape: the gauges say what the
// database holds now, and the lag histogram counts each timeout cancel once.
func TestDBCollectorReadsAtScrape(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	exec(t, db, "SELECT ordertimeout.configure(grace => interval '0')")
	exec(t, db, "SELECT ordertimeout.put_stock('A', 10)")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewDBCollector(db, 0, time.Millisecond, nil))

	for _, id := range []string{"late", "open", "gone"} {
		exec(t, db, `SELECT ordertimeout.create_order($1, '[{"sku":"A","qty":1}]', interval '1 hour')`, id)
	}
	exec(t, db, "SELECT ordertimeout.cancel_order('gone')")
	require.Equal(t, 2.0, sum(t, reg, "ordertimeout_db_orders", "status", "PENDING"))
	require.Equal(t, 1.0, sum(t, reg, "ordertimeout_db_orders", "status", "CANCELLED"))
	require.Zero(t, sum(t, reg, "ordertimeout_db_sweep", "stat", "due_timers"))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ordertimeout_paused 1 while timeout cancels are paused (configure(paused => true), ordertimeout pause): nothing is cancelled by a timeout.
# TYPE ordertimeout_paused gauge
ordertimeout_paused 0
`), "ordertimeout_paused"))
	_, found, err := metricstest.Sum(reg, "ordertimeout_db_cancel_lag_seconds")
	require.NoError(t, err)
	require.False(t, found, "no timeout cancel yet")

	// "late" was due 3 s ago: it is due now, and overdue.
	exec(t, db, `WITH d AS (SELECT clock_timestamp() - interval '3 seconds' AS at)
	             UPDATE ordertimeout.orders SET created_at = d.at - interval '1 second', expire_at = d.at, cancel_at = d.at
	               FROM d WHERE order_id = 'late'`)
	exec(t, db, `UPDATE public.river_job SET scheduled_at = clock_timestamp() - interval '3 seconds'
	              WHERE queue = $1 AND args ->> 'order_id' = 'late'`, timer.Name)
	require.Equal(t, 1.0, sum(t, reg, "ordertimeout_db_sweep", "stat", "due_timers"))
	require.Equal(t, 1.0, sum(t, reg, "ordertimeout_db_sweep", "stat", "overdue_orders"))
	require.GreaterOrEqual(t, sum(t, reg, "ordertimeout_db_sweep", "stat", "oldest_overdue_seconds"), 3.0)

	exec(t, db, "SELECT ordertimeout.configure(paused => true)")
	require.Equal(t, 1.0, sum(t, reg, "ordertimeout_paused"))
	exec(t, db, "SELECT ordertimeout.configure(paused => false)")
	exec(t, db, "SELECT ordertimeout.cancel_due()")
	require.Equal(t, 2.0, sum(t, reg, "ordertimeout_db_orders", "status", "CANCELLED"))

	// The cancel is counted once it has settled, and only once.
	require.Eventually(t, func() bool {
		v, _, err := metricstest.Sum(reg, "ordertimeout_db_cancel_lag_seconds", "cause", "timeout")
		return err == nil && v == 1
	}, 10*time.Second, 10*time.Millisecond, "the timeout cancel reaches the lag histogram")
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != "ordertimeout_db_cancel_lag_seconds" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		require.EqualValues(t, 1, h.GetSampleCount())
		require.GreaterOrEqual(t, h.GetSampleSum(), 3.0, "3 s late")
		for _, b := range h.GetBucket() {
			want := uint64(0)
			if b.GetUpperBound() >= 5 {
				want = 1
			}
			require.Equal(t, want, b.GetCumulativeCount(), "bucket le=%v", b.GetUpperBound())
		}
	}
	require.Zero(t, sum(t, reg, "ordertimeout_db_sweep", "stat", "overdue_orders"))
	require.Equal(t, 1.0, sum(t, reg, "ordertimeout_db_cancel_lag_seconds", "cause", "timeout"), "counted once")
	_, found, err = metricstest.Sum(reg, "ordertimeout_db_polls_total", "result", "error")
	require.NoError(t, err)
	require.False(t, found, "no read failed")

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
}

// A database that does not answer leaves its gauges out of the scrape and
// counts the failed read; the rest of the page is still served.
func TestDBCollectorWithoutDatabase(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	reg := metrics.NewRegistry()
	reg.MustRegister(metrics.NewDBCollector(pool, time.Second, 0, slog.New(slog.DiscardHandler)))

	require.Equal(t, 1.0, sum(t, reg, "ordertimeout_db_polls_total", "result", "error"))
	for _, name := range []string{"ordertimeout_db_sweep", "ordertimeout_db_orders", "ordertimeout_paused"} {
		_, found, err := metricstest.Sum(reg, name)
		require.NoError(t, err)
		require.False(t, found, name)
	}
	require.Positive(t, testutil.CollectAndCount(reg, "go_goroutines"), "the Go collector is registered")
	require.Positive(t, testutil.CollectAndCount(reg, "process_start_time_seconds"), "the process collector is registered")
}

// A long gap without scrapes at a high cancel rate leaves more timeout
// cancels to count than one read should take. The collector once read them
// all in one query inside the scrape's time limit: past that limit the read
// failed, the lag watermark stayed, every later read was larger still, and
// the gauges were left out of every scrape with it. Now each scrape reads a
// page in the order of at, the gauges come at every scrape, and the
// histogram catches up over a few, counting each cancel exactly once: the
// cancels of one sweep share their at, and a page never splits such a group
// (one group here is larger than a page).
func TestDBCollectorCatchesUpAfterLongGap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewDBCollector(db, 0, time.Millisecond, slog.New(slog.DiscardHandler)))
	_, found, err := metricstest.Sum(reg, "ordertimeout_db_sweep") // the collector's first read: its start
	require.NoError(t, err)
	require.True(t, found)

	// 119,000 cancels in sweeps of 1,000 sharing their at, one a
	// millisecond apart, then one sweep of 60,000 (more than a page) at
	// one moment: 179,000.
	const groups, group, big = 119, 1000, 60_000
	const n = groups*group + big
	var end time.Time
	require.NoError(t, db.QueryRow(ctx, `
		WITH t0 AS (SELECT clock_timestamp() AS t0),
		     small AS (INSERT INTO ordertimeout.events (order_id, from_status, to_status, cause, actor, lateness, at)
		               SELECT 'gap' || i, 'PENDING', 'CANCELLED', 'timeout', 'test', interval '1 millisecond',
		                      t0 + (i / $2::int) * interval '1 millisecond'
		                 FROM t0, generate_series(0, $1::int * $2::int - 1) AS i),
		     large AS (INSERT INTO ordertimeout.events (order_id, from_status, to_status, cause, actor, lateness, at)
		               SELECT 'big' || i, 'PENDING', 'CANCELLED', 'timeout', 'test', interval '1 millisecond',
		                      t0 + $1::int * interval '1 millisecond'
		                 FROM t0, generate_series(1, $3::int) AS i)
		SELECT t0 + $1::int * interval '1 millisecond' FROM t0`, groups, group, big).Scan(&end))
	require.Eventually(t, func() bool {
		var settled bool
		err := db.QueryRow(ctx, "SELECT clock_timestamp() > $1::timestamptz + interval '10 milliseconds'", end).Scan(&settled)
		return err == nil && settled
	}, 30*time.Second, 10*time.Millisecond, "the cancels settled")

	var seen float64
	for scrape := 1; ; scrape++ {
		// One gather per scrape, read three times.
		mfs, err := reg.Gather()
		require.NoError(t, err)
		reg := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return mfs, nil })
		_, found, err := metricstest.Sum(reg, "ordertimeout_db_sweep")
		require.NoError(t, err)
		require.True(t, found, "scrape %d: the gauges are there", scrape)
		_, found, err = metricstest.Sum(reg, "ordertimeout_db_polls_total", "result", "error")
		require.NoError(t, err)
		require.False(t, found, "scrape %d: no read failed", scrape)
		v, _, err := metricstest.Sum(reg, "ordertimeout_db_cancel_lag_seconds", "cause", "timeout")
		require.NoError(t, err)
		require.LessOrEqual(t, v-seen, float64(big), "scrape %d read at most a page, or one sweep's group", scrape)
		require.LessOrEqual(t, v, float64(n), "scrape %d: no cancel counted twice", scrape)
		seen = v
		if v == n {
			require.Greater(t, scrape, 3, "caught up over several scrapes")
			t.Logf("caught up in %d scrapes", scrape)
			break
		}
		require.Less(t, scrape, 20, "the lag histogram catches up")
	}
}
