package sidecar_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// A gateway that answers the refunds of two payments with one refund id
// has refunded at most one of them. The first conflict records it; the
// second is refused (OT177): nothing recorded, the conflict stays
// refunding, and the job counts a bad answer and asks again later. Before,
// both conflicts were recorded as refunded by the same refund.
func TestRefundOfAnotherPaymentIsNotRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(late_payment => 'refund')")
	for _, id := range []string{"RA1", "RA2"} {
		sidecartest.CreateOrder(t, e.db, id, time.Hour, `{"amount": 10, "currency": "EUR"}`)
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order($1)", id)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/refunds" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"refund_id": "RF-SAME", "status": "refunded"})
			return
		}
		e.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := e.config("s1")
	cfg.GatewayURL = srv.URL
	s, _ := sidecartest.Start(t, cfg)

	for _, id := range []string{"RA1", "RA2"} {
		var got string
		require.NoError(t, e.db.QueryRow(bg, "SELECT ordertimeout.confirm_payment($1, 'P' || $1, 10, 'EUR')", id).Scan(&got))
		require.Equal(t, "conflict", got)
	}
	sidecartest.Eventually(t, 20*time.Second, "one conflict refunded, the other refused as a bad answer", func() (bool, error) {
		return sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts WHERE refund_id = 'RF-SAME'`) == 1 &&
			sidecartest.Metric(t, s.Registry(), "ordertimeout_gateway_bad_answers_total", "kind", "ordertimeout_resolve_conflict") >= 1, nil
	})
	require.EqualValues(t, 1, sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts
		WHERE state = 'refunding' AND refund_id IS NULL`), "the other stays refunding, for a person")
	require.EqualValues(t, 1, sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.payments WHERE status = 'refunded'`),
		"one payment marked refunded")
	// River records the first job's end after its worker returns.
	sidecartest.Eventually(t, 15*time.Second, "the refused conflict's job is kept, to ask again later", func() (bool, error) {
		return sidecartest.Int(t, e.db, `SELECT count(*) FROM river_job
			WHERE kind = 'ordertimeout_resolve_conflict' AND state NOT IN ('completed', 'cancelled', 'discarded')`) == 1, nil
	})
}
