package worker

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// GatewayCloseArgs closes the payments of a cancelled order at the gateway
// (the cancel inserts it when the order had a payment attempt whose method
// closes: any attempt's, see payments.method).
type GatewayCloseArgs struct {
	OrderID string `json:"order_id"`
}

// Kind is "ordertimeout_gateway_close".
func (GatewayCloseArgs) Kind() string { return "ordertimeout_gateway_close" }

// InsertOpts puts the job in Queue.
func (GatewayCloseArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: Queue} }

// GatewayCloseWorker closes the order's payment at the gateway so that the
// buyer can no longer pay a cancelled order. If the gateway answers that the
// buyer has paid already, the payment is confirmed: on the cancelled order
// that records a late-payment conflict, and the conflict flow (package
// listener, ResolveConflictWorker) takes over.
type GatewayCloseWorker struct {
	river.WorkerDefaults[GatewayCloseArgs]
	*Deps
}

// Work closes one order's payment.
func (w *GatewayCloseWorker) Work(ctx context.Context, job *river.Job[GatewayCloseArgs]) error {
	// A token of the gateway rate limit reserved in the last run, if any.
	ctx = w.gatewayTicket(ctx, job.JobRow)
	a := job.Args
	// While timeout cancels are paused, closes wait too (the incident may be
	// at the gateway).
	if paused, err := cancelsPaused(ctx, w.Pool); err != nil || paused {
		if err != nil {
			return retry(ctx, w.Deps, job, true, err)
		}
		w.outcome(job.Kind, "paused")
		return river.JobSnooze(pausedSnooze)
	}
	// A close's order has begun payments (the cancel closes only those),
	// which a driver reads by their ids: its creation, which only a
	// lookup by the order's id needs, is not read.
	ref, err := gatewayRef(ctx, w.Pool, a.OrderID, time.Time{})
	if errors.Is(err, errUnknownOrder) {
		ref = gateway.Ref{OrderID: a.OrderID} // close it anyway
	} else if err != nil {
		return retry(ctx, w.Deps, job, true, err)
	}
	r, err := w.Gateway.Close(ctx, ref)
	if err != nil {
		return retry(ctx, w.Deps, job, true, err)
	}
	if r.Status == gateway.CloseClosed {
		w.outcome(job.Kind, "closed")
		return nil
	}
	st, err := loadOrder(ctx, w.Pool, a.OrderID)
	if errors.Is(err, errUnknownOrder) {
		// Nowhere to record the money: a person must refund it.
		w.Logger.Error("gateway says the buyer paid, but the database no longer knows the order: refund it by hand",
			"kind", job.Kind, "job_id", job.ID, "order_id", a.OrderID, "payment_id", r.PaymentID, "amount", string(r.Amount))
		w.outcome(job.Kind, "unknown_order")
		return river.JobCancel(err)
	}
	if err != nil {
		return retry(ctx, w.Deps, job, true, err)
	}
	// The payments recorded for the order, again: a callback may have
	// recorded the one the close answers with since they were read.
	if ref, err = gatewayRef(ctx, w.Pool, a.OrderID, st.CreatedAt); err != nil {
		return retry(ctx, w.Deps, job, true, err)
	}
	result, err := confirmPaid(ctx, w.Pool, ref, st, gateway.Order{OrderID: a.OrderID, Status: gateway.StatusPaid,
		PaymentID: r.PaymentID, Amount: r.Amount, Currency: r.Currency, PaidAt: r.PaidAt})
	if err != nil {
		return retry(ctx, w.Deps, job, true, err)
	}
	if result == notOurs {
		// Not this order's money: a payment of an earlier order under its
		// id (purged here, or taken before this order was created). The
		// gateway answers the same to every close; a person looks.
		w.Logger.Error("gateway answers the close with a payment of an earlier order under this order's id (purged, or taken before this order was created): not recorded, check it at the gateway",
			"kind", job.Kind, "job_id", job.ID, "order_id", a.OrderID, "payment_id", r.PaymentID, "paid_at", r.PaidAt)
		w.outcome(job.Kind, "paid_"+result)
		return nil
	}
	w.Logger.Warn("buyer paid a cancelled order before the close", "kind", job.Kind, "job_id", job.ID,
		"order_id", a.OrderID, "payment_id", r.PaymentID, "result", result)
	w.outcome(job.Kind, "paid_"+result)
	return nil
}
