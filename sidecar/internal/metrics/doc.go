// Package metrics is the sidecar's Prometheus plumbing on client_golang:
// the registry each sidecar owns (NewRegistry, with the go_* and process_*
// collectors), the /metrics handler (Handler), and the collector of the
// database's own statistics (DBCollector). The other packages register
// their own collectors on the registry (sweep, worker, gateway, listener,
// rescue, dbclock); none uses client_golang's global default registry, so
// one process may run several sidecars.
//
// Two kinds of numbers are exposed, and their names say which:
//
//   - ordertimeout_sweep_*, ordertimeout_jobs_*, ordertimeout_gateway_*,
//     ordertimeout_conflicts_resolved_*, ordertimeout_reconcile_*: what this
//     sidecar did, counted in process. Sum them across sidecars.
//   - ordertimeout_db_* and ordertimeout_paused: read from the database
//     (views sweep_stats, order_counts, cancel_lag) at each scrape, by every
//     sidecar alike; they describe the whole database. Do not sum them
//     across sidecars: take max or one.
//
// The cancel lag histogram (ordertimeout_db_cancel_lag_seconds) is fed from
// ordertimeout.cancel_lag incrementally: each scrape reads the timeout
// cancels whose event time lies between the previous scrape's watermark and
// now minus a settle delay (a cancel is counted once its transaction has
// surely committed), so it counts every timeout cancel since the collector
// was made, measured by database timestamps.
package metrics
