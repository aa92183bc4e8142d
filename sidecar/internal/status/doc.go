// Package status reads the health of an ordertimeout database for `ordertimeout
// status`: orders by state, the due backlog, the oldest overdue order, the
// cancel lag percentiles over a recent window and the open conflicts; and,
// for the sidecar, logs a warning while timeout cancels are paused
// (WarnWhilePaused).
package status
