package sidecar_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/worker"
)

// "Order not found" is unknown, never unpaid. Alipay answers
// TRADE_NOT_EXIST until the buyer scans the QR code: a precancel check that
// hears "none" for an order without a gateway expiry asks again (up to
// worker.NoneAsks times) instead of cancelling, and finds the payment.
// An order the gateway never hears of is cancelled after those asks.
func TestGatewayNoneIsUnknown(t *testing.T) {
	t.Parallel()

	t.Run("scanned after two asks: paid, never cancelled", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, false)
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(precheck => 'always')")
		sidecartest.CreateOrder(t, e.db, "Q1", 100*time.Millisecond, "")
		require.NoError(t, e.fake.Set(bg, "Q1", fakegateway.Behaviour{Behaviour: fakegateway.QR, PaymentID: "PQ", NoneQueries: worker.NoneAsks - 1}))
		sidecartest.Start(t, e.config("s1"))

		sidecartest.WaitStatus(t, e.db, "Q1", "PAID", 30*time.Second)
		require.Equal(t, worker.NoneAsks, e.fake.Stats().Queries)
		require.NotContains(t, strings.Join(events(t, e.db, "Q1"), "; "), "CANCELLED")
	})

	t.Run("never heard of: cancelled after the asks", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, false)
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(precheck => 'always')")
		sidecartest.CreateOrder(t, e.db, "N1", 100*time.Millisecond, "")
		sidecartest.Start(t, e.config("s1"))

		sidecartest.WaitStatus(t, e.db, "N1", "CANCELLED", 30*time.Second)
		require.Equal(t, worker.NoneAsks, e.fake.Stats().Queries)
	})

	t.Run("with a gateway expiry that passed: no asking again", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, false)
		sidecartest.CreateOrder(t, e.db, "E1", time.Hour, "")
		// The payment check runs at the gateway's expiry plus grace: the
		// gateway can take no payment any more, so none means not paid.
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.begin_payment('E1', 'PE', interval '100 milliseconds')")
		sidecartest.Start(t, e.config("s1"))

		sidecartest.WaitStatus(t, e.db, "E1", "PENDING", 30*time.Second)
		require.Equal(t, 1, e.fake.Stats().Queries)
	})
}

