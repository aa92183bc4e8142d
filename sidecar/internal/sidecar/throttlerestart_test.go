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

// A sidecar restarted during a throttled backlog keeps the rate: the jobs
// snoozed by the old process come back with the tokens it reserved for them,
// and the new process's own calls (here the closes of orders that expire
// after the restart) take their tokens after those. Before, the new process
// started with a full bucket and sent its own calls at the full rate on top
// of the held tokens: twice the rate until they had passed. And the tokens
// that came due while no sidecar ran (here the second the restart takes)
// are not sent late all at once on top of the rate: their jobs reserve new
// ones. Nor are the tokens that come due while the new process starts (its
// snoozed jobs wait, for instance, for its River leader's first scheduler
// pass): their jobs come back late together, and only those within the
// grace (here 100 ms, the limit's refill) use their token.
func TestThrottledBacklogKeepsTheRateAcrossARestart(t *testing.T) {
	t.Parallel()
	const (
		before = 100 // closes queued before the restart
		after  = 30  // orders that expire after it
		rate   = 10.0
		burst  = 1
		window = 2 * time.Second
	)
	e := newEnv(t, false)
	ts := &timestamps{}
	srv := httptest.NewServer(ts.wrap(e.fake))
	t.Cleanup(srv.Close)
	// An order whose payment failed, cancelled (and its close queued) when it
	// expires. It expires 2 s after it is created: begin_payment must come
	// before that, and 200 ms was once too little on a loaded machine (OT122).
	failed := func(id string) {
		sidecartest.CreateOrder(t, e.db, id, 2*time.Second, `{"precheck": "never"}`)
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.begin_payment($1, $2, interval '50 milliseconds')", id, "P"+id)
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.fail_payment($1, $2)", id, "P"+id)
	}
	for i := range before {
		failed(fmt.Sprintf("A%d", i))
	}
	config := func(name string) func() {
		cfg := e.config(name)
		cfg.GatewayURL = srv.URL
		cfg.GatewayRate, cfg.GatewayBurst = rate, burst
		cfg.MaxWorkers = 30 // more than MaxWait's worth of tokens: some jobs snooze with one
		_, stop := sidecartest.Start(t, cfg)
		return stop
	}
	stop := config("s1")
	// Every queued close has run once and holds a token of s1's schedule.
	sidecartest.Eventually(t, 60*time.Second, "the backlog's tokens reserved", func() (bool, error) {
		n := sidecartest.Int(t, e.db, `SELECT count(*) FROM river_job
			WHERE kind = 'ordertimeout_gateway_close' AND metadata ? 'ordertimeout_gateway_slot'`)
		return n+int64(e.fake.Stats().Closes) >= before, nil
	})
	stop()
	down := time.Now()
	sent := e.fake.Stats().Closes
	require.Less(t, sent, before/2, "most of the backlog is still to send after the restart")
	// A second of the old schedule passes with no sidecar: its tokens are
	// due before the new process starts.
	sidecartest.Eventually(t, 30*time.Second, "a second of held tokens due", func() (bool, error) {
		n := sidecartest.Int(t, e.db, `SELECT count(*) FROM river_job
			WHERE kind = 'ordertimeout_gateway_close'
			  AND (metadata -> 'ordertimeout_gateway_slot' ->> 'at')::timestamptz < clock_timestamp()`)
		return n >= int64(rate), nil
	})

	for i := range after {
		failed(fmt.Sprintf("B%d", i))
	}
	restart := time.Since(down)
	config("s2")
	sidecartest.Eventually(t, 120*time.Second, "every close sent", func() (bool, error) {
		return e.fake.Stats().Closes >= before+after, nil
	})
	closes := ts.get()
	require.Len(t, closes, before+after, "one close per order")
	slices.SortFunc(closes, func(a, b time.Time) int { return a.Compare(b) })
	busiest, at := 0, time.Time{}
	for i := range closes {
		j, _ := slices.BinarySearchFunc(closes, closes[i].Add(window), func(c, t time.Time) int { return c.Compare(t) })
		if j-i > busiest {
			busiest, at = j-i, closes[i]
		}
	}
	// At the rate a window holds rate*window closes and the burst; a call
	// sent later than its token (a job fetched late) brings the next one
	// closer, so a quarter more is allowed. Without the held tokens taken
	// out of the new process's limit, the busiest 2 s held 50; with them
	// taken but the late ones still used, 30; with the tokens due before
	// the start refused but a grace of 1 s for those due while it started,
	// 27 to 30 on a loaded machine.
	most := int(rate*window.Seconds()*5/4) + burst
	span := closes[len(closes)-1].Sub(closes[0])
	t.Logf("%d closes before the restart, %d after, in %v (%v without a sidecar); busiest %v: %d closes, from %v after the first (at most %d allowed)",
		sent, before+after-sent, span.Round(time.Millisecond), restart.Round(time.Millisecond), window, busiest, at.Sub(closes[0]).Round(time.Millisecond), most)
	require.LessOrEqual(t, busiest, most, "closes in the busiest %v", window)
	// And no slower than the rate, but for the restart: the tokens taken at
	// the start are those the old process's jobs still held, no more. The
	// tokens of the second (or more) without a sidecar are lost, and so
	// are those the new process's jobs come back for too late.
	ideal := time.Duration(float64(before+after-burst)/rate*float64(time.Second)) + restart
	require.LessOrEqual(t, span, ideal*5/4, "the closes drain at about the rate across the restart (ideal %v)", ideal)
}
