package sidecar_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// A receiver that hangs holds up webhooks only: they have their own queue
// and workers (--webhook-workers), and a payment check of queue ordertimeout
// runs while every webhook worker waits for the receiver. Before, webhooks
// shared the queue and --max-workers with the gateway jobs, and a review
// measured a payment check 49 s late behind 100 deliveries to a hung
// receiver.
func TestHungReceiverHoldsUpWebhooksOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(webhooks => true)")
	url, held := hungReceiver(t)
	cfg := e.config("s1")
	cfg.WebhookURL, cfg.WebhookSecret = url, "whsec"
	cfg.WebhookTimeout = time.Minute
	cfg.JobTimeout = 2 * time.Minute
	cfg.MaxWorkers, cfg.WebhookWorkers = 2, 2
	sidecartest.Start(t, cfg)
	for _, id := range []string{"W1", "W2", "W3", "W4", "W5", "W6"} {
		sidecartest.CreateOrder(t, e.db, id, time.Hour, "")
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order($1)", id)
	}
	sidecartest.Eventually(t, 15*time.Second, "both webhook workers held by the receiver", func() (bool, error) {
		return held.Load() == 2, nil
	})

	// The gateway says P1 is paid; the payment check, due 100 ms after the
	// begin, confirms it.
	e.pay(t, "C1", fakegateway.Silent, "P1")
	createAndBegin(t, e.db, "C1", time.Hour, "", "P1")
	sidecartest.WaitStatus(t, e.db, "C1", "PAID", 15*time.Second)
	require.EqualValues(t, 2, held.Load(), "the receiver still holds both webhook workers")
	require.Zero(t, sidecartest.Int(t, e.db, `SELECT count(*) FROM river_job
	   WHERE kind = 'ordertimeout_webhook' AND queue <> 'ordertimeout_webhook'`), "every webhook in its own queue")
}
