package listener

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/metrics"
)

// RegisterMetrics registers ordertimeout_conflict_notifications_total on
// reg.
func (l *Listener) RegisterMetrics(reg prometheus.Registerer) error {
	return metrics.Register(reg, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ordertimeout_conflict_notifications_total",
		Help: "NOTIFYs on " + ConflictChannel + " this sidecar handled.",
	}, func() float64 { return float64(l.Stats().Notifications) }))
}
