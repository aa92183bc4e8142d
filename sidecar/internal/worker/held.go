package worker

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// ErrNotHeld marks a payment the gateway says it no longer holds: it
// answered that the payment failed (refunded in full there, as the contract
// words it). Such a payment is never reinstated: the order would be PAID for
// money the shop does not have. Nor is it refunded by the sidecar (a second
// refund of money given back already): the resolve worker resolves the
// conflict manual, with the gateway's answer as its note.
var ErrNotHeld = errors.New("the gateway no longer holds the late payment's money")

// ErrPartlyHeld marks a payment the gateway holds less of than recorded
// here, in the same currency: part of it was given back there (a person's
// refund in part). Neither reinstated nor refunded (a refund of the amount
// recorded here would give back more than is held, or be refused); the
// resolve worker hands the conflict to a person, open: the rest is still
// held.
var ErrPartlyHeld = errors.New("the gateway holds only part of the late payment's money")

// ErrCannotTell marks an answer that neither confirms nor denies that the
// gateway holds the late payment: pending, another payment of the order
// named (the JSON contract answers for the order, and two late payments
// make two conflicts), or an answer that cannot be used (a refused request:
// an expired key; a malformed answer; a 404 for a record expired there).
// Nothing is reinstated on it: the resolve worker asks again, HeldAsks
// times at most, then hands the conflict to a person (hand_over_conflict:
// open, left alone by the sidecar). A refund is not claimed on it either
// when the answer is about this very payment (a driver that reads payments
// by id, or the payment named).
var ErrCannotTell = errors.New("the gateway does not tell whether it still holds the late payment")

// ErrOtherCurrency marks a late payment the gateway holds in another currency
// than the one recorded here (the order's, when the confirmation named none),
// of the amount recorded here: not the order's money, so never reinstated;
// it is refunded whole, as a payment resolve_conflict refuses to reinstate
// (OT132) is.
var ErrOtherCurrency = errors.New("the gateway holds the late payment in another currency")

// ErrOtherAmount marks a payment whose record here contradicts the gateway:
// it holds more of it than recorded (a callback that said 9.99 of a payment
// of 10.00), or holds it in another currency and another amount, or an
// amount it does not give (1000 recorded as JPY, 10.00 USD there). Neither
// reinstated nor refunded: a refund names the amount recorded here, which
// would give back part of the payment and record it refunded, or be refused
// for ever. A person settles it at the gateway.
var ErrOtherAmount = errors.New("the gateway's record of the payment contradicts the amount recorded here")

// HeldAsks is how many times the resolve worker asks a gateway that cannot
// tell (ErrCannotTell) before it hands the conflict to a person: with the
// snoozes doubling from a second, about eight minutes. The answers are
// counted on the job (its metadata), apart from its snoozes for other
// reasons.
const HeldAsks = 10

// CheckHeld asks gw, before conflict id is reinstated, whether it still
// holds the late payment's money: nil when it does, or when it answers
// "none" for the order (unknown, never "not paid"); an error wrapping
// ErrNotHeld, ErrPartlyHeld, ErrOtherAmount, ErrCannotTell or
// ErrOtherCurrency otherwise, or a gateway
// error (the gateway unavailable or throttled) or a database error, after
// which nothing may be reinstated yet. The gateway is not asked about a
// conflict that cannot be reinstated anyway (resolve_conflict refuses it,
// OT132): not an open late payment, or its order no longer cancelled
// (another payment of it was reinstated, say).
//
// It narrows, without closing, the window in which a person's refund at the
// gateway (a buyer who asked support for their money back after the cancel)
// could meet a reinstatement: the gateway is not part of the database's
// transaction.
func CheckHeld(ctx context.Context, gw gateway.Gateway, db *pgxpool.Pool, id int64) error {
	return checkConflict(ctx, gw, db, id, false)
}

