package race_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// TestOnePaymentIDTwoOrders: a payment_id belongs to one order. Given to two
// orders at once, the first call writes the payment row and the second,
// which looked before that row was committed, must fail with OT124 and
// write nothing, whatever the two calls are: a confirmation that pays, one
// that records a late payment, a payment start. The interleaving is built,
// not hoped for: the first call's transaction stays open until the second
// waits on its row lock (pg_stat_activity), then commits.
//
// Before migration 000027 the second confirmation updated the first order's
// payment row (ON CONFLICT DO UPDATE without a look at its order) and paid
// its own order too, or recorded a late payment on the other order's row; the
// second begin_payment raised a raw 23505.
func TestOnePaymentIDTwoOrders(t *testing.T) {
	t.Parallel()
	type call struct {
		name  string
		sql   string // $1 order id, $2 payment id
		order string // "pending" or "cancelled": the state of the order it is called on
	}
	var (
		confirm   = call{"confirm_payment (pays)", `SELECT ordertimeout.confirm_payment($1, $2, 10, 'EUR')`, "pending"}
		late      = call{"confirm_payment (late)", `SELECT ordertimeout.confirm_payment($1, $2, 10, 'EUR')`, "cancelled"}
		begin     = call{"begin_payment", `SELECT ordertimeout.begin_payment($1, $2)`, "pending"}
		confirmNA = call{"confirm_payment without amount", `SELECT ordertimeout.confirm_payment($1, $2)`, "pending"}
	)
	cases := [][2]call{
		{confirm, confirm}, {confirm, late}, {late, confirm}, {late, late},
		{begin, begin}, {begin, confirm}, {confirm, begin}, {begin, late}, {late, begin},
		{confirmNA, confirmNA},
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)
	totals := map[string]int64{"A": 1_000}
	require.NoError(t, putStock(ctx, pool, totals))
	first, second := connect(ctx, t, url), connect(ctx, t, url)

	for i, c := range cases {
		name := fmt.Sprintf("%d %s then %s", i, c[0].name, c[1].name)
		payment := fmt.Sprintf("P-%d", i)
		ids := [2]string{fmt.Sprintf("o%d-first", i), fmt.Sprintf("o%d-second", i)}
		for k, id := range ids {
			_, err := pool.Exec(ctx, `SELECT ordertimeout.create_order($1, '[{"sku":"A","qty":1}]', NULL,
			                                                          '{"amount":10,"currency":"EUR"}')`, id)
			require.NoError(t, err, name)
			if c[k].order == "cancelled" {
				_, err = pool.Exec(ctx, `SELECT ordertimeout.cancel_order($1)`, id)
				require.NoError(t, err, name)
			}
		}
		before := orderRows(ctx, t, pool, ids[1])

		tx, err := first.Begin(ctx)
		require.NoError(t, err, name)
		_, err = tx.Exec(ctx, c[0].sql, ids[0], payment)
		require.NoError(t, err, name)

		var pid int
		require.NoError(t, second.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid), name)
		done := make(chan error, 1)
		go func() {
			_, err := second.Exec(ctx, c[1].sql, ids[1], payment)
			done <- err
		}()
		require.NoError(t, waitFor(ctx, pool,
			`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')`, pid), name)
		require.NoError(t, tx.Commit(ctx), name)

		err = <-done
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: the second call answered %v, want OT124", name, err)
		require.Equal(t, sqlstate.PaymentOfOtherOrder, pgErr.Code, "%s: %s", name, pgErr.Message)
		require.Equal(t, before, orderRows(ctx, t, pool, ids[1]), "%s: nothing written for the second order", name)
		require.Equal(t, 1, queryInt(ctx, t, pool,
			`SELECT count(*) FROM ordertimeout.payments WHERE payment_id = $1 AND order_id = $2`, payment, ids[0]),
			"%s: the payment row is the first order's", name)
	}

	report, err := invariant.Check(ctx, pool, invariant.Options{StockTotals: totals})
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())
}

