package sidecar_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// A late payment recorded without an amount may learn it between the
// resolve job's first read of the conflict and its claim of the refund (a
// confirmation that brings the amount while the gateway is asked). The claim
// reads the conflict in its own transaction: changed since the gateway was
// asked, nothing is claimed and the job asks again, and the refund then
// carries the amount. Before, the claim went on; earlier still
// the refund carried the amount read first (none: the whole payment),
// and a retry under the same idempotency key would have sent the amount,
// which a gateway such as Stripe refuses as another request. The
// confirmation is made to land inside the gateway's first answer.
func TestRefundSendsTheAmountOfTheClaimedConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(late_payment => 'refund')")
	sidecartest.CreateOrder(t, e.db, "RR1", time.Hour, `{"amount": 10, "currency": "EUR"}`)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('RR1')")

	var learn sync.Once
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/orders/RR1" {
			learn.Do(func() { sidecartest.Exec(t, e.db, "SELECT ordertimeout.confirm_payment('RR1', 'PRR1', 7.5, 'EUR')") })
		}
		if r.Method == http.MethodPost && r.URL.Path == "/v1/refunds" {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(b)))
		}
		e.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := e.config("s1")
	cfg.GatewayURL = srv.URL
	sidecartest.Start(t, cfg)

	var got string
	require.NoError(t, e.db.QueryRow(bg, "SELECT ordertimeout.confirm_payment('RR1', 'PRR1')").Scan(&got))
	require.Equal(t, "conflict", got)
	sidecartest.Eventually(t, 20*time.Second, "the refund is recorded", func() (bool, error) {
		return sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts WHERE resolution = 'refunded'`) == 1, nil
	})
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, bodies)
	for _, b := range bodies {
		var req struct {
			Amount string `json:"amount"`
		}
		require.NoError(t, json.Unmarshal([]byte(b), &req), b)
		require.Equal(t, "7.5", req.Amount, "the refund carries the claimed conflict's amount: %s", b)
	}
}
