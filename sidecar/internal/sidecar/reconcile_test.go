package sidecar_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

// Continuous reconciliation: QR payments made at the gateway without
// begin_payment and without a callback are found within the period. On a
// live order the payment is confirmed (cause reconcile); on an order
// cancelled on time it becomes a late-payment conflict with cause reconcile
// that the policy resolves (reinstate). Later runs change nothing, and the
// metrics count each lost callback once.
func TestContinuousReconcileFindsSilentPayments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	fake, gw := sidecartest.Fake(t, db)
	sidecartest.CreateOrder(t, db, "qr-live", time.Hour, `{"amount": 12.50, "currency": "EUR"}`)
	sidecartest.CreateOrder(t, db, "qr-cancelled", 100*time.Millisecond, `{"amount": 5.00, "currency": "EUR"}`)

	const every = 500 * time.Millisecond
	cfg := sidecartest.Config(url, gw, "r1")
	cfg.ReconcileEvery = every
	cfg.ReconcileSource = "gateway:fake"
	s, _ := sidecartest.Start(t, cfg)

	sidecartest.WaitStatus(t, db, "qr-cancelled", "CANCELLED", 30*time.Second)
	// The buyers scan the QR codes: the gateway takes the money and never
	// calls back.
	paidAt := time.Now()
	require.NoError(t, fake.Set(ctx, "qr-live", fakegateway.Behaviour{Behaviour: fakegateway.Silent, PaymentID: "wx-live", Amount: "12.50"}))
	require.NoError(t, fake.Set(ctx, "qr-cancelled", fakegateway.Behaviour{Behaviour: fakegateway.Silent, PaymentID: "wx-cancelled", Amount: "5.00"}))

	// Within the period (plus River's fetch and the run itself).
	sidecartest.WaitStatus(t, db, "qr-live", "PAID", 4*every+5*time.Second)
	sidecartest.WaitStatus(t, db, "qr-cancelled", "PAID", 4*every+10*time.Second)
	t.Logf("found and resolved %s after the payments", time.Since(paidAt))
	require.EqualValues(t, 1, sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.events
		WHERE order_id = 'qr-live' AND to_status = 'PAID' AND cause = 'reconcile' AND actor = 'sidecar:r1'`))
	require.EqualValues(t, 1, sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.conflicts
		WHERE order_id = 'qr-cancelled' AND payment_id = 'wx-cancelled' AND kind = 'late_payment' AND cause = 'reconcile'
		  AND resolution = 'reinstated'`))
	// Found without asking the gateway about the orders; the one query is
	// the reinstatement's, which asks whether the gateway still holds the
	// late payment.
	require.Equal(t, 1, fake.Stats().Queries, "found without asking the gateway about the orders")

	// Later runs: the watermark moves on, nothing changes.
	var wm1 time.Time
	require.NoError(t, db.QueryRow(ctx, "SELECT ordertimeout.reconcile_watermark('gateway:fake')").Scan(&wm1))
	events := sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.events")
	sidecartest.Eventually(t, 4*every+10*time.Second, "two more runs", func() (bool, error) {
		var wm time.Time
		err := db.QueryRow(ctx, "SELECT ordertimeout.reconcile_watermark('gateway:fake')").Scan(&wm)
		return err == nil && wm.After(wm1.Add(every)), err
	})
	require.Equal(t, events, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.events"))
	require.EqualValues(t, 1, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts"))
	require.Zero(t, sidecartest.Int(t, db, "SELECT count(*) FROM river_job WHERE kind = 'ordertimeout_reconcile' AND state IN ('discarded', 'retryable')"))

	value := func(name string, labels ...string) float64 {
		return sidecartest.Metric(t, s.Registry(), name, labels...)
	}
	require.EqualValues(t, 2, value("ordertimeout_reconcile_lost_callbacks_total"))
	require.EqualValues(t, 1, value("ordertimeout_reconcile_transactions_total", "outcome", "confirmed"))
	require.EqualValues(t, 1, value("ordertimeout_reconcile_transactions_total", "outcome", "late_payment"))
	require.Positive(t, value("ordertimeout_reconcile_transactions_total", "outcome", "ok"), "later runs see both payments as ok (the reinstated one is confirmed now)")
	require.Zero(t, value("ordertimeout_reconcile_mismatches_total"))
	require.Positive(t, value("ordertimeout_jobs_total", "kind", "ordertimeout_reconcile", "outcome", "reconciled"))
	require.Positive(t, fake.Stats().PaymentLists)
}

// Mismatches and reports are counted; a gateway that is down makes the run
// snooze and come back, losing nothing.
func TestContinuousReconcileMismatchAndDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	sidecartest.Exec(t, db, "SELECT ordertimeout.configure(late_payment => 'manual')")
	fake, gw := sidecartest.Fake(t, db)
	require.NoError(t, fake.SetGateway(fakegateway.Behaviour{Behaviour: fakegateway.Down}))
	sidecartest.CreateOrder(t, db, "mm", time.Hour, `{"amount": 10.00, "currency": "EUR"}`)
	require.NoError(t, fake.Set(ctx, "mm", fakegateway.Behaviour{Behaviour: fakegateway.Silent, PaymentID: "wx-mm", Amount: "9.00"}))
	require.NoError(t, fake.Set(ctx, "stranger", fakegateway.Behaviour{Behaviour: fakegateway.Silent, PaymentID: "wx-stranger", Amount: "1.00"}))

	cfg := sidecartest.Config(url, gw, "r2")
	cfg.ReconcileEvery = 300 * time.Millisecond
	cfg.GatewayRetries = -1
	s, _ := sidecartest.Start(t, cfg)
	sidecartest.Eventually(t, 20*time.Second, "a run to meet the down gateway", func() (bool, error) {
		return fake.Stats().PaymentLists > 0, nil
	})
	require.EqualValues(t, 0, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts"))
	require.NoError(t, fake.SetGateway(fakegateway.Behaviour{Behaviour: fakegateway.Normal}))

	sidecartest.Eventually(t, 30*time.Second, "the mismatch recorded", func() (bool, error) {
		return sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.conflicts
			WHERE payment_id = 'wx-mm' AND kind = 'amount_mismatch' AND cause = 'reconcile'`) == 1, nil
	})
	require.Equal(t, "PENDING", sidecartest.Status(t, db, "mm"), "another amount never pays the order")
	value := func(name string, labels ...string) float64 {
		return sidecartest.Metric(t, s.Registry(), name, labels...)
	}
	sidecartest.Eventually(t, 10*time.Second, "the metrics", func() (bool, error) {
		return value("ordertimeout_reconcile_reported_total", "outcome", "unknown_order") >= 1, nil
	})
	require.Positive(t, value("ordertimeout_reconcile_mismatches_total"))
	require.EqualValues(t, 1, value("ordertimeout_reconcile_lost_callbacks_total"))
	require.Positive(t, value("ordertimeout_jobs_total", "kind", "ordertimeout_reconcile", "outcome", "snoozed"))
}

// A watermark older than the longest period reconcile_payments takes (400
// days; the reconciliation was off for long) is caught up a year per run:
// before, every run failed with OT172 and the watermark never moved.
func TestContinuousReconcileCatchesUpAnOldWatermark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	_, gw := sidecartest.Fake(t, db)
	sidecartest.Exec(t, db, `INSERT INTO ordertimeout.reconcile_watermarks (source, watermark, updated_at)
		VALUES ('gateway:fake', now() - interval '800 days', now() - interval '800 days')`)

	cfg := sidecartest.Config(url, gw, "r3")
	cfg.ReconcileEvery = 200 * time.Millisecond
	cfg.ReconcileSource = "gateway:fake"
	sidecartest.Start(t, cfg)

	sidecartest.Eventually(t, 30*time.Second, "the watermark caught up", func() (bool, error) {
		var behind time.Duration
		err := db.QueryRow(ctx, `SELECT now() - ordertimeout.reconcile_watermark('gateway:fake')`).Scan(&behind)
		return err == nil && behind < time.Hour, err
	})
	require.Zero(t, sidecartest.Int(t, db, `SELECT count(*) FROM river_job
		WHERE kind = 'ordertimeout_reconcile' AND (state IN ('discarded', 'retryable') OR errors IS NOT NULL)`),
		"no run failed on the way")
}
