package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// PrecancelCheckArgs is a check of a due order with the gateway before its
// timeout cancels it (ordertimeout.sweep_due inserts it when the order's
// precheck policy asks for one). Version is the order's deadline version when
// the check was made: the check may act only on that version.
type PrecancelCheckArgs struct {
	OrderID string `json:"order_id"`
	Version int    `json:"version"`
}

// Kind is "ordertimeout_precancel_check".
func (PrecancelCheckArgs) Kind() string { return "ordertimeout_precancel_check" }

// InsertOpts puts the job in Queue.
func (PrecancelCheckArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: Queue} }

// PrecancelCheckWorker asks the gateway about a due order by its order id,
// which also finds a payment made without begin_payment: paid → confirm the
// payment (the order ends PAID); failed → cancel_checked (the cancel is
// fenced by the version); none (the gateway knows no payment) → the same,
// but only once the gateway can no longer take one (see noneIsFinal);
// pending or no answer → ask again later. A
// payment the database refuses (wrong amount: confirm_payment records a
// conflict, which is refunded) leaves the order unpaid, so it is cancelled
// too. While the check runs the order stays PENDING and the sweep leaves it
// alone, so this job must never be discarded: it snoozes rather than fail for
// good (and sweep_due re-creates a check River lost).
type PrecancelCheckWorker struct {
	river.WorkerDefaults[PrecancelCheckArgs]
	*Deps
}

// Work checks one order.
func (w *PrecancelCheckWorker) Work(ctx context.Context, job *river.Job[PrecancelCheckArgs]) error {
	// A token of the gateway rate limit reserved in the last run, if any.
	ctx = w.gatewayTicket(ctx, job.JobRow)
	a := job.Args
	log := w.Logger.With("kind", job.Kind, "job_id", job.ID, "order_id", a.OrderID, "version", a.Version)

	st, err := loadOrder(ctx, w.Pool, a.OrderID)
	if errors.Is(err, errUnknownOrder) {
		w.outcome(job.Kind, "unknown_order")
		return river.JobCancel(err)
	}
	if err != nil {
		return retry(ctx, w.Deps, job, true, err)
	}
	if st.Status != "PENDING" || st.Version != a.Version {
		w.outcome(job.Kind, "moot")
		return nil // paid, paying, cancelled or given more time meanwhile
	}

	ref, err := gatewayRef(ctx, w.Pool, a.OrderID, st.CreatedAt)
	if err != nil {
		return retry(ctx, w.Deps, job, true, err)
	}
	g, err := w.Gateway.Order(ctx, ref)
	if err != nil {
		return retry(ctx, w.Deps, job, true, err)
	}
	switch g.Status {
	case gateway.StatusPaid:
		result, err := confirmPaid(ctx, w.Pool, ref, st, g)
		if err != nil {
			return retry(ctx, w.Deps, job, true, err)
		}
		log.Info("due order is paid at the gateway", "payment_id", g.PaymentID, "result", result)
		w.outcome(job.Kind, result)
		if result == "paid" {
			return nil
		}
		// The database refused the money for this order (a wrong amount):
		// it is a conflict now, refunded by the conflict flow, and the order
		// is as unpaid as before. Or the payment is of an earlier order under
		// this order's id, purged here or taken before this order was
		// created (not ours): nothing recorded, and the order is as unpaid
		// as before. Its timeout applies.
		if result == notOurs {
			log.Warn("the gateway's payment is of an earlier order under this order's id (purged, or taken before this order was created): not this order's money",
				"payment_id", g.PaymentID, "paid_at", g.PaidAt)
		}
		return w.cancel(ctx, job, "payment refused: "+g.PaymentID)
	case gateway.StatusFailed:
		return w.cancel(ctx, job, g.Status)
	case gateway.StatusNone:
		// Unknown, not unpaid: the buyer may not have scanned the QR code
		// yet (Alipay's TRADE_NOT_EXIST).
		if final, pause := noneIsFinal(job.JobRow, st); !final {
			log.Info("gateway knows no payment yet, asking again later", "snooze", pause)
			w.outcome(job.Kind, "none_yet")
			return river.JobSnooze(pause)
		}
		return w.cancel(ctx, job, g.Status)
	default: // pending: the buyer is paying right now
		pause := snoozeFor(job.JobRow)
		log.Info("gateway says pending, asking again later", "snooze", pause)
		w.outcome(job.Kind, "pending")
		return river.JobSnooze(pause)
	}
}

// cancel cancels the order as a timeout, fenced by the check's version.
func (w *PrecancelCheckWorker) cancel(ctx context.Context, job *river.Job[PrecancelCheckArgs], why string) error {
	a := job.Args
	var cancelled bool
	err := w.Pool.QueryRow(ctx, "SELECT ordertimeout.cancel_checked($1, $2)", a.OrderID, a.Version).Scan(&cancelled)
	if err != nil {
		return retry(ctx, w.Deps, job, true, fmt.Errorf("cancel checked order %q: %w", a.OrderID, err))
	}
	if !cancelled {
		w.outcome(job.Kind, "moot")
		return nil
	}
	w.Logger.Info("gateway says not paid: cancelled", "kind", job.Kind, "job_id", job.ID,
		"order_id", a.OrderID, "version", a.Version, "gateway", why)
	w.outcome(job.Kind, "cancelled")
	return nil
}
