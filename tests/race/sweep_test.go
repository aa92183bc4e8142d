package race_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/timer"
)

// TestSweepSessionsCancelEachOrderOnce: four sessions sweep 10,000 due orders
// at once. SKIP LOCKED must hand each timeout to exactly one of them: every
// order is cancelled once, by its timer, with its two items released once,
// every session does a share, and no session deadlocks or fails.
func TestSweepSessionsCancelEachOrderOnce(t *testing.T) {
	t.Parallel()
	const (
		orders   = 10_000
		sessions = 4
		batch    = 100 // small enough that all sessions get batches
		shares   = 4   // creating connections, each with SKUs of its own
		skus     = 5   // per share
	)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)

	totals := make(map[string]int64)
	work := make([][]newOrder, shares)
	for w := range work {
		for k := range skus {
			totals[fmt.Sprintf("w%d-sku%d", w, k)] = 1_000_000
		}
		for i := range orders / shares {
			work[w] = append(work[w], newOrder{
				ID: fmt.Sprintf("sweep-%d-%05d", w, i),
				Items: []item{
					{SKU: fmt.Sprintf("w%d-sku%d", w, i%skus), Qty: 1 + i%3},
					{SKU: fmt.Sprintf("w%d-sku%d", w, (i+1)%skus), Qty: 1 + (i/skus)%3},
				},
			})
		}
	}
	_, err := pool.Exec(ctx, `SELECT ordertimeout.configure(grace => '0')`)
	require.NoError(t, err)
	require.NoError(t, putStock(ctx, pool, totals))

	began := time.Now()
	require.NoError(t, createOrders(ctx, url, work, after(time.Millisecond)))
	t.Logf("created %d orders in %v", orders, time.Since(began).Round(time.Millisecond))
	require.NoError(t, waitFor(ctx, pool, `
		SELECT NOT EXISTS (SELECT 1
		                     FROM public.river_job AS r
		                    WHERE r.queue = $1
		                      AND r.scheduled_at > clock_timestamp())`, timer.Name))

	conns := connectN(ctx, t, url, sessions)
	stats := make([]sweepStats, sessions)
	errs := make([]error, sessions)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Go(func() {
			<-start
			stats[i], errs[i] = sweepUntilEmpty(ctx, conn, batch)
		})
	}
	began = time.Now()
	close(start)
	wg.Wait()
	t.Logf("swept in %v", time.Since(began).Round(time.Millisecond))
	requireNoSessionError(t, "session", errs)

	var total sweepStats
	for i, s := range stats {
		t.Logf("session %d: %+v", i, s)
		require.Positive(t, s.Cancelled, "session %d cancelled nothing", i)
		total.add(s)
	}
	require.Equal(t, orders, total.Cancelled, "cancelled, summed over sessions")
	require.Equal(t, orders, total.Claimed, "timer rows claimed, summed over sessions")
	require.Zero(t, total.CaughtBySweep, "timeouts caught without their timer row")
	require.Zero(t, total.Checks)
	require.Zero(t, total.Moot)

	require.Equal(t, orders, queryInt(ctx, t, pool, `
		SELECT count(*) FROM ordertimeout.orders WHERE status = 'CANCELLED' AND cancel_cause = 'timeout'`))
	require.Equal(t, orders, queryInt(ctx, t, pool, `SELECT count(*) FROM ordertimeout.orders`))
	require.Zero(t, queryInt(ctx, t, pool, `
		SELECT count(*)
		FROM (SELECT o.order_id
		        FROM ordertimeout.orders AS o
		        LEFT JOIN ordertimeout.events AS e
		               ON e.order_id = o.order_id AND e.from_status = 'PENDING' AND e.to_status = 'CANCELLED'
		       GROUP BY o.order_id
		      HAVING count(e.event_id) <> 1) AS x`), "orders without exactly one PENDING -> CANCELLED event")
	require.Zero(t, queryInt(ctx, t, pool, `
		SELECT count(*)
		FROM (SELECT o.order_id
		        FROM ordertimeout.orders AS o
		        LEFT JOIN ordertimeout.releases AS r ON r.order_id = o.order_id
		       GROUP BY o.order_id
		      HAVING count(r.order_id) <> 2) AS x`), "orders without exactly two release rows")
	require.Equal(t, 2*orders, queryInt(ctx, t, pool, `SELECT count(*) FROM ordertimeout.releases`))
	require.Zero(t, queryInt(ctx, t, pool, `
		SELECT count(*) FROM public.river_job WHERE queue = $1`, timer.Name), "timer rows left")

	began = time.Now()
	report, err := invariant.Check(ctx, pool, invariant.Options{StockTotals: totals, Slack: time.Second})
	require.NoError(t, err)
	t.Logf("invariants checked in %v", time.Since(began).Round(time.Millisecond))
	require.True(t, report.OK(), report.String())
}
