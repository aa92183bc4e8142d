package gateway

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestMetricsCountCallsAndThrottles(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)
	require.Zero(t, testutil.CollectAndCount(reg), "no family before the first call")

	m.Observe("order", "ok", 20*time.Millisecond)
	m.Observe("order", "unavailable", 3*time.Second)
	m.ObserveThrottle("close", 300*time.Millisecond, true)
	m.ObserveThrottle("close", 0, false)
	require.Equal(t, 1.0, testutil.ToFloat64(m.calls.WithLabelValues("order", "ok")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.calls.WithLabelValues("order", "unavailable")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.throttled.WithLabelValues("close", "waited")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.throttled.WithLabelValues("close", "snoozed")))
	require.Equal(t, 1, testutil.CollectAndCount(m.waits), "a call sent at once did not wait")
	require.Equal(t, 1, testutil.CollectAndCount(m.seconds))

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
}
