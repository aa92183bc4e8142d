package worker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/reconcile"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// Defaults of continuous reconciliation.
const (
	// DefaultReconcileOverlap is how far before the source's watermark each
	// run asks the gateway again: payments the gateway stamped a little
	// late, or with a clock a little behind the database's, are still read.
	// Reading one twice changes nothing.
	DefaultReconcileOverlap = 2 * time.Minute
	// DefaultReconcileLookback is how far back the first run of a source
	// (no watermark yet) asks.
	DefaultReconcileLookback = 24 * time.Hour
	// reconcilePage is the limit of each gateway call.
	reconcilePage = gateway.MaxPaymentsLimit
	// MaxReconcilePeriod is the longest period one run reconciles, and the
	// longest lookback of a first run: reconcile_payments takes at most 400
	// days (OT172). A watermark older than that (the reconciliation was off
	// for long) is caught up one such period per run, the watermark moving
	// to each period's end, instead of every run failing.
	MaxReconcilePeriod = 365 * 24 * time.Hour
)

// ReconcileArgs reconciles the gateway's payments since the watermark of
// Source ("gateway:<name>"). The sidecar's leader inserts it periodically.
type ReconcileArgs struct {
	Source string `json:"source"`
}

// Kind is "ordertimeout_reconcile".
func (ReconcileArgs) Kind() string { return "ordertimeout_reconcile" }

// InsertOpts puts the job in Queue, unique among live jobs with its
// arguments: however many sidecars and periods, one run per source at a
// time (a snoozed run blocks the next insert too).
func (ReconcileArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       Queue,
		MaxAttempts: 5,
		UniqueOpts: river.UniqueOpts{
			ByArgs: true,
			ByState: []rivertype.JobState{
				rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
				rivertype.JobStateRetryable, rivertype.JobStateScheduled,
			},
		},
	}
}

// ReconcileWorker asks the gateway for the payments it recorded since the
// source's watermark minus Overlap (Lookback on the first run), and passes
// them to ordertimeout.reconcile_payments with report_missing false (the
// list is not a closed period) and the source, which advances the watermark
// to the database's time at the start of the run in the same transaction.
// A payment made without a callback and without begin_payment (a QR code
// paid directly) is so found within one period: confirmed on a live order,
// a conflict with cause reconcile on one that cannot take it.
type ReconcileWorker struct {
	river.WorkerDefaults[ReconcileArgs]
	*Deps
}

