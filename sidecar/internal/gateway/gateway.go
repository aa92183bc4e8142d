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

// ErrDisputed marks, with ErrUnavailable, an answer about a payment whose
// money a dispute (a chargeback) may still take back: what the gateway
// holds of it is known once the dispute closes. Nothing is reinstated or
// refunded meanwhile.
var ErrDisputed = errors.New("the payment is under dispute at the gateway")

// ErrChargedBack marks a payment a dispute lost by the shop took back, in
// part or in full, when the gateway's record does not say how much: neither
// reinstated nor refunded by the sidecar; a person settles it.
var ErrChargedBack = errors.New("a dispute lost took the payment back, in part or in full")

// ErrBadAnswer marks an answer the client cannot use: a 3xx or 4xx status,
// an answer that is not exactly one JSON object (malformed, trailing data,
// larger than MaxAnswerBytes, not UTF-8), a key twice in any object, a key
// that differs from a contract field only in case, a status the contract does
// not know, an amount outside the grammar of ParseAmount, a currency that is
// not three upper-case letters, or a paid status or refund without a usable
// payment_id or refund_id. It says nothing about the money either.
var ErrBadAnswer = errors.New("payment gateway gave an unusable answer")

// ErrBadRequest marks a request the client refuses to send because it breaks
// the contract (a refund amount outside the grammar of ParseAmount). Nothing
// was sent; sending it again will not help until its data changes.
var ErrBadRequest = errors.New("request to the payment gateway breaks the contract, not sent")

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

// NoRetries, as Client.Retries (or a driver's), disables retries: a request
// is sent once. (Zero means DefaultRetries.)
const NoRetries = -1

// Amount is a decimal amount of money as the gateway writes it: a JSON string
// ("12.50") or number (12.50) following the grammar of ParseAmount. The empty
// Amount means unknown.
type Amount string

// UnmarshalJSON accepts a JSON string or number that follows the grammar of
// ParseAmount, or null (unknown).
func (a *Amount) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*a = ""
		return nil
	}
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("amount must be a decimal string or number, got %s", snippet(b))
		}
	}
	v, err := ParseAmount(s)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// SQL returns the amount for a numeric SQL parameter: nil when unknown.
func (a Amount) SQL() any {
	if a == "" {
		return nil
	}
	return string(a)
}

// Order is what the gateway knows about a merchant order. PaidAt, optional
// in the contract, is when the gateway took the payment of a paid answer:
// a payment taken before the order was created is an earlier order's under
// the same id, not this one's (see the worker package).
type Order struct {
	OrderID   string     `json:"order_id"`
	Status    string     `json:"status"`
	PaymentID string     `json:"payment_id,omitempty"`
	Amount    Amount     `json:"amount,omitempty"`
	Currency  Currency   `json:"currency,omitempty"`
	PaidAt    *Timestamp `json:"paid_at,omitempty"`
}

// Timestamp is a time in a gateway's answer: an RFC 3339 string read by
// ParseTime (JSON null, like an absent key, leaves the *Timestamp nil:
// unknown). Decoding never fails: a value ParseTime refuses is kept as its
// error (Err), which only a paid answer makes a bad answer (Client.Order and
// Client.Close drop the field from any other, which has no use for it).
type Timestamp struct {
	time.Time
	// Err is why the value is not a time; nil when it is one.
	Err error `json:"-"`
}

// UnmarshalJSON reads an RFC 3339 string with ParseTime.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	*t = Timestamp{}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		t.Err = fmt.Errorf("paid_at must be an RFC 3339 time string, got %s", snippet(b))
		return nil
	}
	v, err := ParseTime(s)
	if err != nil {
		t.Err = fmt.Errorf("paid_at %w", err)
		return nil
	}
	t.Time = v
	return nil
}

// paidAtErr is why a paid answer's paid_at is not a time; nil when it is one
// or absent.
func paidAtErr(t *Timestamp) error {
	if t == nil {
		return nil
	}
	return t.Err
}

