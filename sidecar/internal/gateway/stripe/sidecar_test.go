package stripe_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A sidecar run with --gateway stripe against stripe-mock: the cancel of an
// order whose payment was a PaymentIntent sends Stripe's cancel of that
// PaymentIntent. stripe-mock keeps no state and answers with its fixture, a
// PaymentIntent still requires_payment_method, which real Stripe never
// answers with a 200: the sidecar counts it as a bad answer and keeps the
// close job for later, never completed as closed.
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
	var logs sidecarproc.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sidecartest.Start(t, cfg)

	sidecartest.WaitStatus(t, db, "S1", "CANCELLED", 15*time.Second)
	sidecartest.Eventually(t, 15*time.Second, "the gateway close's answer taken for a bad answer", func() (bool, error) {
		out := logs.String()
		return strings.Contains(out, "gateway gave a bad answer") && strings.Contains(out, "kind=ordertimeout_gateway_close") &&
			strings.Contains(out, "the object in the answer is still open"), nil
	})
	require.Zero(t, sidecartest.Int(t, db, `SELECT count(*) FROM river_job
	   WHERE kind = 'ordertimeout_gateway_close' AND state IN ('completed', 'discarded', 'cancelled')`),
		"the close is kept, not finished")
	require.EqualValues(t, 1, sidecartest.Int(t, db, `SELECT count(*) FROM river_job
	   WHERE kind = 'ordertimeout_gateway_close' AND state IN ('scheduled', 'available', 'running')`))
	var paths []string
	for _, r := range rec.take() {
		paths = append(paths, r.Method+" "+r.Path)
	}
	require.Contains(t, paths, "POST /v1/payment_intents/pi_3MtwBwLkdIwHu7ix28a3tqPa/cancel")
}
