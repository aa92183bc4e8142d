package stripe_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway/stripe"
)

const testKey = "sk_test_123"

func newDriver(t *testing.T, url string) *stripe.Driver {
	t.Helper()
	d, err := stripe.New(stripe.Config{Key: testKey, URL: url, Retries: -1, Timeout: 10 * time.Second})
	require.NoError(t, err)
	return d
}

// Against Stripe's own stripe-mock: the driver's requests are ones Stripe's
// API accepts (stripe-mock validates every parameter against Stripe's
// OpenAPI spec), and its answers are read. stripe-mock is stateless (a
// fixture per object: a PaymentIntent requiring a payment method, an open
// Checkout Session), so these are shapes, not flows.
func TestAgainstStripeMock(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, startStripeMock(t))
	d := newDriver(t, rec.URL)

	t.Run("order by PaymentIntent", func(t *testing.T) {
		o, err := d.Order(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{"pi_123"}})
		require.NoError(t, err)
		require.Equal(t, gateway.Order{OrderID: "A1", Status: gateway.StatusPending}, o)
		reqs := rec.take()
		require.Len(t, reqs, 1)
		require.Equal(t, "GET", reqs[0].Method)
		require.Equal(t, "/v1/payment_intents/pi_123", reqs[0].Path)
		require.Equal(t, "Bearer "+testKey, reqs[0].Header.Get("Authorization"))
	})

	t.Run("order by Checkout Session", func(t *testing.T) {
		o, err := d.Order(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{"cs_test_abc"}})
		require.NoError(t, err)
		require.Equal(t, gateway.StatusPending, o.Status, "an open session")
		require.Equal(t, "/v1/checkout/sessions/cs_test_abc", rec.take()[0].Path)
	})

	t.Run("order found by search", func(t *testing.T) {
		o, err := d.Order(bg, gateway.Ref{OrderID: `A"1\`})
		require.NoError(t, err)
		// The fixture's metadata names no order: not this one's payment.
		require.Equal(t, gateway.StatusNone, o.Status)
		reqs := rec.take()
		require.Len(t, reqs, 1)
		require.Equal(t, "/v1/payment_intents/search", reqs[0].Path)
		require.Equal(t, `metadata["order_id"]:"A\"1\\"`, reqs[0].Form.Get("query"))
	})

	// stripe-mock keeps no state: its 200 to a cancel or an expire carries
	// its fixture, a PaymentIntent still requires_payment_method and a
	// session still open (under another id). Real Stripe answers 200 only
	// with the object canceled or expired, and a 400 otherwise; so these
	// answers are bad answers, never "closed" (the close of an object that
	// says it is still open is not done). The requests are Stripe's and the
	// answers are read in Stripe's format; the closes that succeed are
	// scripted in TestCloseAnswers.
	t.Run("close cancels a PaymentIntent and expires a session", func(t *testing.T) {
		for _, tc := range []struct{ id, post string }{
			{"pi_123", "/v1/payment_intents/pi_123/cancel cancellation_reason=abandoned&expand%5B0%5D=latest_charge.refunds"},
			{"cs_test_abc", "/v1/checkout/sessions/cs_test_abc/expire expand%5B0%5D=payment_intent.latest_charge.refunds"},
		} {
			r, err := d.Close(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{tc.id}})
			require.ErrorIs(t, err, gateway.ErrBadAnswer, "stripe-mock's fixture is still open, got %+v", r)
			var posts []string
			for _, q := range rec.take() {
				if q.Method == "POST" {
					posts = append(posts, q.Path+" "+q.Form.Encode())
				}
			}
			require.Equal(t, []string{tc.post}, posts)
		}
	})

	t.Run("refund with an idempotency key", func(t *testing.T) {
		r, err := d.Refund(bg, gateway.RefundRequest{OrderID: "A1", PaymentID: "pi_123", Amount: "10.99", IdempotencyKey: "pi_123"})
		require.NoError(t, err)
		require.Equal(t, gateway.RefundRefunded, r.Status)
		require.Regexp(t, `^re_`, r.RefundID)
		reqs := rec.take()
		require.Len(t, reqs, 2)
		require.Equal(t, "/v1/payment_intents/pi_123", reqs[0].Path, "the currency is read first")
		require.Equal(t, "POST", reqs[1].Method)
		require.Equal(t, "/v1/refunds", reqs[1].Path)
		require.Equal(t, "pi_123", reqs[1].Header.Get("Idempotency-Key"))
		require.Equal(t, "1099", reqs[1].Form.Get("amount"), "USD 10.99 in cents")
		require.Equal(t, "pi_123", reqs[1].Form.Get("payment_intent"))
		require.Equal(t, "A1", reqs[1].Form.Get("metadata[order_id]"))
		require.Equal(t, "pi_123", reqs[1].Form.Get("metadata[idempotency_key]"))

		// An amount the currency cannot hold is never sent.
		_, err = d.Refund(bg, gateway.RefundRequest{OrderID: "A1", PaymentID: "pi_123", Amount: "10.995", IdempotencyKey: "k"})
		require.ErrorIs(t, err, gateway.ErrBadRequest)
		for _, q := range rec.take() {
			require.NotEqual(t, "POST", q.Method)
		}
	})

	t.Run("payments since a moment", func(t *testing.T) {
		since := time.Unix(1700000000, 0)
		ps, err := d.Payments(bg, since, 10)
		require.NoError(t, err)
		reqs := rec.take()
		require.Len(t, reqs, 3)
		require.Equal(t, "/v1/charges", reqs[0].Path)
		require.Equal(t, "1700000000", reqs[0].Form.Get("created[gte]"))
		require.Equal(t, "data.payment_intent", reqs[0].Form.Get("expand[0]"))
		require.Equal(t, "/v1/refunds", reqs[1].Path)
		require.Equal(t, "1700000000", reqs[1].Form.Get("created[gte]"))
		require.Equal(t, "/v1/checkout/sessions", reqs[2].Path)
		require.Equal(t, "1699913600", reqs[2].Form.Get("created[gte]"), "sessions from a day before")
		require.Equal(t, "complete", reqs[2].Form.Get("status"))
		// The fixtures: a charge that succeeded but was never captured
		// (captured false: an authorization, no money) and a refund that
		// succeeded.
		var statuses []string
		for _, p := range ps {
			statuses = append(statuses, p.Status)
			require.Equal(t, gateway.Currency("USD"), p.Currency)
		}
		require.ElementsMatch(t, []string{gateway.PaymentRefunded}, statuses)
	})

	t.Run("a key Stripe refuses is a bad request", func(t *testing.T) {
		bad, err := stripe.New(stripe.Config{Key: "not-a-key", URL: rec.URL, Retries: -1})
		require.NoError(t, err)
		_, err = bad.Order(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{"pi_123"}})
		require.ErrorIs(t, err, gateway.ErrBadRequest)
		require.Contains(t, err.Error(), "HTTP 401")
		rec.take()
	})

	t.Run("an id that is no Stripe object is never sent", func(t *testing.T) {
		for _, id := range []string{"P1", "pi_", "pi_../../v1/refunds", "cs_a b", "ch_123"} {
			_, err := d.Order(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{id}})
			require.ErrorIs(t, err, gateway.ErrBadRequest, id)
		}
		require.Empty(t, rec.take())
	})
}

// scripted is a Stripe-shaped HTTP server whose answers a test sets, for
// the states and errors stripe-mock's fixtures never show.
type scripted struct {
	mu      sync.Mutex
	answers map[string][]answer // by "METHOD path"; the last one repeats
	// handlers answer by the request's query instead, if set for the key.
	handlers map[string]func(q url.Values) answer
	seen     []string
	queries  []url.Values // of each request seen
	forms    []url.Values // the form each request seen posted
}

type answer struct {
	code int
	body string
}

func newScripted(t *testing.T) (*scripted, string) {
	s := &scripted{answers: map[string][]answer{}, handlers: map[string]func(url.Values) answer{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func (s *scripted) set(key string, a ...answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[key] = a
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.Path
	s.mu.Lock()
	s.seen = append(s.seen, key)
	s.queries = append(s.queries, r.URL.Query())
	body, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(body))
	s.forms = append(s.forms, form)
	as := s.answers[key]
	var a answer
	switch {
	case s.handlers[key] != nil:
		a = s.handlers[key](r.URL.Query())
	case len(as) == 0:
		a = answer{404, `{"error": {"type": "invalid_request_error", "code": "resource_missing", "message": "No such object"}}`}
	case len(as) == 1:
		a = as[0]
	default:
		a, s.answers[key] = as[0], as[1:]
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.code)
	fmt.Fprint(w, a.body)
}

func intent(id, status string, amount int64, currency, orderID string) answer {
	meta := map[string]string{}
	if orderID != "" {
		meta["order_id"] = orderID
	}
	pi := map[string]any{
		"id": id, "object": "payment_intent", "status": status, "amount": amount,
		"amount_received": amount, "currency": currency, "metadata": meta, "created": 1700000000,
	}
	if status == "succeeded" {
		pi["latest_charge"] = charge(amount, 0)
	}
	b, _ := json.Marshal(pi)
	return answer{200, string(b)}
}

// refunded is intent's succeeded PaymentIntent of amount received, of which
// amountRefunded was refunded since.
func refunded(id string, amount, amountRefunded int64, currency, orderID string) answer {
	a := intent(id, "succeeded", amount, currency, orderID)
	var pi map[string]any
	if err := json.Unmarshal([]byte(a.body), &pi); err != nil {
		panic(err)
	}
	pi["latest_charge"] = charge(amount, amountRefunded)
	b, _ := json.Marshal(pi)
	return answer{200, string(b)}
}

// charge is the latest charge of a succeeded PaymentIntent, expanded with
// its refunds: one that succeeded, of amountRefunded, if not 0.
func charge(amount, amountRefunded int64) map[string]any {
	refunds := []any{}
	if amountRefunded != 0 {
		refunds = append(refunds, map[string]any{"id": "re_dashboard", "object": "refund", "amount": amountRefunded, "status": "succeeded"})
	}
	return map[string]any{"id": "ch_1", "object": "charge", "status": "succeeded", "amount": amount,
		"amount_captured": amount, "amount_refunded": amountRefunded, "refunded": amountRefunded == amount,
		"refunds": map[string]any{"object": "list", "data": refunds, "has_more": false}}
}

func stripeError(code int, typ, errCode string) answer {
	return answer{code, fmt.Sprintf(`{"error": {"type": %q, "code": %q, "message": "scripted"}}`, typ, errCode)}
}

// Paid answers carry the amount converted exactly; Stripe's states and
// errors map to the contract's.
func TestStatesAndErrors(t *testing.T) {
	t.Parallel()
	s, url := newScripted(t)
	d := newDriver(t, url)
	ref := func(ids ...string) gateway.Ref { return gateway.Ref{OrderID: "A1", PaymentIDs: ids} }

	s.set("GET /v1/payment_intents/pi_jpy", intent("pi_jpy", "succeeded", 500, "jpy", "A1"))
	o, err := d.Order(bg, ref("pi_jpy"))
	require.NoError(t, err)
	require.Equal(t, gateway.Order{OrderID: "A1", Status: gateway.StatusPaid, PaymentID: "pi_jpy", Amount: "500", Currency: "JPY"}, o)

	s.set("GET /v1/payment_intents/pi_kwd", intent("pi_kwd", "succeeded", 5120, "kwd", "A1"))
	o, err = d.Order(bg, ref("pi_old", "pi_kwd"))
	require.NoError(t, err, "pi_old is unknown to Stripe, pi_kwd paid")
	require.Equal(t, gateway.Order{OrderID: "A1", Status: gateway.StatusPaid, PaymentID: "pi_kwd", Amount: "5.120", Currency: "KWD"}, o)

	o, err = d.Order(bg, ref("pi_old"))
	require.NoError(t, err)
	require.Equal(t, gateway.StatusNone, o.Status, "resource_missing is unknown, never unpaid")

	s.set("GET /v1/payment_intents/pi_c", intent("pi_c", "canceled", 100, "eur", "A1"))
	s.set("GET /v1/payment_intents/pi_p", intent("pi_p", "processing", 100, "eur", "A1"))
	o, err = d.Order(bg, ref("pi_c"))
	require.NoError(t, err)
	require.Equal(t, gateway.StatusFailed, o.Status)
	o, err = d.Order(bg, ref("pi_c", "pi_p"))
	require.NoError(t, err)
	require.Equal(t, gateway.StatusPending, o.Status)

	// A processing PaymentIntent can be neither closed nor taken for paid.
	_, err = d.Close(bg, ref("pi_p"))
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	// A canceled one is closed already: closing again is success.
	r, err := d.Close(bg, ref("pi_c"))
	require.NoError(t, err)
	require.Equal(t, gateway.CloseClosed, r.Status)

	// Another order's PaymentIntent, a bad currency, a negative amount.
	s.set("GET /v1/payment_intents/pi_x", intent("pi_x", "succeeded", 100, "eur", "B2"))
	_, err = d.Order(bg, ref("pi_x"))
	require.ErrorIs(t, err, gateway.ErrBadAnswer)
	require.Contains(t, err.Error(), `belongs to order "B2"`)
	s.set("GET /v1/payment_intents/pi_x", intent("pi_x", "succeeded", 100, "euro", "A1"))
	_, err = d.Order(bg, ref("pi_x"))
	require.ErrorIs(t, err, gateway.ErrBadAnswer)
	s.set("GET /v1/payment_intents/pi_x", intent("pi_x", "succeeded", -100, "eur", "A1"))
	_, err = d.Order(bg, ref("pi_x"))
	require.ErrorIs(t, err, gateway.ErrBadAnswer)
	s.set("GET /v1/payment_intents/pi_x", intent("pi_other", "succeeded", 100, "eur", "A1"))
	_, err = d.Order(bg, ref("pi_x"))
	require.ErrorIs(t, err, gateway.ErrBadAnswer, "an answer about another object")
	s.set("GET /v1/payment_intents/pi_x", answer{200, `{"id": "pi_x", "status": `})
	_, err = d.Order(bg, ref("pi_x"))
	require.ErrorIs(t, err, gateway.ErrBadAnswer, "malformed JSON")

	// Errors: retry, or give up.
	for _, tc := range []struct {
		a    answer
		want error
	}{
		{stripeError(429, "invalid_request_error", "rate_limit"), gateway.ErrUnavailable},
		{stripeError(429, "invalid_request_error", "lock_timeout"), gateway.ErrUnavailable},
		{stripeError(500, "api_error", ""), gateway.ErrUnavailable},
		{stripeError(503, "api_error", ""), gateway.ErrUnavailable},
		{stripeError(401, "invalid_request_error", ""), gateway.ErrBadRequest},
		{stripeError(403, "invalid_request_error", "secret_key_required"), gateway.ErrBadRequest},
		{stripeError(400, "invalid_request_error", "parameter_invalid_integer"), gateway.ErrBadRequest},
		{stripeError(400, "idempotency_error", ""), gateway.ErrBadRequest},
	} {
		s.set("GET /v1/payment_intents/pi_e", tc.a)
		_, err := d.Order(bg, ref("pi_e"))
		require.ErrorIs(t, err, tc.want, tc.a.body)
	}
	_, err = newDriver(t, "http://127.0.0.1:1").Order(bg, ref("pi_e"))
	require.ErrorIs(t, err, gateway.ErrUnavailable, "connection refused")
}

// A close refused because the PaymentIntent just succeeded is a payment:
// the worker confirms it (PAID, or a late-payment conflict on a cancelled
// order). An open Checkout Session paid meanwhile likewise.
func TestCloseAnsweredPaid(t *testing.T) {
	t.Parallel()
	s, url := newScripted(t)
	d := newDriver(t, url)

	s.set("GET /v1/payment_intents/pi_1",
		intent("pi_1", "requires_action", 1250, "eur", "A1"),
		intent("pi_1", "succeeded", 1250, "eur", "A1"))
	s.set("POST /v1/payment_intents/pi_1/cancel", stripeError(400, "invalid_request_error", "payment_intent_unexpected_state"))
	r, err := d.Close(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{"pi_1"}})
	require.NoError(t, err)
	require.Equal(t, gateway.CloseResult{Status: gateway.ClosePaid, PaymentID: "pi_1", Amount: "12.50", Currency: "EUR"}, r)

	session := func(status, paymentStatus string) answer {
		return answer{200, fmt.Sprintf(`{"id": "cs_1", "object": "checkout.session", "status": %q, "payment_status": %q,
			"amount_total": 1250, "currency": "eur", "client_reference_id": "A1", "metadata": {"order_id": "A1"},
			"payment_intent": {"id": "pi_9", "object": "payment_intent", "latest_charge": {"id": "ch_9", "object": "charge", "amount_refunded": 0,
				"refunds": {"object": "list", "data": [], "has_more": false}}}}`, status, paymentStatus)}
	}
	s.set("GET /v1/checkout/sessions/cs_1", session("open", "unpaid"), session("complete", "paid"))
	s.set("POST /v1/checkout/sessions/cs_1/expire", stripeError(400, "invalid_request_error", ""))
	r, err = d.Close(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{"cs_1"}})
	require.NoError(t, err)
	require.Equal(t, gateway.CloseResult{Status: gateway.ClosePaid, PaymentID: "cs_1", Amount: "12.50", Currency: "EUR"}, r)

	// No payment recorded and none found: nothing to close.
	s.set("GET /v1/payment_intents/search", answer{200, `{"object": "search_result", "data": [], "has_more": false}`})
	r, err = d.Close(bg, gateway.Ref{OrderID: "A1"})
	require.NoError(t, err)
	require.Equal(t, gateway.CloseClosed, r.Status)
}

// A 200 to a close is read as the object it carries. Stripe answers 200
// only with the object canceled or expired (a PaymentIntent that succeeded
// or is processing, or a session that is complete, gets a 400), so anything
// else is not taken for closed: processing is asked again later, an object
// still open, in a state Stripe does not define, or about another object
// or order is a bad answer. Before, every 200 that was not "succeeded" was
// taken for closed, and a payment that then succeeded came as a late
// payment on an order reported closed at the gateway.
func TestCloseAnswers(t *testing.T) {
	t.Parallel()
	s, url := newScripted(t)
	d := newDriver(t, url)
	session := func(id, status, paymentStatus, orderID string) answer {
		return answer{200, fmt.Sprintf(`{"id": %q, "object": "checkout.session", "status": %q, "payment_status": %q,
			"amount_total": 1250, "currency": "eur", "metadata": {"order_id": %q},
			"payment_intent": {"id": "pi_s", "object": "payment_intent", "latest_charge": {"id": "ch_s", "object": "charge", "amount_refunded": 0,
				"refunds": {"object": "list", "data": [], "has_more": false}}}}`,
			id, status, paymentStatus, orderID)}
	}
	s.set("GET /v1/payment_intents/pi_1", intent("pi_1", "requires_action", 1250, "eur", "A1"))
	s.set("GET /v1/checkout/sessions/cs_1", session("cs_1", "open", "unpaid", "A1"))
	for _, tc := range []struct {
		name   string
		id     string
		answer answer
		want   gateway.CloseResult
		err    error
	}{
		{"canceled", "pi_1", intent("pi_1", "canceled", 1250, "eur", "A1"), gateway.CloseResult{Status: gateway.CloseClosed}, nil},
		{"expired", "cs_1", session("cs_1", "expired", "unpaid", "A1"), gateway.CloseResult{Status: gateway.CloseClosed}, nil},
		{"succeeded", "pi_1", intent("pi_1", "succeeded", 1250, "eur", "A1"),
			gateway.CloseResult{Status: gateway.ClosePaid, PaymentID: "pi_1", Amount: "12.50", Currency: "EUR"}, nil},
		{"complete and paid", "cs_1", session("cs_1", "complete", "paid", "A1"),
			gateway.CloseResult{Status: gateway.ClosePaid, PaymentID: "cs_1", Amount: "12.50", Currency: "EUR"}, nil},
		{"processing", "pi_1", intent("pi_1", "processing", 1250, "eur", "A1"), gateway.CloseResult{}, gateway.ErrUnavailable},
		{"complete, unpaid", "cs_1", session("cs_1", "complete", "unpaid", "A1"), gateway.CloseResult{}, gateway.ErrUnavailable},
		{"still requires_payment_method", "pi_1", intent("pi_1", "requires_payment_method", 1250, "eur", "A1"), gateway.CloseResult{}, gateway.ErrBadAnswer},
		{"still requires_capture", "pi_1", intent("pi_1", "requires_capture", 1250, "eur", "A1"), gateway.CloseResult{}, gateway.ErrBadAnswer},
		{"still open", "cs_1", session("cs_1", "open", "unpaid", "A1"), gateway.CloseResult{}, gateway.ErrBadAnswer},
		{"a state Stripe does not define", "pi_1", intent("pi_1", "voided", 1250, "eur", "A1"), gateway.CloseResult{}, gateway.ErrBadAnswer},
		{"another PaymentIntent", "pi_1", intent("pi_9", "canceled", 1250, "eur", "A1"), gateway.CloseResult{}, gateway.ErrBadAnswer},
		{"another order", "pi_1", intent("pi_1", "canceled", 1250, "eur", "B2"), gateway.CloseResult{}, gateway.ErrBadAnswer},
		{"another session", "cs_1", session("cs_9", "expired", "unpaid", "A1"), gateway.CloseResult{}, gateway.ErrBadAnswer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.id, "pi_") {
				s.set("POST /v1/payment_intents/pi_1/cancel", tc.answer)
			} else {
				s.set("POST /v1/checkout/sessions/cs_1/expire", tc.answer)
			}
			r, err := d.Close(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{tc.id}})
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err, "reported %+v", r)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, r)
		})
	}
}

// A refund made with the same key more than Stripe's 24 hours ago is found
// again rather than made twice.
func TestRefundAlreadyRefunded(t *testing.T) {
	t.Parallel()
	s, url := newScripted(t)
	d := newDriver(t, url)
	s.set("GET /v1/payment_intents/pi_1", intent("pi_1", "succeeded", 1250, "eur", "A1"))
	s.set("POST /v1/refunds", stripeError(400, "invalid_request_error", "charge_already_refunded"))
	s.set("GET /v1/refunds", answer{200, `{"object": "list", "has_more": false, "url": "/v1/refunds", "data": [
		{"id": "re_other", "object": "refund", "status": "succeeded", "metadata": {"idempotency_key": "x"}},
		{"id": "re_1", "object": "refund", "status": "succeeded", "metadata": {"idempotency_key": "pi_1"}}]}`})
	r, err := d.Refund(bg, gateway.RefundRequest{OrderID: "A1", PaymentID: "pi_1", Amount: "12.50", IdempotencyKey: "pi_1"})
	require.NoError(t, err)
	require.Equal(t, gateway.Refund{RefundID: "re_1", Status: gateway.RefundRefunded}, r)

	_, err = d.Refund(bg, gateway.RefundRequest{OrderID: "A1", PaymentID: "pi_1", IdempotencyKey: "other"})
	require.ErrorIs(t, err, gateway.ErrBadAnswer, "refunded, but not by this key")

	s.set("POST /v1/refunds", answer{200, `{"id": "re_2", "object": "refund", "status": "failed"}`})
	_, err = d.Refund(bg, gateway.RefundRequest{OrderID: "A1", PaymentID: "pi_1", IdempotencyKey: "k2"})
	require.ErrorIs(t, err, gateway.ErrBadAnswer)
	require.True(t, strings.Contains(err.Error(), `"failed"`), err.Error())
}

func TestSearchQueryEscapes(t *testing.T) {
	t.Parallel()
	require.Equal(t, `metadata["order_id"]:"A1"`, stripe.SearchQuery("A1"))
	require.Equal(t, `metadata["order_id"]:"a\" OR status:\"succeeded"`, stripe.SearchQuery(`a" OR status:"succeeded`))
	require.Equal(t, `metadata["order_id"]:"a\\\" x"`, stripe.SearchQuery(`a\" x`))
}

// The list names each payment as the shop named it in begin_payment: a
// Checkout Session's id for a charge that paid a session, else the
// PaymentIntent's; oldest first; a refund is a transaction of its own.
func TestPaymentsList(t *testing.T) {
	t.Parallel()
	s, url := newScripted(t)
	d := newDriver(t, url)
	s.set("GET /v1/charges", answer{200, `{"object": "list", "has_more": false, "url": "/v1/charges", "data": [
		{"id": "ch_3", "object": "charge", "status": "succeeded", "amount": 5120, "amount_captured": 5120, "captured": true, "currency": "kwd", "created": 1700000300, "refunded": true,
		 "payment_intent": {"id": "pi_3", "object": "payment_intent", "metadata": {"order_id": "C3"}}},
		{"id": "ch_2", "object": "charge", "status": "failed", "amount": 100, "currency": "eur", "created": 1700000200, "payment_intent": "pi_2"},
		{"id": "ch_1", "object": "charge", "status": "succeeded", "amount": 500, "amount_captured": 500, "captured": true, "currency": "jpy", "created": 1700000100,
		 "payment_intent": {"id": "pi_1", "object": "payment_intent", "metadata": {}}}]}`})
	s.set("GET /v1/refunds", answer{200, `{"object": "list", "has_more": false, "url": "/v1/refunds", "data": [
		{"id": "re_3", "object": "refund", "status": "succeeded", "amount": 2000, "currency": "kwd", "created": 1700000400,
		 "payment_intent": {"id": "pi_3", "object": "payment_intent", "metadata": {"order_id": "C3"}}},
		{"id": "re_9", "object": "refund", "status": "failed", "amount": 1, "currency": "eur", "created": 1700000350}]}`})
	s.set("GET /v1/checkout/sessions", answer{200, `{"object": "list", "has_more": false, "url": "/v1/checkout/sessions", "data": [
		{"id": "cs_1", "object": "checkout.session", "status": "complete", "payment_intent": "pi_1", "client_reference_id": "C1", "metadata": {}}]}`})
	ps, err := d.Payments(bg, time.Unix(1700000000, 0), 10)
	require.NoError(t, err)
	require.Equal(t, []gateway.Payment{
		{OrderID: "C1", PaymentID: "cs_1", Amount: "500", Currency: "JPY", Status: gateway.PaymentPaid, At: time.Unix(1700000100, 0).UTC()},
		{OrderID: "C3", PaymentID: "pi_3", Amount: "5.120", Currency: "KWD", Status: gateway.PaymentPaid, At: time.Unix(1700000300, 0).UTC()},
		{OrderID: "C3", PaymentID: "pi_3", Amount: "2.000", Currency: "KWD", Status: gateway.PaymentRefunded, At: time.Unix(1700000400, 0).UTC()},
	}, ps)

	ps, err = d.Payments(bg, time.Unix(1700000000, 0), 1)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, "cs_1", ps[0].PaymentID, "the oldest first")
	_, err = d.Payments(bg, time.Unix(1700000000, 0), 0)
	require.ErrorIs(t, err, gateway.ErrBadRequest)
}

// A charge that succeeded is money only once captured, and only what was
// captured: an authorization (capture_method manual, captured false) moves
// no money and may be released, and a partial capture takes less than the
// charge's amount. Order reads such a PaymentIntent as pending
// (requires_capture) and a succeeded one by its amount_received; the list
// must not say paid, or paid the full amount, where Order would not.
func TestPaymentsListsOnlyCapturedMoney(t *testing.T) {
	t.Parallel()
	s, url := newScripted(t)
	d := newDriver(t, url)
	s.set("GET /v1/charges", answer{200, `{"object": "list", "has_more": false, "url": "/v1/charges", "data": [
		{"id": "ch_3", "object": "charge", "status": "succeeded", "amount": 1000, "amount_captured": 1000, "captured": true,
		 "currency": "eur", "created": 1700000300, "payment_intent": {"id": "pi_3", "object": "payment_intent", "metadata": {"order_id": "C3"}}},
		{"id": "ch_2", "object": "charge", "status": "succeeded", "amount": 1000, "amount_captured": 600, "captured": true,
		 "currency": "eur", "created": 1700000200, "payment_intent": {"id": "pi_2", "object": "payment_intent", "metadata": {"order_id": "C2"}}},
		{"id": "ch_1", "object": "charge", "status": "succeeded", "amount": 1000, "amount_captured": 0, "captured": false,
		 "currency": "eur", "created": 1700000100, "payment_intent": {"id": "pi_1", "object": "payment_intent", "metadata": {"order_id": "C1"}}}]}`})
	s.set("GET /v1/refunds", answer{200, `{"object": "list", "has_more": false, "url": "/v1/refunds", "data": []}`})
	s.set("GET /v1/checkout/sessions", answer{200, `{"object": "list", "has_more": false, "url": "/v1/checkout/sessions", "data": []}`})
	ps, err := d.Payments(bg, time.Unix(1700000000, 0), 10)
	require.NoError(t, err)
	require.Equal(t, []gateway.Payment{
		{OrderID: "C2", PaymentID: "pi_2", Amount: "6.00", Currency: "EUR", Status: gateway.PaymentPaid, At: time.Unix(1700000200, 0).UTC()},
		{OrderID: "C3", PaymentID: "pi_3", Amount: "10.00", Currency: "EUR", Status: gateway.PaymentPaid, At: time.Unix(1700000300, 0).UTC()},
	}, ps, "the authorization is not listed; the partial capture is listed at what was captured")
}

// A close that Stripe refused, for an object that the read after it finds
// still open, is not closed: the buyer can still pay it. A PaymentIntent
// processing when the cancel came (refused: payment_intent_unexpected_state)
// whose payment then failed is back to requires_payment_method; a Checkout
// Session whose expire was refused for another reason is still open. Both
// are asked again later, never reported closed.
func TestCloseRefusedStillOpen(t *testing.T) {
	t.Parallel()
	s, url := newScripted(t)
	d := newDriver(t, url)

	// Read requires_action, refused as processing, read again without a
	// payment method: the buyer may pay with another.
	s.set("GET /v1/payment_intents/pi_2",
		intent("pi_2", "requires_action", 1250, "eur", "A1"),
		intent("pi_2", "requires_payment_method", 1250, "eur", "A1"))
	s.set("POST /v1/payment_intents/pi_2/cancel", stripeError(400, "invalid_request_error", "payment_intent_unexpected_state"))
	r, err := d.Close(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{"pi_2"}})
	require.ErrorIs(t, err, gateway.ErrUnavailable, "reported %+v while the buyer can still pay", r)
	require.Contains(t, err.Error(), "still open")

	session := answer{200, `{"id": "cs_1", "object": "checkout.session", "status": "open", "payment_status": "unpaid",
		"amount_total": 1250, "currency": "eur", "client_reference_id": "A1", "metadata": {"order_id": "A1"}}`}
	s.set("GET /v1/checkout/sessions/cs_1", session)
	s.set("POST /v1/checkout/sessions/cs_1/expire", stripeError(400, "invalid_request_error", ""))
	r, err = d.Close(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{"cs_1"}})
	require.ErrorIs(t, err, gateway.ErrUnavailable, "reported %+v while the buyer can still pay", r)

	// Once Stripe closes it, the close is done.
	s.set("POST /v1/checkout/sessions/cs_1/expire", answer{200, `{"id": "cs_1", "object": "checkout.session", "status": "expired"}`})
	r, err = d.Close(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{"cs_1"}})
	require.NoError(t, err)
	require.Equal(t, gateway.CloseClosed, r.Status)
}

