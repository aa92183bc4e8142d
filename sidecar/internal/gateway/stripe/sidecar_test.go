package stripe_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/worker"
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

// The close job of a cancelled order whose one PaymentIntent is paid and
// another cannot be closed yet snoozes until that one is closed: the paid
// one is recorded once none is left open. A first version answered paid at
// once; the worker recorded the conflict and ended the job, and the open
// PaymentIntent stayed payable for good.
func TestCloseJobWaitsForEveryOpenPaymentIntent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "A1", time.Hour, `{"precheck": "never"}`)
	for _, sql := range []string{
		"SELECT ordertimeout.begin_payment('A1', 'pi_1')",
		"SELECT ordertimeout.fail_payment('A1', 'pi_1')",
		"SELECT ordertimeout.begin_payment('A1', 'pi_3')",
		"SELECT ordertimeout.fail_payment('A1', 'pi_3')",
		"SELECT ordertimeout.cancel_order('A1')",
	} {
		sidecartest.Exec(t, db, sql)
	}
	s, url := newScripted(t)
	s.set("GET /v1/payment_intents/pi_1", intent("pi_1", "requires_action", 1250, "eur", "A1"),
		intent("pi_1", "requires_payment_method", 1250, "eur", "A1"))
	s.set("POST /v1/payment_intents/pi_1/cancel", stripeError(400, "invalid_request_error", "payment_intent_unexpected_state"))
	s.set("GET /v1/payment_intents/pi_3", intent("pi_3", "succeeded", 1250, "eur", "A1"))

	w := &worker.GatewayCloseWorker{Deps: &worker.Deps{Pool: db, Gateway: newDriver(t, url), Logger: sidecartest.Logger()}}
	job := &river.Job[worker.GatewayCloseArgs]{
		JobRow: &rivertype.JobRow{ID: 1, Kind: "ordertimeout_gateway_close", Attempt: 1, MaxAttempts: 25, EncodedArgs: []byte(`{"order_id":"A1"}`)},
		Args:   worker.GatewayCloseArgs{OrderID: "A1"}}
	var snooze *river.JobSnoozeError
	require.ErrorAs(t, w.Work(ctx, job), &snooze, "pi_1 is still payable: the job comes back")
	require.Zero(t, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts"))

	// pi_1 is closed at the next try; pi_3's money is then recorded.
	s.set("POST /v1/payment_intents/pi_1/cancel", intent("pi_1", "canceled", 1250, "eur", "A1"))
	require.NoError(t, w.Work(ctx, job))
	require.EqualValues(t, 1, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts WHERE payment_id = 'pi_3'"))
}

// A payment refunded at Stripe (a person's refund in the dashboard) holds no
// money, though its PaymentIntent still says succeeded with amount_received:
// the precancel check of its order cancels the order on time, never
// confirms it. One refunded in part holds the rest: a payment of another
// amount than the order's, so a conflict, refunded with that rest; the order
// is cancelled too. Before, the driver read amount_received alone, and both
// orders ended PAID.
func TestPaymentRefundedAtStripeHoldsNoMoney(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	s, url := newScripted(t)
	s.set("GET /v1/payment_intents/pi_r1", refunded("pi_r1", 1250, 1250, "eur", "R1"))
	s.set("GET /v1/payment_intents/pi_r2", refunded("pi_r2", 1250, 250, "eur", "R2"))
	s.set("POST /v1/refunds", answer{200, `{"id": "re_r2", "object": "refund", "status": "succeeded"}`})
	for _, id := range []string{"R1", "R2"} {
		// One statement: begin_payment refuses an order already due, and a
		// loaded machine can take long between two statements.
		sidecartest.Exec(t, db, `SELECT ordertimeout.create_order($1, '[{"sku":"A","qty":1}]', interval '2 seconds',
		           '{"amount": 12.50, "currency": "EUR"}'), ordertimeout.begin_payment($1, 'pi_' || lower($1), interval '100 milliseconds')`, id)
		sidecartest.Exec(t, db, "SELECT ordertimeout.fail_payment($1, 'pi_' || lower($1))", id)
	}

	cfg := sidecartest.Config(pgtest.URL(t, db), "", "s1")
	cfg.GatewayDriver = gateway.DriverStripe
	cfg.StripeKey = testKey
	cfg.StripeURL = url
	sidecartest.Start(t, cfg)

	sidecartest.WaitStatus(t, db, "R1", "CANCELLED", 20*time.Second)
	sidecartest.WaitStatus(t, db, "R2", "CANCELLED", 20*time.Second)
	sidecartest.Eventually(t, 20*time.Second, "the conflict of R2 refunded with what Stripe holds", func() (bool, error) {
		return sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.conflicts
		   WHERE order_id = 'R2' AND kind = 'amount_mismatch' AND amount = 10.00 AND currency = 'EUR'
		     AND resolution = 'refunded' AND refund_id = 're_r2'`) == 1, nil
	})
	require.Zero(t, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 'R1'"),
		"a payment refunded in full is no payment")
	require.Zero(t, sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.events
	   WHERE order_id IN ('R1', 'R2') AND to_status = 'PAID'`), "never paid")
	s.mu.Lock()
	defer s.mu.Unlock()
	var amounts []string
	for i, k := range s.seen {
		if k == "POST /v1/refunds" {
			amounts = append(amounts, s.forms[i].Get("amount"))
		}
	}
	require.NotEmpty(t, amounts)
	for _, a := range amounts {
		require.Equal(t, "1000", a, "the refund is what Stripe holds, in cents")
	}
}
