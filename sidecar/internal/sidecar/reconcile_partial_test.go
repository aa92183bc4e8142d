package sidecar_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
)

// A payment refunded at the gateway in two parts (WeChat Pay and Stripe
// allow partial refunds) is listed with two refund records. Continuous
// reconciliation dropped the second as a repeat of the first (same payment,
// same status), so 6 EUR given back went unreported; now each refund the
// database does not know is reported for a person (refund_unknown), the
// second in a log line of its own, since reconcile_payments takes one refund
// per payment. A payment listed paid twice with different records is a bad
// answer, not silently one of them.
func TestContinuousReconcileReportsEveryPartialRefund(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "PR1", time.Hour, `{"amount": 10, "currency": "EUR"}`)
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('PR1', 'P-PR1', 10, 'EUR')")

	at := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UTC()
	gwURL := newListingGateway(t, []gateway.Payment{
		{PaymentID: "P-PR1", OrderID: "PR1", Amount: "10.00", Currency: "EUR", Status: gateway.PaymentPaid, At: at},
		{PaymentID: "P-PR1", OrderID: "PR1", Amount: "4.00", Currency: "EUR", Status: gateway.PaymentRefunded, At: at.Add(time.Minute)},
		{PaymentID: "P-PR1", OrderID: "PR1", Amount: "6.00", Currency: "EUR", Status: gateway.PaymentRefunded, At: at.Add(2 * time.Minute)},
	})
	logs := &sidecarproc.Buffer{}
	cfg := sidecartest.Config(pgtest.URL(t, db), gwURL, "r1")
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.ReconcileEvery = time.Hour // one run, at start
	cfg.ReconcileSource = "gateway:partial"
	s, _ := sidecartest.Start(t, cfg)

	sidecartest.Eventually(t, 30*time.Second, "a run to end", func() (bool, error) {
		return sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.reconcile_watermarks") > 0, nil
	})
	sidecartest.Eventually(t, 10*time.Second, "both refunds reported", func() (bool, error) {
		return sidecartest.Metric(t, s.Registry(), "ordertimeout_reconcile_reported_total", "outcome", "refund_unknown") == 2, nil
	})
	require.Contains(t, logs.String(), `order_id=PR1 payment_id=P-PR1 outcome=refund_unknown detail="refunded at the gateway; here the payment is confirmed"`)
	require.Contains(t, logs.String(), `order_id=PR1 payment_id=P-PR1 outcome=refund_unknown detail="refunded again at the gateway (a partial refund?): 6.00 EUR at `)
	require.Equal(t, "PAID", sidecartest.Status(t, db, "PR1"))
}

func TestContinuousReconcileRefusesAPaymentListedPaidTwice(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "PT1", time.Hour, `{"amount": 10, "currency": "EUR"}`)
	at := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UTC()
	gwURL := newListingGateway(t, []gateway.Payment{
		{PaymentID: "P-PT1", OrderID: "PT1", Amount: "10.00", Currency: "EUR", Status: gateway.PaymentPaid, At: at},
		{PaymentID: "P-PT1", OrderID: "PT1", Amount: "1.00", Currency: "EUR", Status: gateway.PaymentPaid, At: at.Add(time.Minute)},
	})
	logs := &sidecarproc.Buffer{}
	cfg := sidecartest.Config(pgtest.URL(t, db), gwURL, "r2")
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.ReconcileEvery = time.Hour
	cfg.ReconcileSource = "gateway:twice"
	s, _ := sidecartest.Start(t, cfg)

	const kind = "ordertimeout_reconcile"
	sidecartest.Eventually(t, 30*time.Second, "the bad answer counted", func() (bool, error) {
		return sidecartest.Metric(t, s.Registry(), "ordertimeout_gateway_bad_answers_total", "kind", kind) >= 1, nil
	})
	require.Contains(t, logs.String(), `payment \"P-PT1\" is listed paid twice, as 10.00 EUR at `)
	require.Zero(t, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.reconcile_watermarks"), "nothing applied")
	require.Equal(t, "PENDING", sidecartest.Status(t, db, "PT1"))
}
