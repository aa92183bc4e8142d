package sidecar_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// A late payment recorded without its amount (a callback that did not say
// it) cannot be reinstated: the order has an amount, and money is exact. The
// resolve job asks the gateway for the payment's amount first; the gateway
// has it (10 EUR, the order's), the conflict learns it, and the order is
// reinstated. Before, the payment was refunded whole at once, even when the
// amount came a moment later (a review's race: the callback bringing it met
// the resolver's lock, and its retry found the conflict refunding).
func TestLatePaymentWithoutAmountAsksTheGateway(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.CreateOrder(t, e.db, "LA1", time.Hour, `{"amount": 10, "currency": "EUR"}`)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('LA1')")
	require.NoError(t, e.fake.Set(bg, "LA1", fakegateway.Behaviour{
		Behaviour: fakegateway.Silent, PaymentID: "PLA1", Amount: "10", Currency: "EUR"}))
	var got string
	require.NoError(t, e.db.QueryRow(bg, "SELECT ordertimeout.confirm_payment('LA1', 'PLA1')").Scan(&got))
	require.Equal(t, "conflict", got, "a late payment without an amount")

	sidecartest.Start(t, e.config("s1"))
	sidecartest.WaitStatus(t, e.db, "LA1", "PAID", 20*time.Second)
	require.EqualValues(t, 1, sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts
		WHERE resolution = 'reinstated' AND amount = 10 AND currency = 'EUR'`), "learned, then reinstated")
	require.Zero(t, e.fake.Stats().RefundRequests, "no refund asked")
}

// When the gateway names no such payment, the late payment of unknown
// amount is refunded whole, as before.
func TestLatePaymentWithoutAmountUnknownToTheGatewayIsRefunded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.CreateOrder(t, e.db, "LB1", time.Hour, `{"amount": 10, "currency": "EUR"}`)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('LB1')")
	var got string
	require.NoError(t, e.db.QueryRow(bg, "SELECT ordertimeout.confirm_payment('LB1', 'PLB1')").Scan(&got))
	require.Equal(t, "conflict", got)

	sidecartest.Start(t, e.config("s1"))
	sidecartest.Eventually(t, 20*time.Second, "the payment refunded", func() (bool, error) {
		return sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts WHERE resolution = 'refunded'`) == 1, nil
	})
	require.Equal(t, "CANCELLED", sidecartest.Status(t, e.db, "LB1"))
}

// What the gateway's lookup settles against the order leaves the refund as
// it was: an amount or currency other than the order's (only the order's
// exact amount lets the payment be reinstated, and a refund never carries an
// amount that only a lookup said: a review had a lookup's 0 refund nothing).
// The payment is refunded whole, its conflict without an amount. A review
// found a first version snoozing forever on the currency, never refunding.
// A lookup answered with an error (a record expired there: 404) no longer
// refunds at once: whether the gateway still holds the money it does not
// say, so it is asked again, HeldAsks times, then left for a person
// (TestResolveCountsTheAnswersThatDoNotTell, and package worker's
// TestResolveLeavesForAPersonWhatTheGatewayDoesNotTell).
func TestLatePaymentWithoutAmountRefundedWhenTheLookupCannotTell(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		amount   string
		currency string
		lookup   int // the status of GET /v1/orders/..., 0: the fake's own answer
	}{
		{name: "another currency", amount: "10", currency: "USD"},
		{name: "another amount", amount: "0", currency: "EUR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, false)
			sidecartest.CreateOrder(t, e.db, "LC1", time.Hour, `{"amount": 10, "currency": "EUR"}`)
			sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('LC1')")
			require.NoError(t, e.fake.Set(bg, "LC1", fakegateway.Behaviour{
				Behaviour: fakegateway.Silent, PaymentID: "PLC1", Amount: gateway.Amount(tc.amount), Currency: gateway.Currency(tc.currency)}))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.lookup != 0 && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/orders/") {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.lookup)
					_, _ = w.Write([]byte(`{"error":"order not found"}`))
					return
				}
				e.fake.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			var got string
			require.NoError(t, e.db.QueryRow(bg, "SELECT ordertimeout.confirm_payment('LC1', 'PLC1')").Scan(&got))
			require.Equal(t, "conflict", got)

			cfg := e.config("s1")
			cfg.GatewayURL = srv.URL
			s, _ := sidecartest.Start(t, cfg)
			sidecartest.Eventually(t, 20*time.Second, "the payment refunded whole", func() (bool, error) {
				return sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts
					WHERE resolution = 'refunded' AND amount IS NULL`) == 1, nil
			})
			require.Equal(t, "CANCELLED", sidecartest.Status(t, e.db, "LC1"))
			badAnswers := sidecartest.Metric(t, s.Registry(), "ordertimeout_gateway_bad_answers_total", "kind", "ordertimeout_resolve_conflict")
			if tc.lookup != 0 {
				require.EqualValues(t, 1, badAnswers, "the unusable lookup is counted")
			} else {
				require.Zero(t, badAnswers)
			}
		})
	}
}
