package rescue

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/metrics"
)

// RegisterMetrics registers ordertimeout_jobs_rescued_total on reg.
func (r *Rescuer) RegisterMetrics(reg prometheus.Registerer) error {
	return metrics.Register(reg, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ordertimeout_jobs_rescued_total",
		Help: "Jobs of queues ordertimeout and ordertimeout_webhook this sidecar handed back after they ran longer than --rescue-after by the database's clock (their worker died).",
	}, func() float64 { return float64(r.Rescued()) }))
}
