package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrUnavailable marks an error after which the gateway should be asked again
// later: it answered 5xx or 429, timed out, or could not be reached. It says
// nothing about the money.
var ErrUnavailable = errors.New("payment gateway unavailable")

// ErrBadAnswer marks an answer the client cannot use: a 4xx status, malformed
// JSON, or a status the contract does not know. It says nothing about the
// money either.
var ErrBadAnswer = errors.New("payment gateway gave an unusable answer")

// Status values of an order at the gateway (GET /v1/orders/{order_id}).
const (
	StatusPaid    = "paid"
	StatusPending = "pending"
	StatusFailed  = "failed"
	StatusNone    = "none"
)

// Status values of a close (POST /v1/orders/{order_id}/close).
const (
	CloseClosed = "closed"
	ClosePaid   = "paid"
)

// Default settings of a Client.
const (
	DefaultTimeout = 5 * time.Second
	DefaultRetries = 2
)

// Amount is a decimal amount of money as the gateway writes it: a JSON string
// ("12.50") or number (12.50). The empty Amount means unknown.
type Amount string

// UnmarshalJSON accepts a JSON string, number or null.
func (a *Amount) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*a = ""
		return nil
	}
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	} else {
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("amount must be a decimal string or number, got %s", b)
		}
		s = n.String()
	}
	if s != "" {
		if _, err := json.Number(s).Float64(); err != nil {
			return fmt.Errorf("amount must be a decimal number, got %q", s)
		}
	}
	*a = Amount(s)
	return nil
}

// SQL returns the amount for a numeric SQL parameter: nil when unknown.
func (a Amount) SQL() any {
	if a == "" {
		return nil
	}
	return string(a)
}

// Order is what the gateway knows about a merchant order.
type Order struct {
	OrderID   string `json:"order_id"`
	Status    string `json:"status"`
	PaymentID string `json:"payment_id,omitempty"`
	Amount    Amount `json:"amount,omitempty"`
}

// CloseResult is the gateway's answer to a close.
type CloseResult struct {
	Status    string `json:"status"`
	PaymentID string `json:"payment_id,omitempty"`
	Amount    Amount `json:"amount,omitempty"`
}

// RefundRequest asks the gateway to return a payment.
type RefundRequest struct {
	OrderID        string `json:"order_id"`
	PaymentID      string `json:"payment_id"`
	Amount         Amount `json:"amount,omitempty"`
	IdempotencyKey string `json:"idempotency_key"`
}

// Refund is the gateway's answer to a refund.
type Refund struct {
	RefundID string `json:"refund_id"`
	Status   string `json:"status"`
}

// Client calls the payment gateway. It is safe for concurrent use.
type Client struct {
	// BaseURL is the gateway's address, e.g. "https://pay.example.com". It
	// is required.
	BaseURL string

	// Token, if set, is sent as "Authorization: Bearer <Token>".
	Token string

	// Timeout bounds each HTTP request. If zero, DefaultTimeout is used.
	Timeout time.Duration

	// Retries is how many times a request is repeated while the gateway is
	// unavailable. If zero, DefaultRetries is used; a negative value
	// disables retries.
	Retries int

	// HTTPClient sends the requests. If nil, http.DefaultClient is used.
	HTTPClient *http.Client

	// Observe, if set, is called after every call (retries included) with
	// the operation ("order", "close", "refund") and its result ("ok",
	// "unavailable", "bad_answer"). It is how metrics count gateway calls.
	Observe func(op, result string, elapsed time.Duration)
}

// Order asks the gateway about the merchant order orderID: whether it is paid,
// whatever payment it was paid with (also a payment the shop never heard of).
func (c *Client) Order(ctx context.Context, orderID string) (Order, error) {
	var o Order
	err := c.do(ctx, "order", http.MethodGet, "/v1/orders/"+url.PathEscape(orderID), nil, &o)
	if err != nil {
		return Order{}, fmt.Errorf("ask gateway about order %q: %w", orderID, err)
	}
	switch o.Status {
	case StatusPaid:
		if o.PaymentID == "" {
			return Order{}, fmt.Errorf("ask gateway about order %q: status paid without payment_id: %w", orderID, ErrBadAnswer)
		}
	case StatusPending, StatusFailed, StatusNone:
	default:
		return Order{}, fmt.Errorf("ask gateway about order %q: unknown status %q: %w", orderID, o.Status, ErrBadAnswer)
	}
	if o.OrderID != "" && o.OrderID != orderID {
		return Order{}, fmt.Errorf("ask gateway about order %q: answer is about order %q: %w", orderID, o.OrderID, ErrBadAnswer)
	}
	return o, nil
}

