package sweep

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/metrics"
)

// RegisterMetrics registers the sweeper's counters on reg
// (ordertimeout_sweep_*_total), read from Stats at each scrape.
func (s *Sweeper) RegisterMetrics(reg prometheus.Registerer) error {
	counter := func(name, help string, f func(Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(s.Stats())) })
	}
	return metrics.Register(reg,
		counter("ordertimeout_sweep_batches_total", "sweep_due calls this sidecar made.",
			func(st Stats) int64 { return st.Batches }),
		counter("ordertimeout_sweep_claimed_total", "Due timer rows and lost timeouts this sidecar's sweeps claimed.",
			func(st Stats) int64 { return st.Claimed }),
		counter("ordertimeout_sweep_cancelled_total", "Orders this sidecar's sweeps cancelled (timeouts; gateway-checked cancels are in ordertimeout_jobs_total).",
			func(st Stats) int64 { return st.Cancelled }),
		counter("ordertimeout_sweep_caught_by_sweep_total", "Overdue orders this sidecar's sweeps cancelled without their timer row (lost timers).",
			func(st Stats) int64 { return st.CaughtBySweep }),
		counter("ordertimeout_sweep_checks_total", "Due orders this sidecar's sweeps handed to a gateway check.",
			func(st Stats) int64 { return st.Checks }),
		counter("ordertimeout_sweep_moot_total", "Claimed timer rows that could no longer act (order paid, paying or given more time).",
			func(st Stats) int64 { return st.Moot }),
		counter("ordertimeout_sweep_deferred_total", "Due orders this sidecar's sweeps left to a later sweep because another transaction held a lock their cancel needs (counted each time).",
			func(st Stats) int64 { return st.Deferred }),
		counter("ordertimeout_sweep_quick_sweeps_total", "Sweeps made a millisecond or two after one that deferred orders, instead of after the usual sleep.",
			func(st Stats) int64 { return st.QuickSweeps }),
		counter("ordertimeout_sweep_held_plans_total", "Plans of the next sweep that found due orders the last sweep passed over because another transaction held them (a lock their cancel needs, or their timer row: also another sweep's); they are tried again after a pause as long as the newest of them has been due, at most 1 s.",
			func(st Stats) int64 { return st.HeldPlans }),
		counter("ordertimeout_sweep_retries_total", "Sweeps repeated after a serialization failure or deadlock.",
			func(st Stats) int64 { return st.Retries }),
		counter("ordertimeout_sweep_errors_total", "Sweeps that failed.",
			func(st Stats) int64 { return st.Errors }),
		counter("ordertimeout_sweep_wakeups_total", "Wake-ups received on channel "+WakeChannel+".",
			func(st Stats) int64 { return st.Wakeups }),
	)
}
