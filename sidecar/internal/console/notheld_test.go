package console_test

import (
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/console"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway/stripe"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// An operator's reinstate asks the gateway first whether it still holds the
// late payment: one a person refunded there since (the conflict waited for a
// person, days maybe) is refused with the reason, and nothing is resolved;
// with the gateway away, nothing is resolved either, and the operator is
// told to try again. Still held, the order is reinstated. Before, the
// console reinstated without asking: the order became PAID for money given
// back.
func TestReinstateAsksTheGatewayFirst(t *testing.T) {
	t.Parallel()
	s := newShop(t, pgtest.NewPool(t))
	fake, gatewayURL := sidecartest.Fake(t, nil)
	site := serve(t, console.Config{Pool: s.DB, Operator: operator, Logger: sidecartest.Logger(),
		Gateway: &gateway.Client{BaseURL: gatewayURL, Retries: gateway.NoRetries}})
	token := site.token(t, operator)
	require.NoError(t, fake.Set(bg, lateOrder, fakegateway.Behaviour{
		Behaviour: fakegateway.Silent, PaymentID: "pay-late", Amount: "25.00", Currency: "EUR"}))

	// The gateway is away: nothing resolved.
	require.NoError(t, fake.SetGateway(fakegateway.Behaviour{Behaviour: fakegateway.Down}))
	a := site.resolve(t, operator, s.LateID, "reinstate", token, nil)
	require.Equal(t, http.StatusServiceUnavailable, a.Status, a.Body)
	require.Contains(t, a.Body, "could not be asked whether it still holds the payment: nothing was resolved")
	require.Equal(t, "open", readConflict(t, s.DB, s.LateID).State)
	// Nor claimed for a refund (a third review had Refund claimed while the
	// gateway could not be asked: a refund its answer would have refused).
	a = site.resolve(t, operator, s.LateID, "refund", token, nil)
	require.Equal(t, http.StatusServiceUnavailable, a.Status, a.Body)
	require.Contains(t, a.Body, "could not be asked whether it still holds the payment: nothing was resolved")
	require.Equal(t, "open", readConflict(t, s.DB, s.LateID).State)
	require.NoError(t, fake.SetGateway(fakegateway.Behaviour{Behaviour: fakegateway.Normal}))

	// A person refunded 5 EUR of it at the gateway: refused.
	require.NoError(t, fake.RefundOutside(lateOrder, "5.00"))
	a = site.resolve(t, operator, s.LateID, "reinstate", token, nil)
	require.Equal(t, http.StatusConflict, a.Status, a.Body)
	require.Contains(t, a.Body, "reinstate refused: the gateway holds only part of the late payment&#39;s money")
	require.Contains(t, a.Body, "the gateway holds 20.00 of payment")
	require.Contains(t, a.Body, "settle what it still holds there by hand")
	c := readConflict(t, s.DB, s.LateID)
	require.Equal(t, "open", c.State)
	require.Zero(t, c.Events)
	require.Equal(t, "CANCELLED", sidecartest.Status(t, s.DB, lateOrder))

	// The rest too: the gateway answers failed; still refused.
	require.NoError(t, fake.RefundOutside(lateOrder, ""))
	a = site.resolve(t, operator, s.LateID, "reinstate", token, nil)
	require.Equal(t, http.StatusConflict, a.Status, a.Body)
	require.Contains(t, a.Body, "failed (refunded in full there?)")
	require.Equal(t, "open", readConflict(t, s.DB, s.LateID).State)

	// Nor is it refunded: the refund would give the money back twice, and
	// stay refunding for ever once the gateway refuses it.
	a = site.resolve(t, operator, s.LateID, "refund", token, nil)
	require.Equal(t, http.StatusConflict, a.Status, a.Body)
	require.Contains(t, a.Body, "refund refused: the gateway no longer holds the late payment&#39;s money")
	require.Equal(t, "open", readConflict(t, s.DB, s.LateID).State)

	// Pending there: the gateway does not tell; refused, with what to do.
	require.NoError(t, fake.Set(bg, lateOrder, fakegateway.Behaviour{
		Behaviour: fakegateway.PayOnClose, PaymentID: "pay-late", Amount: "25.00", Currency: "EUR"}))
	a = site.resolve(t, operator, s.LateID, "reinstate", token, nil)
	require.Equal(t, http.StatusConflict, a.Status, a.Body)
	require.Contains(t, a.Body, "reinstate refused: the gateway does not tell whether it still holds the late payment")
	require.Contains(t, a.Body, "refund it if the gateway still holds it")
	require.Equal(t, "open", readConflict(t, s.DB, s.LateID).State)

	// What the person does then: manual, with a note.
	a = site.do(t, http.MethodPost, fmt.Sprintf("/console/conflicts/%d/resolve", s.LateID), operator,
		url.Values{"csrf": {token}, "resolution": {"manual"}, "note": {"refunded by support at the gateway"}},
		map[string]string{"Origin": site.URL})
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
}

// Still held at the gateway, the late payment is reinstated from the console.
func TestReinstateWhileTheGatewayHoldsThePayment(t *testing.T) {
	t.Parallel()
	s := newShop(t, pgtest.NewPool(t))
	fake, gatewayURL := sidecartest.Fake(t, nil)
	site := serve(t, console.Config{Pool: s.DB, Operator: operator, Logger: sidecartest.Logger(),
		Gateway: &gateway.Client{BaseURL: gatewayURL, Retries: gateway.NoRetries}})
	require.NoError(t, fake.Set(bg, lateOrder, fakegateway.Behaviour{
		Behaviour: fakegateway.Silent, PaymentID: "pay-late", Amount: "25", Currency: "EUR"}))
	a := site.resolve(t, operator, s.LateID, "reinstate", site.token(t, operator), nil)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.Equal(t, "PAID", sidecartest.Status(t, s.DB, lateOrder))
	require.Equal(t, 1, fake.Stats().Queries, "the gateway was asked once")
}

// A gateway that holds more of the payment than recorded here (a callback
// said 25.00 of a payment of 30.00): the record contradicts the gateway.
// Reinstate and Refund are both refused (409), with what to do: a refund
// would name 25.00 and give back part of the payment. Nothing is resolved.
func TestReinstateAndRefundRefusedWhenTheGatewayHoldsAnotherAmount(t *testing.T) {
	t.Parallel()
	s := newShop(t, pgtest.NewPool(t))
	fake, gatewayURL := sidecartest.Fake(t, nil)
	site := serve(t, console.Config{Pool: s.DB, Operator: operator, Logger: sidecartest.Logger(),
		Gateway: &gateway.Client{BaseURL: gatewayURL, Retries: gateway.NoRetries}})
	token := site.token(t, operator)
	require.NoError(t, fake.Set(bg, lateOrder, fakegateway.Behaviour{
		Behaviour: fakegateway.Silent, PaymentID: "pay-late", Amount: "30.00", Currency: "EUR"}))
	for _, resolution := range []string{"reinstate", "refund"} {
		a := site.resolve(t, operator, s.LateID, resolution, token, nil)
		require.Equal(t, http.StatusConflict, a.Status, a.Body)
		require.Contains(t, a.Body, resolution+" refused: the gateway&#39;s record of the payment contradicts the amount recorded here")
		require.Contains(t, a.Body, "more than the 25.00 confirmed here")
		require.Contains(t, a.Body, "then resolve the conflict as manual with a note")
		c := readConflict(t, s.DB, s.LateID)
		require.Equal(t, "open", c.State, resolution)
		require.Zero(t, c.Events, resolution)
	}
	require.Equal(t, "CANCELLED", sidecartest.Status(t, s.DB, lateOrder))
}

// A review found the console's Refund claimed on an answer about another
// amount: the gateway was asked about a late payment recorded without its
// amount, a confirmation gave it 10 meanwhile, and the refund of 10 of a
// payment of 12 was claimed. The claim now reads the conflict again in its
// transaction: changed since it was read before the gateway was asked,
// nothing is claimed (409).
func TestRefundNotClaimedWhenTheConflictChangesWhileTheGatewayIsAsked(t *testing.T) {
	t.Parallel()
	s := newShop(t, pgtest.NewPool(t))
	sidecartest.Exec(t, s.DB, `SELECT ordertimeout.create_order('O-RACE', '[{"sku":"A","qty":1}]', interval '1 hour', '{"amount":12,"currency":"EUR"}')`)
	sidecartest.Exec(t, s.DB, "SELECT ordertimeout.cancel_order('O-RACE', 'requested')")
	sidecartest.Exec(t, s.DB, "SELECT ordertimeout.confirm_payment('O-RACE', 'pay-race')")
	id := sidecartest.Int(t, s.DB, "SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'O-RACE'")
	// A gateway of the JSON contract, over HTTP, in whose answer a
	// confirmation lands first.
	var once sync.Once
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() {
			sidecartest.Exec(t, s.DB, "SELECT ordertimeout.confirm_payment('O-RACE', 'pay-race', 10, 'EUR')")
		})
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"order_id": "O-RACE", "status": "paid", "payment_id": "pay-race", "amount": "12.00", "currency": "EUR"}`)
	}))
	t.Cleanup(gw.Close)
	site := serve(t, console.Config{Pool: s.DB, Operator: operator, Logger: sidecartest.Logger(),
		Gateway: &gateway.Client{BaseURL: gw.URL, Retries: gateway.NoRetries}})
	a := site.resolve(t, operator, id, "refund", site.token(t, operator), nil)
	require.Equal(t, http.StatusConflict, a.Status, a.Body)
	require.Contains(t, a.Body, "refund not made: the conflict got another amount or currency")
	c := readConflict(t, s.DB, id)
	require.Equal(t, "open", c.State, "nothing claimed")
	require.Zero(t, c.Events)
	// Asked again, the gateway's 12.00 contradicts the 10 recorded now.
	a = site.resolve(t, operator, id, "refund", site.token(t, operator), nil)
	require.Equal(t, http.StatusConflict, a.Status, a.Body)
	require.Contains(t, a.Body, "more than the 10 confirmed here")
	require.Equal(t, "open", readConflict(t, s.DB, id).State)
}

// The same race before the console's Reinstate (a second review): the
// gateway said it holds 10.00 of a late payment recorded without its
// amount, and a confirmation of 12 (the order's amount) landed meanwhile;
// the order was reinstated with 10 of 12 held. Nothing is reinstated now
// (409), and asked again the gateway's 10.00 of 12 is refused as a refund
// in part.
func TestReinstateNotMadeWhenTheConflictChangesWhileTheGatewayIsAsked(t *testing.T) {
	t.Parallel()
	s := newShop(t, pgtest.NewPool(t))
	sidecartest.Exec(t, s.DB, `SELECT ordertimeout.create_order('O-RACE2', '[{"sku":"A","qty":1}]', interval '1 hour', '{"amount":12,"currency":"EUR"}')`)
	sidecartest.Exec(t, s.DB, "SELECT ordertimeout.cancel_order('O-RACE2', 'requested')")
	sidecartest.Exec(t, s.DB, "SELECT ordertimeout.confirm_payment('O-RACE2', 'pay-race2')")
	id := sidecartest.Int(t, s.DB, "SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'O-RACE2'")
	var once sync.Once
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() {
			sidecartest.Exec(t, s.DB, "SELECT ordertimeout.confirm_payment('O-RACE2', 'pay-race2', 12, 'EUR')")
		})
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"order_id": "O-RACE2", "status": "paid", "payment_id": "pay-race2", "amount": "10.00", "currency": "EUR"}`)
	}))
	t.Cleanup(gw.Close)
	site := serve(t, console.Config{Pool: s.DB, Operator: operator, Logger: sidecartest.Logger(),
		Gateway: &gateway.Client{BaseURL: gw.URL, Retries: gateway.NoRetries}})
	a := site.resolve(t, operator, id, "reinstate", site.token(t, operator), nil)
	require.Equal(t, http.StatusConflict, a.Status, a.Body)
	require.Contains(t, a.Body, "reinstate not made: the conflict got another amount or currency")
	require.Equal(t, "CANCELLED", sidecartest.Status(t, s.DB, "O-RACE2"), "not reinstated")
	a = site.resolve(t, operator, id, "reinstate", site.token(t, operator), nil)
	require.Equal(t, http.StatusConflict, a.Status, a.Body)
	require.Contains(t, a.Body, "holds only part of the late payment")
	require.Equal(t, "CANCELLED", sidecartest.Status(t, s.DB, "O-RACE2"))
}

