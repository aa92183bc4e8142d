package fault

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
	"github.com/ordertimeout/ordertimeout/tests/internal/outcome"
)

// kill -9 of the sidecar while its gateway checks are in flight: the checks'
// River jobs are left "running" with nobody working them. A sidecar started
// with a short --rescue-after rescues them (by the database's clock), asks the gateway again and
// finishes each order correctly: the one paid at the gateway ends PAID and
// is never cancelled, the unpaid one is cancelled exactly once, the PAYING
// one whose payment went through ends PAID.
func TestKillDuringGatewayCall(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	ctx := t.Context()

	// k-paid: due, payment never begun, but the buyer paid at the gateway
	// (silent: no callback); the precancel check must find it.
	// k-unpaid: due, nobody paid; the precancel check must cancel it.
	// k-paying: PAYING, paid at the gateway without a callback; the payment
	// check at paying_until must confirm it.
	always := `{"precheck": "always"}`
	e.createOrder("k-paid", time.Second, always)
	e.createOrder("k-unpaid", time.Second, always)
	e.createOrder("k-paying", time.Hour, "")
	e.beginPayment("k-paying", "k-paying-p", time.Second)
	require.NoError(t, e.fake.SetOrder(ctx, "k-paid", sidecarproc.Behaviour{Behaviour: sidecarproc.Silent, PaymentID: "k-paid-p"}))
	require.NoError(t, e.fake.SetOrder(ctx, "k-paying", sidecarproc.Behaviour{Behaviour: sidecarproc.Silent, PaymentID: "k-paying-p"}))
	orders := []string{"k-paid", "k-unpaid", "k-paying"}
	for _, id := range orders {
		// The gateway answers these orders after a minute: every check hangs.
		require.NoError(t, e.fake.SetOrder(ctx, id, sidecarproc.Behaviour{Behaviour: sidecarproc.Slow, DelayMS: 60_000}))
	}

	first := e.startSidecar("k1", "--gateway-timeout", "2m")
	asked := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for len(asked) < len(orders) {
		select {
		case id := <-e.gw.arrived:
			asked[id] = true
		case <-deadline:
			t.Fatalf("the sidecar asked the gateway about %v only", asked)
		}
	}
	inFlight := `SELECT count(*) FROM river_job
	              WHERE kind IN ('ordertimeout_precancel_check', 'ordertimeout_payment_check')
	                AND state = 'running'`
	eventually(t, 10*time.Second, "three checks running", func() bool { return e.count(inFlight) == 3 })

	require.NoError(t, first.Kill())
	eventually(t, 10*time.Second, "the gateway to see the calls abandoned", func() bool { return e.gw.aborted.Load() >= 3 })
	require.EqualValues(t, 3, e.count(inFlight), "the checks stay running with nobody working them")
	require.Equal(t, "PENDING", e.status("k-paid"))
	require.Equal(t, "PENDING", e.status("k-unpaid"))
	require.Equal(t, "PAYING", e.status("k-paying"))

	// The gateway behaves again; a new sidecar rescues the stuck checks.
	for _, id := range orders {
		require.NoError(t, e.fake.SetOrder(ctx, id, sidecarproc.Behaviour{Behaviour: sidecarproc.Instant}))
	}
	start := time.Now()
	e.startSidecar("k2", "--job-timeout", "2s", "--rescue-after", "3s")
	e.waitStatus("k-paid", "PAID", 90*time.Second)
	e.waitStatus("k-unpaid", "CANCELLED", 30*time.Second)
	e.waitStatus("k-paying", "PAID", 30*time.Second)
	t.Logf("the restarted sidecar finished the checks %s after it started", time.Since(start).Round(time.Second))

	// Each check was rescued by the database's clock (an error recorded by
	// ordertimeout.rescue_stuck_jobs), then
	// completed (River records the completion shortly after the work);
	// none was discarded.
	eventually(t, 10*time.Second, "the rescued checks to complete", func() bool {
		return e.count(`SELECT count(*) FROM river_job
		   WHERE kind IN ('ordertimeout_precancel_check', 'ordertimeout_payment_check')
		     AND state = 'completed'
		     AND errors[1]->>'error' LIKE 'Stuck job rescued%'`) == 3
	})
	require.Zero(t, e.count("SELECT count(*) FROM river_job WHERE state = 'discarded'"))
	e.check(0, outcome.Expect{
		Created:   orders,
		Paid:      []string{"k-paid", "k-paying"},
		Cancelled: []string{"k-unpaid"},
		Settled:   true,
	})
	require.EqualValues(t, 1, e.count(`SELECT count(*) FROM ordertimeout.events
	   WHERE order_id = 'k-unpaid' AND to_status = 'CANCELLED' AND cause = 'timeout' AND actor = 'sidecar:k2'`))
}