// A close whose payments cannot all be closed still closes the others.
// Before, the first close that failed ended the close: the order's other
// open PaymentIntents stayed payable until that one could be closed. A paid
// one is the answer only once none is left open (a review of the first
// version, which answered paid at once: the worker recorded it and ended
// the job, and the open one stayed payable for good).
func TestCloseClosesTheOthersWhenOneFails(t *testing.T) {
	t.Parallel()
	// pi_1 cannot be closed and is still open: the buyer could pay it.
	refused := func(s *scripted) {
		s.set("GET /v1/payment_intents/pi_1",
			intent("pi_1", "requires_action", 1250, "eur", "A1"),
			intent("pi_1", "requires_payment_method", 1250, "eur", "A1"))
		s.set("POST /v1/payment_intents/pi_1/cancel", stripeError(400, "invalid_request_error", "payment_intent_unexpected_state"))
	}
	posted := func(s *scripted, key string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return slices.Contains(s.seen, key)
	}

	t.Run("the others are closed", func(t *testing.T) {
		s, url := newScripted(t)
		refused(s)
		s.set("GET /v1/payment_intents/pi_2", intent("pi_2", "requires_action", 1250, "eur", "A1"))
		s.set("POST /v1/payment_intents/pi_2/cancel", intent("pi_2", "canceled", 1250, "eur", "A1"))
		r, err := newDriver(t, url).Close(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{"pi_1", "pi_2"}})
		require.ErrorIs(t, err, gateway.ErrUnavailable, "reported %+v while pi_1 is open", r)
		require.True(t, posted(s, "POST /v1/payment_intents/pi_2/cancel"), "pi_2 closed although pi_1 could not be")
	})

	t.Run("a paid one is the answer once none is open", func(t *testing.T) {
		s, url := newScripted(t)
		refused(s)
		s.set("GET /v1/payment_intents/pi_3", intent("pi_3", "succeeded", 1250, "eur", "A1"))
		d := newDriver(t, url)
		r, err := d.Close(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{"pi_1", "pi_3"}})
		require.ErrorIs(t, err, gateway.ErrUnavailable, "reported %+v while pi_1 is open", r)

		// pi_1 is closed at the next try: the paid one is the answer.
		s.set("GET /v1/payment_intents/pi_1", intent("pi_1", "requires_payment_method", 1250, "eur", "A1"))
		s.set("POST /v1/payment_intents/pi_1/cancel", intent("pi_1", "canceled", 1250, "eur", "A1"))
		r, err = d.Close(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{"pi_1", "pi_3"}})
		require.NoError(t, err)
		require.Equal(t, gateway.CloseResult{Status: gateway.ClosePaid, PaymentID: "pi_3", Amount: "12.50", Currency: "EUR"}, r)
	})

	t.Run("a bad answer is not reported as unavailable", func(t *testing.T) {
		s, url := newScripted(t)
		refused(s)
		s.set("GET /v1/payment_intents/pi_4", intent("pi_4", "requires_action", 1250, "eur", "A1"))
		s.set("POST /v1/payment_intents/pi_4/cancel", intent("pi_4", "requires_capture", 1250, "eur", "A1"))
		_, err := newDriver(t, url).Close(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{"pi_1", "pi_4"}})
		require.ErrorIs(t, err, gateway.ErrBadAnswer)
		require.NotErrorIs(t, err, gateway.ErrUnavailable, "the worker would only snooze it")
		require.Contains(t, err.Error(), "pi_4")
		require.Contains(t, err.Error(), "pi_1", "the other failure is named")
	})
}