// MarshalJSON writes the time in RFC 3339 with its fraction; a value that
// was not a time (Err) is an error, never a time it is not.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	if t.Err != nil {
		return nil, t.Err
	}
	return json.Marshal(t.Format(time.RFC3339Nano))
}

// CloseResult is the gateway's answer to a close; PaidAt as in Order.
type CloseResult struct {
	Status    string     `json:"status"`
	PaymentID string     `json:"payment_id,omitempty"`
	Amount    Amount     `json:"amount,omitempty"`
	Currency  Currency   `json:"currency,omitempty"`
	PaidAt    *Timestamp `json:"paid_at,omitempty"`
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
	// (NoRetries) disables retries.
	Retries int

	// HTTPClient sends the requests. If nil, a client that never follows a
	// redirect is used (a 3xx answer is a bad answer).
	HTTPClient *http.Client

	// Observe, if set, is called after every call (retries included) with
	// the operation ("order", "close", "refund", "payments") and its result ("ok",
	// "unavailable", "bad_answer"). It is how metrics count gateway calls.
	Observe func(op, result string, elapsed time.Duration)
}

// Order asks the gateway about the merchant order ref.OrderID: whether it is
// paid, whatever payment it was paid with (also a payment the shop never
// heard of). The contract keys orders by the merchant's id: ref.PaymentIDs is
// not sent.
func (c *Client) Order(ctx context.Context, ref Ref) (Order, error) {
	orderID := ref.OrderID
	var o Order
	err := c.do(ctx, "order", http.MethodGet, "/v1/orders/"+PathSegment(orderID), nil, &o)
	if err != nil {
		return Order{}, fmt.Errorf("ask gateway about order %q: %w", orderID, err)
	}
	switch o.Status {
	case StatusPaid:
		if o.PaymentID == "" {
			return Order{}, fmt.Errorf("ask gateway about order %q: status paid without payment_id: %w", orderID, ErrBadAnswer)
		}
		if err := checkID("payment_id", o.PaymentID); err != nil {
			return Order{}, fmt.Errorf("ask gateway about order %q: status paid: %v: %w", orderID, err, ErrBadAnswer)
		}
		if err := paidAtErr(o.PaidAt); err != nil {
			return Order{}, fmt.Errorf("ask gateway about order %q: status paid: %v: %w", orderID, err, ErrBadAnswer)
		}
	case StatusPending, StatusFailed, StatusNone:
		o.PaidAt = nil // of no use, whatever it holds
	default:
		return Order{}, fmt.Errorf("ask gateway about order %q: unknown status %s: %w", orderID, quote(o.Status), ErrBadAnswer)
	}
	if o.OrderID != "" && o.OrderID != orderID {
		return Order{}, fmt.Errorf("ask gateway about order %q: answer is about order %s: %w", orderID, quote(o.OrderID), ErrBadAnswer)
	}
	return o, nil
}

// Close closes the payment of order ref.OrderID at the gateway so that the
// buyer can no longer complete it. A CloseResult with Status ClosePaid means
// the buyer paid before the close.
func (c *Client) Close(ctx context.Context, ref Ref) (CloseResult, error) {
	orderID := ref.OrderID
	var r CloseResult
	err := c.do(ctx, "close", http.MethodPost, "/v1/orders/"+PathSegment(orderID)+"/close", struct{}{}, &r)
	if err != nil {
		return CloseResult{}, fmt.Errorf("close order %q at gateway: %w", orderID, err)
	}
	switch r.Status {
	case CloseClosed:
		r.PaidAt = nil // of no use, whatever it holds
	case ClosePaid:
		if r.PaymentID == "" {
			return CloseResult{}, fmt.Errorf("close order %q at gateway: status paid without payment_id: %w", orderID, ErrBadAnswer)
		}
		if err := checkID("payment_id", r.PaymentID); err != nil {
			return CloseResult{}, fmt.Errorf("close order %q at gateway: status paid: %v: %w", orderID, err, ErrBadAnswer)
		}
		if err := paidAtErr(r.PaidAt); err != nil {
			return CloseResult{}, fmt.Errorf("close order %q at gateway: status paid: %v: %w", orderID, err, ErrBadAnswer)
		}
	default:
		return CloseResult{}, fmt.Errorf("close order %q at gateway: unknown status %s: %w", orderID, quote(r.Status), ErrBadAnswer)
	}
	return r, nil
}

