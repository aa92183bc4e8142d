package sidecar_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// A gateway call that the job's timeout ends (a gateway that hangs, with a
// --gateway-timeout above --job-timeout) is the gateway unavailable: the job
// snoozes with the doubling pause. It was taken for the sidecar stopping and
// handed back at once: a new request every job timeout, forever.
func TestGatewayCallEndedByTheJobTimeoutSnoozes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	var closes atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/close") {
			closes.Add(1)
			select { // never answers
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		e.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	// 2 s: begin_payment must come before it expires (200 ms was once too
	// little on a loaded machine, OT122).
	sidecartest.CreateOrder(t, e.db, "JT1", 2*time.Second, `{"precheck": "never"}`)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.begin_payment('JT1', 'PJT1', interval '50 milliseconds')")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.fail_payment('JT1', 'PJT1')")
	cfg := e.config("s1")
	cfg.GatewayURL = srv.URL
	cfg.GatewayTimeout, cfg.GatewayRetries = 10*time.Second, -1
	cfg.JobTimeout = 300 * time.Millisecond
	s, _ := sidecartest.Start(t, cfg)

	metric := func(outcome string) float64 {
		return sidecartest.Metric(t, s.Registry(), "ordertimeout_jobs_total", "kind", "ordertimeout_gateway_close", "outcome", outcome)
	}
	sidecartest.Eventually(t, 20*time.Second, "the close ended by the job's timeout, snoozed", func() (bool, error) {
		return metric("snoozed") >= 1, nil
	})
	require.Zero(t, metric("interrupted"), "taken for the sidecar stopping")
	require.EqualValues(t, 1, closes.Load(), "asked again at once")
}
