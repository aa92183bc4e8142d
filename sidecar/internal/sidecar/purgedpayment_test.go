package sidecar_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// A gateway keyed by the merchant's order id still reports the payment of an
// order that was purged when a new order takes that id. confirm_payment
// refuses it for the new order (OT176): it is not the new order's money. The
// precancel check then treats the new order as unpaid and cancels it on
// time. A review found the check taking OT176 for a bad answer and snoozing
// forever, with the new order PENDING past its deadline and its stock held.
func TestPaymentOfAPurgedOrderDoesNotHoldANewOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(precheck => 'always')")
	sidecartest.CreateOrder(t, e.db, "A1", time.Hour, "")
	e.pay(t, "A1", fakegateway.Silent, "P1")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.confirm_payment('A1', 'P1')")
	require.EqualValues(t, 1, sidecartest.Int(t, e.db, "SELECT ordertimeout.purge_orders('0', 10, paid_older_than => '0')"))

	sidecartest.CreateOrder(t, e.db, "A1", 300*time.Millisecond, "")
	sidecartest.Start(t, e.config("s1"))
	sidecartest.WaitStatus(t, e.db, "A1", "CANCELLED", 20*time.Second)
	require.Positive(t, e.fake.Stats().Queries, "the check asked the gateway, which answered with the old payment")
	require.EqualValues(t, 0, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.payments"), "nothing recorded of the old payment")
}

// A gateway keyed by the merchant's order id answers about a payment taken
// under that id before the order was created: an earlier order's whose
// callback never came, so nothing here knows it. When the gateway says when
// it took the payment (paid_at), one taken more than 5 minutes (the clocks'
// skew) before the order was created, and not one the shop began for the
// order, is not the order's: the precancel check cancels the order on time
// and the payment check fails the attempt, where both confirmed it PAID;
// the close of a cancelled order whose payment was begun, answered with
// that payment, records no late payment (it did before the close read
// paid_at too, whenever the close came before the test's last look: 3
// runs of 20).
func TestPaymentTakenBeforeTheOrderDoesNotPayIt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// begin: the order's payment is begun as "P-new" (a payment check),
		// else none (a precancel check).
		begin   bool
		payment string
		// paidAt is when the gateway says it took the payment, in seconds
		// from the order's creation by the database's clock.
		paidAt int
		paid   bool
		// reconcile: continuous reconciliation runs too, and must judge
		// the payment as the checks do (outcome other_order); the fake
		// lists it at its paid_at.
		reconcile bool
		// purged: an earlier order A1 was cancelled, closed and purged just
		// before this one took its id (purged_orders): the database refuses
		// a payment taken before that purge (OT178), which the worker's own
		// rule, by the order's creation, lets through.
		purged bool
	}{
		{name: "precancel check, an hour before", payment: "P-old", paidAt: -3600, paid: false},
		{name: "precancel check, 6 minutes before", payment: "P-old", paidAt: -360, paid: false},
		{name: "precancel check, within the clocks' skew", payment: "P-old", paidAt: -240, paid: true},
		{name: "precancel check, after the order was created", payment: "P-old", paidAt: 1, paid: true},
		{name: "precancel check and reconciliation, an hour before", payment: "P-old", paidAt: -3600, paid: false, reconcile: true},
		// An adapter's zero time (here 1956) says it does not know.
		{name: "precancel check, a paid_at before 2000", payment: "P-old", paidAt: -70 * 365 * 86400, paid: true},
		{name: "payment check, another payment an hour before", begin: true, payment: "P-old", paidAt: -3600, paid: false},
		{name: "payment check, the attempt's own payment with a clock an hour behind", begin: true, payment: "P-new", paidAt: -3600, paid: true},
		{name: "precancel check, the purged order's payment a second before", payment: "P-old", paidAt: -1, paid: false, purged: true},
		{name: "precancel check, a second before, no purge", payment: "P-old", paidAt: -1, paid: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, false)
			if c.purged {
				sidecartest.CreateOrder(t, e.db, "A1", time.Hour, "")
				sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('A1')")
				sidecartest.Exec(t, e.db, "SELECT ordertimeout.close_cancelled(interval '0')")
				sidecartest.Exec(t, e.db, "SELECT ordertimeout.purge_orders(interval '0')")
				require.EqualValues(t, 1, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.purged_orders WHERE order_id = 'A1'"))
			}
			if c.begin {
				createAndBegin(t, e.db, "A1", 3*time.Second, "", "P-new")
			} else {
				sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(precheck => 'always')")
				sidecartest.CreateOrder(t, e.db, "A1", 300*time.Millisecond, "")
			}
			var paidAt time.Time
			require.NoError(t, e.db.QueryRow(t.Context(),
				"SELECT created_at + $1 * interval '1 second' FROM ordertimeout.orders WHERE order_id = 'A1'", c.paidAt).Scan(&paidAt))
			b := fakegateway.Behaviour{Behaviour: fakegateway.Silent, PaymentID: c.payment, PaidAt: &gateway.Timestamp{Time: paidAt}}
			cfg := e.config("s1")
			if c.reconcile {
				// Listed by GET /v1/payments only with an amount.
				b.Amount, b.Currency = "1.00", "EUR"
				cfg.ReconcileEvery = 300 * time.Millisecond
				cfg.ReconcileSource = "gateway:fake"
			}
			require.NoError(t, e.fake.Set(t.Context(), "A1", b))

			s, _ := sidecartest.Start(t, cfg)
			if c.paid {
				sidecartest.WaitStatus(t, e.db, "A1", "PAID", 20*time.Second)
				require.EqualValues(t, 1, sidecartest.Int(t, e.db,
					"SELECT count(*) FROM ordertimeout.payments WHERE payment_id = $1 AND status = 'confirmed'", c.payment))
				return
			}
			sidecartest.WaitStatus(t, e.db, "A1", "CANCELLED", 20*time.Second)
			require.Positive(t, e.fake.Stats().Queries, "a check asked the gateway, which answered with the earlier payment")
			if c.reconcile {
				sidecartest.Eventually(t, 20*time.Second, "reconciliation to read the earlier payment", func() (bool, error) {
					return sidecartest.Metric(t, s.Registry(), "ordertimeout_reconcile_transactions_total", "outcome", "other_order") > 0, nil
				})
				require.Zero(t, sidecartest.Metric(t, s.Registry(), "ordertimeout_reconcile_transactions_total", "outcome", "confirmed"))
			}
			if c.begin {
				// The cancel of an order whose payment was begun closes it
				// at the gateway, which answers with the earlier payment:
				// not a late payment of this order either.
				sidecartest.Eventually(t, 20*time.Second, "the cancelled order closed at the gateway", func() (bool, error) {
					return e.fake.Order("A1").Closes > 0 && sidecartest.Int(t, e.db,
						"SELECT count(*) FROM river_job WHERE kind = 'ordertimeout_gateway_close' AND state = 'completed'") > 0, nil
				})
			}
			require.EqualValues(t, 0, sidecartest.Int(t, e.db,
				"SELECT count(*) FROM ordertimeout.payments WHERE payment_id = 'P-old'"), "nothing recorded of the earlier payment")
			require.EqualValues(t, 0, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.conflicts"),
				"the earlier payment is no conflict of this order")
			if c.begin {
				require.EqualValues(t, 1, sidecartest.Int(t, e.db,
					"SELECT count(*) FROM ordertimeout.order_events('A1') WHERE from_status = 'PAYING' AND to_status = 'PENDING'"),
					"the payment check failed the attempt")
			}
		})
	}
}
