package sidecar_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// A refund the gateway answers with another refund id than the one the
// conflict was recorded refunded by (here a person recorded a refund made by
// hand while the sidecar's refund was on its way) ends the job with outcome
// another_refund and an error logged: finish_refund refuses it (OT139), and
// asking the gateway again with the same idempotency key gets the same
// answer. Before, the job failed and was retried, each run a refund request,
// until River discarded it, and the metrics never said why.
func TestRefundAnsweredWithAnotherRefundID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(late_payment => 'refund')")
	sidecartest.CreateOrder(t, e.db, "AR1", time.Hour, `{"amount": 10, "currency": "EUR"}`)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('AR1')")

	// The first refund request: a person records a refund by hand first.
	var refunds atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/refunds" && refunds.Add(1) == 1 {
			sidecartest.Exec(t, e.db, `SELECT ordertimeout.finish_refund(conflict_id, 'by-hand-1')
				FROM ordertimeout.conflicts WHERE order_id = 'AR1'`)
		}
		e.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := e.config("s1")
	cfg.GatewayURL = srv.URL
	s, _ := sidecartest.Start(t, cfg)

	var got string
	require.NoError(t, e.db.QueryRow(bg, "SELECT ordertimeout.confirm_payment('AR1', 'PAR1', 10, 'EUR')").Scan(&got))
	require.Equal(t, "conflict", got)
	metric := func() float64 {
		return sidecartest.Metric(t, s.Registry(), "ordertimeout_conflicts_resolved_total", "outcome", "another_refund")
	}
	sidecartest.Eventually(t, 15*time.Second, "the job ends with another_refund", func() (bool, error) {
		return metric() == 1, nil
	})
	var refundID string
	require.NoError(t, e.db.QueryRow(bg, "SELECT refund_id FROM ordertimeout.conflicts WHERE order_id = 'AR1'").Scan(&refundID))
	require.Equal(t, "by-hand-1", refundID, "the conflict keeps the refund it recorded")
	// River records the job's end after the worker returns.
	sidecartest.Eventually(t, 15*time.Second, "no job left to ask the gateway again", func() (bool, error) {
		return sidecartest.Int(t, e.db, `SELECT count(*) FROM river_job
			WHERE kind = 'ordertimeout_resolve_conflict' AND state NOT IN ('completed', 'cancelled', 'discarded')`) == 0, nil
	})
	require.EqualValues(t, 0, sidecartest.Int(t, e.db, `SELECT count(*) FROM river_job
		WHERE kind = 'ordertimeout_resolve_conflict' AND (state <> 'completed' OR attempt > 1)`),
		"the job ended completed, at its first attempt")
	require.EqualValues(t, 1, refunds.Load(), "one refund request")
}
