// Package metrics serves the sidecar's metrics in the Prometheus text format
// (version 0.0.4), written by hand: counters, gauges and histograms with
// labels, and a poller of the database's own statistics.
//
// Two kinds of numbers are exposed, and their names say which:
//
//   - ordertimeout_sweep_*, ordertimeout_jobs_*, ordertimeout_gateway_*,
//     ordertimeout_conflicts_resolved_*: what this sidecar did, counted in
//     process. Sum them across sidecars.
//   - ordertimeout_db_*: read from the database (views sweep_stats,
//     order_counts, cancel_lag) by every sidecar alike; they describe the
//     whole database. Do not sum them across sidecars: take max or one.
//
// The cancel lag histogram (ordertimeout_db_cancel_lag_seconds) is fed from
// ordertimeout.cancel_lag incrementally: each poll reads the timeout cancels
// whose event time lies between the previous poll's watermark and now minus a
// settle delay (a cancel is counted once its transaction has surely
// committed), so it counts every timeout cancel since this sidecar started,
// measured by database timestamps.
package metrics
