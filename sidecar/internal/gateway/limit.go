package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"
)

// ErrThrottled marks a call the rate limit did not send: the next token
// would come later than Limited.MaxWait. Nothing was sent. The error is a
// *ThrottledError, which says when to try again.
var ErrThrottled = errors.New("payment gateway rate limit reached, call not sent")

// ThrottledError is the error of a call the rate limit did not send.
type ThrottledError struct {
	// Op is the call: "order", "close", "refund" or "payments".
	Op string
	// RetryAfter is about when a token will be free for it.
	RetryAfter time.Duration
	// Reserved says that the token due in RetryAfter is kept for this
	// call: the call's context holds a Ticket (WithTicket), and the caller
	// must come back with it about then (Ticket.Held, Ticket.Due). Without
	// a ticket the token is given back and Reserved is false.
	Reserved bool
}

// Error says which call was not sent and when to try again.
func (e *ThrottledError) Error() string {
	return fmt.Sprintf("%s: %v; a token is free in about %s", e.Op, ErrThrottled, e.RetryAfter.Round(time.Millisecond))
}

// Unwrap returns ErrThrottled.
func (e *ThrottledError) Unwrap() error { return ErrThrottled }

// DefaultMaxWait is how long a call waits for a token of the rate limit
// before it gives up with ErrThrottled, if Limited.MaxWait is zero. It is
// well below River's job timeout: a worker waits a little, then its job
// snoozes and frees the worker.
const DefaultMaxWait = 2 * time.Second

// Limited is a Gateway whose calls go out at most at a rate: a token bucket
// (golang.org/x/time/rate) refilled Rate times a second, holding at most
// Burst tokens; each call takes one. A call waits for its token (respecting
// its context) up to MaxWait; when the token comes later, the call is not
// sent and returns a *ThrottledError, so that a backlog (the expiry of
// 10,000 flash-sale orders at once) drains at the rate through job snoozes
// instead of holding every worker. A call with a Ticket keeps that token
// reserved for when its job comes back (see Ticket). The quick retries a driver makes while the
// gateway is unavailable (Client.Retries) take no further token.
type Limited struct {
	// Gateway is the gateway called. It is required.
	Gateway Gateway

	// Limiter is the token bucket. It is required; NewLimited makes one.
	Limiter *rate.Limiter

	// MaxWait bounds the wait for a token. If zero, DefaultMaxWait.
	MaxWait time.Duration

	// Observe, if set, is called for every call that found no token at
	// once: op, how long it waited, and whether it was sent (false: it
	// returned a *ThrottledError without waiting, or its context ended
	// while it waited).
	Observe func(op string, waited time.Duration, sent bool)
}

// NewLimited limits g to perSecond calls a second (more than 0, at most
// 1,000,000) with bursts of burst calls. A burst of 0 means
// max(1, ceil(perSecond)).
func NewLimited(g Gateway, perSecond float64, burst int) (*Limited, error) {
	if !(perSecond > 0 && perSecond <= 1e6) {
		return nil, fmt.Errorf("gateway rate must be more than 0 and at most 1000000 calls a second, got %v", perSecond)
	}
	if burst < 0 || burst > 1e6 {
		return nil, fmt.Errorf("gateway burst must be between 0 and 1000000 calls, got %d", burst)
	}
	if burst == 0 {
		burst = max(1, int(math.Ceil(perSecond)))
	}
	return &Limited{Gateway: g, Limiter: rate.NewLimiter(rate.Limit(perSecond), burst)}, nil
}

// Order waits for a token, then calls the gateway's Order.
func (l *Limited) Order(ctx context.Context, ref Ref) (Order, error) {
	if err := l.wait(ctx, "order"); err != nil {
		return Order{}, fmt.Errorf("ask gateway about order %q: %w", ref.OrderID, err)
	}
	return l.Gateway.Order(ctx, ref)
}

// AnswersByPayment is the limited gateway's (ByPayment).
func (l *Limited) AnswersByPayment() bool { return AnswersByPayment(l.Gateway) }

// Close waits for a token, then calls the gateway's Close.
func (l *Limited) Close(ctx context.Context, ref Ref) (CloseResult, error) {
	if err := l.wait(ctx, "close"); err != nil {
		return CloseResult{}, fmt.Errorf("close order %q at gateway: %w", ref.OrderID, err)
	}
	return l.Gateway.Close(ctx, ref)
}

