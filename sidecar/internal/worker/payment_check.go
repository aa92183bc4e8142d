package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// PaymentCheckArgs is a check of a started payment whose paying window has
// passed (ordertimeout.begin_payment inserts it at paying_until).
type PaymentCheckArgs struct {
	OrderID   string `json:"order_id"`
	PaymentID string `json:"payment_id"`
}

// Kind is "ordertimeout_payment_check".
func (PaymentCheckArgs) Kind() string { return "ordertimeout_payment_check" }

// InsertOpts puts the job in Queue.
func (PaymentCheckArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: Queue} }

// PaymentCheckWorker asks the gateway about a PAYING order: paid → confirm
// the payment; failed → fail the payment, so the order returns to PENDING
// and its own timeout applies again; none (unknown to the gateway) → the
// same, but only once the gateway can no longer take the payment (see
// noneIsFinal); pending or no answer → ask again later. It never cancels
// anything.
//
// Paid by another payment than the checked one, which the database refuses
// (another amount or currency: confirm_payment records a conflict): the
// gateway has answered for the order, and the money is the conflict's, for
// the policy or a person. The checked attempt is over, and is failed as on
// "failed", as the precancel check cancels in that case. Else the order
// would stay PAYING with its stock held, checked again and again.
type PaymentCheckWorker struct {
	river.WorkerDefaults[PaymentCheckArgs]
	*Deps
}

// Work checks one payment.
func (w *PaymentCheckWorker) Work(ctx context.Context, job *river.Job[PaymentCheckArgs]) error {
	// A token of the gateway rate limit reserved in the last run, if any.
	ctx = w.gatewayTicket(ctx, job.JobRow)
	a := job.Args
	log := w.Logger.With("kind", job.Kind, "job_id", job.ID, "order_id", a.OrderID, "payment_id", a.PaymentID)

	st, err := loadOrder(ctx, w.Pool, a.OrderID)
	if errors.Is(err, errUnknownOrder) {
		w.outcome(job.Kind, "unknown_order")
		return river.JobCancel(err)
	}
	if err != nil {
		return retry(ctx, w.Deps, job, true, err)
	}
	if st.Status != "PAYING" {
		w.outcome(job.Kind, "moot")
		return nil // paid, failed or cancelled meanwhile
	}
	var payStatus string
	found, err := queryOne(ctx, w.Pool,
		"SELECT status FROM ordertimeout.order_payments($1) WHERE payment_id = $2",
		[]any{a.OrderID, a.PaymentID}, &payStatus)
	if err != nil {
		return retry(ctx, w.Deps, job, true, fmt.Errorf("read payment %q: %w", a.PaymentID, err))
	}
	if !found || payStatus != "started" {
		w.outcome(job.Kind, "moot")
		return nil
	}

	ref, err := gatewayRef(ctx, w.Pool, a.OrderID, st.CreatedAt)
	if err != nil {
		return retry(ctx, w.Deps, job, true, err)
	}
	g, err := w.Gateway.Order(ctx, ref)
	if err != nil {
		return retry(ctx, w.Deps, job, true, err)
	}
	if g.Status == gateway.StatusNone {
		if final, pause := noneIsFinal(job.JobRow, st); !final {
			log.Info("gateway knows no payment yet, asking again later", "snooze", pause)
			w.outcome(job.Kind, "none_yet")
			return river.JobSnooze(pause)
		}
	}
	switch g.Status {
	case gateway.StatusPaid:
		confirmed, err := confirmPaid(ctx, w.Pool, ref, st, g)
		if err != nil {
			return retry(ctx, w.Deps, job, true, err)
		}
		log.Info("gateway says paid", "gateway_payment_id", g.PaymentID, "result", confirmed)
		if confirmed == "paid" || (confirmed == "conflict" && g.PaymentID == a.PaymentID) {
			// Paid; or this payment itself was refused, and
			// confirm_payment ended the attempt with the conflict.
			w.outcome(job.Kind, confirmed)
			return nil
		}
		// Another payment refused (a conflict), or one of an earlier order
		// under this order's id (not ours): this attempt is not paid. A
		// repeat answers "conflict" too, so a retry of this job after
		// the confirmation committed still fails the attempt; a payment
		// of this attempt that comes later is a conflict or pays the
		// order, as after any failure.
		result, err := w.failPayment(ctx, a)
		if err != nil {
			return retry(ctx, w.Deps, job, true, err)
		}
		if confirmed == notOurs {
			log.Warn("gateway says paid by a payment of an earlier order under this order's id (purged, or taken before this order was created): not this order's money; attempt failed",
				"gateway_payment_id", g.PaymentID, "paid_at", g.PaidAt, "result", result)
			w.outcome(job.Kind, "not_ours_failed_"+result)
			return nil
		}
		log.Info("gateway says paid by another payment, refused: attempt failed",
			"gateway_payment_id", g.PaymentID, "result", result)
		w.outcome(job.Kind, "conflict_failed_"+result)
	case gateway.StatusFailed, gateway.StatusNone:
		result, err := w.failPayment(ctx, a)
		if err != nil {
			return retry(ctx, w.Deps, job, true, err)
		}
		log.Info("gateway says not paid", "gateway_status", g.Status, "result", result)
		w.outcome(job.Kind, "failed_"+result)
	default: // pending: the buyer may still be paying
		pause := snoozeFor(job.JobRow)
		log.Info("gateway says pending, asking again later", "snooze", pause)
		w.outcome(job.Kind, "pending")
		return river.JobSnooze(pause)
	}
	return nil
}

// failPayment marks the checked payment failed (fail_payment): "pending"
// (the order is PENDING again), "paying" (another attempt is in flight) or
// "ignored".
func (w *PaymentCheckWorker) failPayment(ctx context.Context, a PaymentCheckArgs) (string, error) {
	var result string
	err := w.Pool.QueryRow(ctx, "SELECT ordertimeout.fail_payment($1, $2)", a.OrderID, a.PaymentID).Scan(&result)
	if err != nil {
		return "", fmt.Errorf("fail payment %q of order %q: %w", a.PaymentID, a.OrderID, err)
	}
	return result, nil
}
