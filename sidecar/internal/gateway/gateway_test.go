package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

func TestClientAgainstFake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := fakegateway.New(nil, nil)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	t.Cleanup(fake.Close)
	c := &gateway.Client{BaseURL: srv.URL, Timeout: time.Second}

	o, err := c.Order(ctx, "A1")
	require.NoError(t, err)
	require.Equal(t, gateway.StatusNone, o.Status)

	require.NoError(t, fake.Set(ctx, "A1", fakegateway.Behaviour{Behaviour: fakegateway.Silent, PaymentID: "P1", Amount: "12.50"}))
	o, err = c.Order(ctx, "A1")
	require.NoError(t, err)
	require.Equal(t, gateway.Order{OrderID: "A1", Status: gateway.StatusPaid, PaymentID: "P1", Amount: "12.50"}, o)

	cl, err := c.Close(ctx, "A1")
	require.NoError(t, err)
	require.Equal(t, gateway.ClosePaid, cl.Status)
	require.Equal(t, "P1", cl.PaymentID)

	cl, err = c.Close(ctx, "B1")
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
	_, err = c.Order(ctx, "A1")
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	require.Equal(t, before+1+gateway.DefaultRetries, fake.Stats().Queries)

	// A slow gateway: the per-request timeout ends it.
	require.NoError(t, fake.SetGateway(fakegateway.Behaviour{Behaviour: fakegateway.Slow, DelayMS: 2000}))
	slow := &gateway.Client{BaseURL: srv.URL, Timeout: 100 * time.Millisecond, Retries: -1}
	start := time.Now()
	_, err = slow.Order(ctx, "A1")
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
			_, err := c.Order(ctx, "A1")
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
	_, err := (&gateway.Client{BaseURL: url, Retries: -1}).Close(ctx, "A1")
	require.ErrorIs(t, err, gateway.ErrUnavailable)
}
