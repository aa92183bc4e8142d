package fakegateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var bg = context.Background()

// The control API over HTTP, and the callbacks into the database.
func TestControlAPIAndCallbacks(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	fake := fakegateway.New(db, sidecartest.Logger())
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	t.Cleanup(fake.Close)

	post := func(path, body string) (int, map[string]any) {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	get := func(path string) (int, map[string]any) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}

	// instant: paid, and confirmed in the database before the answer.
	sidecartest.CreateOrder(t, db, "I1", time.Hour, "")
	code, out := post("/_fake/orders/I1", `{"behaviour": "instant", "payment_id": "PI"}`)
	require.Equal(t, 200, code)
	require.Equal(t, "paid", out["status"])
	require.Equal(t, "PAID", sidecartest.Status(t, db, "I1"))

	// decline: the callback fails the payment; the order goes back to PENDING.
	sidecartest.CreateOrder(t, db, "D1", time.Hour, "")
	sidecartest.Exec(t, db, "SELECT ordertimeout.begin_payment('D1', 'PD')")
	code, _ = post("/_fake/orders/D1", `{"behaviour": "decline", "payment_id": "PD"}`)
	require.Equal(t, 200, code)
	require.Equal(t, "PENDING", sidecartest.Status(t, db, "D1"))
	_, out = get("/v1/orders/D1")
	require.Equal(t, "failed", out["status"])

	// late: unknown to queries until the delay, then paid and confirmed.
	sidecartest.CreateOrder(t, db, "L1", time.Hour, "")
	post("/_fake/orders/L1", `{"behaviour": "late", "delay_ms": 200, "payment_id": "PL"}`)
	_, out = get("/v1/orders/L1")
	require.Equal(t, "none", out["status"])
	sidecartest.WaitStatus(t, db, "L1", "PAID", 10*time.Second)
	_, out = get("/v1/orders/L1")
	require.Equal(t, "paid", out["status"])

	// late after a close: refused.
	post("/_fake/orders/L2", `{"behaviour": "late", "delay_ms": 100, "payment_id": "PL2"}`)
	code, out = post("/v1/orders/L2/close", `{}`)
	require.Equal(t, 200, code)
	require.Equal(t, "closed", out["status"])
	sidecartest.Eventually(t, 10*time.Second, "the late payment refused", func() (bool, error) {
		return fake.Order("L2").Status == "failed", nil
	})

	// silent: paid, no callback.
	sidecartest.CreateOrder(t, db, "S1", time.Hour, "")
	post("/_fake/orders/S1", `{"behaviour": "silent", "payment_id": "PS"}`)
	require.Equal(t, "PENDING", sidecartest.Status(t, db, "S1"))
	_, out = get("/v1/orders/S1")
	require.Equal(t, "paid", out["status"])

	// down: 503 for this order only; the whole gateway down: 503 for all.
	post("/_fake/orders/X1", `{"behaviour": "down"}`)
	code, _ = get("/v1/orders/X1")
	require.Equal(t, 503, code)
	code, _ = get("/v1/orders/S1")
	require.Equal(t, 200, code)
	code, _ = post("/_fake/gateway", `{"behaviour": "down"}`)
	require.Equal(t, 200, code)
	code, _ = get("/v1/orders/S1")
	require.Equal(t, 503, code)
	post("/_fake/gateway", `{"behaviour": "normal"}`)

	// refunds: one per idempotency key.
	for range 3 {
		code, out = post("/v1/refunds", `{"order_id": "S1", "payment_id": "PS", "amount": "1.00", "idempotency_key": "PS"}`)
		require.Equal(t, 200, code)
		require.Equal(t, "refunded", out["status"])
	}
	code, _ = post("/_fake/orders/S1", `{"behaviour": "nonsense"}`)
	require.Equal(t, 400, code)

	_, out = get("/_fake/stats")
	require.EqualValues(t, 1, out["refunds"])
	require.EqualValues(t, 3, out["refund_requests"])
	require.EqualValues(t, 1, out["closes"])
	require.EqualValues(t, 3, out["callbacks"])
	require.EqualValues(t, 0, out["callback_errors"])
}