// With Stripe's driver, a late payment whose charge is under an open
// dispute: Reinstate and Refund are refused (409), nothing resolved. A
// second review had Refund claimed (the worker waits the dispute out, the
// console did not), and the claimed refund could then never be made of
// that amount, nor at all once the dispute was lost. Stripe here is a
// scripted HTTP server.
func TestReinstateAndRefundRefusedWhileThePaymentIsDisputed(t *testing.T) {
	t.Parallel()
	s := newShop(t, pgtest.NewPool(t))
	sidecartest.Exec(t, s.DB, `SELECT ordertimeout.create_order('O-DISP', '[{"sku":"A","qty":1}]', interval '1 hour', '{"amount":12.50,"currency":"EUR"}')`)
	sidecartest.Exec(t, s.DB, "SELECT ordertimeout.cancel_order('O-DISP', 'requested')")
	sidecartest.Exec(t, s.DB, "SELECT ordertimeout.confirm_payment('O-DISP', 'pi_disp', 12.50, 'EUR')")
	id := sidecartest.Int(t, s.DB, "SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'O-DISP'")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/payment_intents/pi_disp":
			fmt.Fprint(w, `{"id": "pi_disp", "object": "payment_intent", "status": "succeeded", "amount": 1250, "amount_received": 1250,
				"currency": "eur", "metadata": {"order_id": "O-DISP"}, "latest_charge": {"id": "ch_disp", "object": "charge",
				"status": "succeeded", "amount": 1250, "amount_captured": 1250, "amount_refunded": 0, "disputed": true,
				"refunds": {"object": "list", "has_more": false, "data": []}}}`)
		case "/v1/disputes":
			fmt.Fprint(w, `{"object": "list", "url": "/v1/disputes", "has_more": false, "data": [
				{"id": "dp_1", "object": "dispute", "amount": 1250, "currency": "eur", "status": "needs_response", "charge": "ch_disp"}]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error": {"type": "invalid_request_error", "code": "resource_missing", "message": "No such object"}}`)
		}
	}))
	t.Cleanup(srv.Close)
	d, err := stripe.New(stripe.Config{Key: "sk_test_console", URL: srv.URL, Retries: -1, Timeout: 10 * time.Second})
	require.NoError(t, err)
	site := serve(t, console.Config{Pool: s.DB, Operator: operator, Logger: sidecartest.Logger(), Gateway: d})
	for _, resolution := range []string{"reinstate", "refund"} {
		a := site.resolve(t, operator, id, resolution, site.token(t, operator), nil)
		require.Equal(t, http.StatusConflict, a.Status, a.Body)
		require.Contains(t, a.Body, resolution+" refused:")
		require.Contains(t, a.Body, "the payment is under dispute at the gateway")
		require.Equal(t, "open", readConflict(t, s.DB, id).State, resolution)
	}
	require.Equal(t, "CANCELLED", sidecartest.Status(t, s.DB, "O-DISP"))
}

