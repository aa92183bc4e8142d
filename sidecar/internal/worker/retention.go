package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// RetentionBatch is how many orders one close_cancelled or purge_orders call
// of RetentionWorker handles (one transaction).
const RetentionBatch = 10_000

// RetentionArgs closes and purges old orders: the sidecar's River client
// inserts one every RetentionWorker.Every, on its elected leader only.
type RetentionArgs struct{}

// Kind is "ordertimeout_retention".
func (RetentionArgs) Kind() string { return "ordertimeout_retention" }

// InsertOpts puts the job in Queue.
func (RetentionArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: Queue} }

// RetentionWorker moves CANCELLED orders older than CloseAfter to CLOSED
// (ordertimeout.close_cancelled) and deletes CLOSED orders older than
// PurgeAfter, and PAID ones older than PurgePaidAfter
// (ordertimeout.purge_orders), in batches of RetentionBatch until a batch
// comes back short or the job's context ends; the next job goes on. A zero
// duration turns that step off. Jobs that overlap share the work: both
// functions lock with SKIP LOCKED.
type RetentionWorker struct {
	river.WorkerDefaults[RetentionArgs]
	*Deps
	CloseAfter     time.Duration
	PurgeAfter     time.Duration
	PurgePaidAfter time.Duration
}

// PeriodicJob returns the periodic job inserting a RetentionArgs every
// every, the first when the leader starts.
func (w *RetentionWorker) PeriodicJob(every time.Duration) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(every),
		func() (river.JobArgs, *river.InsertOpts) { return RetentionArgs{}, nil },
		&river.PeriodicJobOpts{ID: RetentionArgs{}.Kind(), RunOnStart: true})
}

// Work closes, then purges, old orders.
func (w *RetentionWorker) Work(ctx context.Context, job *river.Job[RetentionArgs]) error {
	closed, purged := 0, 0
	if w.CloseAfter > 0 {
		n, err := w.batches(ctx, "SELECT ordertimeout.close_cancelled($1 * interval '1 microsecond', $2)",
			w.CloseAfter.Microseconds(), RetentionBatch)
		closed = n
		if err != nil {
			return retry(ctx, w.Deps, job, false, fmt.Errorf("close cancelled orders: %w", err))
		}
	}
	if w.PurgeAfter > 0 {
		var paid any // NULL keeps paid orders
		if w.PurgePaidAfter > 0 {
			paid = w.PurgePaidAfter.Microseconds()
		}
		n, err := w.batches(ctx, "SELECT ordertimeout.purge_orders($1 * interval '1 microsecond', $2, $3 * interval '1 microsecond')",
			w.PurgeAfter.Microseconds(), RetentionBatch, paid)
		purged = n
		if err != nil {
			return retry(ctx, w.Deps, job, false, fmt.Errorf("purge orders: %w", err))
		}
	}
	if closed+purged > 0 {
		w.Logger.Info("retention", "kind", job.Kind, "job_id", job.ID, "closed", closed, "purged", purged)
	}
	w.outcome(job.Kind, "done")
	return nil
}

// retentionBudget is how long one job goes on with full batches: well within
// the job timeout, so that a large backlog is worked by a series of jobs
// that each end well, not by one that is cut off.
const retentionBudget = 20 * time.Second

// batches calls sql (returning a count, $2 the batch size) until it returns
// less than a full batch or retentionBudget has passed, and returns the sum.
func (w *RetentionWorker) batches(ctx context.Context, sql string, args ...any) (int, error) {
	total := 0
	began := time.Now()
	for time.Since(began) < retentionBudget {
		var n int
		if err := w.Pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			return total, err
		}
		total += n
		if n < RetentionBatch {
			break
		}
	}
	return total, nil
}