// The Chinese gateways' semantics: an order the gateway does not know yet
// (Alipay's TRADE_NOT_EXIST before the QR code is scanned) answers none,
// then paid; a close answered "already paid" (WeChat Pay's ORDERPAID) is a
// payment; closing twice is success.
func TestChineseGatewaySemantics(t *testing.T) {
	t.Parallel()
	fake := fakegateway.New(nil, sidecartest.Logger())
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	t.Cleanup(fake.Close)
	c := &gateway.Client{BaseURL: srv.URL}
	ref := func(id string) gateway.Ref { return gateway.Ref{OrderID: id} }

	require.NoError(t, fake.Set(bg, "Q1", fakegateway.Behaviour{Behaviour: fakegateway.QR, PaymentID: "PQ", Amount: "5.00", Currency: "CNY", NoneQueries: 2}))
	for range 2 {
		o, err := c.Order(bg, ref("Q1"))
		require.NoError(t, err)
		require.Equal(t, gateway.StatusNone, o.Status, "not scanned yet")
	}
	o, err := c.Order(bg, ref("Q1"))
	require.NoError(t, err)
	require.Equal(t, gateway.Order{OrderID: "Q1", Status: gateway.StatusPaid, PaymentID: "PQ", Amount: "5.00", Currency: "CNY"}, o)

	// Closed before the scan: never paid.
	require.NoError(t, fake.Set(bg, "Q2", fakegateway.Behaviour{Behaviour: fakegateway.QR, PaymentID: "PQ2", NoneQueries: 5}))
	r, err := c.Close(bg, ref("Q2"))
	require.NoError(t, err)
	require.Equal(t, gateway.CloseClosed, r.Status)
	o, err = c.Order(bg, ref("Q2"))
	require.NoError(t, err)
	require.Equal(t, gateway.StatusFailed, o.Status)

	// ORDERPAID: pending until the close, which finds it paid.
	require.NoError(t, fake.Set(bg, "W1", fakegateway.Behaviour{Behaviour: fakegateway.PayOnClose, PaymentID: "PW", Amount: "8.80", Currency: "CNY"}))
	o, err = c.Order(bg, ref("W1"))
	require.NoError(t, err)
	require.Equal(t, gateway.StatusPending, o.Status)
	r, err = c.Close(bg, ref("W1"))
	require.NoError(t, err)
	require.Equal(t, gateway.CloseResult{Status: gateway.ClosePaid, PaymentID: "PW", Amount: "8.80", Currency: "CNY"}, r)

	// Closing an order twice, or one never seen: closed each time.
	for range 2 {
		r, err = c.Close(bg, ref("N1"))
		require.NoError(t, err)
		require.Equal(t, gateway.CloseClosed, r.Status)
	}
	require.Equal(t, 2, fake.Order("N1").Closes)
	require.True(t, fake.Order("N1").Closed)
}

// A refund changes what the fake holds, as the contract says: in part, paid
// with the rest; in full, failed. Every refund is listed, and a new refund
// of more than it holds is refused (409), as a gateway refuses it; a repeat
// of a key answers its refund.
func TestRefundsChangeWhatIsHeld(t *testing.T) {
	t.Parallel()
	fake := fakegateway.New(nil, sidecartest.Logger())
	defer fake.Close()
	require.NoError(t, fake.Set(context.Background(), "R1", fakegateway.Behaviour{
		Behaviour: fakegateway.Silent, PaymentID: "PR1", Amount: "20.00", Currency: "EUR"}))
	require.NoError(t, fake.RefundOutside("R1", "5.00"))
	require.NoError(t, fake.RefundOutside("R1", "5.00"))
	st := fake.Order("R1")
	require.Equal(t, "paid", st.Status)
	require.EqualValues(t, "10.00", st.Amount)
	require.Error(t, fake.RefundOutside("R1", "10.01"), "more than it holds")

	srv := httptest.NewServer(fake)
	defer srv.Close()
	refund := func(key, amount string) int {
		resp, err := http.Post(srv.URL+"/v1/refunds", "application/json", strings.NewReader(
			`{"order_id": "R1", "payment_id": "PR1", "amount": "`+amount+`", "idempotency_key": "`+key+`"}`))
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusConflict, refund("k1", "10.50"), "more than the 10.00 it holds")
	require.Equal(t, http.StatusOK, refund("k1", "10.00"))
	require.Equal(t, "failed", fake.Order("R1").Status, "refunded in full")
	require.Equal(t, http.StatusOK, refund("k1", "10.00"), "a repeat of the key answers its refund")
	require.Equal(t, http.StatusConflict, refund("k2", "1.00"), "nothing left")
	require.Error(t, fake.RefundOutside("R1", ""), "nothing left")

	refunds := 0
	for _, p := range fake.Payments() {
		if p.Status == "refunded" {
			refunds++
		}
	}
	require.Equal(t, 3, refunds, "each refund listed")
}