// A late payment the gateway holds in another currency, of the amount
// recorded here, is not the order's money: Reinstate is refused, and Refund
// goes on (the worker refunds it whole). A fourth review found the console
// answering that Refund with a 500. A gateway that refuses the question (an
// expired key) or answers unusably gets no refund claimed (502): once it
// answers, its answer may be the one that would refuse.
func TestRefundOfAnotherCurrencyGoesOnAndAnUnusableAnswerClaimsNothing(t *testing.T) {
	t.Parallel()
	s := newShop(t, pgtest.NewPool(t))
	fake, gatewayURL := sidecartest.Fake(t, nil)
	site := serve(t, console.Config{Pool: s.DB, Operator: operator, Logger: sidecartest.Logger(),
		Gateway: &gateway.Client{BaseURL: gatewayURL, Retries: gateway.NoRetries}})
	token := site.token(t, operator)

	// Unusable: the fake knows nothing of another order's id, so a scripted
	// server answers 401 instead.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error": "api key expired"}`)
	}))
	t.Cleanup(bad.Close)
	badSite := serve(t, console.Config{Pool: s.DB, Operator: operator, Logger: sidecartest.Logger(),
		Gateway: &gateway.Client{BaseURL: bad.URL, Retries: gateway.NoRetries}})
	a := badSite.resolve(t, operator, s.LateID, "refund", badSite.token(t, operator), nil)
	require.Equal(t, http.StatusBadGateway, a.Status, a.Body)
	require.Contains(t, a.Body, "could not be used, or it refused the request")
	require.Equal(t, "open", readConflict(t, s.DB, s.LateID).State)

	require.NoError(t, fake.Set(bg, lateOrder, fakegateway.Behaviour{
		Behaviour: fakegateway.Silent, PaymentID: "pay-late", Amount: "25.00", Currency: "USD"}))
	a = site.resolve(t, operator, s.LateID, "reinstate", token, nil)
	require.Equal(t, http.StatusConflict, a.Status, a.Body)
	require.Contains(t, a.Body, "It is not the order&#39;s money: refund it.")
	a = site.resolve(t, operator, s.LateID, "refund", token, nil)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.Equal(t, "refunding", readConflict(t, s.DB, s.LateID).State)
}