// WeChat Pay's ORDERPAID: the buyer pays as the close of a cancelled order
// arrives; the close answered "already paid" is a payment, which becomes a
// late-payment conflict, resolved by policy (reinstated: stock is there).
func TestCloseAnsweredAlreadyPaid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	// 2 s: begin_payment refuses an expired order, and a loaded machine can
	// take hundreds of milliseconds between two statements.
	sidecartest.CreateOrder(t, e.db, "W1", 2*time.Second, `{"precheck": "never"}`)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.begin_payment('W1', 'PW', interval '100 milliseconds')")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.fail_payment('W1', 'PW')")
	require.NoError(t, e.fake.Set(bg, "W1", fakegateway.Behaviour{Behaviour: fakegateway.PayOnClose, PaymentID: "PW2"}))
	sidecartest.Start(t, e.config("s1"))

	sidecartest.Eventually(t, 20*time.Second, "the payment found by the close reinstated", func() (bool, error) {
		return sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts
		   WHERE order_id = 'W1' AND payment_id = 'PW2' AND resolution = 'reinstated'`) == 1, nil
	})
	require.Equal(t, "PAID", sidecartest.Status(t, e.db, "W1"))
	require.Equal(t, 1, e.fake.Order("W1").Closes)
}

// timestamps is an HTTP server in front of the fake gateway that records
// when each close arrived.
type timestamps struct {
	mu     sync.Mutex
	closes []time.Time
}

func (ts *timestamps) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/close") {
			ts.mu.Lock()
			ts.closes = append(ts.closes, time.Now())
			ts.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (ts *timestamps) get() []time.Time {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.closes)
}

// The expiry of many orders at once does not send their closes at once:
// with --gateway-rate R and --gateway-burst B, N closes take at least
// (N-B)/R seconds, no second has more than R+B of them, and the backlog
// drains through waits and snoozes that the metrics show.
func TestGatewayRateLimitDrainsBacklog(t *testing.T) {
	t.Parallel()
	const (
		n     = 40
		rate  = 10.0
		burst = 2
	)
	e := newEnv(t, false)
	ts := &timestamps{}
	srv := httptest.NewServer(ts.wrap(e.fake))
	t.Cleanup(srv.Close)

	for i := range n {
		id := fmt.Sprintf("F%d", i)
		// 2 s: begin_payment refuses an expired order, and a loaded machine
		// can take hundreds of milliseconds between two statements.
		sidecartest.CreateOrder(t, e.db, id, 2*time.Second, `{"precheck": "never"}`)
		// A payment attempt, failed: its cancel is closed at the gateway.
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.begin_payment($1, $2, interval '50 milliseconds')", id, "P"+id)
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.fail_payment($1, $2)", id, "P"+id)
	}
	cfg := e.config("s1")
	cfg.GatewayURL = srv.URL
	cfg.GatewayRate, cfg.GatewayBurst = rate, burst
	cfg.MaxWorkers = 20
	s, _ := sidecartest.Start(t, cfg)

	sidecartest.Eventually(t, 60*time.Second, "every close sent", func() (bool, error) {
		return e.fake.Stats().Closes >= n, nil
	})
	closes := ts.get()
	require.Len(t, closes, n, "one close per order")
	slices.SortFunc(closes, func(a, b time.Time) int { return a.Compare(b) })
	span := closes[n-1].Sub(closes[0])
	least := time.Duration(float64(n-burst) / rate * float64(time.Second))
	require.GreaterOrEqual(t, span, least*9/10, "the closes drain at the rate, not at once")
	require.Less(t, span, least*3, "the backlog drains at about the rate, not slower")
	for i := range closes {
		j := i
		for j < n && closes[j].Sub(closes[i]) < time.Second {
			j++
		}
		require.LessOrEqual(t, j-i, int(rate)+burst+1, "closes within one second from close %d", i)
	}

	require.Positive(t, sidecartest.Metric(t, s.Registry(), "ordertimeout_gateway_throttled_total", "op", "close", "result", "waited"))
	require.Positive(t, sidecartest.Metric(t, s.Registry(), "ordertimeout_gateway_throttle_wait_seconds", "op", "close"))
}

// The gateway says a PAYING order is paid, but by another payment than the
// started attempt and of another amount: confirm_payment records that money
// as an amount_mismatch conflict, for the policy or a person. The started
// attempt the payment check was about is then over: the check fails it, so
// the order returns to PENDING and its own timeout cancels it (once, after
// the precancel check). Without that, the order stayed PAYING with its stock
// held, and the sweep started a new payment check every 10 s, forever. The
// same holds when the conflict was recorded already (a check retried after
// its confirm_payment committed). A late payment of the failed attempt still
// becomes a conflict, never dropped.
func TestPaidByAnotherPaymentEndsTheAttempt(t *testing.T) {
	t.Parallel()
	for name, confirmedBefore := range map[string]bool{
		"first check":                           false,
		"retried after the conflict was stored": true,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, false)
			// Conflicts stay open: nothing but this test resolves them.
			sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(late_payment => 'manual')")
			sidecartest.CreateOrder(t, e.db, "G15", 2*time.Second, `{"amount": 7.00, "currency": "EUR"}`)
			sidecartest.Exec(t, e.db, "SELECT ordertimeout.begin_payment('G15', 'BG15', interval '1 second')")
			require.NoError(t, e.fake.Set(bg, "G15", fakegateway.Behaviour{
				Behaviour: fakegateway.Silent, PaymentID: "PG15", Amount: "5.00", Currency: "EUR"}))
			if confirmedBefore {
				var result string
				require.NoError(t, e.db.QueryRow(bg, "SELECT ordertimeout.confirm_payment('G15', 'PG15', 5.00, 'EUR')").Scan(&result))
				require.Equal(t, "conflict", result)
				require.Equal(t, "PAYING", sidecartest.Status(t, e.db, "G15"), "the started attempt BG15 is still in flight")
			}
			sidecartest.Start(t, e.config("s1"))

			sidecartest.WaitStatus(t, e.db, "G15", "CANCELLED", 20*time.Second)
			require.Equal(t, []string{
				"->PENDING requested",
				"PENDING>PAYING payment",
				"PAYING>PAYING payment", // the conflict
				"PAYING>PENDING payment",
				"PENDING>CANCELLED timeout",
			}, events(t, e.db, "G15"))
			require.EqualValues(t, 1, sidecartest.Int(t, e.db,
				"SELECT count(*) FROM ordertimeout.order_payments('G15') WHERE payment_id = 'BG15' AND status = 'failed'"))
			require.EqualValues(t, 1, sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts
			   WHERE order_id = 'G15' AND payment_id = 'PG15' AND kind = 'amount_mismatch' AND amount = 5.00`))
			require.EqualValues(t, 1, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.conflicts"))
			require.EqualValues(t, 1, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.releases WHERE order_id = 'G15'"))
			sidecartest.Eventually(t, 10*time.Second, "the payment check completed", func() (bool, error) {
				return sidecartest.Int(t, e.db, `SELECT count(*) FROM river_job
				   WHERE kind = 'ordertimeout_payment_check' AND state = 'completed'`) == 1, nil
			})

			// The buyer completes the failed attempt after all: a late
			// payment, recorded as a conflict.
			var result string
			require.NoError(t, e.db.QueryRow(bg, "SELECT ordertimeout.confirm_payment('G15', 'BG15', 7.00, 'EUR')").Scan(&result))
			require.Equal(t, "conflict", result)
			require.EqualValues(t, 1, sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts
			   WHERE order_id = 'G15' AND payment_id = 'BG15' AND kind = 'late_payment' AND amount = 7.00`))
			require.Equal(t, "CANCELLED", sidecartest.Status(t, e.db, "G15"))
		})
	}
}
