package race_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// TestCloseNeverPassesALatePayment: no CLOSED order has an open conflict.
// close_cancelled decides with a snapshot; a late payment committed after
// that snapshot must not be closed past. Issue 9 reproduced (with a pause
// inside close_cancelled after its NOT EXISTS check): the order ended CLOSED
// with an open conflict.
//
// Deterministic part: a REPEATABLE READ transaction holds a snapshot taken
// before the late payment commits, then closes. confirm_payment touches the
// order row, so the close fails with 40001 instead of closing the order.
// Concurrent part: sessions closing in READ COMMITTED race sessions
// confirming late payments on the same orders; afterwards no CLOSED order
// has an unresolved conflict.
func TestCloseNeverPassesALatePayment(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	exec(`SELECT ordertimeout.put_stock('A', 100000)`)

	// Deterministic.
	exec(`SELECT ordertimeout.create_order('snap', '[{"sku":"A","qty":1}]')`)
	exec(`SELECT ordertimeout.cancel_order('snap')`)
	closer := connect(ctx, t, url)
	tx, err := closer.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	require.Equal(t, 1, queryInt(ctx, t, tx, `SELECT count(*)::integer FROM ordertimeout.orders WHERE order_id = 'snap'`),
		"the snapshot is taken")
	var answer string
	require.NoError(t, pool.QueryRow(ctx, `SELECT ordertimeout.confirm_payment('snap', 'snap-p')`).Scan(&answer))
	require.Equal(t, "conflict", answer)
	var closed int
	err = tx.QueryRow(ctx, `SELECT ordertimeout.close_cancelled(interval '0', 10)`).Scan(&closed)
	require.Equal(t, sqlstate.SerializationFailure, sqlstate.Code(err), "closing from a snapshot older than the late payment: %v (closed %d)", err, closed)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, 0, queryInt(ctx, t, pool, `SELECT count(*)::integer FROM ordertimeout.orders WHERE status = 'CLOSED'`))

	// Concurrent.
	const n = 400
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("c-%03d", i)
	}
	exec(`SELECT ordertimeout.create_order(id, '[{"sku":"A","qty":1}]') FROM unnest($1::text[]) AS id`, ids)
	exec(`SELECT ordertimeout.cancel_order(id) FROM unnest($1::text[]) AS id`, ids)

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	done := make(chan struct{})
	for range 3 {
		conn := connect(ctx, t, url)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := conn.Exec(ctx, `SELECT ordertimeout.close_cancelled(interval '0', 7)`); err != nil {
					errs <- fmt.Errorf("close: %w", err)
					return
				}
			}
		}()
	}
	var payers sync.WaitGroup
	for w := range 3 {
		conn := connect(ctx, t, url)
		payers.Add(1)
		go func() {
			defer payers.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i, id := range ids {
				if i%3 != w || r.IntN(2) == 0 {
					continue
				}
				var a string
				if err := conn.QueryRow(ctx, `SELECT ordertimeout.confirm_payment($1, $2)`, id, id+"-p").Scan(&a); err != nil {
					errs <- fmt.Errorf("confirm %s: %w", id, err)
					return
				}
				if a != "conflict" {
					errs <- fmt.Errorf("confirm %s answered %s, want conflict", id, a)
					return
				}
			}
		}()
	}
	payers.Wait()
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	exec(`SELECT ordertimeout.close_cancelled(interval '0', 1000)`) // what the closers had not reached

	require.Zero(t, queryInt(ctx, t, pool, `
		SELECT count(*)::integer FROM ordertimeout.orders AS o
		 WHERE o.status = 'CLOSED'
		   AND EXISTS (SELECT 1 FROM ordertimeout.conflicts AS c WHERE c.order_id = o.order_id AND c.resolution IS NULL)`),
		"a CLOSED order with an open conflict")
	late := queryInt(ctx, t, pool, `SELECT count(*)::integer FROM ordertimeout.conflicts WHERE order_id LIKE 'c-%'`)
	require.Positive(t, late)
	require.Equal(t, late, queryInt(ctx, t, pool, `
		SELECT count(*)::integer FROM ordertimeout.orders AS o
		 WHERE o.order_id LIKE 'c-%' AND o.status = 'CANCELLED'
		   AND EXISTS (SELECT 1 FROM ordertimeout.conflicts AS c WHERE c.order_id = o.order_id)`),
		"every order paid late is CANCELLED (reopened if it had been closed)")
	require.Equal(t, n-late, queryInt(ctx, t, pool, `
		SELECT count(*)::integer FROM ordertimeout.orders WHERE order_id LIKE 'c-%' AND status = 'CLOSED'`),
		"every other order is closed")
}
