package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/metrics"
)

// Metrics counts a sidecar's calls to the payment gateway. Its methods fit
// the Observe fields of Client, stripe.Config and Limited.
type Metrics struct {
	calls     *prometheus.CounterVec
	seconds   *prometheus.HistogramVec
	throttled *prometheus.CounterVec
	waits     *prometheus.HistogramVec
}

// NewMetrics registers the gateway's metrics on reg:
// ordertimeout_gateway_calls_total{op,result},
// ordertimeout_gateway_call_seconds{op}, and, once the rate limit holds a
// call back, ordertimeout_gateway_throttled_total{op,result} and
// ordertimeout_gateway_throttle_wait_seconds{op}.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ordertimeout_gateway_calls_total",
			Help: "Calls this sidecar made to the payment gateway, by operation (order, close, refund, payments) and result (ok, unavailable, bad_answer, bad_request; disputed with Stripe: the payment is under dispute, not an outage; charged_back: a dispute lost took it back).",
		}, []string{"op", "result"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ordertimeout_gateway_call_seconds",
			Help:    "Duration of this sidecar's calls to the payment gateway.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"op"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ordertimeout_gateway_throttled_total",
			Help: "Calls to the payment gateway the rate limit (--gateway-rate) held back, by operation and result: waited (sent after a wait) or snoozed (not sent: the job asks later).",
		}, []string{"op", "result"}),
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ordertimeout_gateway_throttle_wait_seconds",
			Help:    "How long calls to the payment gateway waited for the rate limit.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5},
		}, []string{"op"}),
	}
	if err := metrics.Register(reg, m.calls, m.seconds, m.throttled, m.waits); err != nil {
		return nil, err
	}
	return m, nil
}

// Observe counts one call (retries count each) with its result and
// duration.
func (m *Metrics) Observe(op, result string, elapsed time.Duration) {
	m.calls.WithLabelValues(op, result).Inc()
	m.seconds.WithLabelValues(op).Observe(elapsed.Seconds())
}

// ObserveThrottle counts a call the rate limit held back: sent after
// waiting, or not sent.
func (m *Metrics) ObserveThrottle(op string, waited time.Duration, sent bool) {
	result := "snoozed"
	if sent {
		result = "waited"
	}
	m.throttled.WithLabelValues(op, result).Inc()
	if waited > 0 {
		m.waits.WithLabelValues(op).Observe(waited.Seconds())
	}
}
