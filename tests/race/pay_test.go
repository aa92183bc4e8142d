package race_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
	"github.com/ordertimeout/ordertimeout/sidecar/timer"
)

// TestPaymentRacesCancel: 2,000 orders expire at the same instant (created
// with a long timeout, then moved to one deadline). Through that instant each
// gets a full payment (begin_payment, then confirm_payment) and a
// cancel_order, while sweeps run back to back. Each order must end PAID or
// CANCELLED, never both: every "paid" answer has a PAID order, every
// "conflict" answer a late_payment conflict on a CANCELLED order, each cancel
// is counted by exactly one caller, and stock, coupons and points are
// conserved.
func TestPaymentRacesCancel(t *testing.T) {
	t.Parallel()
	const (
		orders     = 2_000
		shares     = 4 // creating connections, each with SKUs of its own
		skus       = 5 // per share
		accounts   = 5 // per share
		balance    = 1_000
		points     = 10
		payers     = 4
		cancellers = 2
		sweepers   = 2
		batch      = 20
		// lead is how long before the deadline the racers start, so that
		// the race runs through it.
		lead = 100 * time.Millisecond
	)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)

	// Orders: two items each; a coupon of its own for every fourth, points
	// from an account of its share for every third, an amount for all.
	totals := make(map[string]int64)
	work := make([][]newOrder, shares)
	var all []newOrder
	for w := range work {
		for k := range skus {
			totals[fmt.Sprintf("w%d-sku%d", w, k)] = 100_000
		}
		for i := range orders / shares {
			n := w*orders/shares + i
			o := newOrder{
				ID: fmt.Sprintf("pay-%04d", n),
				Items: []item{
					{SKU: fmt.Sprintf("w%d-sku%d", w, i%skus), Qty: 1 + i%3},
					{SKU: fmt.Sprintf("w%d-sku%d", w, (i+1)%skus), Qty: 1 + (i/skus)%3},
				},
				Options: map[string]any{"amount": 10 + n%7, "currency": "EUR"},
			}
			if n%4 == 0 {
				o.Options["coupon"] = fmt.Sprintf("coupon-%04d", n)
			}
			if n%3 == 0 {
				o.Options["points_account"] = fmt.Sprintf("acct-%d-%d", w, i%accounts)
				o.Options["points"] = points
			}
			work[w] = append(work[w], o)
			all = append(all, o)
		}
	}
	_, err := pool.Exec(ctx, `SELECT ordertimeout.configure(grace => '0')`)
	require.NoError(t, err)
	require.NoError(t, putStock(ctx, pool, totals))
	_, err = pool.Exec(ctx, `SELECT ordertimeout.put_points(format('acct-%s-%s', w, i), $1)
	                         FROM generate_series(0, $2 - 1) AS w, generate_series(0, $3 - 1) AS i`,
		balance, shares, accounts)
	require.NoError(t, err)

	began := time.Now()
	require.NoError(t, createOrders(ctx, url, work, after(time.Hour)))
	t.Logf("created %d orders in %v", orders, time.Since(began).Round(time.Millisecond))
	// The sweeps claim the timers in job id order (all are due at one
	// instant). Cancellers take the orders in that order too, racing the
	// sweeps for the same orders; payers take them from the other end and
	// meet the sweeps and cancellers head-on somewhere in the middle.
	byID := make(map[string]newOrder, len(all))
	for _, o := range all {
		byID[o.ID] = o
	}
	rows, err := pool.Query(ctx, `SELECT order_id FROM ordertimeout.orders ORDER BY timer_job_id`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Len(t, ids, orders)
	all = all[:0]
	for _, id := range ids {
		all = append(all, byID[id])
	}

	payConns := connectN(ctx, t, url, payers)
	cancelConns := connectN(ctx, t, url, cancellers)
	sweepConns := connectN(ctx, t, url, sweepers)
	deadline, err := expireAllAt(ctx, pool, 2*lead)
	require.NoError(t, err)

	answers := make([]string, orders) // confirm_payment's answer per order
	var accepted, refused, cancelledByCall atomic.Int64
	var payNext atomic.Int64 // payers go down from the last order
	payNext.Store(orders)
	var cancelNext atomic.Int64 // cancellers go up from the first, with the sweeps

	pay := func(conn *pgx.Conn, n int) error {
		o := all[n]
		payment := "p-" + o.ID
		_, err := conn.Exec(ctx, `SELECT ordertimeout.begin_payment($1, $2)`, o.ID, payment)
		switch code := sqlstate.Code(err); {
		case err == nil:
			accepted.Add(1)
		case code == sqlstate.OrderExpired || code == sqlstate.WrongStatus: // expired, or already cancelled
			refused.Add(1)
		default:
			return fmt.Errorf("begin payment %s: %w", payment, err)
		}
		if err := conn.QueryRow(ctx, `SELECT ordertimeout.confirm_payment($1, $2, $3)`, o.ID, payment, o.Options["amount"]).
			Scan(&answers[n]); err != nil {
			return fmt.Errorf("confirm payment %s: %w", payment, err)
		}
		return nil
	}
	cancelOrder := func(conn *pgx.Conn, n int) error {
		var cancelled bool
		if err := conn.QueryRow(ctx, `SELECT ordertimeout.cancel_order($1)`, all[n].ID).Scan(&cancelled); err != nil {
			return fmt.Errorf("cancel order %s: %w", all[n].ID, err)
		}
		if cancelled {
			cancelledByCall.Add(1)
		}
		return nil
	}

	start := make(chan struct{})
	racersDone := make(chan struct{})
	payErrs := make([]error, payers)
	cancelErrs := make([]error, cancellers)
	sweepErrs := make([]error, sweepers)
	sweepStatsOf := make([]sweepStats, sweepers)
	var racers, sweeps sync.WaitGroup
	for i, conn := range payConns {
		racers.Go(func() {
			<-start
			for n := int(payNext.Add(-1)); n >= 0 && payErrs[i] == nil; n = int(payNext.Add(-1)) {
				payErrs[i] = pay(conn, n)
			}
		})
	}
	for i, conn := range cancelConns {
		racers.Go(func() {
			<-start
			for n := int(cancelNext.Add(1) - 1); n < orders && cancelErrs[i] == nil; n = int(cancelNext.Add(1) - 1) {
				cancelErrs[i] = cancelOrder(conn, n)
			}
		})
	}
	for i, conn := range sweepConns {
		sweeps.Go(func() {
			<-start
			sweepStatsOf[i], sweepErrs[i] = sweepUntil(ctx, conn, batch, racersDone)
		})
	}

	require.NoError(t, waitFor(ctx, pool, `SELECT clock_timestamp() >= $1`, deadline.Add(-lead)))
	close(start)
	racers.Wait()
	close(racersDone)
	sweeps.Wait()
	requireNoSessionError(t, "payer", payErrs)
	requireNoSessionError(t, "canceller", cancelErrs)
	requireNoSessionError(t, "sweeper", sweepErrs)

	var swept sweepStats
	for _, s := range sweepStatsOf {
		swept.add(s)
	}

	// Every confirm answered paid or conflict.
	answered := map[string]int{}
	for n, a := range answers {
		require.Contains(t, []string{"paid", "conflict"}, a, "confirm_payment of %s", all[n].ID)
		answered[a]++
	}

	// Every order PAID xor CANCELLED, as its confirm said.
	status := map[string]string{}
	rows, err = pool.Query(ctx, `SELECT order_id, status FROM ordertimeout.orders`)
	require.NoError(t, err)
	var id, st string
	_, err = pgx.ForEachRow(rows, []any{&id, &st}, func() error { status[id] = st; return nil })
	require.NoError(t, err)
	require.Len(t, status, orders)

	conflicts := map[string]string{} // payment -> kind and order status
	rows, err = pool.Query(ctx, `
		SELECT c.payment_id, c.kind || ' on ' || o.status
		FROM ordertimeout.conflicts AS c
		JOIN ordertimeout.orders AS o ON o.order_id = c.order_id`)
	require.NoError(t, err)
	var payment, what string
	_, err = pgx.ForEachRow(rows, []any{&payment, &what}, func() error { conflicts[payment] = what; return nil })
	require.NoError(t, err)

	counts := map[string]int{}
	for n, o := range all {
		counts[status[o.ID]]++
		switch answers[n] {
		case "paid":
			require.Equal(t, "PAID", status[o.ID], "order %s answered paid", o.ID)
		case "conflict":
			require.Equal(t, "late_payment on CANCELLED", conflicts["p-"+o.ID], "order %s answered conflict", o.ID)
		}
	}
	t.Logf("paid %d, cancelled %d (by cancel_order %d, by sweep %d), conflicts %d; begin_payment accepted %d, refused %d; sweeps %+v",
		counts["PAID"], counts["CANCELLED"], cancelledByCall.Load(), swept.Cancelled, len(conflicts),
		accepted.Load(), refused.Load(), swept)
	require.Equal(t, orders, counts["PAID"]+counts["CANCELLED"], "orders neither PAID nor CANCELLED: %v", counts)
	require.Equal(t, answered["paid"], counts["PAID"])
	require.Equal(t, answered["conflict"], counts["CANCELLED"])
	require.Len(t, conflicts, answered["conflict"], "conflict rows")

	// Each cancel came from one caller, once.
	require.Equal(t, int(cancelledByCall.Load()), queryInt(ctx, t, pool, `
		SELECT count(*) FROM ordertimeout.orders WHERE status = 'CANCELLED' AND cancel_cause = 'requested'`))
	require.Equal(t, swept.Cancelled, queryInt(ctx, t, pool, `
		SELECT count(*) FROM ordertimeout.orders WHERE status = 'CANCELLED' AND cancel_cause = 'timeout'`))
	require.Zero(t, swept.CaughtBySweep, "timeouts caught without their timer row")
	require.Zero(t, queryInt(ctx, t, pool, `
		SELECT count(*)
		FROM (SELECT o.order_id
		        FROM ordertimeout.orders AS o
		        LEFT JOIN ordertimeout.events AS e
		               ON e.order_id = o.order_id AND e.from_status = 'PENDING' AND e.to_status = 'CANCELLED'
		       GROUP BY o.order_id, o.status
		      HAVING count(e.event_id) <> CASE o.status WHEN 'CANCELLED' THEN 1 ELSE 0 END) AS x`),
		"orders whose cancel events do not match their status")
	require.Zero(t, queryInt(ctx, t, pool, `
		SELECT count(*) FROM public.river_job WHERE queue = $1`, timer.Name), "timer rows left")

	// Points: what paid orders spent left the accounts, nothing stays held.
	require.Zero(t, queryInt(ctx, t, pool, `
		SELECT count(*)
		FROM ordertimeout.points_accounts AS a
		WHERE a.held <> 0
		   OR a.balance <> $1 - (SELECT coalesce(sum(h.points), 0)
		                           FROM ordertimeout.points_holds AS h
		                           JOIN ordertimeout.orders AS o ON o.order_id = h.order_id
		                          WHERE h.account_id = a.account_id
		                            AND o.status = 'PAID')`, balance), "points accounts off")

	report, err := invariant.Check(ctx, pool, invariant.Options{StockTotals: totals, Slack: time.Second})
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())
}
