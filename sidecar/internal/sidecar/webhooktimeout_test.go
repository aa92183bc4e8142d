package sidecar_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// A receiver that never answers, with a --webhook-timeout longer than the
// job's timeout: the job's timeout ends each delivery. That is a failed
// delivery like any other (River records it, counts the attempt and backs
// off, and discards the job after its last attempt), not a shutdown. The job
// used to snooze at once without an attempt counted: a new request every
// job timeout, forever, each holding a worker.
func TestWebhookJobTimeoutIsAFailedDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(webhooks => true)")
	url, _ := hungReceiver(t)
	cfg := e.config("s1")
	cfg.WebhookURL, cfg.WebhookSecret = url, "whsec"
	cfg.WebhookTimeout = time.Minute
	cfg.JobTimeout = 300 * time.Millisecond
	sidecartest.Start(t, cfg)
	sidecartest.CreateOrder(t, e.db, "A1", time.Hour, "")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('A1')")

	sidecartest.Eventually(t, 20*time.Second, "the timed-out delivery recorded as a failed attempt", func() (bool, error) {
		return sidecartest.Int(t, e.db, `SELECT count(*) FROM river_job WHERE kind = 'ordertimeout_webhook'
		   AND errors[1]->>'error' LIKE '%deliver webhook evt_%'`) == 1, nil
	})
	require.Zero(t, sidecartest.Int(t, e.db, `SELECT coalesce(max((metadata->>'snoozes')::int), 0)
	   FROM river_job WHERE kind = 'ordertimeout_webhook'`), "snoozed on its timeout")
}

// hungReceiver is a webhook receiver that reads each delivery and never
// answers it, until the test ends; held counts the deliveries it holds.
func hungReceiver(t *testing.T) (url string, held *atomic.Int64) {
	t.Helper()
	held = new(atomic.Int64)
	release := make(chan struct{})
	receiver := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		held.Add(1)
		defer held.Add(-1)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(receiver.Close)
	t.Cleanup(func() { close(release) })
	return receiver.URL, held
}
