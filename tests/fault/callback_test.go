package fault

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/tests/internal/outcome"
)

// Payment callbacks that come twice, at once, or in the wrong order, as
// gateways send them, with a sidecar running (it resolves conflicts). Each
// gets the answer README documents, writes at most once, and the invariants
// hold:
//
//   - confirm twice (and eight times at once): "paid" every time, one PAID
//     event, one confirmed payment;
//   - fail after confirm: "ignored"; the order stays PAID;
//   - confirm after fail: "paid" (the gateway's failure was wrong; the money
//     is there); never cancelled;
//   - confirm and fail at once: either order of arrival ends PAID;
//   - confirm after cancel: "conflict", again "conflict" on a repeat, one
//     conflict row, resolved once (reinstated: the order ends PAID, its
//     stock sold, its release reclaimed); a repeat after the reinstatement
//     says "paid" and writes nothing.
func TestPaymentCallbacks(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	ctx := t.Context()
	e.startSidecar("c1")

	confirm := func(orderID, paymentID string) string {
		t.Helper()
		var r string
		require.NoError(t, e.db.QueryRow(ctx, "SELECT ordertimeout.confirm_payment($1, $2, 10)", orderID, paymentID).Scan(&r))
		return r
	}
	fail := func(orderID, paymentID string) string {
		t.Helper()
		var r string
		require.NoError(t, e.db.QueryRow(ctx, "SELECT ordertimeout.fail_payment($1, $2)", orderID, paymentID).Scan(&r))
		return r
	}
	events := func(orderID, to string) int64 {
		t.Helper()
		return e.count("SELECT count(*) FROM ordertimeout.events WHERE order_id = $1 AND to_status = $2 AND from_status <> $2", orderID, to)
	}
	const amount = `{"amount": 10}`

	// Confirm twice, then eight times at once.
	e.createOrder("twice", time.Hour, amount)
	e.beginPayment("twice", "twice-p", time.Hour)
	require.Equal(t, "paid", confirm("twice", "twice-p"))
	require.Equal(t, "paid", confirm("twice", "twice-p"))
	e.createOrder("burst", time.Hour, amount)
	e.beginPayment("burst", "burst-p", time.Hour)
	answers := make([]string, 8)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r string
			if err := e.db.QueryRow(context.Background(), "SELECT ordertimeout.confirm_payment('burst', 'burst-p', 10)").Scan(&r); err != nil {
				r = err.Error()
			}
			answers[i] = r
		}()
	}
	wg.Wait()
	for _, id := range []string{"twice", "burst"} {
		require.Equal(t, "PAID", e.status(id))
		require.EqualValues(t, 1, events(id, "PAID"), id)
		require.EqualValues(t, 1, e.count("SELECT count(*) FROM ordertimeout.payments WHERE order_id = $1 AND status = 'confirmed'", id))
	}
	for _, a := range answers {
		require.Equal(t, "paid", a)
	}

	// Fail after confirm.
	e.createOrder("failafter", time.Hour, amount)
	e.beginPayment("failafter", "failafter-p", time.Hour)
	require.Equal(t, "paid", confirm("failafter", "failafter-p"))
	require.Equal(t, "ignored", fail("failafter", "failafter-p"))
	require.Equal(t, "PAID", e.status("failafter"))
	require.EqualValues(t, 1, e.count("SELECT count(*) FROM ordertimeout.payments WHERE payment_id = 'failafter-p' AND status = 'confirmed'"))

	// Confirm after fail.
	e.createOrder("confirmafter", time.Hour, amount)
	e.beginPayment("confirmafter", "confirmafter-p", time.Hour)
	require.Equal(t, "pending", fail("confirmafter", "confirmafter-p"))
	require.Equal(t, "PENDING", e.status("confirmafter"))
	require.Equal(t, "paid", confirm("confirmafter", "confirmafter-p"))
	require.Equal(t, "PAID", e.status("confirmafter"))

	// Confirm and fail at once, a few times over.
	var raced []string
	for i := range 5 {
		id := "race" + string(rune('a'+i))
		raced = append(raced, id)
		e.createOrder(id, time.Hour, amount)
		e.beginPayment(id, id+"-p", time.Hour)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, _ = e.db.Exec(context.Background(), "SELECT ordertimeout.confirm_payment($1, $2, 10)", id, id+"-p")
		}()
		go func() {
			defer wg.Done()
			_, _ = e.db.Exec(context.Background(), "SELECT ordertimeout.fail_payment($1, $2)", id, id+"-p")
		}()
		wg.Wait()
		require.Equal(t, "PAID", e.status(id), "a confirmed payment wins whatever the order of arrival")
	}

	// Confirm after cancel: a conflict, once, resolved once. The repeated
	// callbacks run in the transaction of the first: the sidecar resolves the
	// conflict as soon as it commits, and a repeat after the reinstatement is
	// rightly answered "paid", so separate transactions made the answers
	// depend on who ran first (seen once on a fresh clone).
	e.createOrder("aftercancel", 200*time.Millisecond, amount)
	e.waitStatus("aftercancel", "CANCELLED", 20*time.Second)
	tx, err := e.db.Begin(ctx)
	require.NoError(t, err)
	inTx := func(sql string) string {
		var r string
		require.NoError(t, tx.QueryRow(ctx, sql, "aftercancel", "aftercancel-p").Scan(&r))
		return r
	}
	require.Equal(t, "conflict", inTx("SELECT ordertimeout.confirm_payment($1, $2, 10)"))
	require.Equal(t, "conflict", inTx("SELECT ordertimeout.confirm_payment($1, $2, 10)"))
	require.Equal(t, "ignored", inTx("SELECT ordertimeout.fail_payment($1, $2)"))
	require.NoError(t, tx.Commit(ctx))
	require.EqualValues(t, 1, e.count("SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 'aftercancel'"))
	e.waitStatus("aftercancel", "PAID", 20*time.Second)
	eventually(t, 10*time.Second, "the resolution job to complete", func() bool {
		return e.count(`SELECT count(*) FROM river_job WHERE kind = 'ordertimeout_resolve_conflict' AND state = 'completed'`) == 1
	})
	// Reinstated, the payment is the order's now: a repeat says "paid" and
	// writes nothing.
	before := e.count("SELECT count(*) FROM ordertimeout.events WHERE order_id = 'aftercancel'")
	require.Equal(t, "paid", confirm("aftercancel", "aftercancel-p"))
	require.Equal(t, before, e.count("SELECT count(*) FROM ordertimeout.events WHERE order_id = 'aftercancel'"))
	require.EqualValues(t, 1, e.count("SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 'aftercancel'"))
	require.EqualValues(t, 1, e.count("SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 'aftercancel' AND resolution = 'reinstated'"))
	require.EqualValues(t, 1, events("aftercancel", "CANCELLED"))
	require.EqualValues(t, 1, events("aftercancel", "PAID"))

	paid := append([]string{"twice", "burst", "failafter", "confirmafter"}, raced...)
	e.check(0, outcome.Expect{Created: append(paid, "aftercancel"), Paid: paid, Settled: true})
	require.EqualValues(t, 1, e.count(`SELECT count(*) FROM ordertimeout.releases
	   WHERE order_id = 'aftercancel' AND reclaimed_at IS NOT NULL`), "the release is reclaimed by the reinstatement")
}
