package metrics

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry holding the Go runtime's collector (go_*)
// and this process's (process_*). Every sidecar owns one: the packages of
// the sidecar register their own collectors on it, never on client_golang's
// global default registry, so that a process may run several sidecars
// (tests do).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves reg's metrics in the Prometheus exposition format and
// counts its own scrapes (promhttp_metric_handler_requests_total and
// _in_flight, registered on reg). A collector that fails is logged and left
// out; the others are still served.
func Handler(reg *prometheus.Registry, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.Default()
	}
	return promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      errorLog{logger},
		ErrorHandling: promhttp.ContinueOnError,
	}))
}

// errorLog writes promhttp's errors to a slog.Logger.
type errorLog struct{ logger *slog.Logger }

// Println logs v as one warning.
func (l errorLog) Println(v ...any) {
	l.logger.Warn("serve metrics", "error", fmt.Sprint(v...))
}

// Register registers each collector on reg in turn and returns the first
// error.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	return nil
}
