package sidecar_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
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