// Refund waits for a token, then calls the gateway's Refund.
func (l *Limited) Refund(ctx context.Context, req RefundRequest) (Refund, error) {
	if err := l.wait(ctx, "refund"); err != nil {
		return Refund{}, fmt.Errorf("refund payment %q of order %q at gateway: %w", req.PaymentID, req.OrderID, err)
	}
	return l.Gateway.Refund(ctx, req)
}

// Payments waits for a token, then calls the gateway's Payments.
func (l *Limited) Payments(ctx context.Context, since time.Time, limit int) ([]Payment, error) {
	if err := l.wait(ctx, "payments"); err != nil {
		return nil, fmt.Errorf("list gateway payments: %w", err)
	}
	return l.Gateway.Payments(ctx, since, limit)
}

// Occupy takes n tokens of the bucket ahead, for calls that will go out
// without taking one: the tokens jobs reserved in an earlier process (a
// Ticket held across a restart). The calls through l then find their tokens
// after those n, so that both together keep the rate.
func (l *Limited) Occupy(n int) {
	now := time.Now()
	for range n {
		l.Limiter.ReserveN(now, 1)
	}
}

// Refill is how long the bucket takes to fill from empty: Burst tokens at
// the rate. Calls on tokens reserved ahead (Ticket) that go out up to that
// late bunch no more than a full bucket sends at once. It saturates at the
// longest Duration (a tiny rate).
func (l *Limited) Refill() time.Duration {
	ns := float64(l.Limiter.Burst()) / float64(l.Limiter.Limit()) * float64(time.Second)
	if !(ns < math.MaxInt64) {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// Ticket lets a call keep a token reserved ahead instead of giving it back,
// so that a backlog drains at the rate with a few job runs per call instead
// of every throttled job asking again every couple of seconds. A caller
// puts it in the call's context (WithTicket). A call that would wait longer
// than MaxWait then keeps its token, sets Held and Due, and returns a
// *ThrottledError with Reserved; the caller comes back about Due with Held
// and Due as they were, and that call sends at Due on the token it holds,
// taking no other. A call made with Held clears it: one ticket, one token.
// Each reserved token is promised once, so a backlog comes back at the rate,
// never all together.
type Ticket struct {
	// Held says that the caller holds a token reserved earlier, due at Due.
	Held bool
	// Due is when the held token is due, by this host's clock.
	Due time.Time
}

type ticketKey struct{}

// WithTicket returns ctx carrying t for the calls made with it.
func WithTicket(ctx context.Context, t *Ticket) context.Context {
	return context.WithValue(ctx, ticketKey{}, t)
}

func ticketFrom(ctx context.Context) *Ticket {
	t, _ := ctx.Value(ticketKey{}).(*Ticket)
	return t
}

// wait takes a token, waiting up to MaxWait for it.
func (l *Limited) wait(ctx context.Context, op string) error {
	maxWait := l.MaxWait
	if maxWait <= 0 {
		maxWait = DefaultMaxWait
	}
	t := ticketFrom(ctx)
	if t != nil && t.Held {
		// A token reserved earlier: wait for it, or come back later.
		d := time.Until(t.Due)
		if d > maxWait {
			l.observe(op, 0, false)
			return &ThrottledError{Op: op, RetryAfter: d, Reserved: true}
		}
		t.Held = false
		return l.sleep(ctx, op, d, nil)
	}
	r := l.Limiter.Reserve()
	if !r.OK() {
		return &ThrottledError{Op: op, RetryAfter: time.Second}
	}
	d := r.Delay()
	if d <= 0 {
		return nil
	}
	if d > maxWait {
		l.observe(op, 0, false)
		if t != nil {
			// Keep the token for the caller, who comes back for it.
			t.Held, t.Due = true, time.Now().Add(d)
			return &ThrottledError{Op: op, RetryAfter: d, Reserved: true}
		}
		r.Cancel() // give the token back to calls that can wait for it
		return &ThrottledError{Op: op, RetryAfter: d}
	}
	return l.sleep(ctx, op, d, r)
}

// sleep waits d for a token, then returns nil; if ctx ends first, it gives
// r's token back (if r is not nil) and returns ctx's error.
func (l *Limited) sleep(ctx context.Context, op string, d time.Duration, r *rate.Reservation) error {
	if d <= 0 {
		return nil
	}
	start := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		l.observe(op, time.Since(start), true)
		return nil
	case <-ctx.Done():
		if r != nil {
			r.Cancel()
		}
		l.observe(op, time.Since(start), false)
		return fmt.Errorf("wait for the gateway rate limit: %w", ctx.Err())
	}
}

func (l *Limited) observe(op string, waited time.Duration, sent bool) {
	if l.Observe != nil {
		l.Observe(op, waited, sent)
	}
}
