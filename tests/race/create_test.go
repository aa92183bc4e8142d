package race_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
	"github.com/ordertimeout/ordertimeout/sidecar/timer"
)

// TestCreateOrderIdempotentUnderConcurrency: eight sessions create the same
// order (same id, same content) at once. Exactly one call creates it, the
// others get the existing order, and its stock, coupon, points and timer are
// reserved once.
func TestCreateOrderIdempotentUnderConcurrency(t *testing.T) {
	t.Parallel()
	const sessions = 8
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)

	totals := map[string]int64{"A": 100, "B": 100}
	require.NoError(t, putStock(ctx, pool, totals))
	_, err := pool.Exec(ctx, `SELECT ordertimeout.put_points('acct', 1000)`)
	require.NoError(t, err)

	const (
		items   = `[{"sku":"B","qty":3},{"sku":"A","qty":2}]`
		options = `{"coupon":"WELCOME","points_account":"acct","points":40,"amount":25,"currency":"EUR"}`
	)
	conns := connectN(ctx, t, url, sessions)
	created := make([]bool, sessions)
	statuses := make([]string, sessions)
	errs := make([]error, sessions)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Go(func() {
			<-start
			errs[i] = conn.QueryRow(ctx, `
				SELECT created, status FROM ordertimeout.create_order('dup', $1::jsonb, '10 minutes', $2::jsonb)`,
				items, options).Scan(&created[i], &statuses[i])
		})
	}
	close(start)
	wg.Wait()
	requireNoSessionError(t, "session", errs)

	var creators int
	for i := range sessions {
		require.Equal(t, "PENDING", statuses[i], "session %d", i)
		if created[i] {
			creators++
		}
	}
	require.Equal(t, 1, creators, "calls that answered created=true: %v", created)

	var reservedA, reservedB, availableA, availableB, held int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT (SELECT reserved FROM ordertimeout.stock WHERE sku = 'A'),
		       (SELECT reserved FROM ordertimeout.stock WHERE sku = 'B'),
		       (SELECT available FROM ordertimeout.stock WHERE sku = 'A'),
		       (SELECT available FROM ordertimeout.stock WHERE sku = 'B'),
		       (SELECT held FROM ordertimeout.points_accounts WHERE account_id = 'acct')`).
		Scan(&reservedA, &reservedB, &availableA, &availableB, &held))
	require.Equal(t, []int{2, 3, 98, 97, 40}, []int{reservedA, reservedB, availableA, availableB, held},
		"reserved A, B; available A, B; points held")
	require.Equal(t, 1, queryInt(ctx, t, pool, `SELECT count(*) FROM ordertimeout.coupon_holds WHERE coupon_id = 'WELCOME'`))
	require.Equal(t, 1, queryInt(ctx, t, pool, `
		SELECT count(*) FROM public.river_job WHERE queue = $1 AND args ->> 'order_id' = 'dup'`, timer.Name),
		"timer rows")
	require.Equal(t, 1, queryInt(ctx, t, pool, `SELECT count(*) FROM ordertimeout.events WHERE order_id = 'dup'`))

	// The same id with other content is refused, and changes nothing.
	_, err = pool.Exec(ctx, `SELECT ordertimeout.create_order('dup', '[{"sku":"A","qty":1}]', '10 minutes')`)
	require.Equal(t, sqlstate.OrderIDConflict, sqlstate.Code(err), "create_order with other content: %v", err)

	report, err := invariant.Check(ctx, pool, invariant.Options{StockTotals: totals})
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())
}
