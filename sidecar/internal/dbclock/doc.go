// Package dbclock gives the sidecar the database's time.
//
// The database's clock rules: every deadline, every cancel and every event is
// timed by PostgreSQL. The sidecar's own wall clock may be off by minutes (a
// host whose NTP is broken, a container on a skewed node), and nothing may
// depend on it. The sweep never reads it (plan_next_sweep returns the wake-up
// moment and clock_timestamp() together; their difference is slept with the
// monotonic clock). What remains is the work River schedules from the
// client's clock: a snoozed or retried job's next run, the promotion of
// scheduled jobs, and what the workers stamp on webhooks.
//
// A Clock measures how far the database's clock is from this host's and
// answers Now with the host's time moved by that offset, keeping Go's
// monotonic reading so durations stay true. It implements River's
// rivertype.TimeGenerator, so River's snoozes, retries and scheduler follow
// the database. NowOrNil answers nil, so that River's queries keep using the
// database's now(). River's stuck-job rescuer reads the host's clock
// directly; the sidecar rescues its own jobs by the database's clock instead
// (ordertimeout.rescue_stuck_jobs, package rescue).
package dbclock
