package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

// --gateway-retries 0 means no retry: an unavailable gateway is asked once,
// then the job snoozes. (It used to mean the default, 2 retries; only a
// negative value turned them off, which it still does.)
//
// The gateway holds each request until the test answers it, so the test
// reads which run of the check job sent it: the request after a 503 comes
// from the job's next run (a new attempted_at), not from a retry within the
// same run.
func TestGatewayRetriesZeroMeansNoRetry(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	sidecartest.Exec(t, db, "SELECT ordertimeout.configure(precheck => 'always')")

	done := make(chan struct{})
	requests := make(chan chan int)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer := make(chan int)
		select {
		case requests <- answer:
		case <-done:
			return
		case <-r.Context().Done():
			return
		}
		select {
		case code := <-answer:
			w.WriteHeader(code)
		case <-done:
		case <-r.Context().Done():
		}
	}))
	ctx, cancel := context.WithCancel(t.Context())
	exited := make(chan error, 1)
	go func() {
		exited <- runCmd(ctx, []string{"--database-url", url, "--name", "retries", "--gateway-url", gw.URL,
			"--gateway-retries", "0", "--gateway-timeout", "30s", "--http", "-", "--reconcile-every", "0",
			"--max-sleep", "200ms", "--fetch-poll-interval", "20ms", "--shutdown-timeout", "1s"})
	}()
	t.Cleanup(func() {
		close(done)
		cancel()
		require.NoError(t, <-exited)
		gw.Close()
	})
	sidecartest.CreateOrder(t, db, "R1", time.Millisecond, "")

	next := func() chan int {
		t.Helper()
		select {
		case answer := <-requests:
			return answer
		case <-time.After(30 * time.Second):
			t.Fatal("no gateway request within 30 s")
			return nil
		}
	}
	run := func() string {
		t.Helper()
		var at string
		require.NoError(t, db.QueryRow(t.Context(), `SELECT attempted_at::text FROM river_job
			WHERE kind = 'ordertimeout_precancel_check' AND args->>'order_id' = 'R1' AND state = 'running'`).Scan(&at))
		return at
	}
	answer := next()
	first := run()
	answer <- http.StatusServiceUnavailable
	answer = next()
	require.NotEqual(t, first, run(), "the second request must come from the job's next run, not from a retry")
	answer <- http.StatusServiceUnavailable
}
