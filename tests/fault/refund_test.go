package fault

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// A refund and a reinstate never both happen, and a refund that started is
// the one that finishes. The sidecar claims the conflict for a refund, the
// gateway makes the refund, and the sidecar is killed (kill -9) before it
// learns of it. Meanwhile a person's reinstate is refused (OT134). Another
// sidecar rescues the job, asks the gateway again with the same idempotency
// key and records that one refund: one refund at the gateway, the order
// CANCELLED, the conflict refunded once. Issue 9 reproduced: the resolve
// worker refunded first and recorded after, so a retry after a failure in
// between could reinstate the order (refunded and sold), and a person's
// reinstate succeeded while the refund was in flight.
func TestRefundSurvivesKillBetweenGatewayAndCommit(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	ctx := t.Context()
	e.exec("SELECT ordertimeout.configure(late_payment => 'refund')")

	e.createOrder("rf-1", time.Hour, `{"amount": 25.50, "currency": "EUR"}`)
	e.exec("SELECT ordertimeout.cancel_order('rf-1')")
	before, err := e.fake.Stats(ctx)
	require.NoError(t, err)

	e.gw.holdRefunds.Store(true)
	first := e.startSidecar("rf1", "--gateway-timeout", "2m", "--job-timeout", "3m", "--rescue-after", "5m")
	var got string
	require.NoError(t, e.db.QueryRow(ctx, "SELECT ordertimeout.confirm_payment('rf-1', 'rf-1-p', 25.50, 'EUR')").Scan(&got))
	require.Equal(t, "conflict", got)

	select {
	case <-e.gw.refundMade:
	case <-time.After(30 * time.Second):
		t.Fatal("the sidecar did not refund at the gateway")
	}
	require.Equal(t, "refunding", e.conflictState("rf-1"), "claimed before the gateway call")

	// A person tries to reinstate while the refund is in flight.
	_, err = e.db.Exec(ctx, "SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'rf-1'), 'reinstate')")
	require.ErrorContains(t, err, sqlstate.ConflictRefunding)

	require.NoError(t, first.Kill())
	eventually(t, 10*time.Second, "the gateway to see the refund abandoned", func() bool { return e.gw.aborted.Load() >= 1 })
	require.Equal(t, "refunding", e.conflictState("rf-1"), "the sidecar died before recording the refund")

	e.gw.holdRefunds.Store(false)
	e.startSidecar("rf2", "--job-timeout", "2s", "--rescue-after", "3s")
	eventually(t, 60*time.Second, "the refund to be recorded", func() bool {
		return e.count("SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 'rf-1' AND resolution = 'refunded'") == 1
	})

	after, err := e.fake.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, after.Refunds-before.Refunds, "one refund moved money")
	require.GreaterOrEqual(t, after.RefundRequests-before.RefundRequests, 2, "asked again with the same key")
	require.Equal(t, "CANCELLED", e.status("rf-1"))
	require.EqualValues(t, 1, e.count(`SELECT count(*) FROM ordertimeout.payments WHERE payment_id = 'rf-1-p' AND status = 'refunded'`))
	require.EqualValues(t, 0, e.count(`SELECT count(*) FROM ordertimeout.events WHERE order_id = 'rf-1' AND to_status = 'PAID'`),
		"never reinstated")
}

// A late payment of another amount is never reinstated, even under the
// default reinstate policy: the sidecar refunds it. Issue 9 reproduced: a
// late 0.01 for an order of 100.00 EUR was reinstated by the sidecar.
func TestMismatchedLatePaymentIsRefunded(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	ctx := t.Context()
	e.createOrder("mm-1", time.Hour, `{"amount": 100.00, "currency": "EUR"}`)
	e.exec("SELECT ordertimeout.cancel_order('mm-1')")
	e.startSidecar("mm")
	var got string
	require.NoError(t, e.db.QueryRow(ctx, "SELECT ordertimeout.confirm_payment('mm-1', 'mm-1-p', 0.01)").Scan(&got))
	require.Equal(t, "conflict", got)
	eventually(t, 30*time.Second, "the mismatched payment to be refunded", func() bool {
		return e.count("SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 'mm-1' AND resolution = 'refunded'") == 1
	})
	require.Equal(t, "CANCELLED", e.status("mm-1"))
}

// conflictState is the state of the order's one conflict.
func (e *env) conflictState(orderID string) string {
	e.t.Helper()
	var s string
	require.NoError(e.t, e.db.QueryRow(e.t.Context(), "SELECT state FROM ordertimeout.conflicts WHERE order_id = $1", orderID).Scan(&s))
	return s
}
