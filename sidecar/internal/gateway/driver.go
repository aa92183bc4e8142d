package gateway

import (
	"context"
	"time"
)

// Gateway is a payment gateway as the sidecar's workers use it. A driver
// implements it for one kind of gateway: *Client for the JSON contract of
// this package (driver "http"), package stripe for Stripe. Every method is
// safe for concurrent use, and its errors wrap ErrUnavailable (ask again
// later), ErrBadAnswer (the answer says nothing about the money) or
// ErrBadRequest (nothing sent; sending it again will not help), as the
// package documentation describes.
type Gateway interface {
	// Order asks what the gateway knows about the order ref names: paid
	// (with the payment, its amount and currency), pending, failed, or
	// none: the gateway knows no payment for it, which is unknown, never
	// unpaid (see the package documentation).
	Order(ctx context.Context, ref Ref) (Order, error)

	// Close makes the order's payment impossible to complete. A close of
	// an order already closed, or never seen, is CloseClosed; a close the
	// gateway refuses because the buyer has paid is ClosePaid with the
	// payment.
	Close(ctx context.Context, ref Ref) (CloseResult, error)

	// Refund returns a payment, at most once per IdempotencyKey.
	Refund(ctx context.Context, req RefundRequest) (Refund, error)

	// Payments lists the payments the gateway recorded since a moment, at
	// most limit of them, oldest first, for continuous reconciliation.
	Payments(ctx context.Context, since time.Time, limit int) ([]Payment, error)
}

// ByPayment is implemented by a driver whose Order, asked with a Ref of one
// payment id, answers about that payment alone (Stripe's: it reads
// PaymentIntents and Checkout Sessions by id), so that its failed and none
// are that payment's. The JSON contract answers for the order.
type ByPayment interface {
	AnswersByPayment() bool
}

// AnswersByPayment reports whether g answers about the payment a Ref of one
// payment id names (ByPayment).
func AnswersByPayment(g Gateway) bool {
	b, ok := g.(ByPayment)
	return ok && b.AnswersByPayment()
}

// Ref names an order at the gateway. A gateway that keys payments by the
// merchant's order id (the JSON contract, WeChat Pay, Alipay) needs only
// OrderID; one that keys them by its own payment objects (Stripe's
// PaymentIntents and Checkout Sessions) uses PaymentIDs: the payment ids
// the shop gave begin_payment for the order, oldest first.
type Ref struct {
	OrderID    string
	PaymentIDs []string
	// CreatedAt, when set, is when the order was created by the database's
	// clock. A driver that looks the order's payments up by its id (Stripe's
	// search by metadata) leaves out a payment begun (or, when it cannot
	// tell, taken) more than ClockSkew before it: an earlier order's under
	// the same id.
	CreatedAt time.Time
	// Held asks what is still held of a paid payment, for a reinstatement
	// or a refund of money that came late: a driver that knows of money
	// taken back since besides refunds (Stripe's disputes) counts it, and
	// while that is undecided (a dispute open) answers ErrDisputed. A
	// payment or precancel check, or a close, does not set it: a chargeback
	// of an order paid on time is not the timeout's matter.
	Held bool
}

// ClockSkew is how far a gateway's clock and the database's may differ
// when a gateway says when it took a payment (Order.PaidAt, Payment.At):
// reconcile_payments allows the same before it calls a payment an earlier
// order's (outcome other_order).
const ClockSkew = 5 * time.Minute

// NoTimeBefore: a time a gateway gives before it (an adapter's zero time:
// Go's year 1, Unix's 1970) is no time it took a payment. The sidecar takes
// such a paid_at as unknown, and confirm_payment refuses one (OT179).
var NoTimeBefore = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Known reports whether t is a time a gateway gave: not before NoTimeBefore.
func Known(t time.Time) bool { return !t.Before(NoTimeBefore) }

// Driver names, for --gateway.
const (
	DriverHTTP   = "http"
	DriverStripe = "stripe"
)

var _ Gateway = (*Client)(nil)
