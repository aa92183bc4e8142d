// Package rescue hands back the sidecar's River jobs whose worker died, by
// the database's clock.
//
// River's own rescuer decides that a job is stuck when it has been running
// since before the client's wall clock minus RescueStuckJobsAfter. On a
// sidecar whose clock is ten minutes fast that is every running job: a
// gateway check in flight would be handed to a second worker. The sidecar
// therefore sets River's rescuer an hour further back (a backstop) and runs a
// Rescuer, which calls ordertimeout.rescue_stuck_jobs: jobs of queue
// ordertimeout running for longer than After by the database's clock are
// made available again (or discarded on their last attempt, or cancelled if
// a cancel was asked), as River's rescuer would. Any number of sidecars may
// run one; SKIP LOCKED keeps them from rescuing a job twice.
package rescue

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Rescuer calls ordertimeout.rescue_stuck_jobs every Interval.
type Rescuer struct {
	Pool *pgxpool.Pool
	// After is how long a job may run before it is taken for stuck.
	After time.Duration
	// Interval is the pause between rescues. If zero, After/4 within 1 s to 30 s.
	Interval time.Duration
	Logger   *slog.Logger

	rescued atomic.Int64
}

// Result is what one rescue did.
type Result struct {
	Retried, Discarded, Cancelled int
}

// Total is the number of jobs the rescue handed back.
func (r Result) Total() int { return r.Retried + r.Discarded + r.Cancelled }

// Rescued returns the number of jobs this Rescuer has handed back.
func (r *Rescuer) Rescued() int64 { return r.rescued.Load() }

func (r *Rescuer) interval() time.Duration {
	if r.Interval > 0 {
		return r.Interval
	}
	return min(max(r.After/4, time.Second), 30*time.Second)
}

// RescueOnce runs one rescue of up to 1,000 jobs.
func (r *Rescuer) RescueOnce(ctx context.Context) (Result, error) {
	var res Result
	err := r.Pool.QueryRow(ctx,
		"SELECT retried, discarded, cancelled FROM ordertimeout.rescue_stuck_jobs($1 * interval '1 microsecond')",
		r.After.Microseconds(),
	).Scan(&res.Retried, &res.Discarded, &res.Cancelled)
	if err != nil {
		return Result{}, fmt.Errorf("rescue stuck jobs: %w", err)
	}
	r.rescued.Add(int64(res.Total()))
	return res, nil
}

// Run rescues every interval until ctx is done. Failures are logged and
// tried again at the next interval.
func (r *Rescuer) Run(ctx context.Context) error {
	logger := r.Logger
	if logger == nil {
		logger = slog.Default()
	}
	t := time.NewTicker(r.interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		res, err := r.RescueOnce(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil:
			logger.Error("rescue stuck jobs", "error", err)
		case res.Total() > 0:
			logger.Warn("rescued jobs whose worker stopped answering", "running_for_over", r.After,
				"retried", res.Retried, "discarded", res.Discarded, "cancelled", res.Cancelled)
		}
	}
}