// A conflict's refund is the whole payment: its amount is the one the
// payment was confirmed with. One that is not what Stripe took for the
// PaymentIntent (a callback handler that divided yen by 100, or read fils as
// cents) is never sent: Stripe would make a partial refund, and the
// conflict would be recorded refunded while most of the money stays.
func TestRefundIsTheWholePayment(t *testing.T) {
	t.Parallel()
	s, url := newScripted(t)
	d := newDriver(t, url)
	s.set("GET /v1/payment_intents/pi_jpy", intent("pi_jpy", "succeeded", 500, "jpy", "A1"))
	s.set("GET /v1/payment_intents/pi_kwd", intent("pi_kwd", "succeeded", 5120, "kwd", "A1"))
	s.set("POST /v1/refunds", answer{200, `{"id": "re_1", "object": "refund", "status": "succeeded"}`})
	posts := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := 0
		for _, k := range s.seen {
			if k == "POST /v1/refunds" {
				n++
			}
		}
		return n
	}

	for _, tc := range []struct {
		id     string
		amount gateway.Amount
	}{
		{"pi_jpy", "5.00"},  // JPY 500 read as cents
		{"pi_jpy", "50000"}, // more than was paid
		{"pi_jpy", "499"},   // less
		{"pi_kwd", "51.20"}, // KWD 5.120 read as cents
		{"pi_kwd", "0.005"}, // fils
	} {
		_, err := d.Refund(bg, gateway.RefundRequest{OrderID: "A1", PaymentID: tc.id, Amount: tc.amount, IdempotencyKey: tc.id})
		require.ErrorIs(t, err, gateway.ErrBadRequest, "%s %s", tc.id, tc.amount)
		require.Contains(t, err.Error(), "not what Stripe took")
		require.Zero(t, posts(), "%s %s: a refund of another amount was sent", tc.id, tc.amount)
	}

	// The payment's amount, however written, is sent.
	for _, tc := range []struct {
		id     string
		amount gateway.Amount
	}{{"pi_jpy", "500"}, {"pi_jpy", "500.00"}, {"pi_kwd", "5.120"}, {"pi_kwd", "5.12"}, {"pi_kwd", ""}} {
		r, err := d.Refund(bg, gateway.RefundRequest{OrderID: "A1", PaymentID: tc.id, Amount: tc.amount, IdempotencyKey: tc.id})
		require.NoError(t, err, "%s %q", tc.id, tc.amount)
		require.Equal(t, "re_1", r.RefundID)
	}
	require.Equal(t, 5, posts())
}