// A review found Reinstate and Refund asking the gateway before the
// database checked the note: a note it refuses (OT149: more than 500
// characters, or a control or format character) cost gateway calls, and
// while the gateway was away the operator was told to try again in a
// moment (503), never that the note was wrong. The console checks the note
// with the database's rule first, and refuses it in the database's words
// (409), before the gateway is asked anything; nothing is resolved.
func TestBadNoteIsRefusedBeforeTheGatewayIsAsked(t *testing.T) {
	t.Parallel()
	s := newShop(t, pgtest.NewPool(t))
	fake, gatewayURL := sidecartest.Fake(t, nil)
	site := serve(t, console.Config{Pool: s.DB, Operator: operator, Logger: sidecartest.Logger(),
		Gateway: &gateway.Client{BaseURL: gatewayURL, Retries: gateway.NoRetries}})
	token := site.token(t, operator)
	require.NoError(t, fake.SetGateway(fakegateway.Behaviour{Behaviour: fakegateway.Down}))
	resolve := func(resolution, note string) answer {
		t.Helper()
		return site.do(t, http.MethodPost, fmt.Sprintf("/console/conflicts/%d/resolve", s.LateID), operator,
			url.Values{"csrf": {token}, "resolution": {resolution}, "note": {note}}, map[string]string{"Origin": site.URL})
	}
	for name, note := range map[string]string{
		"501 characters":     strings.Repeat("x", 501),
		"a bidi override":    "refunded\u202Eevil",
		"a zero-width space": "refunded\u200Bby hand",
	} {
		for _, resolution := range []string{"reinstate", "refund"} {
			a := resolve(resolution, note)
			require.Equal(t, http.StatusConflict, a.Status, "%s, %s: %s", resolution, name, a.Body)
			require.Contains(t, a.Body, template.HTMLEscapeString(fmt.Sprintf("%s refused (%s): %s.",
				resolution, sqlstate.InvalidNote, noteRefusal(t, s.DB, s.LateID, resolution, note))), "%s, %s", resolution, name)
			require.NotContains(t, a.Body, "could not be asked", "%s, %s", resolution, name)
			c := readConflict(t, s.DB, s.LateID)
			require.Equal(t, "open", c.State, "%s, %s", resolution, name)
			require.Zero(t, c.Events, "%s, %s", resolution, name)
		}
	}
	require.Equal(t, fakegateway.Stats{}, fake.Stats(), "the gateway was asked nothing")

	// A note the database keeps goes on to the gateway, which is away.
	a := resolve("refund", strings.Repeat("x", 500))
	require.Equal(t, http.StatusServiceUnavailable, a.Status, a.Body)
	require.Contains(t, a.Body, "could not be asked whether it still holds the payment: nothing was resolved")
	require.NotZero(t, fake.Stats().Queries)
	require.Equal(t, "open", readConflict(t, s.DB, s.LateID).State)
}

// noteRefusal is the database's message when resolve_conflict refuses note
// (OT149), as the console would call it; nothing is written.
func noteRefusal(t *testing.T, db *pgxpool.Pool, id int64, resolution, note string) string {
	t.Helper()
	err := pgx.BeginFunc(bg, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(bg, `SELECT set_config('ordertimeout.actor', 'console:olga', true)`); err != nil {
			return err
		}
		_, err := tx.Exec(bg, `SELECT ordertimeout.resolve_conflict($1, $2, $3)`, id, resolution, note)
		return err
	})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, sqlstate.InvalidNote, pgErr.Code, pgErr.Message)
	return pgErr.Message
}