// Close closes the payment of order orderID at the gateway so that the buyer
// can no longer complete it. A CloseResult with Status ClosePaid means the
// buyer paid before the close.
func (c *Client) Close(ctx context.Context, orderID string) (CloseResult, error) {
	var r CloseResult
	err := c.do(ctx, "close", http.MethodPost, "/v1/orders/"+url.PathEscape(orderID)+"/close", struct{}{}, &r)
	if err != nil {
		return CloseResult{}, fmt.Errorf("close order %q at gateway: %w", orderID, err)
	}
	switch r.Status {
	case CloseClosed:
	case ClosePaid:
		if r.PaymentID == "" {
			return CloseResult{}, fmt.Errorf("close order %q at gateway: status paid without payment_id: %w", orderID, ErrBadAnswer)
		}
	default:
		return CloseResult{}, fmt.Errorf("close order %q at gateway: unknown status %q: %w", orderID, r.Status, ErrBadAnswer)
	}
	return r, nil
}

// Refund returns a payment to the buyer. The gateway refunds each
// IdempotencyKey at most once, so a repeated call is safe.
func (c *Client) Refund(ctx context.Context, req RefundRequest) (Refund, error) {
	if req.IdempotencyKey == "" {
		return Refund{}, errors.New("refund: idempotency key is required")
	}
	var r Refund
	if err := c.do(ctx, "refund", http.MethodPost, "/v1/refunds", req, &r); err != nil {
		return Refund{}, fmt.Errorf("refund payment %q of order %q at gateway: %w", req.PaymentID, req.OrderID, err)
	}
	if r.Status != "refunded" || r.RefundID == "" {
		return Refund{}, fmt.Errorf("refund payment %q of order %q at gateway: status %q, refund_id %q: %w",
			req.PaymentID, req.OrderID, r.Status, r.RefundID, ErrBadAnswer)
	}
	return r, nil
}

// do sends one request, repeating it while the gateway is unavailable, and
// decodes a 200 answer into out.
func (c *Client) do(ctx context.Context, op, method, path string, in, out any) error {
	if c.BaseURL == "" {
		return errors.New("gateway base URL is not set")
	}
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
	}
	retries := c.Retries
	if retries == 0 {
		retries = DefaultRetries
	}
	retries = max(retries, 0)

	var err error
	for attempt := 0; ; attempt++ {
		start := time.Now()
		err = c.once(ctx, method, path, body, out)
		if c.Observe != nil {
			c.Observe(op, result(err), time.Since(start))
		}
		if err == nil || !errors.Is(err, ErrUnavailable) || attempt >= retries || ctx.Err() != nil {
			return err
		}
		// A short pause between tries: the caller's own retry policy (River's)
		// handles longer outages.
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(100*(attempt+1)) * time.Millisecond):
		}
	}
}

func (c *Client) once(ctx context.Context, method, path string, body []byte, out any) error {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	target := strings.TrimSuffix(c.BaseURL, "/") + path
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, reader)
	if err != nil {
		return fmt.Errorf("build request %s %s: %w", method, target, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	httpClient := c.HTTPClient
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		// Refused, reset, timed out: nothing was learnt, ask again later.
		return fmt.Errorf("%s %s: %w: %w", method, target, ErrUnavailable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w: %w", method, target, ErrUnavailable, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests ||
		resp.StatusCode == http.StatusRequestTimeout:
		return fmt.Errorf("%s %s: HTTP %d: %w", method, target, resp.StatusCode, ErrUnavailable)
	default:
		return fmt.Errorf("%s %s: HTTP %d %s: %w", method, target, resp.StatusCode, snippet(data), ErrBadAnswer)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s %s: malformed JSON answer %s: %v: %w", method, target, snippet(data), err, ErrBadAnswer)
	}
	return nil
}

func result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	default:
		return "bad_answer"
	}
}

// snippet quotes the start of an answer for an error message.
func snippet(b []byte) string {
	const limit = 200
	if len(b) > limit {
		return fmt.Sprintf("%q...", b[:limit])
	}
	return fmt.Sprintf("%q", b)
}