// Answers that are not Stripe's: an error page from a proxy in front of
// Stripe (a 502 in HTML, a 503 of "{}") is "unavailable, try again", as a
// 5xx from Stripe is, and its body is not quoted in the error; a 4xx
// without Stripe's error is a bad answer; an answer over MaxAnswerBytes is
// not read whole, and is a bad answer. Before, stripe-go read any size,
// and a 5xx without Stripe's JSON was a bad answer quoting the body.
func TestAnswersThatAreNotStripes(t *testing.T) {
	t.Parallel()
	s, url := newScripted(t)
	d := newDriver(t, url)
	ref := gateway.Ref{OrderID: "A1", PaymentIDs: []string{"pi_e"}}
	page := "<html><body>502 Bad Gateway secret-looking-page</body></html>"
	for _, tc := range []struct {
		a    answer
		want error
	}{
		{answer{502, page}, gateway.ErrUnavailable},
		{answer{503, `{}`}, gateway.ErrUnavailable},
		{answer{500, ``}, gateway.ErrUnavailable},
		{answer{405, page}, gateway.ErrBadAnswer},
		// A proxy's 400, 401, 403 or 404 page is not Stripe refusing the
		// request or the key, nor "no such payment": a bad answer too.
		{answer{400, page}, gateway.ErrBadAnswer},
		{answer{401, page}, gateway.ErrBadAnswer},
		{answer{403, `{}`}, gateway.ErrBadAnswer},
		{answer{404, page}, gateway.ErrBadAnswer},
		// A proxy's 429 is a rate limit all the same: ask again later.
		{answer{429, page}, gateway.ErrUnavailable},
	} {
		s.set("GET /v1/payment_intents/pi_e", tc.a)
		_, err := d.Order(bg, ref)
		require.ErrorIs(t, err, tc.want, "HTTP %d %q", tc.a.code, tc.a.body)
		require.NotContains(t, err.Error(), "secret-looking-page")
		require.Contains(t, err.Error(), fmt.Sprintf("HTTP %d without Stripe's JSON error", tc.a.code))
	}

	huge := intent("pi_e", "succeeded", 100, "eur", "A1")
	huge.body = strings.Replace(huge.body, `"metadata":{`, `"padding":"`+strings.Repeat("x", stripe.MaxAnswerBytes)+`","metadata":{`, 1)
	s.set("GET /v1/payment_intents/pi_e", huge)
	_, err := d.Order(bg, ref)
	require.ErrorIs(t, err, gateway.ErrBadAnswer)
	require.Contains(t, err.Error(), "larger than")

	// Stripe's own answers are read as before.
	s.set("GET /v1/payment_intents/pi_e", intent("pi_e", "succeeded", 100, "eur", "A1"))
	o, err := d.Order(bg, ref)
	require.NoError(t, err)
	require.Equal(t, gateway.StatusPaid, o.Status)
}

