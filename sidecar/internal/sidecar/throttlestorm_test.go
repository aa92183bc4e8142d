package sidecar_test

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// A backlog of gateway calls under --gateway-rate drains at the rate through
// snoozes, and each snoozed job comes back about when its token is due, not
// all of them every couple of seconds. Before, every throttled job snoozed
// until the next free token (just over the 2 s wait), so the whole backlog
// came back together every 2 s and all but the rate's share of it were
// throttled again: N closes at R a second cost about N*N/(2R) job runs (each
// with its database reads and River's fetch and snooze), a storm growing with
// the square of the backlog (measured: 100 closes at 5/s took 395 throttled
// runs, 200 took 1,666). Now a throttled job keeps a token reserved ahead and
// snoozes to it: a few runs a job, and the closes still go out at the rate.
func TestThrottledBacklogDoesNotStorm(t *testing.T) {
	t.Parallel()
	const (
		n     = 200
		rate  = 5.0
		burst = 1
	)
	e := newEnv(t, false)
	ts := &timestamps{}
	srv := httptest.NewServer(ts.wrap(e.fake))
	t.Cleanup(srv.Close)
	for i := range n {
		id := fmt.Sprintf("T%d", i)
		// 2 s: begin_payment must come before it expires (200 ms was once
		// too little on a loaded machine, OT122).
		sidecartest.CreateOrder(t, e.db, id, 2*time.Second, `{"precheck": "never"}`)
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.begin_payment($1, $2, interval '50 milliseconds')", id, "P"+id)
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.fail_payment($1, $2)", id, "P"+id)
	}
	cfg := e.config("s1")
	cfg.GatewayURL = srv.URL
	cfg.GatewayRate, cfg.GatewayBurst = rate, burst
	cfg.MaxWorkers = 20
	s, _ := sidecartest.Start(t, cfg)

	sidecartest.Eventually(t, 120*time.Second, "every close sent", func() (bool, error) {
		return e.fake.Stats().Closes >= n, nil
	})
	closes := ts.get()
	require.Len(t, closes, n, "one close per order")
	slices.SortFunc(closes, func(a, b time.Time) int { return a.Compare(b) })
	span := closes[n-1].Sub(closes[0])
	ideal := time.Duration(float64(n-burst) / rate * float64(time.Second))

	metric := func(outcome string) float64 {
		return sidecartest.Metric(t, s.Registry(), "ordertimeout_jobs_total", "kind", "ordertimeout_gateway_close", "outcome", outcome)
	}
	throttled, closed := metric("throttled"), metric("closed")
	t.Logf("%d closes at %v/s: %v throttled runs, %v runs in all; sent over %v (ideal %v, %.2f/s)",
		n, rate, throttled, throttled+closed, span.Round(time.Millisecond), ideal, float64(n-1)/span.Seconds())
	require.Equal(t, float64(n), closed, "one closing run per order")
	// O(N): each job runs at most three times (reserve, wake before its
	// token, send); a storm would be about N*N/(2R) = 4,000.
	require.LessOrEqual(t, throttled, 2.0*n, "throttled job runs for %d closes", n)
	// The rate is kept, and the reserved tokens are all used: the backlog
	// drains at about the rate, not slower.
	require.GreaterOrEqual(t, span, ideal*9/10, "the closes drain at the rate, not faster")
	require.LessOrEqual(t, span, ideal*11/10+time.Second, "the closes drain at about the rate, not slower")
}
