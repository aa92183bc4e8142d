package race_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/timer"
)

// TestSweepDoesNotWaitForLocks: a sweep whose batch is not full never waits
// behind a transaction that holds what a cancel needs (the order's row, a
// stock row of its items, its points account). Each is held by an open
// transaction in turn; sweep_due must return at once (lock_timeout makes a
// wait an error), leave that order PENDING with its timer row, cancel the
// others; once the holder commits, the next sweep cancels it.
func TestSweepDoesNotWaitForLocks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)

	_, err := pool.Exec(ctx, `SELECT ordertimeout.configure(grace => '0')`)
	require.NoError(t, err)
	require.NoError(t, putStock(ctx, pool, map[string]int64{"held-sku": 100, "free-sku": 100, "row-sku": 100, "pts-sku": 100}))
	_, err = pool.Exec(ctx, `SELECT ordertimeout.put_points('acct', 1000)`)
	require.NoError(t, err)

	holds := []struct {
		name, order, hold string
		items             []item
		options           map[string]any
	}{
		{"stock row", "by-stock", `SELECT 1 FROM ordertimeout.stock WHERE sku = 'held-sku' FOR NO KEY UPDATE`,
			[]item{{SKU: "free-sku", Qty: 1}, {SKU: "held-sku", Qty: 1}}, nil},
		{"order row", "by-row", `SELECT 1 FROM ordertimeout.orders WHERE order_id = 'by-row' FOR NO KEY UPDATE`,
			[]item{{SKU: "row-sku", Qty: 1}}, nil},
		{"points account", "by-points", `SELECT 1 FROM ordertimeout.points_accounts WHERE account_id = 'acct' FOR NO KEY UPDATE`,
			[]item{{SKU: "pts-sku", Qty: 1}}, map[string]any{"points_account": "acct", "points": 10}},
	}
	sweeper := connect(ctx, t, url)
	_, err = sweeper.Exec(ctx, `SET lock_timeout = '2s'`)
	require.NoError(t, err)
	for _, h := range holds {
		t.Run(h.name, func(t *testing.T) {
			free := "free-" + h.order
			for _, o := range []newOrder{{ID: h.order, Items: h.items, Options: h.options}, {ID: free, Items: []item{{SKU: "free-sku", Qty: 1}}}} {
				options := o.Options
				if options == nil {
					options = map[string]any{}
				}
				_, err := pool.Exec(ctx, `SELECT ordertimeout.create_order($1, $2, interval '1 hour', $3)`, o.ID, o.Items, options)
				require.NoError(t, err)
			}
			_, err := expireAllAt(ctx, pool, 0)
			require.NoError(t, err)

			holder, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer holder.Rollback(context.Background()) //nolint:errcheck // committed below
			_, err = holder.Exec(ctx, h.hold)
			require.NoError(t, err)

			var s sweepStats
			began := time.Now()
			_, err = s.sweepOnce(ctx, sweeper, 1000)
			require.NoError(t, err, "sweep_due must not wait for the %s", h.name)
			t.Logf("sweep with the %s held: %v, %+v", h.name, time.Since(began).Round(time.Millisecond), s)
			require.Equal(t, 1, s.Cancelled, "the order nobody holds is cancelled")
			require.Equal(t, 1, s.Deferred, "the held order is reported deferred")
			require.Equal(t, 1, s.Claimed, "and not claimed")
			require.Equal(t, "PENDING", status(ctx, t, pool, h.order), "the held order waits for the next sweep")
			require.Equal(t, "CANCELLED", status(ctx, t, pool, free))
			require.Equal(t, 1, queryInt(ctx, t, pool, `
				SELECT count(*)::integer FROM public.river_job
				WHERE queue = $1 AND args ->> 'order_id' = $2 AND state = 'available'`, timer.Name, h.order),
				"its timer row is kept")

			require.NoError(t, holder.Commit(ctx))
			var after sweepStats
			_, err = after.sweepOnce(ctx, sweeper, 1000)
			require.NoError(t, err)
			require.Equal(t, sweepStats{Calls: 1, Claimed: 1, Cancelled: 1}, after, "the next sweep cancels it, nothing deferred")
			require.Equal(t, "CANCELLED", status(ctx, t, pool, h.order), "cancelled once the lock is gone")
			require.Equal(t, 1, queryInt(ctx, t, pool, `
				SELECT count(*)::integer FROM ordertimeout.releases WHERE order_id = $1 AND kind = 'stock' AND resource_id = $2`,
				h.order, h.items[len(h.items)-1].SKU), "released once")
		})
	}
}

func status(ctx context.Context, t *testing.T, db querier, orderID string) string {
	t.Helper()
	var s string
	require.NoError(t, db.QueryRow(ctx, `SELECT status FROM ordertimeout.orders WHERE order_id = $1`, orderID).Scan(&s))
	return s
}
