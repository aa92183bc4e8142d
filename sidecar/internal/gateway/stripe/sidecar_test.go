package stripe_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A sidecar run with --gateway stripe against stripe-mock: the cancel of an
// order whose payment was a PaymentIntent cancels that PaymentIntent, and
// the close job completes.
func TestSidecarWithStripeDriver(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	rec := newRecorder(t, startStripeMock(t))

	// 2 s: begin_payment refuses an expired order, and a loaded machine can
	// take hundreds of milliseconds between two statements.
	sidecartest.CreateOrder(t, db, "S1", 2*time.Second, `{"precheck": "never"}`)
	sidecartest.Exec(t, db, "SELECT ordertimeout.begin_payment('S1', 'pi_3MtwBwLkdIwHu7ix28a3tqPa', interval '100 milliseconds')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.fail_payment('S1', 'pi_3MtwBwLkdIwHu7ix28a3tqPa')")

	cfg := sidecartest.Config(pgtest.URL(t, db), "", "s1")
	cfg.GatewayDriver = gateway.DriverStripe
	cfg.StripeKey = testKey
	cfg.StripeURL = rec.URL
	sidecartest.Start(t, cfg)

	sidecartest.WaitStatus(t, db, "S1", "CANCELLED", 15*time.Second)
	sidecartest.Eventually(t, 15*time.Second, "the gateway close completed", func() (bool, error) {
		return sidecartest.Int(t, db, `SELECT count(*) FROM river_job
		   WHERE kind = 'ordertimeout_gateway_close' AND state = 'completed'`) == 1, nil
	})
	var paths []string
	for _, r := range rec.take() {
		paths = append(paths, r.Method+" "+r.Path)
	}
	require.Contains(t, paths, "POST /v1/payment_intents/pi_3MtwBwLkdIwHu7ix28a3tqPa/cancel")
}