// Work runs one reconciliation.
func (w *ReconcileWorker) Work(ctx context.Context, job *river.Job[ReconcileArgs]) error {
	// A token of the gateway rate limit reserved in the last run, if any.
	ctx = w.gatewayTicket(ctx, job.JobRow)
	source := job.Args.Source
	var end time.Time
	var watermark *time.Time
	err := w.Pool.QueryRow(ctx, "SELECT clock_timestamp(), ordertimeout.reconcile_watermark($1)", source).Scan(&end, &watermark)
	if err != nil {
		return retry(ctx, w.Deps, job, false, fmt.Errorf("reconcile %s: read watermark: %w", source, err))
	}
	since := end.Add(-w.lookback())
	if watermark != nil {
		since = watermark.Add(-w.overlap())
	}
	if !since.Before(end) {
		// The watermark is ahead of the database's clock: a clock that
		// stepped forward and back. It stays where it is (it only moves
		// forward), and the transactions until the clock passes it are read
		// as after it, each run its overlap: waiting for the clock to
		// reach it would leave out every payment made meanwhile.
		w.Logger.Warn("reconcile: the watermark is ahead of the database's clock (a clock step?); reading the overlap before now until the clock passes it",
			"kind", job.Kind, "source", source, "watermark", *watermark, "now", end)
		since = end.Add(-w.overlap())
	}
	if end.Sub(since) > MaxReconcilePeriod {
		w.Logger.Warn("reconcile: the watermark is more than a year old; catching up one year per run",
			"kind", job.Kind, "source", source, "since", since, "until", since.Add(MaxReconcilePeriod), "now", end)
		end = since.Add(MaxReconcilePeriod)
	}

	// Read every page; stop at reconcile.MaxRows, ending the period at the
	// last transaction read (the rest comes next time).
	var ts []reconcile.Transaction
	// A transaction read again (pages and runs overlap) is dropped. Another
	// record of a payment with the same status is not the same transaction:
	// a second refund (a partial refund) is reported for a person, since
	// reconcile_payments takes one refund per payment; a second, different
	// payment record is a bad answer.
	seen := map[[2]string]gateway.Payment{}
	early := map[string]bool{}
	var again []gateway.Payment
	cursor := since
read:
	for {
		page, err := w.Gateway.Payments(ctx, cursor, reconcilePage)
		if err != nil {
			return retry(ctx, w.Deps, job, false, fmt.Errorf("reconcile %s: %w", source, err))
		}
		added, ended := 0, false
		for _, p := range page {
			if p.At.Before(since) {
				// A gateway that lists from the whole second of since
				// (Stripe's created[gte]) gives transactions of before
				// the period, which earlier runs read: reconcile_payments
				// would refuse the whole call for them (OT171), every
				// run. Each is counted once as read, so that paging goes on.
				k := fmt.Sprintf("%s\x00%s\x00%d", p.PaymentID, p.Status, p.At.UnixNano())
				if !early[k] {
					early[k] = true
					added++
				}
				continue
			}
			if !p.At.Before(end) {
				// After the period (the run's start, or the end of a year
				// of catching up): the next run reads it, from a little
				// before the watermark this run leaves at end.
				ended = true
				continue
			}
			k := [2]string{p.PaymentID, p.Status}
			if first, ok := seen[k]; ok {
				if gateway.SameRecord(first, p) || slices.ContainsFunc(again, func(a gateway.Payment) bool { return gateway.SameRecord(a, p) }) {
					continue
				}
				if p.Status != gateway.PaymentRefunded {
					return retry(ctx, w.Deps, job, false, fmt.Errorf("reconcile %s: payment %q is listed paid twice, as %s %s at %s and as %s %s at %s: %w",
						source, p.PaymentID, first.Amount, first.Currency, first.At.Format(time.RFC3339Nano),
						p.Amount, p.Currency, p.At.Format(time.RFC3339Nano), gateway.ErrBadAnswer))
				}
				again = append(again, p)
				added++
				continue
			}
			seen[k] = p
			added++
			ts = append(ts, reconcile.Transaction{PaymentID: p.PaymentID, OrderID: p.OrderID, Amount: p.Amount,
				Currency: p.Currency, Status: p.Status, At: p.At})
		}
		// At most MaxRows a call, whichever page brought them: the period
		// then ends at the last one applied, and the next run goes on from
		// there. (Checked after the last page too: a period that ends on the
		// page that passes MaxRows was refused whole, every run.)
		if len(ts) >= reconcile.MaxRows {
			ts = ts[:reconcile.MaxRows]
			last := ts[len(ts)-1].At
			if watermark != nil && !last.After(*watermark) && since.Before(*watermark) {
				// All of them before the watermark, in the overlap: ending
				// there would leave the watermark where it is, and every
				// run would read the same transactions again, never what
				// came after it. This run reads from the watermark.
				w.Logger.Warn("reconcile: more transactions in the overlap than one run applies; reading from the watermark this run (lower --reconcile-overlap)",
					"kind", job.Kind, "source", source, "max_rows", reconcile.MaxRows, "overlap_from", since, "watermark", *watermark)
				since, cursor = *watermark, *watermark
				ts, again, seen, early = nil, nil, map[[2]string]gateway.Payment{}, map[string]bool{}
				continue read
			}
			if last.After(since) && last.Before(end) {
				end = last
			}
			break
		}
		if len(page) < reconcilePage || ended {
			break
		}
		if added == 0 {
			// A full page at the cursor's moment, all read already: more
			// than a page of transactions share that time, and the cursor
			// (a time) cannot get past them. Applying what was read would
			// move the watermark past the rest for good: a bad answer (the
			// contract's "has_more page that brings nothing new").
			return retry(ctx, w.Deps, job, false, fmt.Errorf("reconcile %s: more than %d transactions at %s: the list cannot be paged past them: %w",
				source, reconcilePage, cursor.Format(time.RFC3339Nano), gateway.ErrBadAnswer))
		}
		cursor = page[len(page)-1].At
	}

	tx, err := w.Pool.Begin(ctx)
	if err != nil {
		return retry(ctx, w.Deps, job, false, fmt.Errorf("reconcile %s: %w", source, err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := reconcile.Apply(ctx, tx, ts, since, end, false, source)
	if err == nil {
		err = tx.Commit(ctx)
	}
	if sqlstate.Is(err, sqlstate.InvalidTransaction) {
		// The database refuses a transaction the client let through: the
		// gateway's answer breaks the contract.
		err = fmt.Errorf("%w: %w", err, gateway.ErrBadAnswer)
	}
	if err != nil {
		return retry(ctx, w.Deps, job, false, fmt.Errorf("reconcile %s: %w", source, err))
	}
	found := 0
	for _, r := range rows {
		if w.Reconciled != nil {
			w.Reconciled(r.Outcome)
		}
		switch {
		case reconcile.IsLostCallback(r.Outcome):
			found++
			w.Logger.Warn("reconcile: the gateway has money whose callback never came", "kind", job.Kind, "source", source,
				"order_id", r.OrderID, "payment_id", r.PaymentID, "outcome", r.Outcome, "detail", r.Detail)
		case reconcile.NeedsPerson(r.Outcome):
			w.Logger.Error("reconcile: needs a person", "kind", job.Kind, "source", source,
				"order_id", r.OrderID, "payment_id", r.PaymentID, "outcome", r.Outcome, "detail", r.Detail)
		}
	}
	for _, p := range again {
		// Outcome refund_unknown: refunded at the gateway, not here.
		if w.Reconciled != nil {
			w.Reconciled("refund_unknown")
		}
		w.Logger.Error("reconcile: needs a person", "kind", job.Kind, "source", source,
			"order_id", p.OrderID, "payment_id", p.PaymentID, "outcome", "refund_unknown",
			"detail", fmt.Sprintf("refunded again at the gateway (a partial refund?): %s %s at %s; reconciled here: one refund per payment",
				p.Amount, p.Currency, p.At.Format(time.RFC3339Nano)))
	}
	w.Logger.Debug("reconciled", "source", source, "since", since, "until", end, "transactions", len(ts), "lost_callbacks", found)
	w.outcome(job.Kind, "reconciled")
	return nil
}

func (w *ReconcileWorker) overlap() time.Duration {
	if w.ReconcileOverlap > 0 {
		return w.ReconcileOverlap
	}
	return DefaultReconcileOverlap
}

func (w *ReconcileWorker) lookback() time.Duration {
	if w.ReconcileLookback > 0 {
		return w.ReconcileLookback
	}
	return DefaultReconcileLookback
}