// CheckRefundable asks gw, before a person's refund of conflict id is
// claimed, whether it still holds the payment (of any kind of conflict): an
// error wrapping ErrNotHeld when it says it does not (a refund would give it
// back twice, and stay refunding for ever once the gateway refuses it), or
// ErrOtherAmount when a refund of the amount recorded here would not be that
// payment, or gateway.ErrDisputed while a dispute may still take it back (a
// refund claimed then could not be made, or not of that amount); a gateway
// error when it could not be asked (unavailable, throttled: nothing may be
// claimed yet, since the answer may be the one that would refuse), or a
// database error; an error wrapping ErrCannotTell and gateway.ErrBadAnswer
// when its answer could not be used or the request was refused (an expired
// key: once it works, the answer may be the one that would refuse); nil
// when it holds the payment (in another currency too, of the amount
// recorded here: refunded whole, as the worker does), or answers without
// telling (a person decided, and a gateway refuses a refund of money it no
// longer holds).
func CheckRefundable(ctx context.Context, gw gateway.Gateway, db *pgxpool.Pool, id int64) error {
	err := checkConflict(ctx, gw, db, id, true)
	switch {
	case errors.Is(err, ErrOtherCurrency):
		return nil // refunded whole, as the worker does
	case errors.Is(err, ErrCannotTell) && !errors.Is(err, gateway.ErrBadAnswer):
		return nil
	}
	return err
}

func checkConflict(ctx context.Context, gw gateway.Gateway, db *pgxpool.Pool, id int64, forRefund bool) error {
	var c conflict
	found, err := readConflict(ctx, db, id, &c)
	if err != nil {
		return fmt.Errorf("read conflict %d: %w", id, err)
	}
	if !found || c.State != "open" || (c.Kind != "late_payment" && !forRefund) {
		return nil
	}
	o, err := readOrderOf(ctx, db, c)
	if err != nil || (!o.cancelled && !forRefund) {
		return err
	}
	_, err = askHeld(ctx, gw, c, o)
	return err
}

// orderOf is what the gateway check needs of a late payment's order:
// whether it is still cancelled (only then can the payment be reinstated),
// and how many payments it has (the JSON contract's failed and none are
// this payment's only when it has no other).
type orderOf struct {
	cancelled bool
	payments  int
}

func readOrderOf(ctx context.Context, db *pgxpool.Pool, c conflict) (orderOf, error) {
	var o orderOf
	if err := db.QueryRow(ctx,
		`SELECT o.status IN ('CANCELLED', 'CLOSED'), (SELECT count(*) FROM ordertimeout.order_payments($1))
		   FROM ordertimeout.order_info($1) AS o`,
		c.OrderID).Scan(&o.cancelled, &o.payments); err != nil {
		return o, fmt.Errorf("read order %q: %w", c.OrderID, err)
	}
	return o, nil
}

