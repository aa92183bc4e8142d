package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

func TestClientAgainstFake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake, url := sidecartest.Fake(t, nil)
	c := &gateway.Client{BaseURL: url, Timeout: time.Second}

	o, err := c.Order(ctx, gateway.Ref{OrderID: "A1"})
	require.NoError(t, err)
	require.Equal(t, gateway.StatusNone, o.Status)

	require.NoError(t, fake.Set(ctx, "A1", fakegateway.Behaviour{Behaviour: fakegateway.Silent, PaymentID: "P1", Amount: "12.50"}))
	o, err = c.Order(ctx, gateway.Ref{OrderID: "A1"})
	require.NoError(t, err)
	require.Equal(t, gateway.Order{OrderID: "A1", Status: gateway.StatusPaid, PaymentID: "P1", Amount: "12.50"}, o)

	cl, err := c.Close(ctx, gateway.Ref{OrderID: "A1"})
	require.NoError(t, err)
	require.Equal(t, gateway.ClosePaid, cl.Status)
	require.Equal(t, "P1", cl.PaymentID)

	cl, err = c.Close(ctx, gateway.Ref{OrderID: "B1"})
	require.NoError(t, err)
	require.Equal(t, gateway.CloseClosed, cl.Status)

	req := gateway.RefundRequest{OrderID: "A1", PaymentID: "P1", Amount: "12.50", IdempotencyKey: "P1"}
	r1, err := c.Refund(ctx, req)
	require.NoError(t, err)
	r2, err := c.Refund(ctx, req)
	require.NoError(t, err)
	require.Equal(t, r1, r2, "same idempotency key, same refund")
	st := fake.Stats()
	require.Equal(t, 1, st.Refunds)
	require.Equal(t, 2, st.RefundRequests)
	require.Equal(t, 2, st.Closes)

	// A down gateway: ErrUnavailable after the retries.
	require.NoError(t, fake.SetGateway(fakegateway.Behaviour{Behaviour: fakegateway.Down}))
	before := fake.Stats().Queries
	_, err = c.Order(ctx, gateway.Ref{OrderID: "A1"})
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	require.Equal(t, before+1+gateway.DefaultRetries, fake.Stats().Queries)

	// A slow gateway: the per-request timeout ends it.
	require.NoError(t, fake.SetGateway(fakegateway.Behaviour{Behaviour: fakegateway.Slow, DelayMS: 2000}))
	slow := &gateway.Client{BaseURL: url, Timeout: 100 * time.Millisecond, Retries: -1}
	start := time.Now()
	_, err = slow.Order(ctx, gateway.Ref{OrderID: "A1"})
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	require.Less(t, time.Since(start), time.Second)
}

func TestClientRefusesBadAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, tc := range map[string]struct {
		code int
		body string
		want error
	}{
		"malformed JSON":       {200, `{"status": "paid"`, gateway.ErrBadAnswer},
		"not JSON":             {200, `<html>oops</html>`, gateway.ErrBadAnswer},
		"unknown status":       {200, `{"status": "maybe"}`, gateway.ErrBadAnswer},
		"paid without payment": {200, `{"status": "paid"}`, gateway.ErrBadAnswer},
		"other order":          {200, `{"order_id": "B2", "status": "none"}`, gateway.ErrBadAnswer},
		"bad amount":           {200, `{"status": "paid", "payment_id": "P", "amount": "ten"}`, gateway.ErrBadAnswer},
		"not found":            {404, `{}`, gateway.ErrBadAnswer},
		"server error":         {500, `{}`, gateway.ErrUnavailable},
		"too many requests":    {429, `{}`, gateway.ErrUnavailable},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				calls.Add(1)
				w.WriteHeader(tc.code)
				_, _ = w.Write([]byte(tc.body))
			}))
			t.Cleanup(srv.Close)
			var observed []string
			c := &gateway.Client{BaseURL: srv.URL, Retries: 1, Observe: func(op, result string, _ time.Duration) {
				observed = append(observed, op+":"+result)
			}}
			_, err := c.Order(ctx, gateway.Ref{OrderID: "A1"})
			require.ErrorIs(t, err, tc.want)
			require.Contains(t, err.Error(), `order "A1"`)
			if tc.want == gateway.ErrUnavailable {
				require.EqualValues(t, 2, calls.Load(), "retried once")
				require.Equal(t, []string{"order:unavailable", "order:unavailable"}, observed)
			} else {
				require.EqualValues(t, 1, calls.Load(), "a bad answer is not retried by the client")
			}
		})
	}

	// A refused connection is unavailability.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := (&gateway.Client{BaseURL: url, Retries: -1}).Close(ctx, gateway.Ref{OrderID: "A1"})
	require.ErrorIs(t, err, gateway.ErrUnavailable)
}