// RefundRefunded is the status of a refund answer (POST /v1/refunds): the
// only one the contract knows.
const RefundRefunded = "refunded"

// Refund returns a payment to the buyer. The gateway refunds each
// IdempotencyKey at most once, so a repeated call is safe. A request whose
// amount does not follow the grammar of ParseAmount is never sent.
func (c *Client) Refund(ctx context.Context, req RefundRequest) (Refund, error) {
	if req.IdempotencyKey == "" {
		return Refund{}, errors.New("refund: idempotency key is required")
	}
	if err := req.Amount.Validate(); err != nil {
		return Refund{}, fmt.Errorf("refund payment %q of order %q: %v: %w", req.PaymentID, req.OrderID, err, ErrBadRequest)
	}
	var r Refund
	if err := c.do(ctx, "refund", http.MethodPost, "/v1/refunds", req, &r); err != nil {
		return Refund{}, fmt.Errorf("refund payment %q of order %q at gateway: %w", req.PaymentID, req.OrderID, err)
	}
	if r.Status != RefundRefunded || r.RefundID == "" {
		return Refund{}, fmt.Errorf("refund payment %q of order %q at gateway: status %s, refund_id %s: %w",
			req.PaymentID, req.OrderID, quote(r.Status), quote(r.RefundID), ErrBadAnswer)
	}
	if err := checkID("refund_id", r.RefundID); err != nil {
		return Refund{}, fmt.Errorf("refund payment %q of order %q at gateway: %v: %w", req.PaymentID, req.OrderID, err, ErrBadAnswer)
	}
	return r, nil
}

// PathSegment escapes s as one segment of a URL path: every byte that is
// not unreserved is percent-encoded ("/", "?", "#", "%", spaces, non-ASCII),
// and a segment "." or ".." has its dots encoded as %2E, so that no client,
// proxy or server takes it for a dot segment and resolves it away.
func PathSegment(s string) string {
	e := url.PathEscape(s)
	if e == "." || e == ".." {
		return strings.Repeat("%2E", len(e))
	}
	return e
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

// noRedirects is the HTTP client of a Client without one: a redirect is
// never followed (the answer is a 3xx, a bad answer), so neither the token
// nor a POST body goes anywhere but BaseURL.
var noRedirects = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
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
		return fmt.Errorf("build request %s %s: %w", method, path, withoutURL(err))
	}
	// BaseURL's userinfo goes out as basic auth, but errors go to the logs
	// and to River's errors of the job: they name the gateway without it.
	shown := *req.URL
	shown.User = nil
	target = shown.String()
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	httpClient := c.HTTPClient
	if httpClient == nil {
		httpClient = noRedirects
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		// Refused, reset, timed out: nothing was learnt, ask again later.
		return fmt.Errorf("%s %s: %w: %w", method, target, ErrUnavailable, withoutURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
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
	if len(data) > MaxAnswerBytes {
		return fmt.Errorf("%s %s: answer larger than %d bytes: %w", method, target, MaxAnswerBytes, ErrBadAnswer)
	}
	if err := decodeAnswer(data, out); err != nil {
		return fmt.Errorf("%s %s: %v: answer %s: %w", method, target, err, snippet(data), ErrBadAnswer)
	}
	return nil
}

// withoutURL returns the error inside a *url.Error, which quotes the whole
// URL (net/http hides only the password, not the user).
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
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

// String writes the time in RFC 3339 with its fraction, for logs.
func (t Timestamp) String() string { return t.Format(time.RFC3339Nano) }