// askHeld asks gw about late payment c of order o; it returns the gateway's
// answer, which a late payment recorded without its amount learns the
// amount from, with the error CheckHeld describes.
func askHeld(ctx context.Context, gw gateway.Gateway, c conflict, o orderOf) (gateway.Order, error) {
	// This payment alone: a driver that reads payments by their ids
	// (Stripe) answers for it, not for another payment of the order (a
	// second late payment, which a review had answer paid for a first one
	// refunded in full). The JSON contract answers for the order: its
	// failed or none is this payment's only when the order has no other.
	ref := gateway.Ref{OrderID: c.OrderID, PaymentIDs: []string{c.PaymentID}, Held: true}
	g, err := gw.Order(ctx, ref)
	if errors.Is(err, gateway.ErrBadAnswer) || errors.Is(err, gateway.ErrBadRequest) {
		// Counted as a bad answer by the worker (a refused request, too:
		// it was sent, and refused).
		if !errors.Is(err, gateway.ErrBadAnswer) {
			err = fmt.Errorf("%w: %w", err, gateway.ErrBadAnswer)
		}
		return gateway.Order{}, fmt.Errorf("%w: asked about payment %q: %w", ErrCannotTell, c.PaymentID, err)
	}
	if errors.Is(err, gateway.ErrChargedBack) {
		// Part of it, or all, went back to the buyer through their bank:
		// a person settles it, as a refund in part at the gateway.
		return gateway.Order{}, fmt.Errorf("%w: %w", ErrPartlyHeld, err)
	}
	if err != nil {
		return gateway.Order{}, fmt.Errorf("ask the gateway whether it holds payment %q: %w", c.PaymentID, err)
	}
	byPayment := gateway.AnswersByPayment(gw)
	about := byPayment || g.PaymentID == c.PaymentID || (g.PaymentID == "" && o.payments <= 1)
	switch {
	case g.Status == gateway.StatusFailed && about:
		return g, fmt.Errorf("%w: the gateway answers that payment %q of order %q failed (refunded in full there?), yet it was confirmed late",
			ErrNotHeld, c.PaymentID, c.OrderID)
	case g.Status == gateway.StatusFailed:
		return g, fmt.Errorf("%w: the gateway answers that order %q's payment failed, and the order has %d payments: which one, it does not say: %w",
			ErrCannotTell, c.OrderID, o.payments, gateway.ErrUnavailable)
	case g.Status == gateway.StatusPending:
		return g, fmt.Errorf("%w: the gateway answers that order %q's payment is pending, yet payment %q was confirmed late: %w",
			ErrCannotTell, c.OrderID, c.PaymentID, gateway.ErrUnavailable)
	case g.Status == gateway.StatusPaid && g.PaymentID != c.PaymentID:
		return g, fmt.Errorf("%w: the gateway answers for order %q with payment %q, not %q: %w",
			ErrCannotTell, c.OrderID, g.PaymentID, c.PaymentID, gateway.ErrUnavailable)
	case g.Status != gateway.StatusPaid && byPayment:
		// none for the very payment from a driver that reads it by id
		// (Stripe never deletes one): another account's key, test mode
		// against live ids. No confirmation.
		return g, fmt.Errorf("%w: the gateway knows no payment %q (another account or mode?): %w",
			ErrCannotTell, c.PaymentID, gateway.ErrBadAnswer)
	case g.Status != gateway.StatusPaid:
		// none for the order: unknown, never "not paid" (a gateway that no
		// longer keeps the record, or a payment it was never asked about).
		return g, nil
	case c.Currency != nil && g.Currency != "" && string(g.Currency) != *c.Currency &&
		c.Amount != nil && !sameAmount(string(g.Amount), *c.Amount):
		return g, fmt.Errorf("%w: payment %q is %s at the gateway, %s %s here: a refund of %s would not be this payment",
			ErrOtherAmount, c.PaymentID, shownMoney(g), *c.Amount, *c.Currency, *c.Amount)
	case c.Currency != nil && g.Currency != "" && string(g.Currency) != *c.Currency:
		return g, fmt.Errorf("%w: payment %q is in %s at the gateway, in %s here",
			ErrOtherCurrency, c.PaymentID, g.Currency, *c.Currency)
	case c.Amount != nil && g.Amount != "" && lessAmount(string(g.Amount), *c.Amount) &&
		(c.Currency == nil || string(g.Currency) == *c.Currency):
		return g, fmt.Errorf("%w: the gateway holds %s of payment %q, confirmed here as %s (refunded in part there?)",
			ErrPartlyHeld, g.Amount, c.PaymentID, *c.Amount)
	case c.Amount != nil && g.Amount != "" && lessAmount(string(g.Amount), *c.Amount):
		// Less, in a currency the gateway does not name: perhaps the
		// same money in another currency (10.00 USD recorded as 1000
		// JPY), not a refund in part.
		return g, fmt.Errorf("%w: the gateway holds %s of payment %q in a currency it does not name, %s %s here: a refund of %s would not be this payment",
			ErrOtherAmount, g.Amount, c.PaymentID, *c.Amount, *c.Currency, *c.Amount)
	case c.Amount != nil && g.Amount != "" && !sameAmount(string(g.Amount), *c.Amount):
		return g, fmt.Errorf("%w: the gateway holds %s of payment %q, more than the %s confirmed here: a refund of %s would give back part of it",
			ErrOtherAmount, g.Amount, c.PaymentID, *c.Amount, *c.Amount)
	}
	return g, nil
}

// shownMoney is the gateway's amount and currency of g for a message; an
// amount it did not give is "an amount not given".
func shownMoney(g gateway.Order) string {
	if g.Amount == "" {
		return "an amount not given in " + string(g.Currency)
	}
	return string(g.Amount) + " " + string(g.Currency)
}

// sameAmount compares two decimal amounts by value (10.5 is 10.50). An
// amount that does not parse is not the same as anything.
func sameAmount(a, b string) bool {
	c, ok := cmpAmount(a, b)
	return ok && c == 0
}

// lessAmount reports whether decimal amount a is less than b; an amount that
// does not parse is not less than anything.
func lessAmount(a, b string) bool {
	c, ok := cmpAmount(a, b)
	return ok && c < 0
}

// cmpAmount compares two decimal amounts by value; ok is false when either
// does not parse.
func cmpAmount(a, b string) (c int, ok bool) {
	x, okA := new(big.Rat).SetString(a)
	y, okB := new(big.Rat).SetString(b)
	if !okA || !okB {
		return 0, false
	}
	return x.Cmp(y), true
}