// A succeeded PaymentIntent whose amount_received is 0 or missing is a bad
// answer: the driver read its amount (what was asked) instead, and would
// have confirmed an order with money Stripe did not say it took.
func TestSucceededWithNothingReceived(t *testing.T) {
	t.Parallel()
	s, url := newScripted(t)
	d := newDriver(t, url)
	ref := gateway.Ref{OrderID: "A1", PaymentIDs: []string{"pi_z"}}
	for _, body := range []string{
		`{"id": "pi_z", "object": "payment_intent", "status": "succeeded", "amount": 1000, "amount_received": 0, "currency": "eur", "metadata": {"order_id": "A1"}}`,
		`{"id": "pi_z", "object": "payment_intent", "status": "succeeded", "amount": 1000, "currency": "eur", "metadata": {"order_id": "A1"}}`,
	} {
		s.set("GET /v1/payment_intents/pi_z", answer{200, body})
		_, err := d.Order(bg, ref)
		require.ErrorIs(t, err, gateway.ErrBadAnswer, body)
		require.Contains(t, err.Error(), "amount_received 0")
	}
}

// A succeeded PaymentIntent keeps its amount_received after a refund; what
// Stripe holds is in its latest charge's amount_refunded, which the driver
// asks for (expand). Refunded in full it holds no money: never paid, and a
// close has nothing left to close. Refunded in part it holds the rest: that
// is its amount, and the one refund the driver sends. An answer without the
// charge cannot tell: a bad answer. Before, a payment a person refunded in
// Stripe's dashboard was read as paid with amount_received.
func TestRefundedAtStripe(t *testing.T) {
	t.Parallel()
	s, url := newScripted(t)
	d := newDriver(t, url)
	ref := func(id string) gateway.Ref { return gateway.Ref{OrderID: "A1", PaymentIDs: []string{id}} }

	s.set("GET /v1/payment_intents/pi_full", refunded("pi_full", 1250, 1250, "eur", "A1"))
	o, err := d.Order(bg, ref("pi_full"))
	require.NoError(t, err)
	require.Equal(t, gateway.Order{OrderID: "A1", Status: gateway.StatusFailed}, o, "no money held")
	r, err := d.Close(bg, ref("pi_full"))
	require.NoError(t, err)
	require.Equal(t, gateway.CloseResult{Status: gateway.CloseClosed}, r)
	s.mu.Lock()
	require.Equal(t, []string{"GET /v1/payment_intents/pi_full", "GET /v1/payment_intents/pi_full"}, s.seen,
		"nothing posted: a succeeded PaymentIntent is not cancelled")
	require.Equal(t, "latest_charge.refunds", s.queries[0].Get("expand[0]"), "the charge and its refunds are asked for")
	s.seen, s.queries, s.forms = nil, nil, nil
	s.mu.Unlock()

	s.set("GET /v1/payment_intents/pi_part", refunded("pi_part", 1250, 250, "eur", "A1"))
	o, err = d.Order(bg, ref("pi_part"))
	require.NoError(t, err)
	require.Equal(t, gateway.Order{OrderID: "A1", Status: gateway.StatusPaid, PaymentID: "pi_part", Amount: "10.00", Currency: "EUR"}, o)
	r, err = d.Close(bg, ref("pi_part"))
	require.NoError(t, err)
	require.Equal(t, gateway.CloseResult{Status: gateway.ClosePaid, PaymentID: "pi_part", Amount: "10.00", Currency: "EUR"}, r)
	_, err = d.Refund(bg, gateway.RefundRequest{OrderID: "A1", PaymentID: "pi_part", Amount: "12.50", IdempotencyKey: "pi_part"})
	require.ErrorIs(t, err, gateway.ErrBadRequest, "more than Stripe holds")
	require.Contains(t, err.Error(), "1250 received, 250 of it refunded since")
	s.set("POST /v1/refunds", answer{200, `{"id": "re_1", "object": "refund", "status": "succeeded"}`})
	_, err = d.Refund(bg, gateway.RefundRequest{OrderID: "A1", PaymentID: "pi_part", Amount: "10.00", IdempotencyKey: "pi_part"})
	require.NoError(t, err)
	s.mu.Lock()
	var sent []string
	for i, k := range s.seen {
		if k == "POST /v1/refunds" {
			sent = append(sent, s.forms[i].Get("amount"))
		}
	}
	s.mu.Unlock()
	require.Equal(t, []string{"1000"}, sent, "only the refund of what Stripe holds is sent")

	// A refund of our own that reached Stripe, its answer lost: the
	// PaymentIntent is refunded in full, and the same key gets the same
	// refund again.
	_, err = d.Refund(bg, gateway.RefundRequest{OrderID: "A1", PaymentID: "pi_full", Amount: "12.50", IdempotencyKey: "pi_full"})
	require.NoError(t, err)

	for name, body := range map[string]string{
		"the charge not expanded": `{"id": "pi_x", "object": "payment_intent", "status": "succeeded", "amount": 1250, "amount_received": 1250,
			"currency": "eur", "metadata": {"order_id": "A1"}, "latest_charge": "ch_1"}`,
		"its refunds not expanded": `{"id": "pi_x", "object": "payment_intent", "status": "succeeded", "amount": 1250, "amount_received": 1250,
			"currency": "eur", "metadata": {"order_id": "A1"}, "latest_charge": {"id": "ch_1", "object": "charge", "amount_refunded": 0}}`,
		"no charge": `{"id": "pi_x", "object": "payment_intent", "status": "succeeded", "amount": 1250, "amount_received": 1250,
			"currency": "eur", "metadata": {"order_id": "A1"}}`,
		"more refunded than received": refunded("pi_x", 1250, 1251, "eur", "A1").body,
		"a negative refund":           refunded("pi_x", 1250, -1, "eur", "A1").body,
	} {
		s.set("GET /v1/payment_intents/pi_x", answer{200, body})
		_, err := d.Order(bg, ref("pi_x"))
		require.ErrorIs(t, err, gateway.ErrBadAnswer, name)
	}

	// Only succeeded refunds count. One still pending may fail and the
	// money stay: nothing can be said yet, asked again later. A failed one
	// gave nothing back. More refunds than one answer lists: the charge's
	// amount_refunded.
	withRefunds := func(amountRefunded int64, hasMore bool, refunds ...string) answer {
		return answer{200, fmt.Sprintf(`{"id": "pi_r", "object": "payment_intent", "status": "succeeded", "amount": 1250, "amount_received": 1250,
			"currency": "eur", "metadata": {"order_id": "A1"}, "latest_charge": {"id": "ch_r", "object": "charge", "amount_refunded": %d,
			"refunds": {"object": "list", "has_more": %t, "data": [%s]}}}`, amountRefunded, hasMore, strings.Join(refunds, ","))}
	}
	refund := func(id string, amount int, status string) string {
		return fmt.Sprintf(`{"id": %q, "object": "refund", "amount": %d, "status": %q}`, id, amount, status)
	}
	s.set("GET /v1/payment_intents/pi_r", withRefunds(1250, false, refund("re_p", 1250, "pending")))
	_, err = d.Order(bg, ref("pi_r"))
	require.ErrorIs(t, err, gateway.ErrUnavailable, "a refund on its way")
	require.Contains(t, err.Error(), "refund re_p of pi_r is still on its way")
	_, err = d.Close(bg, ref("pi_r"))
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	s.set("GET /v1/payment_intents/pi_r", withRefunds(0, false, refund("re_f", 1250, "failed")))
	o, err = d.Order(bg, ref("pi_r"))
	require.NoError(t, err)
	require.Equal(t, gateway.Order{OrderID: "A1", Status: gateway.StatusPaid, PaymentID: "pi_r", Amount: "12.50", Currency: "EUR"}, o,
		"a failed refund gave nothing back")
	s.set("GET /v1/payment_intents/pi_r", withRefunds(250, false, refund("re_1", 100, "succeeded"), refund("re_2", 150, "succeeded"), refund("re_3", 1000, "canceled")))
	o, err = d.Order(bg, ref("pi_r"))
	require.NoError(t, err)
	require.Equal(t, gateway.Amount("10.00"), o.Amount)
	s.set("GET /v1/payment_intents/pi_r", withRefunds(1250, true, refund("re_1", 100, "succeeded")))
	o, err = d.Order(bg, ref("pi_r"))
	require.NoError(t, err)
	require.Equal(t, gateway.StatusFailed, o.Status, "more refunds than listed: amount_refunded")

	session := func(paymentStatus, intent string) answer {
		return answer{200, fmt.Sprintf(`{"id": "cs_1", "object": "checkout.session", "status": "complete", "payment_status": %q,
			"amount_total": 1250, "currency": "eur", "metadata": {"order_id": "A1"}, "payment_intent": %s}`, paymentStatus, intent)}
	}
	s.set("GET /v1/checkout/sessions/cs_1", session("paid",
		`{"id": "pi_s", "object": "payment_intent", "latest_charge": {"id": "ch_s", "object": "charge", "amount_refunded": 1250,
			"refunds": {"object": "list", "data": [{"id": "re_s", "object": "refund", "amount": 1250, "status": "succeeded"}], "has_more": false}}}`))
	o, err = d.Order(bg, ref("cs_1"))
	require.NoError(t, err)
	require.Equal(t, gateway.StatusFailed, o.Status, "a paid session refunded in full holds no money")
	require.Equal(t, "payment_intent.latest_charge.refunds", s.queries[len(s.queries)-1].Get("expand[0]"))
	s.set("GET /v1/checkout/sessions/cs_1", session("paid", `"pi_s"`))
	_, err = d.Order(bg, ref("cs_1"))
	require.ErrorIs(t, err, gateway.ErrBadAnswer, "a paid session whose PaymentIntent was not expanded")
	s.set("GET /v1/checkout/sessions/cs_1", session("paid", `null`))
	_, err = d.Order(bg, ref("cs_1"))
	require.ErrorIs(t, err, gateway.ErrBadAnswer, "a paid session without a PaymentIntent")
}

