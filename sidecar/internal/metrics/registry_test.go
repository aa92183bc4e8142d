package metrics_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/metrics"
)

func TestRegistryWritesTextFormat(t *testing.T) {
	t.Parallel()
	reg := &metrics.Registry{}
	c := reg.NewCounter("x_calls_total", "Calls by result.", "op", "result")
	c.Inc("order", "ok")
	c.Add(2, "order", "ok")
	c.Inc("close", `we"ird`)
	g := reg.NewGauge("x_backlog", "Backlog.\nSecond line.")
	g.Set(7)
	reg.NewCounterFunc("x_func_total", "From a func.", func() float64 { return 42 })
	h := reg.NewHistogram("x_lag_seconds", "Lag.", []float64{0.1, 1}, "cause")
	h.Observe(0.05, "timeout")
	h.Observe(0.1, "timeout")
	h.Observe(5, "timeout")
	require.Panics(t, func() { reg.NewGauge("x_backlog", "again") })

	var b strings.Builder
	_, err := reg.WriteTo(&b)
	require.NoError(t, err)
	require.Equal(t, `# HELP x_backlog Backlog.\nSecond line.
# TYPE x_backlog gauge
x_backlog 7
# HELP x_calls_total Calls by result.
# TYPE x_calls_total counter
x_calls_total{op="close",result="we\"ird"} 1
x_calls_total{op="order",result="ok"} 3
# HELP x_func_total From a func.
# TYPE x_func_total counter
x_func_total 42
# HELP x_lag_seconds Lag.
# TYPE x_lag_seconds histogram
x_lag_seconds_bucket{cause="timeout",le="0.1"} 2
x_lag_seconds_bucket{cause="timeout",le="1"} 2
x_lag_seconds_bucket{cause="timeout",le="+Inf"} 3
x_lag_seconds_sum{cause="timeout"} 5.15
x_lag_seconds_count{cause="timeout"} 3
`, b.String())
}
