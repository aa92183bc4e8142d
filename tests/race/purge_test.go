package race_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// TestPurgeRacesLatePayment: two sessions purge old CLOSED orders in small
// batches while four others confirm a late payment for every one of them, in
// random order, all at once. Each order ends one of two ways: the purge took
// it first, and the confirmation then finds no order (OT120, nothing
// written); or the confirmation came first, and the order stays with its
// open conflict, which no purge deletes. Never both, never a purge error
// (a conflict's foreign key would refuse the order's deletion), never a
// conflict, payment or event left of a purged order.
func TestPurgeRacesLatePayment(t *testing.T) {
	t.Parallel()
	const (
		orders  = 600
		purgers = 2
		payers  = 4
		batch   = 20
	)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)
	totals := map[string]int64{"A": 1_000_000, "B": 1_000_000}
	require.NoError(t, putStock(ctx, pool, totals))
	_, err := pool.Exec(ctx, `
		SELECT ordertimeout.create_order('o' || g, '[{"sku":"A","qty":1},{"sku":"B","qty":1}]')
		FROM generate_series(1, $1::integer) AS g`, orders)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT ordertimeout.cancel_order(o.order_id) FROM ordertimeout.orders AS o`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT ordertimeout.close_cancelled(interval '0', 100000);
		UPDATE ordertimeout.orders SET closed_at = closed_at - interval '1 day'`)
	require.NoError(t, err)

	ids := make([]string, orders)
	for i := range ids {
		ids[i] = fmt.Sprintf("o%d", i+1)
	}
	rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })

	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := make(map[string]string) // order -> "conflict" or "unknown"
	purged := 0
	var failure error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if failure == nil {
			failure = err
		}
	}
	for _, conn := range connectN(ctx, t, url, purgers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				var n int
				if err := conn.QueryRow(ctx, "SELECT ordertimeout.purge_orders(interval '1 hour', $1)", batch).Scan(&n); err != nil {
					fail(fmt.Errorf("purge_orders: %w", err))
					return
				}
				mu.Lock()
				purged += n
				done := len(answers) == orders
				mu.Unlock()
				if n == 0 && done {
					return
				}
			}
		}()
	}
	for p, conn := range connectN(ctx, t, url, payers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := p; i < orders; i += payers {
				id := ids[i]
				var answer string
				err := conn.QueryRow(ctx, "SELECT ordertimeout.confirm_payment($1, $2)", id, "late-"+id).Scan(&answer)
				var pgErr *pgconn.PgError
				switch {
				case errors.As(err, &pgErr) && pgErr.Code == sqlstate.UnknownOrder:
					answer = "unknown"
				case err != nil:
					fail(fmt.Errorf("confirm_payment %s: %w", id, err))
					return
				}
				mu.Lock()
				answers[id] = answer
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	require.NoError(t, failure)
	require.Len(t, answers, orders)

	kept := 0
	rows, err := pool.Query(ctx, `
		SELECT g.id,
		       (SELECT count(*) FROM ordertimeout.orders AS o WHERE o.order_id = g.id AND o.status = 'CANCELLED'),
		       (SELECT count(*) FROM ordertimeout.conflicts AS c WHERE c.order_id = g.id AND c.resolution IS NULL
		                                                             AND c.kind = 'late_payment'),
		       (SELECT count(*) FROM ordertimeout.payments AS p WHERE p.order_id = g.id AND p.status = 'late'),
		       (SELECT count(*) FROM ordertimeout.events AS e WHERE e.order_id = g.id),
		       (SELECT count(*) FROM ordertimeout.order_items AS i WHERE i.order_id = g.id)
		FROM unnest($1::text[]) AS g(id)`, ids)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id string
		var order, conflict, payment, events, items int
		require.NoError(t, rows.Scan(&id, &order, &conflict, &payment, &events, &items))
		switch answers[id] {
		case "conflict":
			require.Equal(t, []int{1, 1, 1}, []int{order, conflict, payment},
				"%s: its late payment was recorded, so the order (CANCELLED again), its open conflict and the payment stay", id)
			require.Equal(t, 2, items, id)
			kept++
		case "unknown":
			require.Equal(t, []int{0, 0, 0, 0, 0}, []int{order, conflict, payment, events, items},
				"%s: purged before its payment came: nothing of it is left", id)
		default:
			t.Fatalf("%s: confirm_payment answered %q", id, answers[id])
		}
	}
	require.NoError(t, rows.Err())
	require.Equal(t, orders-kept, purged, "every purged order was counted once")
	t.Logf("%d orders purged before their late payment, %d kept with an open conflict", purged, kept)

	report, err := invariant.Check(ctx, pool, invariant.Options{StockTotals: totals})
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())

	// Resolved and closed again, they go too.
	_, err = pool.Exec(ctx, `SELECT ordertimeout.resolve_conflict(conflict_id, 'refund') FROM ordertimeout.open_conflicts(100000)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT ordertimeout.finish_refund(conflict_id, 'R-' || conflict_id) FROM ordertimeout.open_conflicts(100000)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT ordertimeout.close_cancelled(interval '0', 100000)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE ordertimeout.orders SET closed_at = closed_at - interval '2 hours' WHERE status = 'CLOSED'`)
	require.NoError(t, err)
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT ordertimeout.purge_orders(interval '1 hour', 100000)").Scan(&n))
	require.Equal(t, kept, n)
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM ordertimeout.orders) + (SELECT count(*) FROM ordertimeout.conflicts)
	                                         + (SELECT count(*) FROM ordertimeout.payments)`).Scan(&n))
	require.Zero(t, n, "nothing is left")
}

// TestPurgesDoNotWaitForEachOthersRecords: a purge whose order id was purged
// before holds that id's purged_orders record (its upsert) until it commits.
// Another purge, pruning the records an hour old, passes that row over
// instead of waiting for it, so two purges never wait for each other there
// (a review saw them deadlock when each held a row the other's prune
// wanted); the held record goes with a later purge.
func TestPurgesDoNotWaitForEachOthersRecords(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)
	require.NoError(t, putStock(ctx, pool, map[string]int64{"A": 1000}))
	closed := func(id string) {
		t.Helper()
		for _, q := range []string{
			`SELECT ordertimeout.create_order($1, '[{"sku":"A","qty":1}]')`,
			`SELECT ordertimeout.cancel_order($1)`,
		} {
			_, err := pool.Exec(ctx, q, id)
			require.NoError(t, err)
		}
		_, err := pool.Exec(ctx, `SELECT ordertimeout.close_cancelled(interval '0', 10)`)
		require.NoError(t, err)
	}
	// X was purged an hour ago and given again: purging it again upserts
	// its old record. Y is another closed order for the second purge.
	_, err := pool.Exec(ctx, `INSERT INTO ordertimeout.purged_orders (order_id, purged_at)
		VALUES ('X', clock_timestamp() - interval '2 hours'), ('old', clock_timestamp() - interval '2 hours')`)
	require.NoError(t, err)
	closed("X")
	_, err = pool.Exec(ctx, `UPDATE ordertimeout.orders SET closed_at = closed_at - interval '1 minute' WHERE order_id = 'X'`)
	require.NoError(t, err)
	closed("Y")

	conns := connectN(ctx, t, url, 2)
	first, err := conns[0].Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(context.WithoutCancel(ctx)) }()
	var n int
	require.NoError(t, first.QueryRow(ctx, "SELECT ordertimeout.purge_orders(interval '0', 1)").Scan(&n))
	require.Equal(t, 1, n, "the first purge takes X, the oldest closed, and holds its record")

	// The second purge takes Y and prunes: X's and old's records, an hour
	// old in its snapshot, are held by the first purge (its upsert and its
	// own prune): passed over, not waited for.
	qctx, qcancel := context.WithTimeout(ctx, 10*time.Second)
	defer qcancel()
	require.NoError(t, conns[1].QueryRow(qctx, "SELECT ordertimeout.purge_orders(interval '0', 1)").Scan(&n),
		"the second purge did not wait for the first one's record")
	require.Equal(t, 1, n)
	records := func() []string {
		t.Helper()
		var ids []string
		rows, err := pool.Query(ctx, "SELECT order_id FROM ordertimeout.purged_orders ORDER BY 1")
		require.NoError(t, err)
		for rows.Next() {
			var id string
			require.NoError(t, rows.Scan(&id))
			ids = append(ids, id)
		}
		require.NoError(t, rows.Err())
		return ids
	}
	require.Equal(t, []string{"X", "Y", "old"}, records(),
		"Y recorded; X's record (upserted) and old's (pruned) are the first purge's, not committed yet")
	require.NoError(t, first.Commit(ctx))
	require.Equal(t, []string{"X", "Y"}, records(), "the first purge's prune and upsert committed")
}