// A charge the buyer's bank disputed: a review found it read as paid in
// full, and a late payment under dispute could be reinstated, the order PAID
// for money the bank was taking back. Asked what is still held of it
// (gateway.Ref.Held: before a reinstatement or a refund), its disputes are
// read: one still open may take the money, so nothing can be said (asked
// again later, ErrDisputed), as with a refund on its way; one lost took
// some or all of it, how much its record does not tell (ErrChargedBack, for
// a person); one won took nothing. A refund is not sent while a dispute is
// open, nor once one was lost. Checks and closes do not read disputes
// (a second review had an open dispute stop the close of the order's other
// payments): a chargeback of an order paid on time is not the timeout's
// matter. Answers about another charge or currency, or losing more than
// the charge held, are bad answers.
func TestDisputedAtStripe(t *testing.T) {
	t.Parallel()
	s, url := newScripted(t)
	d := newDriver(t, url)
	ref := gateway.Ref{OrderID: "A1", PaymentIDs: []string{"pi_d"}, Held: true}
	check := gateway.Ref{OrderID: "A1", PaymentIDs: []string{"pi_d"}}
	pi := refunded("pi_d", 1250, 0, "eur", "A1")
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(pi.body), &body))
	ch := body["latest_charge"].(map[string]any)
	ch["disputed"] = true
	b, _ := json.Marshal(body)
	s.set("GET /v1/payment_intents/pi_d", answer{200, string(b)})
	disputes := func(ds ...string) answer {
		return answer{200, `{"object": "list", "url": "/v1/disputes", "has_more": false, "data": [` + strings.Join(ds, ",") + `]}`}
	}
	disputeOf := func(charge, id, status string, amount int64, currency string) string {
		return fmt.Sprintf(`{"id": %q, "object": "dispute", "amount": %d, "currency": %q, "status": %q, "charge": %q}`, id, amount, currency, status, charge)
	}
	dispute := func(id, status string, amount int64) string {
		return disputeOf(ch["id"].(string), id, status, amount, "eur")
	}

	for _, status := range []string{"needs_response", "under_review", "warning_needs_response", "warning_under_review"} {
		s.set("GET /v1/disputes", disputes(dispute("dp_1", status, 1250)))
		_, err := d.Order(bg, ref)
		require.ErrorIs(t, err, gateway.ErrUnavailable, status)
		require.ErrorIs(t, err, gateway.ErrDisputed, status)
		require.Contains(t, err.Error(), `dispute "dp_1" of pi_d is "`+status+`" at Stripe`)
		_, err = d.Refund(bg, gateway.RefundRequest{OrderID: "A1", PaymentID: "pi_d", Amount: "12.50", IdempotencyKey: "pi_d"})
		require.ErrorIs(t, err, gateway.ErrDisputed, "no refund while a dispute is open: %s", status)
		o, err := d.Order(bg, check)
		require.NoError(t, err, "a check does not read disputes")
		require.Equal(t, gateway.StatusPaid, o.Status)
	}
	s.mu.Lock()
	require.Equal(t, ch["id"], s.queries[1].Get("charge"), "the disputes of the payment's charge")
	s.mu.Unlock()

	s.set("GET /v1/disputes", disputes())
	_, err := d.Order(bg, ref)
	require.ErrorIs(t, err, gateway.ErrDisputed, "disputed, none listed yet")

	s.set("GET /v1/disputes", disputes(dispute("dp_1", "won", 1250), dispute("dp_2", "warning_closed", 1250)))
	o, err := d.Order(bg, ref)
	require.NoError(t, err)
	require.Equal(t, gateway.Order{OrderID: "A1", Status: gateway.StatusPaid, PaymentID: "pi_d", Amount: "12.50", Currency: "EUR"}, o, "won: held")

	// Lost, in part or in full: how much the bank took back cannot be told
	// from the dispute (one partly won keeps status lost and its whole
	// amount): ErrChargedBack, for a person; no refund is sent. A fourth
	// review found a first version taking the dispute's amount as what was
	// taken, and recording the dispute as the refund.
	for _, amount := range []int64{250, 1250} {
		s.set("GET /v1/disputes", disputes(dispute("dp_1", "won", 1250), dispute("dp_9", "lost", amount)))
		_, err = d.Order(bg, ref)
		require.ErrorIs(t, err, gateway.ErrChargedBack, "lost %d", amount)
		require.Contains(t, err.Error(), "dispute dp_9 of pi_d was lost at Stripe")
		_, err = d.Refund(bg, gateway.RefundRequest{OrderID: "A1", PaymentID: "pi_d", Amount: "12.50", IdempotencyKey: "pi_d"})
		require.ErrorIs(t, err, gateway.ErrChargedBack, "no refund, lost %d", amount)
		o, err = d.Order(bg, check)
		require.NoError(t, err, "a check does not read disputes")
		require.Equal(t, gateway.StatusPaid, o.Status)
	}
	s.mu.Lock()
	require.NotContains(t, s.seen, "POST /v1/refunds", "no refund sent")
	s.mu.Unlock()

	for name, ds := range map[string]answer{
		"an unknown status":       disputes(dispute("dp_1", "pondering", 1250)),
		"about another charge":    disputes(disputeOf("ch_other", "dp_1", "lost", 1250, "eur")),
		"not a list of Stripe":    {200, `{"object": "list", "data": "x"}`},
		"a dispute without an id": disputes(disputeOf(ch["id"].(string), "", "lost", 1250, "eur")),
	} {
		s.set("GET /v1/disputes", ds)
		_, err := d.Order(bg, ref)
		require.ErrorIs(t, err, gateway.ErrBadAnswer, name)
	}
}

