package gateway_test

import (
	"context"
	"fmt"
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

// The fake lists what it took, silent payments and refunds included, and
// Payments follows has_more over pages.
func TestPaymentsAgainstFake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake, url := sidecartest.Fake(t, nil)
	c := &gateway.Client{BaseURL: url, Timeout: time.Second}
	start := time.Now().Add(-time.Second)

	ps, err := c.Payments(ctx, start, 10)
	require.NoError(t, err)
	require.Empty(t, ps)

	for i := range 5 {
		require.NoError(t, fake.Set(ctx, fmt.Sprintf("A%d", i), fakegateway.Behaviour{
			Behaviour: fakegateway.Silent, PaymentID: fmt.Sprintf("P%d", i), Amount: "12.50", Currency: "CNY"}))
	}
	require.NoError(t, fake.Set(ctx, "NOAMOUNT", fakegateway.Behaviour{Behaviour: fakegateway.Silent, PaymentID: "PX"}))
	_, err = c.Refund(ctx, gateway.RefundRequest{OrderID: "A1", PaymentID: "P1", IdempotencyKey: "P1"})
	require.NoError(t, err)

	ps, err = c.Payments(ctx, start, 10)
	require.NoError(t, err)
	require.Len(t, ps, 6, "five payments and a refund; none without an amount")
	require.Equal(t, gateway.Payment{PaymentID: "P0", OrderID: "A0", Amount: "12.50", Currency: "CNY",
		Status: gateway.PaymentPaid, At: ps[0].At}, ps[0])
	last := ps[5]
	require.Equal(t, []string{"P1", "A1", "12.50", gateway.PaymentRefunded}, []string{last.PaymentID, last.OrderID, string(last.Amount), last.Status})
	require.False(t, last.At.Before(ps[4].At))

	// Pages of 2: the client follows has_more; with limit 4 it stops at 4.
	var pages []gateway.Payment
	cursor := start
	for {
		page, err := c.Payments(ctx, cursor, 2)
		require.NoError(t, err)
		before := len(pages)
		for _, p := range page {
			dup := false
			for _, q := range pages {
				dup = dup || (q.PaymentID == p.PaymentID && q.Status == p.Status)
			}
			if !dup {
				pages = append(pages, p)
			}
		}
		if len(page) < 2 {
			break
		}
		require.Greater(t, len(pages), before, "each page brings something new")
		cursor = page[len(page)-1].At
	}
	require.Equal(t, ps, pages, "paging from the last at reads everything once")

	ps, err = c.Payments(ctx, start, 4)
	require.NoError(t, err)
	require.Len(t, ps, 4)

	ps, err = c.Payments(ctx, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.Empty(t, ps, "nothing since the future")

	_, err = c.Payments(ctx, start, 0)
	require.ErrorIs(t, err, gateway.ErrBadRequest)
	_, err = c.Payments(ctx, start, gateway.MaxPaymentsLimit+1)
	require.ErrorIs(t, err, gateway.ErrBadRequest)
	require.Positive(t, fake.Stats().PaymentLists)
}

// Answers outside the contract are ErrBadAnswer; a down gateway is
// ErrUnavailable.
func TestPaymentsBadAnswers(t *testing.T) {
	t.Parallel()
	const p = `{"payment_id": "P1", "order_id": "A1", "amount": "1.00", "currency": "EUR", "status": "paid", "at": "2026-12-01T10:00:00Z"}`
	const p2 = `{"payment_id": "P2", "order_id": "A2", "amount": "1.00", "currency": "EUR", "status": "paid", "at": "2026-12-01T09:00:00Z"}`
	since := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct{ name, body, want string }{
		{"no has_more", `{"payments": []}`, "has_more is missing"},
		{"no payments", `{"has_more": false}`, "payments is missing"},
		{"has_more twice", `{"payments": [], "has_more": false, "has_more": true}`, "twice"},
		{"key in another case", `{"payments": [], "Has_More": true, "has_more": false}`, "only in case"},
		{"nested key in another case", `{"payments": [{"Payment_ID": "X", "payment_id": "P1", "order_id": "A1", "amount": "1", "currency": "EUR", "status": "paid", "at": "2026-12-01T10:00:00Z"}], "has_more": false}`, "only in case"},
		{"nested key twice", `{"payments": [{"status": "refunded", "payment_id": "P1", "order_id": "A1", "amount": "1", "currency": "EUR", "status": "paid", "at": "2026-12-01T10:00:00Z"}], "has_more": false}`, "twice"},
		{"status", `{"payments": [` + strings.Replace(p, `"paid"`, `"PAID"`, 1) + `], "has_more": false}`, "unknown status"},
		{"amount NaN", `{"payments": [` + strings.Replace(p, `"1.00"`, `"NaN"`, 1) + `], "has_more": false}`, "amount"},
		{"amount missing", `{"payments": [` + strings.Replace(p, `"amount": "1.00", `, ``, 1) + `], "has_more": false}`, "amount is missing"},
		{"currency missing", `{"payments": [` + strings.Replace(p, `"currency": "EUR", `, ``, 1) + `], "has_more": false}`, "currency is missing"},
		{"at without zone", `{"payments": [` + strings.Replace(p, `10:00:00Z`, `10:00:00`, 1) + `], "has_more": false}`, "breaks the contract"},
		{"at missing", `{"payments": [` + strings.Replace(p, `, "at": "2026-12-01T10:00:00Z"`, ``, 1) + `], "has_more": false}`, "at is missing"},
		// Go's parser takes offsets up to 24:00, PostgreSQL up to 15:59.
		{"at +16:00", `{"payments": [` + strings.Replace(p, `2026-12-01T10:00:00Z`, `2026-12-04T03:25:10+16:00`, 1) + `], "has_more": false}`, "zone offset must be from -15:59 to +15:59 (what PostgreSQL accepts), got +16:00"},
		{"at -16:00", `{"payments": [` + strings.Replace(p, `2026-12-01T10:00:00Z`, `2026-12-04T03:25:10-16:00`, 1) + `], "has_more": false}`, "got -16:00"},
		{"at +23:59", `{"payments": [` + strings.Replace(p, `2026-12-01T10:00:00Z`, `2026-12-04T03:25:10+23:59`, 1) + `], "has_more": false}`, "got +23:59"},
		{"at +24:00", `{"payments": [` + strings.Replace(p, `2026-12-01T10:00:00Z`, `2026-12-04T03:25:10+24:00`, 1) + `], "has_more": false}`, "got +24:00"},
		// RFC 3339, not time.Time's laxer parser: it read a zone minute of
		// 60 as the next hour (+00:60 as +01:00), and took a comma before
		// the fraction and a one-digit hour.
		{"at +15:60", `{"payments": [` + strings.Replace(p, `2026-12-01T10:00:00Z`, `2026-12-04T03:25:10+15:60`, 1) + `], "has_more": false}`, "must be an RFC 3339 time"},
		{"at +00:60", `{"payments": [` + strings.Replace(p, `2026-12-01T10:00:00Z`, `2026-12-01T10:00:00+00:60`, 1) + `], "has_more": false}`, "must be an RFC 3339 time"},
		{"at with a comma", `{"payments": [` + strings.Replace(p, `2026-12-01T10:00:00Z`, `2026-12-01T10:00:00,5Z`, 1) + `], "has_more": false}`, "must be an RFC 3339 time"},
		{"at with a one-digit hour", `{"payments": [` + strings.Replace(p, `2026-12-01T10:00:00Z`, `2026-12-01T1:00:00Z`, 1) + `], "has_more": false}`, "must be an RFC 3339 time"},
		{"payment id with control characters", `{"payments": [` + strings.Replace(p, `"P1"`, `"P\u001b1"`, 1) + `], "has_more": false}`, "control"},
		{"long order id", `{"payments": [` + strings.Replace(p, `"A1"`, `"`+strings.Repeat("x", 65)+`"`, 1) + `], "has_more": false}`, "longer than 64"},
		{"out of order", `{"payments": [` + p + `, ` + p2 + `], "has_more": false}`, "older than the one before"},
		{"before since", `{"payments": [` + strings.Replace(p, `2026-12-01T10`, `2026-11-30T10`, 1) + `], "has_more": false}`, "before since"},
		{"more than asked", `{"payments": [` + p + `, ` + strings.Replace(p, `"P1"`, `"P3"`, 1) + `, ` + strings.Replace(p, `"P1"`, `"P4"`, 1) + `], "has_more": false}`, "more than the limit"},
		{"has_more without progress", `{"payments": [` + p + `], "has_more": true}`, "nothing new"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(c.body))
			}))
			t.Cleanup(srv.Close)
			cl := &gateway.Client{BaseURL: srv.URL, Timeout: time.Second}
			_, err := cl.Payments(context.Background(), since, 2)
			require.ErrorIs(t, err, gateway.ErrBadAnswer)
			require.ErrorContains(t, err, c.want)
		})
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/payments", r.URL.Path)
		require.Equal(t, "2026-12-01T00:00:00Z", r.URL.Query().Get("since"))
		require.Equal(t, "2", r.URL.Query().Get("limit"))
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	cl := &gateway.Client{BaseURL: srv.URL, Timeout: time.Second, Retries: -1}
	_, err := cl.Payments(context.Background(), since, 2)
	require.ErrorIs(t, err, gateway.ErrUnavailable)
}

// Zone offsets up to 15:59 east and west are what PostgreSQL accepts: the
// client takes them, keeping the instant.
func TestPaymentsZoneOffsetsPostgresAccepts(t *testing.T) {
	t.Parallel()
	const body = `{"payments": [
		{"payment_id": "P1", "order_id": "A1", "amount": "1", "currency": "EUR", "status": "paid", "at": "2026-12-05T03:25:10+15:59"},
		{"payment_id": "P2", "order_id": "A2", "amount": "1", "currency": "EUR", "status": "paid", "at": "2026-12-04T03:25:10-15:59"}
	], "has_more": false}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	cl := &gateway.Client{BaseURL: srv.URL, Timeout: time.Second}
	got, err := cl.Payments(context.Background(), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.True(t, got[0].At.Equal(time.Date(2026, 12, 4, 11, 26, 10, 0, time.UTC)), got[0].At)
	require.True(t, got[1].At.Equal(time.Date(2026, 12, 4, 19, 24, 10, 0, time.UTC)), got[1].At)
}