// TestOnePaymentIDManyOrders: eight sessions confirm the same payment_id for
// eight different orders at once, for 100 payment ids. Exactly one order per
// payment is paid; every other call fails with OT124 and its order stays
// PENDING; the invariants hold.
func TestOnePaymentIDManyOrders(t *testing.T) {
	t.Parallel()
	const (
		payments = 100
		sessions = 8
	)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)
	totals := map[string]int64{"A": payments * sessions}
	require.NoError(t, putStock(ctx, pool, totals))
	_, err := pool.Exec(ctx, `
		SELECT ordertimeout.create_order(format('o%s-%s', p, s), '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}')
		FROM generate_series(1, $1::integer) AS p, generate_series(1, $2::integer) AS s`, payments, sessions)
	require.NoError(t, err)

	conns := connectN(ctx, t, url, sessions)
	var mu sync.Mutex
	paid := make(map[int][]int) // payment -> sessions whose order it paid
	var failure error
	for p := 1; p <= payments; p++ {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for s, conn := range conns {
			wg.Add(1)
			go func(s int, conn *pgx.Conn) {
				defer wg.Done()
				<-start
				var answer string
				err := conn.QueryRow(ctx, `SELECT ordertimeout.confirm_payment($1, $2, 10, 'EUR')`,
					fmt.Sprintf("o%d-%d", p, s+1), fmt.Sprintf("P-%d", p)).Scan(&answer)
				var pgErr *pgconn.PgError
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && answer == "paid":
					paid[p] = append(paid[p], s+1)
				case errors.As(err, &pgErr) && pgErr.Code == sqlstate.PaymentOfOtherOrder:
				case failure == nil:
					failure = fmt.Errorf("payment P-%d, session %d: answer %q, error %v", p, s+1, answer, err)
				}
			}(s, conn)
		}
		close(start)
		wg.Wait()
	}
	require.NoError(t, failure)
	for p := 1; p <= payments; p++ {
		require.Len(t, paid[p], 1, "payment P-%d paid the orders of sessions %v", p, paid[p])
	}
	require.Equal(t, payments, queryInt(ctx, t, pool, `SELECT count(*) FROM ordertimeout.orders WHERE status = 'PAID'`))
	require.Equal(t, payments*(sessions-1), queryInt(ctx, t, pool, `SELECT count(*) FROM ordertimeout.orders WHERE status = 'PENDING'`))
	require.Equal(t, payments, queryInt(ctx, t, pool, `SELECT count(*) FROM ordertimeout.payments`))
	require.Zero(t, queryInt(ctx, t, pool, `SELECT count(*) FROM ordertimeout.conflicts`))
	report, err := invariant.Check(ctx, pool, invariant.Options{StockTotals: totals})
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())
}

// orderRows is everything about one order, as text: its row, payments,
// conflicts, events and River rows.
func orderRows(ctx context.Context, t *testing.T, db querier, orderID string) string {
	t.Helper()
	var s string
	require.NoError(t, db.QueryRow(ctx, `
		SELECT concat_ws(' | ',
		    (SELECT row(o.*)::text FROM ordertimeout.orders AS o WHERE o.order_id = $1),
		    (SELECT string_agg(row(p.*)::text, ',' ORDER BY p.payment_id) FROM ordertimeout.payments AS p WHERE p.order_id = $1),
		    (SELECT string_agg(row(c.*)::text, ',' ORDER BY c.conflict_id) FROM ordertimeout.conflicts AS c WHERE c.order_id = $1),
		    (SELECT count(*)::text FROM ordertimeout.events AS e WHERE e.order_id = $1),
		    (SELECT count(*)::text FROM river_job AS j WHERE j.args ->> 'order_id' = $1))`, orderID).Scan(&s))
	return s
}

// TestOnePaymentIDUnderRepeatableRead: a caller that runs the API inside a
// REPEATABLE READ (or SERIALIZABLE) transaction whose snapshot predates
// another order's use of the payment_id cannot see that payment row, so the
// function's own look passes; the upsert then meets the row and PostgreSQL
// raises a serialization failure (40001) before anything is written, as the
// README's Errors section says. The retry, in a new transaction, gets OT124.
// One payment still pays one order.
func TestOnePaymentIDUnderRepeatableRead(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)
	totals := map[string]int64{"A": 100}
	require.NoError(t, putStock(ctx, pool, totals))
	conn := connect(ctx, t, url)

	for i, call := range []string{
		`SELECT ordertimeout.confirm_payment($1, $2, 10, 'EUR')`,
		`SELECT ordertimeout.confirm_payment($1, $2)`,
		`SELECT ordertimeout.begin_payment($1, $2)`,
	} {
		payment := fmt.Sprintf("RR-%d", i)
		ids := [2]string{fmt.Sprintf("rr%d-first", i), fmt.Sprintf("rr%d-second", i)}
		for _, id := range ids {
			_, err := pool.Exec(ctx, `SELECT ordertimeout.create_order($1, '[{"sku":"A","qty":1}]', NULL,
			                                                          '{"amount":10,"currency":"EUR"}')`, id)
			require.NoError(t, err, call)
		}
		before := orderRows(ctx, t, pool, ids[1])

		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SELECT count(*) FROM ordertimeout.payments`) // takes the snapshot
		require.NoError(t, err)
		var answer string
		require.NoError(t, pool.QueryRow(ctx, `SELECT ordertimeout.confirm_payment($1, $2, 10, 'EUR')`,
			ids[0], payment).Scan(&answer))
		require.Equal(t, "paid", answer)

		_, err = tx.Exec(ctx, call, ids[1], payment)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s in an old snapshot answered %v, want 40001", call, err)
		require.Equal(t, "40001", pgErr.Code, "%s: %s", call, pgErr.Message)
		require.NoError(t, tx.Rollback(ctx))
		require.Equal(t, before, orderRows(ctx, t, pool, ids[1]), "%s: nothing written", call)

		tx, err = conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		require.NoError(t, err)
		_, err = tx.Exec(ctx, call, ids[1], payment)
		require.True(t, errors.As(err, &pgErr), "%s retried answered %v, want OT124", call, err)
		require.Equal(t, sqlstate.PaymentOfOtherOrder, pgErr.Code, "%s: %s", call, pgErr.Message)
		require.NoError(t, tx.Rollback(ctx))
		require.Equal(t, before, orderRows(ctx, t, pool, ids[1]), "%s: nothing written", call)
	}
	report, err := invariant.Check(ctx, pool, invariant.Options{StockTotals: totals})
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())
}
