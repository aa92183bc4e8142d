package dbclock

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/metrics"
)

// RegisterMetrics registers ordertimeout_clock_offset_seconds on reg.
func (c *Clock) RegisterMetrics(reg prometheus.Registerer) error {
	return metrics.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ordertimeout_clock_offset_seconds",
		Help: "How far the database's clock is ahead of this host's (negative: behind). The sidecar follows the database's; alert above a few seconds, as the host's clock needs fixing.",
	}, func() float64 { o, _ := c.Offset(); return o.Seconds() }))
}