// answerServer answers every request with code and body, and counts them.
func answerServer(t *testing.T, code int, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// Gateway answers are parsed strictly: anything ambiguous or outside the
// contract is ErrBadAnswer, whatever it would have meant. A duplicate key
// once made {"status":"failed","status":"paid"} a payment.
func TestClientParsesAnswersStrictly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const paid = `"status": "paid", "payment_id": "P1"`
	bad := map[string]string{
		"duplicate status":            `{"status": "failed", "status": "paid", "payment_id": "P1"}`,
		"duplicate amount":            `{` + paid + `, "amount": "1", "amount": "1000"}`,
		"duplicate in a nested value": `{"status": "none", "extra": {"a": 1, "a": 2}}`,
		"duplicate in an array":       `{"status": "none", "extra": [{"b": 1, "b": 1}]}`,
		"key differs in case":         `{"status": "failed", "Status": "paid", "payment_id": "P1"}`,
		"key differs by long s":       `{"status": "failed", "ſtatus": "paid", "payment_id": "P1"}`,
		"only a case variant":         `{"STATUS": "none"}`,
		"trailing garbage":            `{"status": "none"} garbage`,
		"two objects":                 `{"status": "none"}{"status": "paid", "payment_id": "P1"}`,
		"trailing comma":              `{"status": "none",}`,
		"an array":                    `[{"status": "none"}]`,
		"a string":                    `"none"`,
		"empty":                       ``,
		"not UTF-8":                   "{\"status\": \"none\", \"x\": \"\xff\"}",
		"status null":                 `{"status": null}`,
		"status a number":             `{"status": 1}`,
		"status in other case":        `{"status": "PAID", "payment_id": "P1"}`,
		"amount NaN":                  `{` + paid + `, "amount": "NaN"}`,
		"amount Infinity":             `{` + paid + `, "amount": "Infinity"}`,
		"amount negative":             `{` + paid + `, "amount": "-1.00"}`,
		"amount negative number":      `{` + paid + `, "amount": -1}`,
		"amount hex float":            `{` + paid + `, "amount": "0x1p3"}`,
		"amount exponent":             `{` + paid + `, "amount": "1e3"}`,
		"amount exponent number":      `{` + paid + `, "amount": 1e3}`,
		"amount plus":                 `{` + paid + `, "amount": "+1"}`,
		"amount leading zero":         `{` + paid + `, "amount": "012"}`,
		"amount no integer part":      `{` + paid + `, "amount": ".5"}`,
		"amount no fraction":          `{` + paid + `, "amount": "5."}`,
		"amount spaces":               `{` + paid + `, "amount": " 5"}`,
		"amount empty":                `{` + paid + `, "amount": ""}`,
		"amount 16 integer digits":    `{` + paid + `, "amount": "1234567890123456"}`,
		"amount 7 fraction digits":    `{` + paid + `, "amount": "1.1234567"}`,
		"amount a bool":               `{` + paid + `, "amount": true}`,
		"currency lower case":         `{` + paid + `, "currency": "eur"}`,
		"currency four letters":       `{` + paid + `, "currency": "EURO"}`,
		"currency a number":           `{` + paid + `, "currency": 978}`,
		"currency empty":              `{` + paid + `, "currency": ""}`,
		"payment id control":          `{"status": "paid", "payment_id": "P\u0007"}`,
		"payment id bidi":             `{"status": "paid", "payment_id": "P\u202e1"}`,
		"payment id zero width":       `{"status": "paid", "payment_id": "P\u200b1"}`,
		"payment id line separator":   `{"status": "paid", "payment_id": "P\u20281"}`,
		"payment id too long":         `{"status": "paid", "payment_id": "` + strings.Repeat("p", 129) + `"}`,
		"payment id dot dot":          `{"status": "paid", "payment_id": ".."}`,
		"paid_at not a time":          `{` + paid + `, "paid_at": "yesterday"}`,
		"paid_at without a zone":      `{` + paid + `, "paid_at": "2026-12-01T10:00:00"}`,
		"paid_at a zone minute of 60": `{` + paid + `, "paid_at": "2026-12-01T10:00:00+00:60"}`,
		"paid_at a comma fraction":    `{` + paid + `, "paid_at": "2026-12-01T10:00:00,5Z"}`,
		"paid_at a number":            `{` + paid + `, "paid_at": 1764583200}`,
		"paid_at empty":               `{` + paid + `, "paid_at": ""}`,
		"too large":                   `{"status": "none"}` + strings.Repeat(" ", gateway.MaxAnswerBytes),
		"nested too deep":             `{"status": "none", "x": ` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`,
	}
	for name, body := range bad {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv, calls := answerServer(t, 200, body)
			c := &gateway.Client{BaseURL: srv.URL, Retries: 1}
			o, err := c.Order(ctx, gateway.Ref{OrderID: "A1"})
			require.ErrorIs(t, err, gateway.ErrBadAnswer, "answer %q gave %+v", body, o)
			require.Zero(t, o)
			require.EqualValues(t, 1, calls.Load(), "a bad answer is not retried by the client")
			cl, err := c.Close(ctx, gateway.Ref{OrderID: "A1"})
			if name != "status in other case" { // "PAID" is not a close status either way
				require.ErrorIs(t, err, gateway.ErrBadAnswer, "close answer %q gave %+v", body, cl)
			}
		})
	}

	good := map[string]gateway.Order{
		`{"status": "none", "unknown": {"a": [1, 2]}, "also": null}`:                               {Status: "none"},
		`{"order_id": "A1", "status": "pending"}`:                                                  {OrderID: "A1", Status: "pending"},
		`{` + paid + `, "amount": "0"}`:                                                            {Status: "paid", PaymentID: "P1", Amount: "0"},
		`{` + paid + `, "amount": "12.50", "currency": "EUR"}`:                                     {Status: "paid", PaymentID: "P1", Amount: "12.50", Currency: "EUR"},
		`{` + paid + `, "amount": 12.5}`:                                                           {Status: "paid", PaymentID: "P1", Amount: "12.5"},
		`{` + paid + `, "amount": "123456789012345.123456"}`:                                       {Status: "paid", PaymentID: "P1", Amount: "123456789012345.123456"},
		`{` + paid + `, "amount": null, "currency": null}`:                                         {Status: "paid", PaymentID: "P1"},
		`{"status": "paid", "payment_id": "` + strings.Repeat("ü", 128) + `"}` + "\n":              {Status: "paid", PaymentID: strings.Repeat("ü", 128)},
		`{"status": "none", "nested": {"status": "paid"}, "list": [{"status": 1}, {"status": 2}]}`: {Status: "none"},
		`{` + paid + `, "paid_at": null}`:                                                          {Status: "paid", PaymentID: "P1"},
		// An answer that is not paid has no use for paid_at: whatever it
		// holds, the answer stands.
		`{"status": "pending", "paid_at": "yesterday"}`: {Status: "pending"},
		`{"status": "none", "paid_at": ""}`:             {Status: "none"},
		`{` + paid + `, "paid_at": "2026-12-01T10:00:00.5+08:00"}`: {Status: "paid", PaymentID: "P1",
			PaidAt: &gateway.Timestamp{Time: time.Date(2026, 12, 1, 2, 0, 0, 500_000_000, time.UTC)}},
	}
	for body, want := range good {
		srv, _ := answerServer(t, 200, body)
		o, err := (&gateway.Client{BaseURL: srv.URL}).Order(ctx, gateway.Ref{OrderID: "A1"})
		require.NoError(t, err, body)
		if want.PaidAt != nil {
			require.NotNil(t, o.PaidAt, body)
			require.True(t, want.PaidAt.Equal(o.PaidAt.Time), "%s: paid_at %v", body, o.PaidAt)
			want.PaidAt, o.PaidAt = nil, nil
		}
		require.Equal(t, want, o, body)
	}
}

// A close's paid answer carries paid_at as a query's does; a closed answer
// has no use for it.
func TestCloseReadsPaidAt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, _ := answerServer(t, 200, `{"status": "paid", "payment_id": "P1", "amount": "1.00", "paid_at": "2026-12-01T10:00:00Z"}`)
	r, err := (&gateway.Client{BaseURL: srv.URL}).Close(ctx, gateway.Ref{OrderID: "A1"})
	require.NoError(t, err)
	require.NotNil(t, r.PaidAt)
	require.True(t, r.PaidAt.Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)))
	srv, _ = answerServer(t, 200, `{"status": "closed", "paid_at": "yesterday"}`)
	r, err = (&gateway.Client{BaseURL: srv.URL}).Close(ctx, gateway.Ref{OrderID: "A1"})
	require.NoError(t, err)
	require.Equal(t, gateway.CloseResult{Status: gateway.CloseClosed}, r)
}

// A refund answer is parsed as strictly, its status must be "refunded", and
// a refund whose amount is outside the grammar is never sent.
func TestRefundIsStrict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	req := gateway.RefundRequest{OrderID: "A1", PaymentID: "P1", Amount: "12.50", IdempotencyKey: "P1"}
	for _, body := range []string{
		`{"refund_id": "R1", "status": "refunded", "status": "failed"}`,
		`{"refund_id": "R1", "status": "Refunded"}`,
		`{"refund_id": "R1", "status": "pending"}`,
		`{"refund_id": "R1"}`,
		`{"status": "refunded"}`,
		`{"refund_id": "R1", "status": "refunded"} {}`,
		`{"refund_id": "R\u202e1", "status": "refunded"}`,
		`{"refund_id": "..", "status": "refunded"}`,
		`{"refund_id": 1, "status": "refunded"}`,
	} {
		srv, _ := answerServer(t, 200, body)
		_, err := (&gateway.Client{BaseURL: srv.URL}).Refund(ctx, req)
		require.ErrorIs(t, err, gateway.ErrBadAnswer, body)
	}
	srv, calls := answerServer(t, 200, `{"refund_id": "R1", "status": "refunded"}`)
	c := &gateway.Client{BaseURL: srv.URL}
	r, err := c.Refund(ctx, req)
	require.NoError(t, err)
	require.Equal(t, gateway.Refund{RefundID: "R1", Status: gateway.RefundRefunded}, r)
	for _, amount := range []gateway.Amount{"NaN", "Infinity", "-Infinity", "-1", "1e3", "0x1p3", " 1", "1.1234567", "1234567890123456"} {
		bad := req
		bad.Amount = amount
		_, err := c.Refund(ctx, bad)
		require.ErrorIs(t, err, gateway.ErrBadRequest, string(amount))
		require.ErrorContains(t, err, "not sent", string(amount))
	}
	require.EqualValues(t, 1, calls.Load(), "no refund with a bad amount reached the gateway")
}

// A redirect is never followed: it is a bad answer, and the target never
// sees the request, its token or its body.
func TestClientFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		_, _ = w.Write([]byte(`{"status": "paid", "payment_id": "P1"}`))
	}))
	t.Cleanup(other.Close)
	for _, code := range []int{301, 302, 303, 307, 308} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, code)
		}))
		t.Cleanup(srv.Close)
		c := &gateway.Client{BaseURL: srv.URL, Token: "secret"}
		_, err := c.Order(ctx, gateway.Ref{OrderID: "A1"})
		require.ErrorIs(t, err, gateway.ErrBadAnswer, "HTTP %d", code)
		_, err = c.Refund(ctx, gateway.RefundRequest{OrderID: "A1", PaymentID: "P1", IdempotencyKey: "P1"})
		require.ErrorIs(t, err, gateway.ErrBadAnswer, "HTTP %d", code)
	}
	require.Zero(t, elsewhere.Load())
}

// Order ids are escaped per path segment ("." and ".." too), and the fake
// gateway decodes them back: each id reaches its own order, never another
// path.
func TestOrderIDsAreEscapedInPaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ids := []string{"a/b", "a//b", "/", "a?b=c", "a#b", "100%", "%2E%2E", "%zz", "a b", ".", "..", "...", "./x", "../close",
		"ümlaut-€", "日本", "a+b", "a;b", "a\\b", "close"}

	// What the gateway receives on the wire.
	var mu sync.Mutex
	var paths []string
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.RequestURI)
		mu.Unlock()
		_, _ = w.Write([]byte(`{"status": "none"}`))
	}))
	t.Cleanup(rec.Close)
	for _, id := range []string{".", "..", "a/b", "a?b", "a#b", "%"} {
		_, err := (&gateway.Client{BaseURL: rec.URL}).Order(ctx, gateway.Ref{OrderID: id})
		require.NoError(t, err)
	}
	require.Equal(t, []string{"/v1/orders/%2E", "/v1/orders/%2E%2E", "/v1/orders/a%2Fb", "/v1/orders/a%3Fb", "/v1/orders/a%23b", "/v1/orders/%25"}, paths)

	fake, url := sidecartest.Fake(t, nil)
	c := &gateway.Client{BaseURL: url, Timeout: time.Second}
	for i, id := range ids {
		pid := fmt.Sprintf("P%d", i)
		require.NoError(t, fake.Set(ctx, id, fakegateway.Behaviour{Behaviour: fakegateway.Silent, PaymentID: pid, Amount: "1.50"}))
	}
	for i, id := range ids {
		o, err := c.Order(ctx, gateway.Ref{OrderID: id})
		require.NoError(t, err, "id %q", id)
		require.Equal(t, gateway.Order{OrderID: id, Status: gateway.StatusPaid, PaymentID: fmt.Sprintf("P%d", i), Amount: "1.50"}, o, "id %q", id)
		cl, err := c.Close(ctx, gateway.Ref{OrderID: id})
		require.NoError(t, err, "id %q", id)
		require.Equal(t, fmt.Sprintf("P%d", i), cl.PaymentID, "id %q", id)
	}
	for _, id := range ids {
		require.Equal(t, 1, fake.Order(id).Closes, "id %q closed once, under its own id", id)
	}
	require.Equal(t, len(ids), fake.Stats().Closes)

	// The fake's control API takes escaped ids too.
	resp, err := http.Get(url + "/_fake/orders/" + gateway.PathSegment(".."))
	require.NoError(t, err)
	defer resp.Body.Close()
	var st fakegateway.OrderState
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	require.Equal(t, "..", st.OrderID)
	require.Equal(t, gateway.StatusPaid, st.Status)
}

// A password in the gateway URL is sent as HTTP basic auth, but no error
// quotes it (errors go to the logs and to River's errors of the job): an
// error names the gateway by scheme, host and path.
func TestErrorsHideTheURLsUserinfo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var gotUser, gotPassword atomic.Value
	for name, tc := range map[string]struct {
		code int
		want error
	}{
		"unavailable": {http.StatusServiceUnavailable, gateway.ErrUnavailable},
		"bad answer":  {http.StatusNotFound, gateway.ErrBadAnswer},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				user, password, _ := r.BasicAuth()
				gotUser.Store(user)
				gotPassword.Store(password)
				w.WriteHeader(tc.code)
			}))
			defer srv.Close()
			base := strings.Replace(srv.URL, "http://", "http://merchant:S3cretPass@", 1) + "/pay/"
			c := &gateway.Client{BaseURL: base, Retries: gateway.NoRetries}
			_, err := c.Order(ctx, gateway.Ref{OrderID: "A1"})
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, "merchant", gotUser.Load(), "the userinfo is still sent as basic auth")
			require.Equal(t, "S3cretPass", gotPassword.Load())
			require.NotContains(t, err.Error(), "S3cretPass")
			require.NotContains(t, err.Error(), "merchant")
			require.Contains(t, err.Error(), "GET "+srv.URL+"/pay/v1/orders/A1")
		})
	}
	// A gateway that cannot be reached: net/http's error quotes the URL.
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	c := &gateway.Client{BaseURL: strings.Replace(srv.URL, "http://", "http://merchant:S3cretPass@", 1), Retries: gateway.NoRetries}
	_, err := c.Order(ctx, gateway.Ref{OrderID: "A1"})
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	require.NotContains(t, err.Error(), "S3cretPass")
	require.NotContains(t, err.Error(), "merchant")
}