// A paid answer says when Stripe took the payment: its charge's creation,
// what reconciliation lists as its at. The worker tells by it a payment of
// an earlier order under the same order id (Stripe's search by metadata
// finds those too).
func TestPaidAtIsTheChargesCreation(t *testing.T) {
	t.Parallel()
	s, url := newScripted(t)
	d := newDriver(t, url)
	a := intent("pi_1", "succeeded", 1250, "eur", "A1")
	var pi map[string]any
	require.NoError(t, json.Unmarshal([]byte(a.body), &pi))
	pi["latest_charge"].(map[string]any)["created"] = 1700000100
	b, err := json.Marshal(pi)
	require.NoError(t, err)
	s.set("GET /v1/payment_intents/pi_1", answer{200, string(b)})
	o, err := d.Order(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{"pi_1"}})
	require.NoError(t, err)
	require.Equal(t, gateway.StatusPaid, o.Status)
	require.NotNil(t, o.PaidAt)
	require.True(t, o.PaidAt.Equal(time.Unix(1700000100, 0)), "paid_at %v", o.PaidAt)

	// A charge without its creation says nothing of when.
	s.set("GET /v1/payment_intents/pi_2", intent("pi_2", "succeeded", 1250, "eur", "A2"))
	o, err = d.Order(bg, gateway.Ref{OrderID: "A2", PaymentIDs: []string{"pi_2"}})
	require.NoError(t, err)
	require.Nil(t, o.PaidAt)
}

