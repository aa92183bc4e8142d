package worker

import (
	"context"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// ResolveConflictArgs resolves one late or double payment. The sidecar
// inserts it (package listener) for every NOTIFY on ordertimeout_conflict and
// every open conflict found after (re)connecting; InsertOpts makes it unique
// by its arguments, so there is one job per conflict.
type ResolveConflictArgs struct {
	ConflictID int64 `json:"conflict_id"`
}

// Kind is "ordertimeout_resolve_conflict".
func (ResolveConflictArgs) Kind() string { return "ordertimeout_resolve_conflict" }

// InsertOpts puts the job in Queue, unique by its arguments: a second insert
// for the same conflict while a job for it is pending, running or kept as
// completed is skipped.
func (ResolveConflictArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// ResolveConflictWorker resolves a conflict by the policy in
// settings.late_payment:
//
//   - reinstate: resolve_conflict(id, 'reinstate') takes the stock back and
//     marks the order paid; when that is impossible (SQLSTATE OT132: stock,
//     coupon or points gone, or a double payment) the payment is refunded;
//   - refund: the payment is refunded at the gateway (idempotency key: the
//     payment id), then resolve_conflict(id, 'refund');
//   - manual: nothing but a log line; the conflict stays open for a person
//     (see the open conflicts metric).
//
// resolve_conflict is exactly-once in the database and the gateway refunds a
// key at most once, so a job that runs again after a crash does no harm.
type ResolveConflictWorker struct {
	river.WorkerDefaults[ResolveConflictArgs]
	*Deps
}

// conflict is one row of ordertimeout.open_conflicts.
type conflict struct {
	OrderID   string
	PaymentID string
	Kind      string
	Amount    *string
}

// Work resolves one conflict.
func (w *ResolveConflictWorker) Work(ctx context.Context, job *river.Job[ResolveConflictArgs]) error {
	id := job.Args.ConflictID
	log := w.Logger.With("kind", job.Kind, "job_id", job.ID, "conflict_id", id)

	// Only open conflicts are listed: one not found is resolved already (or
	// unknown), and there is nothing to do.
	var c conflict
	found, err := queryOne(ctx, w.Pool,
		`SELECT order_id, payment_id, kind, amount::text
		   FROM ordertimeout.open_conflicts(100000)
		  WHERE conflict_id = $1`,
		[]any{id}, &c.OrderID, &c.PaymentID, &c.Kind, &c.Amount)
	if err != nil {
		return retry(ctx, w.Deps, job, true, fmt.Errorf("read conflict %d: %w", id, err))
	}
	if !found {
		w.outcome(job.Kind, "already_resolved")
		return nil
	}
	log = log.With("order_id", c.OrderID, "payment_id", c.PaymentID, "conflict", c.Kind)

	var policy string
	if err := w.Pool.QueryRow(ctx, "SELECT late_payment FROM ordertimeout.settings").Scan(&policy); err != nil {
		return retry(ctx, w.Deps, job, true, fmt.Errorf("read late payment policy: %w", err))
	}

	switch policy {
	case "manual":
		log.Warn("conflict left open for manual resolution (settings.late_payment = manual)")
		w.outcome(job.Kind, "manual_pending")
		return nil
	case "reinstate":
		outcome, err := w.resolve(ctx, id, "reinstate")
		switch {
		case hasCode(err, "OT132"):
			log.Info("cannot reinstate, refunding instead", "reason", err)
		case hasCode(err, "OT133"):
			log.Info("conflict already resolved otherwise", "reason", err)
			w.outcome(job.Kind, "already_resolved")
			return nil
		case err != nil:
			return retry(ctx, w.Deps, job, true, err)
		default:
			log.Info("late payment reinstated the order", "outcome", outcome)
			w.outcome(job.Kind, outcome)
			return nil
		}
	case "refund":
	default:
		return retry(ctx, w.Deps, job, true, fmt.Errorf("unknown late payment policy %q", policy))
	}

	// Refund at the gateway first, then record it: a crash in between repeats
	// the refund with the same key, which moves no money twice.
	var amount gateway.Amount
	if c.Amount != nil {
		amount = gateway.Amount(*c.Amount)
	}
	r, err := w.Gateway.Refund(ctx, gateway.RefundRequest{
		OrderID:        c.OrderID,
		PaymentID:      c.PaymentID,
		Amount:         amount,
		IdempotencyKey: c.PaymentID,
	})
	if err != nil {
		return retry(ctx, w.Deps, job, true, err)
	}
	outcome, err := w.resolve(ctx, id, "refund")
	if hasCode(err, "OT133") {
		// Someone resolved it otherwise between our read and the refund.
		log.Error("refunded at the gateway, but the conflict was resolved otherwise meanwhile: check it by hand",
			"refund_id", r.RefundID, "reason", err)
		w.outcome(job.Kind, "refunded_after_resolution")
		return nil
	}
	if err != nil {
		return retry(ctx, w.Deps, job, true, err)
	}
	log.Info("late payment refunded", "refund_id", r.RefundID, "outcome", outcome)
	w.outcome(job.Kind, outcome)
	return nil
}

func (w *ResolveConflictWorker) resolve(ctx context.Context, id int64, resolution string) (string, error) {
	var outcome string
	err := w.Pool.QueryRow(ctx, "SELECT ordertimeout.resolve_conflict($1, $2)", id, resolution).Scan(&outcome)
	if err != nil {
		return "", fmt.Errorf("resolve conflict %d as %s: %w", id, resolution, err)
	}
	return outcome, nil
}
