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
// instead of holding every worker. The quick retries a driver makes while the
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

// wait takes a token, waiting up to MaxWait for it.
func (l *Limited) wait(ctx context.Context, op string) error {
	r := l.Limiter.Reserve()
	if !r.OK() {
		return &ThrottledError{Op: op, RetryAfter: time.Second}
	}
	d := r.Delay()
	if d <= 0 {
		return nil
	}
	maxWait := l.MaxWait
	if maxWait <= 0 {
		maxWait = DefaultMaxWait
	}
	if d > maxWait {
		r.Cancel() // give the token back to calls that can wait for it
		l.observe(op, 0, false)
		return &ThrottledError{Op: op, RetryAfter: d}
	}
	start := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		l.observe(op, time.Since(start), true)
		return nil
	case <-ctx.Done():
		r.Cancel()
		l.observe(op, time.Since(start), false)
		return fmt.Errorf("wait for the gateway rate limit: %w", ctx.Err())
	}
}

func (l *Limited) observe(op string, waited time.Duration, sent bool) {
	if l.Observe != nil {
		l.Observe(op, waited, sent)
	}
}
