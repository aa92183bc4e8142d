package gateway_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// N calls at once go out at the rate: the gateway sees them spread over
// about (N-burst)/rate seconds.
func TestLimitedSpreadsCalls(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		times []time.Time
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		_, _ = w.Write([]byte(`{"status": "closed"}`))
	}))
	t.Cleanup(srv.Close)
	const (
		n     = 30
		rate  = 20.0
		burst = 5
	)
	l, err := gateway.NewLimited(&gateway.Client{BaseURL: srv.URL}, rate, burst)
	require.NoError(t, err)
	l.MaxWait = 10 * time.Second
	var waited, sent int
	l.Observe = func(_ string, _ time.Duration, ok bool) {
		mu.Lock()
		defer mu.Unlock()
		waited++
		if ok {
			sent++
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := l.Close(context.Background(), gateway.Ref{OrderID: "A1"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, times, n)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	least := time.Duration(float64(n-burst) / rate * float64(time.Second))
	span := times[n-1].Sub(times[0])
	require.GreaterOrEqual(t, span, least*9/10)
	require.Less(t, span, least*2)
	require.Equal(t, n-burst, waited, "all but the burst waited")
	require.Equal(t, n-burst, sent)
}

// A call whose token comes later than MaxWait is not sent: it returns a
// ThrottledError saying when to try again. A call whose context ends while
// it waits returns at once, and gives its token back.
func TestLimitedThrottles(t *testing.T) {
	t.Parallel()
	var calls int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		_, _ = w.Write([]byte(`{"order_id": "A1", "status": "pending"}`))
	}))
	t.Cleanup(srv.Close)
	l, err := gateway.NewLimited(&gateway.Client{BaseURL: srv.URL}, 1, 1)
	require.NoError(t, err)
	l.MaxWait = 100 * time.Millisecond
	ref := gateway.Ref{OrderID: "A1"}

	_, err = l.Order(context.Background(), ref)
	require.NoError(t, err, "the burst")
	_, err = l.Order(context.Background(), ref)
	require.ErrorIs(t, err, gateway.ErrThrottled)
	require.NotErrorIs(t, err, gateway.ErrUnavailable)
	var te *gateway.ThrottledError
	require.True(t, errors.As(err, &te))
	require.Equal(t, "order", te.Op)
	require.Greater(t, te.RetryAfter, 500*time.Millisecond)
	require.LessOrEqual(t, te.RetryAfter, time.Second)

	l.MaxWait = 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = l.Order(ctx, ref)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 900*time.Millisecond)
	mu.Lock()
	require.Equal(t, 1, calls)
	mu.Unlock()

	for _, bad := range []float64{0, -1, 2e6} {
		_, err := gateway.NewLimited(&gateway.Client{BaseURL: srv.URL}, bad, 0)
		require.Error(t, err, "%v", bad)
	}
	l2, err := gateway.NewLimited(&gateway.Client{BaseURL: srv.URL}, 2.5, 0)
	require.NoError(t, err)
	require.Equal(t, 3, l2.Limiter.Burst(), "burst 0 is the rate rounded up")
	require.Equal(t, 1200*time.Millisecond, l2.Refill(), "3 tokens at 2.5 a second")
	l3, err := gateway.NewLimited(&gateway.Client{BaseURL: srv.URL}, 10, 1)
	require.NoError(t, err)
	require.Equal(t, 100*time.Millisecond, l3.Refill())
	l4, err := gateway.NewLimited(&gateway.Client{BaseURL: srv.URL}, 1e-12, 1000000)
	require.NoError(t, err)
	require.Equal(t, time.Duration(math.MaxInt64), l4.Refill(), "saturates, never wraps")
}

// With a Ticket in its context, a call whose token is further than MaxWait
// keeps it reserved (Reserved, Held, Due) instead of giving it back, so the
// next call finds the token after it; coming back with the held ticket, the
// call waits for its own token and takes no other, and the ticket is used
// once.
func TestLimitedReservesAheadWithTicket(t *testing.T) {
	t.Parallel()
	var calls int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		_, _ = w.Write([]byte(`{"order_id": "A1", "status": "pending"}`))
	}))
	t.Cleanup(srv.Close)
	const rate = 10.0 // a token every 100 ms
	l, err := gateway.NewLimited(&gateway.Client{BaseURL: srv.URL}, rate, 1)
	require.NoError(t, err)
	l.MaxWait = 10 * time.Millisecond
	ref := gateway.Ref{OrderID: "A1"}
	bg := context.Background()

	_, err = l.Order(bg, ref)
	require.NoError(t, err, "the burst")

	t1, t2 := &gateway.Ticket{}, &gateway.Ticket{}
	var te *gateway.ThrottledError
	_, err = l.Order(gateway.WithTicket(bg, t1), ref)
	require.True(t, errors.As(err, &te))
	require.True(t, te.Reserved)
	require.True(t, t1.Held)
	require.InDelta(t, 100*time.Millisecond, time.Until(t1.Due), float64(30*time.Millisecond))

	_, err = l.Order(gateway.WithTicket(bg, t2), ref)
	require.True(t, errors.As(err, &te))
	require.True(t, te.Reserved)
	require.InDelta(t, 200*time.Millisecond, time.Until(t2.Due), float64(30*time.Millisecond), "the first token is promised: the second call gets the next")

	// Without a ticket, the token after those two, given back.
	_, err = l.Order(bg, ref)
	require.True(t, errors.As(err, &te))
	require.False(t, te.Reserved)
	require.InDelta(t, 300*time.Millisecond, te.RetryAfter, float64(30*time.Millisecond))

	// Too early with the held ticket: still held, not sent.
	_, err = l.Order(gateway.WithTicket(bg, t1), ref)
	require.True(t, errors.As(err, &te))
	require.True(t, te.Reserved)
	require.True(t, t1.Held)

	// Back within MaxWait of Due: sent on the held token, which is used.
	l.MaxWait = time.Second
	start := time.Now()
	_, err = l.Order(gateway.WithTicket(bg, t1), ref)
	require.NoError(t, err)
	require.False(t, t1.Held, "a ticket holds one token")
	require.WithinDuration(t, t1.Due, time.Now(), 30*time.Millisecond, "sent when its token was due")
	require.Less(t, time.Since(start), 200*time.Millisecond)
	_, err = l.Order(gateway.WithTicket(bg, t2), ref)
	require.NoError(t, err)
	require.WithinDuration(t, t2.Due, time.Now(), 30*time.Millisecond)

	// Both tokens were taken when reserved: the next free one is the
	// fourth (300 ms after the burst), not an earlier one.
	start = time.Now()
	_, err = l.Order(bg, ref)
	require.NoError(t, err)
	require.InDelta(t, 100*time.Millisecond, time.Since(start), float64(40*time.Millisecond))
	mu.Lock()
	require.Equal(t, 4, calls)
	mu.Unlock()
}
