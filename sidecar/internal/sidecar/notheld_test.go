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

// A late payment of the order's exact amount that a person then refunded at
// the gateway (a buyer who asked support for their money back after the
// cancel) is not reinstated: the order would be PAID for money the shop no
// longer has (invariant 7). Nor does the sidecar refund it a second time.
// Refunded in full, the conflict is resolved manual for a person (the
// gateway's answer in its note), counted as not_held; refunded in part, it
// is handed to a person and stays open (the rest is still held), counted as
// partly_held. Before, the resolve worker reinstated every late payment of
// the exact amount without asking the gateway, and both orders below ended
// PAID.
func TestLatePaymentRefundedAtTheGatewayIsNotReinstated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		refunded gateway.Amount // "" refunds all of it
		outcome  string
		row      string // the conflict afterwards
	}{
		{name: "refunded in full", outcome: "not_held", row: `resolution = 'manual'
			AND note LIKE 'sidecar: not reinstated nor refunded: the gateway no longer holds%'`},
		{name: "refunded in part", refunded: "4.00", outcome: "partly_held", row: `state = 'open'
			AND handed_over_why LIKE 'sidecar: not reinstated nor refunded: the gateway holds only part%6.00 of payment%'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, false)
			sidecartest.CreateOrder(t, e.db, "NH1", time.Hour, `{"amount": 10, "currency": "EUR"}`)
			sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('NH1')")
			require.NoError(t, e.fake.Set(bg, "NH1", fakegateway.Behaviour{
				Behaviour: fakegateway.Silent, PaymentID: "PNH1", Amount: "10.00", Currency: "EUR"}))
			var got string
			require.NoError(t, e.db.QueryRow(bg, "SELECT ordertimeout.confirm_payment('NH1', 'PNH1', 10.00, 'EUR')").Scan(&got))
			require.Equal(t, "conflict", got, "a late payment of the exact amount")
			require.NoError(t, e.fake.RefundOutside("NH1", tc.refunded), "a person refunds it at the gateway")

			s, _ := sidecartest.Start(t, e.config("s1"))
			sidecartest.Eventually(t, 20*time.Second, "the resolve job to find the money gone", func() (bool, error) {
				return sidecartest.Metric(t, s.Registry(), "ordertimeout_conflicts_resolved_total", "outcome", tc.outcome) == 1, nil
			})
			require.Equal(t, "CANCELLED", sidecartest.Status(t, e.db, "NH1"), "not reinstated")
			require.EqualValues(t, 1, sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts
				WHERE order_id = 'NH1' AND `+tc.row), "handed to a person, the reason kept")
			require.Zero(t, e.fake.Stats().RefundRequests, "not refunded a second time")
		})
	}
}

// The same late payment, still held at the gateway, is reinstated as always,
// also when the gateway writes its amount otherwise (10 against 10.00).
func TestLatePaymentStillHeldIsReinstated(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.CreateOrder(t, e.db, "NH2", time.Hour, `{"amount": 10, "currency": "EUR"}`)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('NH2')")
	require.NoError(t, e.fake.Set(bg, "NH2", fakegateway.Behaviour{
		Behaviour: fakegateway.Silent, PaymentID: "PNH2", Amount: "10", Currency: "EUR"}))
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.confirm_payment('NH2', 'PNH2', 10.00, 'EUR')")

	sidecartest.Start(t, e.config("s1"))
	sidecartest.WaitStatus(t, e.db, "NH2", "PAID", 20*time.Second)
	require.GreaterOrEqual(t, e.fake.Stats().Queries, 1, "the gateway was asked")
}

// Two late payments of one cancelled order, with the JSON contract (which
// answers for the order, naming its last payment): the one the gateway names
// is reinstated; the other is neither reinstated nor refunded on the doubt.
// With that contract a payment still held and one a person refunded there
// answer alike (a review had the refunded one claimed for a refund, refused
// by the gateway, and stuck refunding for ever): it is asked again, then
// left open for a person.
func TestTwoLatePaymentsOfTheJSONContract(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.CreateOrder(t, e.db, "TL1", time.Hour, `{"amount": 10, "currency": "EUR"}`)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('TL1')")
	require.NoError(t, e.fake.Set(bg, "TL1", fakegateway.Behaviour{
		Behaviour: fakegateway.Silent, PaymentID: "PTL1", Amount: "10", Currency: "EUR"}))
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.confirm_payment('TL1', 'PTL1', 10, 'EUR')")
	require.NoError(t, e.fake.Set(bg, "TL1", fakegateway.Behaviour{
		Behaviour: fakegateway.Silent, PaymentID: "PTL2", Amount: "10", Currency: "EUR"}))
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.confirm_payment('TL1', 'PTL2', 10, 'EUR')")

	sidecartest.Start(t, e.config("s1"))
	sidecartest.WaitStatus(t, e.db, "TL1", "PAID", 30*time.Second)
	require.EqualValues(t, 1, sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts
		WHERE order_id = 'TL1' AND payment_id = 'PTL2' AND resolution = 'reinstated'`), "the payment the gateway names")
	sidecartest.Eventually(t, 30*time.Second, "PTL1 asked again", func() (bool, error) {
		return sidecartest.Int(t, e.db, `SELECT coalesce(max((metadata ->> 'ordertimeout_held_asks')::int), 0)
			FROM river_job WHERE kind = 'ordertimeout_resolve_conflict' AND args ->> 'conflict_id' =
			  (SELECT conflict_id::text FROM ordertimeout.conflicts WHERE payment_id = 'PTL1')`) >= 2, nil
	})
	require.EqualValues(t, 1, sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts
		WHERE payment_id = 'PTL1' AND state = 'open'`), "neither reinstated nor refunded")
	require.Zero(t, e.fake.Stats().RefundRequests)
}

// A gateway whose lookups cannot be used (404) does not get a late payment
// reinstated: the resolve job asks again, counting the answers on the job
// itself (River keeps the count across its snoozes), and the conflict stays
// open meanwhile. After HeldAsks answers it is left for a person
// (TestResolveLeavesForAPersonWhatTheGatewayDoesNotTell in package worker).
func TestResolveCountsTheAnswersThatDoNotTell(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.CreateOrder(t, e.db, "CT1", time.Hour, `{"amount": 10, "currency": "EUR"}`)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('CT1')")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.confirm_payment('CT1', 'PCT1', 10, 'EUR')")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/orders/") {
			http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
			return
		}
		e.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := e.config("s1")
	cfg.GatewayURL = srv.URL
	sidecartest.Start(t, cfg)
	sidecartest.Eventually(t, 30*time.Second, "two answers counted on the job", func() (bool, error) {
		return sidecartest.Int(t, e.db, `SELECT coalesce(max((metadata ->> 'ordertimeout_held_asks')::int), 0)
			FROM river_job WHERE kind = 'ordertimeout_resolve_conflict'`) >= 2, nil
	})
	require.Equal(t, "CANCELLED", sidecartest.Status(t, e.db, "CT1"), "not reinstated")
	require.EqualValues(t, 1, sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts
		WHERE payment_id = 'PCT1' AND state = 'open'`))
	require.Zero(t, e.fake.Stats().RefundRequests)
}
