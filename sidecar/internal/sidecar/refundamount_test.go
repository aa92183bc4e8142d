package sidecar_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// A late payment confirmed with an amount that has trailing zeros past six
// decimal places is refunded, of its amount written the way the gateway
// contract allows. confirm_payment accepts such an amount (10.500000000 is
// 10.5, and a handler that computes 1050 / 100.0 in SQL passes
// 10.5000000000000000), and the conflict keeps it as given. The resolve
// worker sent it as written, "10.5000000000000000", which breaks the
// contract's grammar (at most 6 fraction digits): the gateway client refused
// to send it (ErrBadRequest), so the job snoozed forever and the buyer was
// never refunded. The worker now reads the amount without the zeros beyond
// six places.
func TestRefundOfAnAmountWithTrailingZeros(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(late_payment => 'refund')")
	sidecartest.CreateOrder(t, e.db, "TZ1", time.Hour, `{"amount": 10.5, "currency": "EUR"}`)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('TZ1')")
	sidecartest.Start(t, e.config("s1"))

	var got string
	require.NoError(t, e.db.QueryRow(bg, "SELECT ordertimeout.confirm_payment('TZ1', 'PTZ1', 1050 / 100.0, 'EUR')").Scan(&got))
	require.Equal(t, "conflict", got)
	require.EqualValues(t, 1, sidecartest.Int(t, e.db,
		"SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 'TZ1' AND scale(amount) > 6"),
		"the conflict keeps the amount as given")

	sidecartest.Eventually(t, 15*time.Second, "the late payment refunded", func() (bool, error) {
		return sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 'TZ1' AND resolution = 'refunded'") == 1, nil
	})
	require.Equal(t, 1, e.fake.Stats().Refunds)
	var refunds []gateway.Payment
	for _, p := range e.fake.Payments() {
		if p.Status == gateway.PaymentRefunded {
			refunds = append(refunds, p)
		}
	}
	require.Len(t, refunds, 1)
	require.Equal(t, gateway.Amount("10.5"), refunds[0].Amount, "the amount of the payment, in the contract's grammar")
	require.Equal(t, "CANCELLED", sidecartest.Status(t, e.db, "TZ1"))
}
