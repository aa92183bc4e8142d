package race_test

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// TestRetentionRacesTheWholeLifecycle runs the retention at once with
// everything else that touches the same orders, with retentions of zero so
// that every order is purged as soon as the rules let it: two sessions
// sweep the orders as they expire, three pay two thirds of them (on time,
// late, or twice) in random order, one resolves every conflict that comes
// (refund then finish_refund, manual, or reinstate), one closes the
// cancelled orders, and two purge. It runs until every order is gone.
//
// Each call may be refused only for what the race explains (a payment for
// an order already purged is OT120; a reinstate whose stock is gone or
// whose order was paid is OT132; a conflict another session resolved is
// OT130/OT133/OT134), never a deadlock, a foreign-key or any other error.
// At the end no row of any order is left (payments, items, events,
// releases, conflicts: nothing of a purged order survives it), the stock
// is whole (what is not available was sold, and purged_sales says so),
// and the invariants hold.
func TestRetentionRacesTheWholeLifecycle(t *testing.T) {
	t.Parallel()
	const (
		orders    = 1500
		sweepers  = 2
		payers    = 3
		purgers   = 2
		purgeMax  = 40
		closeMax  = 40
		sweepSize = 100
	)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)
	skus := []string{"A", "B", "C", "D", "E", "F"}
	totals := map[string]int64{}
	for _, s := range skus {
		totals[s] = 1_000_000
	}
	require.NoError(t, putStock(ctx, pool, totals))
	_, err := pool.Exec(ctx, `SELECT ordertimeout.configure(grace => '0')`)
	require.NoError(t, err)

	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	share := make([]newOrder, orders)
	ids := make([]string, orders)
	for i := range share {
		a, b := rng.IntN(len(skus)), rng.IntN(len(skus)-1)
		if b >= a {
			b++
		}
		ids[i] = fmt.Sprintf("r%d", i)
		share[i] = newOrder{ID: ids[i], Items: []item{{SKU: skus[a], Qty: 1 + rng.IntN(3)}, {SKU: skus[b], Qty: 1}}}
	}
	require.NoError(t, createOrders(ctx, url, [][]newOrder{share}, after(time.Hour)))
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	_, err = expireAllAt(ctx, pool, time.Second)
	require.NoError(t, err)

	var (
		wg       sync.WaitGroup
		paid     = make(chan struct{}) // the payers are done
		allGone  = make(chan struct{}) // no order is left
		answers  sync.Map              // payment id -> answer
		counts   [8]atomic.Int64       // purged, closed, resolved, refunded, reinstated, refused, unknown, paid
		failures = make(chan error, 16)
	)
	const (
		nPurged = iota
		nClosed
		nResolved
		nRefunded
		nReinstated
		nRefused
		nUnknown
		nAnswered
	)
	fail := func(role string, err error) {
		select {
		case failures <- fmt.Errorf("%s: %w", role, err):
		default:
		}
		cancel()
	}
	// loop runs f until allGone is closed (and once more after it), or
	// until f fails.
	loop := func(role string, conn *pgx.Conn, f func(*pgx.Conn) error) {
		wg.Go(func() {
			for {
				finished := false
				select {
				case <-allGone:
					finished = true
				default:
				}
				if err := f(conn); err != nil {
					fail(role, err)
					return
				}
				if finished {
					return
				}
			}
		})
	}

	for i, conn := range connectN(ctx, t, url, sweepers) {
		wg.Go(func() {
			if _, err := sweepUntil(ctx, conn, sweepSize, allGone); err != nil {
				fail(fmt.Sprintf("sweeper %d", i), err)
			}
		})
	}
	var payersLeft sync.WaitGroup
	for p, conn := range connectN(ctx, t, url, payers) {
		payersLeft.Add(1)
		wg.Go(func() {
			defer payersLeft.Done()
			for i := p; i < orders; i += payers {
				if i%3 == 0 {
					continue // never paid: cancelled, closed, purged
				}
				id := ids[i]
				pays := []string{"P-" + id}
				if i%5 == 0 {
					pays = append(pays, "Q-"+id) // a second payment: a double payment, or two late ones
				}
				for _, pid := range pays {
					var answer string
					err := conn.QueryRow(ctx, "SELECT ordertimeout.confirm_payment($1, $2)", id, pid).Scan(&answer)
					switch {
					case sqlstate.Is(err, sqlstate.UnknownOrder):
						answer = "unknown"
						counts[nUnknown].Add(1)
					case err != nil:
						fail(fmt.Sprintf("payer %d", p), fmt.Errorf("confirm_payment(%s, %s): %w", id, pid, err))
						return
					}
					answers.Store(pid, answer)
					counts[nAnswered].Add(1)
				}
			}
		})
	}
	go func() {
		payersLeft.Wait()
		close(paid)
	}()

	resolver := connect(ctx, t, url)
	loop("resolver", resolver, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT conflict_id, state FROM ordertimeout.open_conflicts(50)`)
		if err != nil {
			return fmt.Errorf("open_conflicts: %w", err)
		}
		type open struct {
			id    int64
			state string
		}
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (open, error) {
			var o open
			return o, r.Scan(&o.id, &o.state)
		})
		if err != nil {
			return fmt.Errorf("open_conflicts: %w", err)
		}
		for _, c := range list {
			if c.state == "refunding" {
				if _, err := conn.Exec(ctx, `SELECT ordertimeout.finish_refund($1, $2)`, c.id, fmt.Sprintf("R-%d", c.id)); err != nil {
					return fmt.Errorf("finish_refund(%d): %w", c.id, err)
				}
				counts[nRefunded].Add(1)
				continue
			}
			resolution := []string{"refund", "manual", "reinstate"}[c.id%3]
			var outcome string
			err := conn.QueryRow(ctx, `SELECT ordertimeout.resolve_conflict($1, $2)`, c.id, resolution).Scan(&outcome)
			switch {
			case resolution == "reinstate" && sqlstate.Is(err, sqlstate.CannotReinstate):
				// Not a late payment of the order's amount (a double
				// payment), or the order was paid meanwhile: refund it.
				counts[nRefused].Add(1)
				if _, err := conn.Exec(ctx, `SELECT ordertimeout.resolve_conflict($1, 'refund')`, c.id); err != nil {
					return fmt.Errorf("resolve_conflict(%d, refund) after OT132: %w", c.id, err)
				}
			case err != nil:
				return fmt.Errorf("resolve_conflict(%d, %s): %w", c.id, resolution, err)
			case outcome == "reinstated":
				counts[nReinstated].Add(1)
			}
			counts[nResolved].Add(1)
		}
		return nil
	})
	closer := connect(ctx, t, url)
	loop("closer", closer, func(conn *pgx.Conn) error {
		var n int
		if err := conn.QueryRow(ctx, `SELECT ordertimeout.close_cancelled(interval '0', $1)`, closeMax).Scan(&n); err != nil {
			return fmt.Errorf("close_cancelled: %w", err)
		}
		counts[nClosed].Add(int64(n))
		return nil
	})
	for i, conn := range connectN(ctx, t, url, purgers) {
		loop(fmt.Sprintf("purger %d", i), conn, func(conn *pgx.Conn) error {
			var n int
			if err := conn.QueryRow(ctx, `SELECT ordertimeout.purge_orders(interval '0', $1, interval '0')`, purgeMax).Scan(&n); err != nil {
				return fmt.Errorf("purge_orders: %w", err)
			}
			counts[nPurged].Add(int64(n))
			return nil
		})
	}

	// Every order ends purged: the never-paid ones once cancelled and
	// closed, the paid ones once paid, those with a conflict once it is
	// resolved. The payers must be done first: a payment may still come.
	err = func() error {
		select {
		case <-paid:
		case <-ctx.Done():
			return ctx.Err()
		}
		return waitFor(ctx, pool, `SELECT NOT EXISTS (SELECT FROM ordertimeout.orders)`)
	}()
	close(allGone)
	wg.Wait()
	close(failures)
	for f := range failures {
		if sqlstate.Code(f) == sqlstate.DeadlockDetected {
			t.Fatalf("deadlock: %v", f)
		}
		require.NoError(t, f)
	}
	require.NoError(t, err, "every order purged")
	var paidAnswers int
	answers.Range(func(_, v any) bool {
		if v == "paid" {
			paidAnswers++
		}
		return true
	})
	t.Logf("purged %d, closed %d; %d payments answered (%d paid, %d for orders already purged); conflicts: %d resolved (%d reinstated, %d reinstates refused), %d refunds finished",
		counts[nPurged].Load(), counts[nClosed].Load(), counts[nAnswered].Load(), paidAnswers, counts[nUnknown].Load(),
		counts[nResolved].Load(), counts[nReinstated].Load(), counts[nRefused].Load(), counts[nRefunded].Load())
	require.EqualValues(t, orders, counts[nPurged].Load(), "each order purged exactly once")

	// Nothing of a purged order is left, whichever way it ended.
	left := queryInt(ctx, t, pool, `SELECT (SELECT count(*) FROM ordertimeout.payments)
		+ (SELECT count(*) FROM ordertimeout.order_items) + (SELECT count(*) FROM ordertimeout.events)
		+ (SELECT count(*) FROM ordertimeout.releases) + (SELECT count(*) FROM ordertimeout.conflicts)
		+ (SELECT count(*) FROM public.river_job WHERE queue = $1)`, timer.Name)
	require.Zero(t, left, "rows of purged orders left behind")

	// The stock is whole: nothing reserved, and what is not available was
	// sold to an order that was paid and then purged.
	report, err := invariant.Check(ctx, pool, invariant.Options{StockTotals: totals})
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())
	require.Zero(t, queryInt(ctx, t, pool, `SELECT coalesce(sum(reserved), 0)::int FROM ordertimeout.stock`), "stock still reserved")
	sold := queryInt(ctx, t, pool, `SELECT coalesce(sum(sold), 0)::int FROM ordertimeout.stock`)
	require.Positive(t, sold, "some orders were paid and kept their stock")
	require.Positive(t, paidAnswers, "some payments came on time")
	require.Positive(t, counts[nUnknown].Load()+counts[nResolved].Load(), "some payments came late")
}