// Stripe's search by the order's metadata finds the PaymentIntents of an
// earlier order under the same order id too. One paid more than the clocks'
// skew before the order was created is left out, so the order's own one
// answers, also while it is still processing (an earlier paid one answered,
// the worker judged it an earlier order's and cancelled the order at once).
// Of several paid after it, the newest answers, wherever the search lists
// it; one that does not say when loses to one that does. The order's own
// payments (begun) answer oldest first, as before.
func TestSearchLeavesOutEarlierOrders(t *testing.T) {
	t.Parallel()
	s, url := newScripted(t)
	d := newDriver(t, url)
	pi := func(id, status string, created int64) map[string]any {
		a := intent(id, status, 1250, "eur", "A1")
		var pi map[string]any
		require.NoError(t, json.Unmarshal([]byte(a.body), &pi))
		if created != 0 {
			pi["latest_charge"].(map[string]any)["created"] = created
		}
		return pi
	}
	search := func(pis ...map[string]any) {
		list, err := json.Marshal(map[string]any{"object": "search_result", "has_more": false, "data": pis})
		require.NoError(t, err)
		s.set("GET /v1/payment_intents/search", answer{200, string(list)})
	}
	created := time.Unix(1700000000, 0)
	ref := gateway.Ref{OrderID: "A1", CreatedAt: created}

	search(pi("pi_earlier", "succeeded", 1600000000), pi("pi_buyer", "processing", 0))
	o, err := d.Order(bg, ref)
	require.NoError(t, err)
	require.Equal(t, gateway.StatusPending, o.Status, "the buyer's own payment is on its way")
	_, err = d.Close(bg, ref)
	require.ErrorIs(t, err, gateway.ErrUnavailable, "the close waits for the processing one, not answering with the earlier")

	search(pi("pi_earlier", "succeeded", 1600000000))
	o, err = d.Order(bg, ref)
	require.NoError(t, err)
	require.Equal(t, gateway.StatusNone, o.Status, "only an earlier order's payment: none of this order's")
	o, err = d.Order(bg, gateway.Ref{OrderID: "A1"})
	require.NoError(t, err)
	require.Equal(t, "pi_earlier", o.PaymentID, "without the order's creation nothing is left out")

	search(pi("pi_new", "succeeded", 1700000200), pi("pi_old", "succeeded", 1700000100), pi("pi_undated", "succeeded", 0))
	o, err = d.Order(bg, ref)
	require.NoError(t, err)
	require.Equal(t, "pi_new", o.PaymentID, "the newest first in the list")
	search(pi("pi_undated", "succeeded", 0), pi("pi_old", "succeeded", 1700000100), pi("pi_new", "succeeded", 1700000200))
	o, err = d.Order(bg, ref)
	require.NoError(t, err)
	require.Equal(t, "pi_new", o.PaymentID, "the newest last in the list")
	r, err := d.Close(bg, ref)
	require.NoError(t, err)
	require.Equal(t, "pi_new", r.PaymentID)

	s.set("GET /v1/payment_intents/pi_1", answer{200, mustJSON(t, pi("pi_1", "succeeded", 1700000100))})
	s.set("GET /v1/payment_intents/pi_2", answer{200, mustJSON(t, pi("pi_2", "succeeded", 1700000200))})
	o, err = d.Order(bg, gateway.Ref{OrderID: "A1", PaymentIDs: []string{"pi_1", "pi_2"}, CreatedAt: created})
	require.NoError(t, err)
	require.Equal(t, "pi_1", o.PaymentID, "the order's own payments: the first begun")

	// The PaymentIntent's own creation: one created before the order is an
	// earlier order's, whatever its state and however new its charge.
	begun := func(p map[string]any, at int64) map[string]any {
		p["created"] = at
		return p
	}
	s.set("POST /v1/payment_intents/pi_early/cancel", intent("pi_early", "canceled", 1250, "eur", "A1"))
	for _, tc := range []struct {
		name   string
		early  map[string]any
		closes bool
	}{
		{"paid after the order was created", begun(pi("pi_early", "succeeded", 1700000200), 1600000000), false},
		{"still open", begun(pi("pi_early", "requires_payment_method", 0), 1600000000), true},
		{"processing", begun(pi("pi_early", "processing", 0), 1600000000), false},
	} {
		t.Run("earlier order's PaymentIntent "+tc.name, func(t *testing.T) {
			search(tc.early)
			o, err := d.Order(bg, ref)
			require.NoError(t, err)
			require.Equal(t, gateway.Order{OrderID: "A1", Status: gateway.StatusNone}, o, "nothing of this order's")
			before := len(s.seen)
			r, err := d.Close(bg, ref)
			require.NoError(t, err)
			require.Equal(t, gateway.CloseResult{Status: gateway.CloseClosed}, r, "never the close's answer, paid or processing")
			s.mu.Lock()
			cancelled := slices.Contains(s.seen[before:], "POST /v1/payment_intents/pi_early/cancel")
			s.mu.Unlock()
			require.Equal(t, tc.closes, cancelled, "an open one is cancelled all the same: nobody pays an order that is gone")

			// Beside it, the order's own payment answers.
			search(tc.early, begun(pi("pi_own", "succeeded", 1700000300), 1700000250))
			o, err = d.Order(bg, ref)
			require.NoError(t, err)
			require.Equal(t, "pi_own", o.PaymentID)
		})
	}

	// Within the clock skew, and a creation Stripe does not give (or an
	// adapter's zero time) with a charge after the order: the order's own.
	for _, at := range []int64{1700000000 - 240, 0, 1} {
		search(begun(pi("pi_near", "succeeded", 1700000100), at))
		o, err := d.Order(bg, ref)
		require.NoError(t, err)
		require.Equal(t, "pi_near", o.PaymentID, "created at %d", at)
	}
	// Either time saying "before the order" is enough: a charge long older
	// than the order, whatever the PaymentIntent's creation says.
	search(begun(pi("pi_odd", "succeeded", 1600000000), 1700000100))
	o, err = d.Order(bg, ref)
	require.NoError(t, err)
	require.Equal(t, gateway.StatusNone, o.Status)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
