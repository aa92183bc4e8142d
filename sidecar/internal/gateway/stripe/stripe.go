// Package stripe is the sidecar's gateway driver for Stripe (--gateway
// stripe), on github.com/stripe/stripe-go.
//
// How the sidecar finds the Stripe object of an order: the shop creates a
// PaymentIntent (or a Checkout Session) for the order with metadata
// order_id=<the order id> and passes its id to begin_payment as the
// payment_id (pi_... or cs_...), with the Checkout Session's expires_at (or
// its own cancel of the PaymentIntent) at the gateway_expire_at
// begin_payment returns. The driver then:
//
//   - Order: retrieves each PaymentIntent / Checkout Session begin_payment
//     recorded for the order. A succeeded PaymentIntent, or a complete and
//     paid Checkout Session, is StatusPaid with its payment id, the amount
//     Stripe still holds (amount_received less the succeeded refunds of its
//     latest charge, which the driver asks Stripe to expand) converted
//     exactly from Stripe's minor units (see Major), and its currency; one
//     refunded in full (in Stripe's dashboard, say) holds no money and is
//     StatusFailed; while one of its refunds is pending, nothing can be
//     said (ErrUnavailable). Asked what is still held of a payment
//     (gateway.Ref.Held: before a reinstatement or a refund of money that
//     came late), a charge Stripe says was disputed has its disputes
//     listed: one lost by the shop took some or all of it back, how much
//     cannot be told from it (ErrChargedBack: a person settles it); one
//     still open (or an inquiry) may take it, so nothing can be said
//     (ErrDisputed with ErrUnavailable); won, prevented and closed
//     inquiries take nothing. Checks and closes do
//     not read disputes. One the buyer can still pay (requires_*, processing, an
//     open session) is StatusPending; canceled / expired is StatusFailed.
//     An order with no recorded payment is looked up by the metadata with
//     Stripe's search (metadata["order_id"]:"<id>"), which also finds a
//     payment made without begin_payment, but only after Stripe's search
//     index has it (usually within a minute), and also an earlier order's
//     under the same id: a PaymentIntent created more than
//     gateway.ClockSkew before the order was (Ref.CreatedAt), paid or not,
//     is that order's and never answers (markEarlier; a close still
//     cancels it while it is open), and of several paid the one whose
//     charge is newest answers (paidOf). A paid
//     answer carries the charge's creation as PaidAt. Nothing found, or a payment id
//     Stripe does not know (resource_missing), is StatusNone: unknown.
//   - Close: cancels each PaymentIntent that can be canceled and expires each
//     open Checkout Session. One that succeeded, also when the cancel is
//     refused because it just did, is ClosePaid; one already canceled or
//     expired is CloseClosed (closing twice is success); one processing
//     (money on its way), also when a 200 to its cancel says so, or one
//     whose close Stripe refused while it is still open, is
//     ErrUnavailable: ask again later. A 200 is read as the object it
//     carries: about another object or order, or still open (Stripe refuses
//     such a close with a 400), it is ErrBadAnswer, never closed.
//   - Refund: a Refund of the PaymentIntent (a session's), for the amount
//     in minor units (for a payment that succeeded, only the amount Stripe
//     holds: a conflict's refund is the whole payment; another amount is
//     gateway.ErrBadRequest), with the idempotency key as Stripe's
//     Idempotency-Key (Stripe keeps keys 24 hours; after that, a refund
//     already made is found by its metadata idempotency_key instead of
//     being made twice).
//   - Payments: lists the succeeded, captured charges (payments, of the
//     amount captured) and refunds created
//     since a moment (a charge is created when the buyer pays), each named
//     by the Checkout Session or PaymentIntent id the shop gave
//     begin_payment. Set the order id in the metadata of the PaymentIntent
//     (payment_intent_data.metadata for Checkout) or of the session, so
//     that the list names the order.
//
// Errors: Stripe's rate limit (429, lock_timeout), connection errors and
// api_error / 5xx are gateway.ErrUnavailable (ask again later);
// authentication, permission, invalid requests and idempotency errors are
// gateway.ErrBadRequest (asking again will not help: a person must look);
// an answer about another object or order, or with an amount or currency
// that cannot be read, is gateway.ErrBadAnswer.
package stripe

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	stripeapi "github.com/stripe/stripe-go/v82"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// DefaultURL is Stripe's API.
const DefaultURL = stripeapi.APIURL

// Config configures a Driver.
type Config struct {
	// Key is the secret API key (sk_... or rk_...). It is required. Read it
	// from the environment, never from a flag value (process listings show
	// those).
	Key string

	// URL is the API's base URL. If empty, DefaultURL; stripe-mock's in
	// tests.
	URL string

	// Timeout bounds each HTTP request. If zero, gateway.DefaultTimeout.
	Timeout time.Duration

	// Retries is how many times stripe-go repeats a request that failed in
	// a way worth repeating (connection, 409, 429 lock_timeout, 5xx). If
	// zero, gateway.DefaultRetries; a negative value disables them.
	Retries int

	// Observe, if set, is called after every call with the operation
	// ("order", "close", "refund", "payments") and its result ("ok",
	// "unavailable", "bad_answer", "bad_request").
	Observe func(op, result string, elapsed time.Duration)
}

// Driver is a gateway.Gateway on Stripe. It is safe for concurrent use.
type Driver struct {
	client  *stripeapi.Client
	observe func(op, result string, elapsed time.Duration)
}

var _ gateway.Gateway = (*Driver)(nil)

// New returns a Driver.
func New(cfg Config) (*Driver, error) {
	if cfg.Key == "" {
		return nil, errors.New("stripe: API key is required")
	}
	apiURL := cfg.URL
	if apiURL == "" {
		apiURL = DefaultURL
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = gateway.DefaultTimeout
	}
	retries := int64(cfg.Retries)
	if retries == 0 {
		retries = gateway.DefaultRetries
	}
	retries = max(retries, 0)
	httpClient := &http.Client{
		Timeout:   timeout,
		Transport: answerGuard{next: http.DefaultTransport},
		// A redirect is never followed: the key goes nowhere but URL.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	backends := stripeapi.NewBackendsWithConfig(&stripeapi.BackendConfig{
		URL:               stripeapi.String(apiURL),
		HTTPClient:        httpClient,
		MaxNetworkRetries: stripeapi.Int64(retries),
		LeveledLogger:     &stripeapi.LeveledLogger{Level: stripeapi.LevelNull},
	})
	return &Driver{
		client:  stripeapi.NewClient(cfg.Key, stripeapi.WithBackends(backends)),
		observe: cfg.Observe,
	}, nil
}

// MaxAnswerBytes bounds an answer from Stripe: a list page of 100 objects
// is a few hundred KiB; stripe-go reads a body whole, so without a bound an
// answer of any size would be read into memory.
const MaxAnswerBytes = 8 << 20

// errAnswerTooLarge is an answer over MaxAnswerBytes: a bad answer.
var errAnswerTooLarge = fmt.Errorf("Stripe's answer is larger than %d bytes", MaxAnswerBytes)

// answerGuard reads every answer from Stripe, at most MaxAnswerBytes of it,
// before stripe-go does. An error status whose body is not Stripe's JSON
// error (a proxy's 502 page, "{}") gets one in its place, so that stripe-go
// reports the status (a 5xx is "unavailable, try again") instead of an
// unreadable answer quoting the body.
type answerGuard struct{ next http.RoundTripper }

func (g answerGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := g.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(body) > MaxAnswerBytes {
		return nil, errAnswerTooLarge
	}
	if resp.StatusCode >= 400 && !isStripeError(body) {
		typ := string(errorTypeNotStripe)
		if resp.StatusCode >= 500 {
			typ = string(stripeapi.ErrorTypeAPI)
		}
		body, _ = json.Marshal(map[string]any{"error": map[string]string{
			"type":    typ,
			"message": fmt.Sprintf("HTTP %d without Stripe's JSON error (%d bytes of %s)", resp.StatusCode, len(body), quote(resp.Header.Get("Content-Type"))),
		}})
		resp.Header.Set("Content-Type", "application/json")
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

// errorTypeNotStripe is the type of the error answerGuard puts in place of
// a 4xx answer that is not Stripe's JSON error (a proxy's page): classify
// makes it a bad answer (a 429 excepted), never Stripe refusing the request
// or the key, nor "no such object".
const errorTypeNotStripe stripeapi.ErrorType = "not_stripe"

// isStripeError reports whether body is Stripe's error: a JSON object
// whose "error" is an object.
func isStripeError(body []byte) bool {
	var e struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	return json.Unmarshal(body, &e) == nil && e.Error != nil
}

// idPattern is what a PaymentIntent or Checkout Session id looks like.
var idPattern = regexp.MustCompile(`^(pi|cs)_[A-Za-z0-9_]{1,200}$`)

// payment is what the driver learnt about one Stripe object.
type payment struct {
	id       string
	status   string // gateway.StatusPaid, StatusPending, StatusFailed, StatusNone
	amount   gateway.Amount
	currency gateway.Currency
	// intent is the PaymentIntent id (a session's, once it has one).
	intent string
	// processing: money is on its way; the object can be neither closed
	// nor taken for paid.
	processing bool
	// closable: Close can cancel or expire it.
	closable bool
	// received and refunded are what Stripe took for a succeeded payment
	// and what it has given back of that since, in minor units; amount is
	// the difference, the money Stripe holds for the order.
	received, refunded int64
	// disputedCharge is the id of the succeeded payment's charge when
	// Stripe says it was disputed: its disputes are read
	// (Driver.checkDisputes) before a refund, or an answer about what is
	// still held.
	disputedCharge string
	// paidAt is when the succeeded payment's charge was created (what
	// reconciliation lists as its at): gateway.Order.PaidAt.
	paidAt *gateway.Timestamp
	// created is when Stripe created the PaymentIntent (zero when it does
	// not say).
	created time.Time
	// earlier: Stripe's search found it, and it is an earlier order's
	// under the same order id (markEarlier). It never answers for the
	// order; a close still closes it while it is open.
	earlier bool
}

// Order asks Stripe about every payment of the order (see the package
// documentation).
func (d *Driver) Order(ctx context.Context, ref gateway.Ref) (gateway.Order, error) {
	start := time.Now()
	o, err := d.order(ctx, ref)
	d.done("order", start, err)
	if err != nil {
		return gateway.Order{}, fmt.Errorf("ask Stripe about order %q: %w", ref.OrderID, err)
	}
	return o, nil
}

func (d *Driver) order(ctx context.Context, ref gateway.Ref) (gateway.Order, error) {
	ps, err := d.payments(ctx, ref)
	if err != nil {
		return gateway.Order{}, err
	}
	if ref.Held {
		for i := range ps {
			if err := d.checkDisputes(ctx, ps[i]); err != nil {
				return gateway.Order{}, err
			}
		}
	}
	ps = ours(ps)
	if p, ok := paidOf(ps, ref); ok {
		return gateway.Order{OrderID: ref.OrderID, Status: gateway.StatusPaid, PaymentID: p.id, Amount: p.amount, Currency: p.currency, PaidAt: p.paidAt}, nil
	}
	o := gateway.Order{OrderID: ref.OrderID, Status: gateway.StatusNone}
	for _, p := range ps {
		switch {
		case p.status == gateway.StatusPending:
			o.Status = gateway.StatusPending
		case p.status == gateway.StatusFailed && o.Status == gateway.StatusNone:
			o.Status = gateway.StatusFailed
		}
	}
	return o, nil
}

// Close cancels or expires every payment of the order that can still be
// completed (see the package documentation).
func (d *Driver) Close(ctx context.Context, ref gateway.Ref) (gateway.CloseResult, error) {
	start := time.Now()
	r, err := d.close(ctx, ref)
	d.done("close", start, err)
	if err != nil {
		return gateway.CloseResult{}, fmt.Errorf("close order %q at Stripe: %w", ref.OrderID, err)
	}
	return r, nil
}

func (d *Driver) close(ctx context.Context, ref gateway.Ref) (gateway.CloseResult, error) {
	ps, err := d.payments(ctx, ref)
	if err != nil {
		return gateway.CloseResult{}, err
	}
	// Every open payment is closed even when the close of another fails:
	// the buyer must not be left one to pay meanwhile. While one is still
	// open the close is not done, even if another is paid: the worker
	// would record the paid one and end the job, and the open one would
	// stay payable for good. The close is tried again later, and the paid
	// one is the answer once none is left open. An earlier order's payment
	// that Stripe's search found under the same order id is closed too
	// while it is open (no buyer should pay an order that is gone), but it
	// is never the answer, paid or processing (ours).
	var failed []error
	for i, p := range ps {
		if !p.closable {
			continue
		}
		closed, err := d.closeOne(ctx, ref.OrderID, p)
		if err != nil {
			failed = append(failed, err)
			continue
		}
		ps[i] = closed
	}
	if len(failed) > 0 {
		return gateway.CloseResult{}, closeFailed(failed)
	}
	ps = ours(ps)
	if p, ok := paidOf(ps, ref); ok {
		return gateway.CloseResult{Status: gateway.ClosePaid, PaymentID: p.id, Amount: p.amount, Currency: p.currency, PaidAt: p.paidAt}, nil
	}
	var processing []string
	for _, p := range ps {
		if p.processing {
			processing = append(processing, p.id)
		}
	}
	if len(processing) > 0 {
		return gateway.CloseResult{}, fmt.Errorf("payment %s is processing: it can be neither closed nor taken for paid yet: %w",
			strings.Join(processing, ", "), gateway.ErrUnavailable)
	}
	return gateway.CloseResult{Status: gateway.CloseClosed}, nil
}

// closeFailed is the error of a close some of whose payments could not be
// closed: the gravest of their errors (a bad answer before any other, an
// unavailable gateway last) as the one the worker acts on, the others named
// in its text only.
func closeFailed(errs []error) error {
	rank := func(err error) int {
		switch {
		case errors.Is(err, gateway.ErrBadAnswer):
			return 0
		case errors.Is(err, gateway.ErrUnavailable):
			return 2
		}
		return 1
	}
	slices.SortStableFunc(errs, func(a, b error) int { return rank(a) - rank(b) })
	if len(errs) == 1 {
		return errs[0]
	}
	others := make([]string, 0, len(errs)-1)
	for _, err := range errs[1:] {
		others = append(others, err.Error())
	}
	return fmt.Errorf("%w (and %d more could not be closed: %s)", errs[0], len(others), strings.Join(others, "; "))
}

// closeOne cancels a PaymentIntent or expires a Checkout Session. A 200
// answer is read as the object it carries, which must be the one asked
// about (its id, its order): canceled or expired is closed; succeeded (a
// complete, paid session) is paid; processing (a complete, unpaid session)
// is neither closed nor paid yet (gateway.ErrUnavailable). Stripe answers
// its cancel or expire with a 400 in every other case, so a 200 whose object
// is still open (or in a state Stripe does not define) is an answer that
// contradicts itself: gateway.ErrBadAnswer, never closed. Refused because
// its state changed (it just succeeded, or was canceled by someone else),
// it is read again: that state is the answer, unless the object is still
// open (the buyer can still pay it): then the close is
// gateway.ErrUnavailable, tried again later.
func (d *Driver) closeOne(ctx context.Context, orderID string, p payment) (payment, error) {
	var (
		err    error
		answer payment
	)
	if strings.HasPrefix(p.id, "pi_") {
		var pi *stripeapi.PaymentIntent
		params := &stripeapi.PaymentIntentCancelParams{
			CancellationReason: stripeapi.String(string(stripeapi.PaymentIntentCancellationReasonAbandoned)),
		}
		params.AddExpand(expandCharge)
		pi, err = d.client.V1PaymentIntents.Cancel(ctx, p.id, params)
		if err == nil {
			answer, err = fromIntent(orderID, p.id, pi)
			if err != nil {
				return payment{}, err
			}
		}
	} else {
		var s *stripeapi.CheckoutSession
		params := &stripeapi.CheckoutSessionExpireParams{}
		params.AddExpand(expandSessionCharge)
		s, err = d.client.V1CheckoutSessions.Expire(ctx, p.id, params)
		if err == nil {
			answer, err = fromSession(orderID, p.id, s)
			if err != nil {
				return payment{}, err
			}
		}
	}
	if err == nil {
		if answer.closable {
			return payment{}, fmt.Errorf("Stripe answered 200 to the close of %s, but the object in the answer is still open: %w",
				p.id, gateway.ErrBadAnswer)
		}
		// Closed (StatusFailed), paid, or processing: the close reads it.
		return answer, nil
	}
	var se *stripeapi.Error
	if errors.As(err, &se) && se.HTTPStatusCode == http.StatusBadRequest &&
		(se.Code == stripeapi.ErrorCodePaymentIntentUnexpectedState || strings.HasPrefix(p.id, "cs_")) {
		now, rerr := d.retrieve(ctx, orderID, p.id)
		if rerr != nil {
			return payment{}, rerr
		}
		if now.closable {
			// Refused, yet still open (a PaymentIntent whose processing
			// payment failed meanwhile, a session whose expire was refused
			// for another reason): the buyer can still pay it, so it is
			// not closed. Asked again later, the close is tried again.
			return payment{}, fmt.Errorf("Stripe refused to close %s (%s: %s), and it is still open: %w",
				p.id, quote(string(se.Code)), se.Msg, gateway.ErrUnavailable)
		}
		return now, nil
	}
	return payment{}, fmt.Errorf("close %s: %w", p.id, classify(err))
}

// AnswersByPayment reports that Order, asked about one payment id, answers
// about that PaymentIntent or Checkout Session alone (gateway.ByPayment).
func (d *Driver) AnswersByPayment() bool { return true }

// Refund refunds the PaymentIntent of req.PaymentID (a PaymentIntent, or a
// Checkout Session's) once per req.IdempotencyKey.
func (d *Driver) Refund(ctx context.Context, req gateway.RefundRequest) (gateway.Refund, error) {
	start := time.Now()
	r, err := d.refund(ctx, req)
	d.done("refund", start, err)
	if err != nil {
		return gateway.Refund{}, fmt.Errorf("refund payment %q of order %q at Stripe: %w", req.PaymentID, req.OrderID, err)
	}
	return r, nil
}

func (d *Driver) refund(ctx context.Context, req gateway.RefundRequest) (gateway.Refund, error) {
	if req.IdempotencyKey == "" {
		return gateway.Refund{}, fmt.Errorf("idempotency key is required: %w", gateway.ErrBadRequest)
	}
	if err := req.Amount.Validate(); err != nil {
		return gateway.Refund{}, fmt.Errorf("%v: %w", err, gateway.ErrBadRequest)
	}
	p, err := d.retrieve(ctx, req.OrderID, req.PaymentID)
	if err == nil {
		err = d.checkDisputes(ctx, p)
	}
	if err != nil {
		return gateway.Refund{}, err
	}
	if p.status == gateway.StatusNone {
		return gateway.Refund{}, fmt.Errorf("Stripe knows no payment %q: %w", req.PaymentID, gateway.ErrBadRequest)
	}
	if p.intent == "" {
		return gateway.Refund{}, fmt.Errorf("payment %q has no PaymentIntent to refund: %w", req.PaymentID, gateway.ErrBadRequest)
	}
	params := &stripeapi.RefundCreateParams{
		PaymentIntent: stripeapi.String(p.intent),
		Metadata:      map[string]string{"order_id": req.OrderID, "idempotency_key": req.IdempotencyKey},
	}
	if req.Amount != "" {
		if p.currency == "" {
			return gateway.Refund{}, fmt.Errorf("payment %q has no currency to convert the amount: %w", req.PaymentID, gateway.ErrBadRequest)
		}
		minor, err := Minor(req.Amount, string(p.currency))
		if err != nil {
			return gateway.Refund{}, fmt.Errorf("%v: %w", err, gateway.ErrBadRequest)
		}
		if p.status == gateway.StatusPaid {
			// The refund of a conflict is the whole payment, of the amount
			// it was confirmed with. Another amount (a callback that read
			// yen as cents) would be a partial refund recorded as the
			// refund: never sent, a person looks.
			paid, err := Minor(p.amount, string(p.currency))
			if err != nil || paid != minor {
				if p.refunded > 0 {
					return gateway.Refund{}, fmt.Errorf("refund of %s %s is not what Stripe holds for payment %q (%s %s: %d received, %d of it refunded since): not sent: %w",
						req.Amount, p.currency, req.PaymentID, p.amount, p.currency, p.received, p.refunded, gateway.ErrBadRequest)
				}
				return gateway.Refund{}, fmt.Errorf("refund of %s %s is not what Stripe took for payment %q (%s %s): not sent: %w",
					req.Amount, p.currency, req.PaymentID, p.amount, p.currency, gateway.ErrBadRequest)
			}
		}
		params.Amount = stripeapi.Int64(minor)
	}
	params.SetIdempotencyKey(req.IdempotencyKey)
	r, err := d.client.V1Refunds.Create(ctx, params)
	var se *stripeapi.Error
	if errors.As(err, &se) && se.Code == stripeapi.ErrorCodeChargeAlreadyRefunded {
		// Refunded before, maybe by this key more than 24 hours ago.
		if r, err = d.findRefund(ctx, p.intent, req.IdempotencyKey); err != nil {
			return gateway.Refund{}, err
		}
		if r == nil {
			return gateway.Refund{}, fmt.Errorf("payment %q was refunded, but not with idempotency key %q: %w",
				req.PaymentID, req.IdempotencyKey, gateway.ErrBadAnswer)
		}
	} else if err != nil {
		return gateway.Refund{}, classify(err)
	}
	return refundAnswer(r)
}

// findRefund finds the refund of PaymentIntent intent made with an
// idempotency key, or nil.
func (d *Driver) findRefund(ctx context.Context, intent, key string) (*stripeapi.Refund, error) {
	params := &stripeapi.RefundListParams{PaymentIntent: stripeapi.String(intent)}
	params.Limit = stripeapi.Int64(100)
	n := 0
	for r, err := range d.client.V1Refunds.List(ctx, params) {
		if err != nil {
			return nil, classify(err)
		}
		if r.Metadata["idempotency_key"] == key {
			return r, nil
		}
		if n++; n >= 1000 {
			break
		}
	}
	return nil, nil
}

func refundAnswer(r *stripeapi.Refund) (gateway.Refund, error) {
	if r == nil || r.ID == "" {
		return gateway.Refund{}, fmt.Errorf("refund without an id: %w", gateway.ErrBadAnswer)
	}
	switch r.Status {
	case stripeapi.RefundStatusSucceeded, stripeapi.RefundStatusPending, stripeapi.RefundStatusRequiresAction:
		// Succeeded, or on its way: Stripe owes the buyer the money now.
		return gateway.Refund{RefundID: r.ID, Status: gateway.RefundRefunded}, nil
	default:
		return gateway.Refund{}, fmt.Errorf("refund %s is %s: %w", r.ID, quote(string(r.Status)), gateway.ErrBadAnswer)
	}
}

// MaxListed bounds how many charges, and how many refunds, one second may
// hold: the driver reads a second whole (to return its transactions in
// order), and a second holding more is ErrBadAnswer.
const MaxListed = 10000

// listPage is how many objects one list request asks for (Stripe's most).
const listPage = 100

// windowMax is how many charges (or refunds) a window of more than one
// second may hold: one that holds this many is read again as a smaller
// window.
const windowMax = 500

// MaxListRequests bounds the list requests (charges and refunds) one
// Payments call makes. Each window that holds fewer than limit transactions
// costs at most windowMax/100 pages of each, and the windows halve or double,
// so only a stretch with thousands of charges that did not succeed (card
// testing) and fewer than limit that did can reach it: ErrBadAnswer, for a
// person to look.
const MaxListRequests = 200

// lookups is how many Checkout Session lookups run at once.
const lookups = 8

// sessionLifetime is the longest a Checkout Session stays open: a session
// paid after a moment was created at most this long before it.
const sessionLifetime = 24 * time.Hour

// Payments lists the transactions Stripe recorded at or after since (to the
// second: Stripe's times are whole seconds), oldest first by time, then
// payment id, at most limit (1 to gateway.MaxPaymentsLimit):
//
//   - each succeeded and captured charge created since then is a payment
//     of the amount captured (a charge is created when the buyer pays,
//     unlike its PaymentIntent) at its time; an uncaptured one (an
//     authorization, capture_method manual) is not, nor is it listed again
//     when it is captured later: the payment and precancel checks find
//     such a payment (Order), reconciliation does not; nor is a charge
//     still pending when listed (SEPA Direct Debit, ACH settle days
//     later), once it succeeds with its creation time behind the
//     watermark;
//   - each succeeded or pending refund created since then is a refund, of
//     its amount, at its time.
//
// They are the oldest limit however many follow: charges and refunds are
// listed in windows of whole seconds (created gte / lt) from since, each
// read whole, the first from since to now; a window holding windowMax or
// more of either is read again narrower, one holding few makes the next
// wider, and reading stops once limit are collected. A second is never
// split between windows, so the transactions of the last second returned
// that did not fit come first when asked again from that second (which of
// a second's fit is decided by PaymentIntent id, before sessions are looked
// up, so that it is the same every time). The list
// requests are bounded (MaxListRequests), and a single second holding more
// than MaxListed of either is ErrBadAnswer.
//
// Each is named as the shop named it in begin_payment: by its Checkout
// Session's id when it paid a session, else by its PaymentIntent's id. The
// complete session of each PaymentIntent returned is looked up by its id
// (created up to 24 hours before since): one request per PaymentIntent
// returned, whatever the number of sessions. The order id is the session's
// metadata order_id (or client_reference_id), else the PaymentIntent's
// metadata order_id, else the charge's.
func (d *Driver) Payments(ctx context.Context, since time.Time, limit int) ([]gateway.Payment, error) {
	start := time.Now()
	ps, err := d.list(ctx, since, limit)
	d.done("payments", start, err)
	if err != nil {
		return nil, fmt.Errorf("list Stripe payments since %s: %w", since.UTC().Format(time.RFC3339), err)
	}
	return ps, nil
}

// record is a charge or refund listed, kept until the oldest are known.
type record struct {
	id      string // ch_... or re_...
	created int64
	charge  *stripeapi.Charge
	refund  *stripeapi.Refund
	// intent is the PaymentIntent, if any; fallbackID and fallbackOrder
	// name the record without a session.
	intent                    *stripeapi.PaymentIntent
	fallbackID, fallbackOrder string
}

// window is what one window of whole seconds [lo, hi) (hi 0: no end)
// held.
type window struct {
	records []record
	// full: charges or refunds reached the cap: not all were read.
	full bool
	// listed is the most charges or refunds listed; newest and oldest are
	// the times of those listed.
	listed         int
	newest, oldest int64
}

func (d *Driver) list(ctx context.Context, since time.Time, limit int) ([]gateway.Payment, error) {
	if limit < 1 || limit > gateway.MaxPaymentsLimit {
		return nil, fmt.Errorf("limit must be 1 to %d, got %d: %w", gateway.MaxPaymentsLimit, limit, gateway.ErrBadRequest)
	}
	var (
		records  []record
		seen     = map[string]bool{}
		requests = 0
		lo       = since.Unix()
		now      = time.Now().Unix()
		width    = int64(0) // 0: from lo on, no end (the first window)
	)
	for {
		hi := int64(0)
		if width > 0 && lo+width <= now {
			hi = lo + width
		}
		capacity := windowMax
		if hi == lo+1 {
			capacity = MaxListed // a second is read whole or not at all
		}
		w, err := d.window(ctx, lo, hi, capacity, &requests)
		if err != nil {
			return nil, err
		}
		if w.full {
			if hi == lo+1 {
				return nil, fmt.Errorf("more than %d charges or refunds at %s: the list cannot be paged past them: %w",
					MaxListed, time.Unix(lo, 0).UTC().Format(time.RFC3339), gateway.ErrBadAnswer)
			}
			// Narrower: half the window, at most half the span of the
			// newest windowMax read (they are as dense as that).
			end := hi
			if end == 0 {
				end = max(now, w.newest) + 1
			}
			width = max(1, min((end-lo)/2, (w.newest-w.oldest+1)/2))
		} else {
			for _, r := range w.records {
				if !seen[r.id] {
					seen[r.id] = true
					records = append(records, r)
				}
			}
			if hi == 0 || len(records) >= limit {
				break
			}
			lo = hi
			switch {
			case w.listed < windowMax/4:
				width *= 2
			case w.listed > windowMax/2:
				width = max(1, width/2)
			}
		}
		if requests >= MaxListRequests {
			return nil, fmt.Errorf("%d list requests found only %d of %d transactions, up to %s (thousands of charges that did not succeed?): %w",
				requests, len(records), limit, time.Unix(lo, 0).UTC().Format(time.RFC3339), gateway.ErrBadAnswer)
		}
	}
	// Oldest first, by time, payment id; then status and Stripe's id, so
	// that the same records are always cut at the same place.
	slices.SortFunc(records, func(a, b record) int {
		return cmp.Or(cmp.Compare(a.created, b.created), strings.Compare(a.name(), b.name()),
			strings.Compare(a.status(), b.status()), strings.Compare(a.id, b.id))
	})
	if len(records) > limit {
		records = records[:limit]
	}
	if len(records) == 0 {
		return nil, nil
	}
	sessions, err := d.sessions(ctx, since, records)
	if err != nil {
		return nil, err
	}
	out := make([]gateway.Payment, 0, len(records))
	for _, r := range records {
		var p gateway.Payment
		var err error
		if r.charge != nil {
			// What was captured: a partial capture takes less than the
			// charge's amount (Order reads the PaymentIntent's
			// amount_received).
			p.Amount, p.Currency, err = money(r.id, r.charge.AmountCaptured, r.charge.Currency)
			p.Status = gateway.PaymentPaid
		} else {
			p.Amount, p.Currency, err = money(r.id, r.refund.Amount, r.refund.Currency)
			p.Status = gateway.PaymentRefunded
		}
		if err != nil {
			return nil, err
		}
		p.At = time.Unix(r.created, 0).UTC()
		p.PaymentID, p.OrderID = r.fallbackID, r.fallbackOrder
		if pi := r.intent; pi != nil && pi.ID != "" {
			p.PaymentID = pi.ID
			p.OrderID = cmp.Or(pi.Metadata["order_id"], p.OrderID)
			if cs, ok := sessions[pi.ID]; ok {
				p.PaymentID = cs.ID
				p.OrderID = cmp.Or(cs.Metadata["order_id"], cs.ClientReferenceID, p.OrderID)
			}
		}
		out = append(out, p)
	}
	// Sorted by PaymentIntent id above; a session's id may sort otherwise.
	slices.SortStableFunc(out, func(a, b gateway.Payment) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.PaymentID, b.PaymentID))
	})
	return out, nil
}

func (r record) name() string {
	if r.intent != nil && r.intent.ID != "" {
		return r.intent.ID
	}
	return r.fallbackID
}

func (r record) status() string {
	if r.charge != nil {
		return gateway.PaymentPaid
	}
	return gateway.PaymentRefunded
}

// window lists the charges, then the refunds, created in [lo, hi) (hi 0:
// from lo on), at most capacity of each: a window with capacity of either
// is full, and what it read is not used.
func (d *Driver) window(ctx context.Context, lo, hi int64, capacity int, requests *int) (window, error) {
	created := &stripeapi.RangeQueryParams{GreaterThanOrEqual: lo}
	if hi > 0 {
		created.LesserThan = hi
	}
	var w window
	// seen notes a listed object (any status) for the window's counts.
	seen := func(n *int, at int64) bool {
		if *n%listPage == 0 {
			*requests++
		}
		*n++
		if *n == 1 {
			w.newest, w.oldest = at, at
		}
		w.newest, w.oldest = max(w.newest, at), min(w.oldest, at)
		w.listed = max(w.listed, *n)
		if *n >= capacity {
			w.full = true
		}
		return !w.full
	}

	cp := &stripeapi.ChargeListParams{CreatedRange: created}
	cp.Limit = stripeapi.Int64(listPage)
	cp.AddExpand("data.payment_intent")
	n := 0
	for c, err := range d.client.V1Charges.List(ctx, cp) {
		if err != nil {
			return window{}, classify(err)
		}
		// An uncaptured charge (capture_method manual) is an
		// authorization: no money moved yet, and it may be released. Order
		// reads its PaymentIntent as pending (requires_capture) too.
		if c.Status == stripeapi.ChargeStatusSucceeded && c.Captured {
			w.records = append(w.records, record{id: c.ID, created: c.Created, charge: c, intent: c.PaymentIntent,
				fallbackID: c.ID, fallbackOrder: c.Metadata["order_id"]})
		}
		if !seen(&n, c.Created) {
			return w, nil
		}
	}
	if n == 0 {
		*requests++
	}

	rp := &stripeapi.RefundListParams{CreatedRange: created}
	rp.Limit = stripeapi.Int64(listPage)
	rp.AddExpand("data.payment_intent")
	n = 0
	for r, err := range d.client.V1Refunds.List(ctx, rp) {
		if err != nil {
			return window{}, classify(err)
		}
		if r.Status == stripeapi.RefundStatusSucceeded || r.Status == stripeapi.RefundStatusPending {
			fallback := r.ID
			if r.Charge != nil && r.Charge.ID != "" {
				fallback = r.Charge.ID
			}
			w.records = append(w.records, record{id: r.ID, created: r.Created, refund: r, intent: r.PaymentIntent,
				fallbackID: fallback, fallbackOrder: r.Metadata["order_id"]})
		}
		if !seen(&n, r.Created) {
			return w, nil
		}
	}
	if n == 0 {
		*requests++
	}
	return w, nil
}

// sessions looks up the complete Checkout Session of each PaymentIntent of
// records (by its payment_intent, created at most a session's lifetime
// before since), lookups at a time. An answer naming another PaymentIntent
// is ignored: the transaction keeps the PaymentIntent's name.
func (d *Driver) sessions(ctx context.Context, since time.Time, records []record) (map[string]*stripeapi.CheckoutSession, error) {
	var intents []string
	for _, r := range records {
		if r.intent != nil && r.intent.ID != "" && !slices.Contains(intents, r.intent.ID) {
			intents = append(intents, r.intent.ID)
		}
	}
	var (
		mu       sync.Mutex
		sessions = map[string]*stripeapi.CheckoutSession{}
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, lookups)
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, pi := range intents {
		sem <- struct{}{}
		if ctx.Err() != nil {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sp := &stripeapi.CheckoutSessionListParams{
				CreatedRange:  &stripeapi.RangeQueryParams{GreaterThanOrEqual: since.Add(-sessionLifetime).Unix()},
				PaymentIntent: stripeapi.String(pi),
				Status:        stripeapi.String(string(stripeapi.CheckoutSessionStatusComplete)),
			}
			sp.Limit = stripeapi.Int64(1)
			sp.Single = true
			for cs, err := range d.client.V1CheckoutSessions.List(ctx, sp) {
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = classify(err)
					cancel()
				}
				// Another PaymentIntent's session names nothing here.
				if err == nil && cs.PaymentIntent != nil && cs.PaymentIntent.ID == pi {
					sessions[pi] = cs
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return sessions, nil
}

// payments reads the order's payments at Stripe: the ones ref names, or
// those Stripe's search finds by metadata order_id.
func (d *Driver) payments(ctx context.Context, ref gateway.Ref) ([]payment, error) {
	if len(ref.PaymentIDs) == 0 {
		ps, err := d.search(ctx, ref.OrderID)
		if err != nil {
			return nil, err
		}
		markEarlier(ps, ref.CreatedAt)
		return ps, nil
	}
	var ps []payment
	for _, id := range ref.PaymentIDs {
		p, err := d.retrieve(ctx, ref.OrderID, id)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// retrieve reads one PaymentIntent or Checkout Session; one Stripe does
// not know is StatusNone.
func (d *Driver) retrieve(ctx context.Context, orderID, id string) (payment, error) {
	if !idPattern.MatchString(id) {
		return payment{}, fmt.Errorf("payment id %s names no Stripe PaymentIntent (pi_...) or Checkout Session (cs_...): %w", quote(id), gateway.ErrBadRequest)
	}
	var (
		pi  *stripeapi.PaymentIntent
		cs  *stripeapi.CheckoutSession
		err error
	)
	if strings.HasPrefix(id, "pi_") {
		params := &stripeapi.PaymentIntentRetrieveParams{}
		params.AddExpand(expandCharge)
		pi, err = d.client.V1PaymentIntents.Retrieve(ctx, id, params)
	} else {
		params := &stripeapi.CheckoutSessionRetrieveParams{}
		params.AddExpand(expandSessionCharge)
		cs, err = d.client.V1CheckoutSessions.Retrieve(ctx, id, params)
	}
	var se *stripeapi.Error
	if errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound && se.Code == stripeapi.ErrorCodeResourceMissing {
		return payment{id: id, status: gateway.StatusNone}, nil
	}
	if err != nil {
		return payment{}, fmt.Errorf("retrieve %s: %w", id, classify(err))
	}
	if pi != nil {
		return fromIntent(orderID, id, pi)
	}
	return fromSession(orderID, id, cs)
}

// markEarlier marks the payments of ps, those a search by the order's
// metadata found, that are an earlier order's under the same order id (one
// purged, its id given again): a PaymentIntent Stripe created more than
// gateway.ClockSkew before the order was (createdAt; nothing is marked when
// it is zero), whatever its state, since a shop creates an order's
// PaymentIntent once the order exists; and a payment whose charge is that
// much older than the order (also when Stripe does not say when the
// PaymentIntent was created).
// Reconciliation reports such money for a person (other_order). Taken for
// the order's own, an earlier order's payment paid the order with another
// buyer's money (paid, even after the order was created), made a check
// wait for it (open or processing), or made the worker cancel while the
// order's own payment was still on its way.
func markEarlier(ps []payment, createdAt time.Time) {
	if createdAt.IsZero() {
		return
	}
	before := createdAt.Add(-gateway.ClockSkew)
	for i, p := range ps {
		ps[i].earlier = gateway.Known(p.created) && p.created.Before(before) ||
			p.status == gateway.StatusPaid && p.paidAt != nil && gateway.Known(p.paidAt.Time) && p.paidAt.Before(before)
	}
}

// ours is ps without the earlier orders' payments (markEarlier).
func ours(ps []payment) []payment {
	out := ps[:0:0]
	for _, p := range ps {
		if !p.earlier {
			out = append(out, p)
		}
	}
	return out
}

// paidOf is the payment of ps that answers for the order when one is paid:
// the first paid of the order's own payments (ref.PaymentIDs, oldest
// first); of those a search found, the one whose charge Stripe created last
// (one that does not say when comes after any that does), the likeliest to
// be the order's own.
func paidOf(ps []payment, ref gateway.Ref) (payment, bool) {
	var best payment
	found := false
	for _, p := range ps {
		if p.status != gateway.StatusPaid {
			continue
		}
		if !found {
			best, found = p, true
			if len(ref.PaymentIDs) > 0 {
				break
			}
			continue
		}
		// A dated one beats an undated one, and a later one an earlier.
		if p.paidAt != nil && (best.paidAt == nil || p.paidAt.After(best.paidAt.Time)) {
			best = p
		}
	}
	return best, found
}

// MaxDisputes bounds how many disputes of one charge are read.
const MaxDisputes = 100

// checkDisputes reads the disputes of p's charge when Stripe says it was
// disputed and p is paid. A dispute still open (or an inquiry, which may
// become one) may take the money or leave it: nothing can be said yet
// (ErrDisputed with ErrUnavailable), asked again later, as with a refund on
// its way; a charge said to be disputed with no dispute listed yet is the
// same. A dispute lost by the shop took some or all of the payment back,
// how much its record does not tell (ErrChargedBack: a person settles it).
// A dispute won, prevented or an inquiry closed takes nothing.
func (d *Driver) checkDisputes(ctx context.Context, p payment) error {
	if p.disputedCharge == "" || p.status != gateway.StatusPaid {
		return nil // nothing disputed, or nothing held anyway
	}
	params := &stripeapi.DisputeListParams{Charge: stripeapi.String(p.disputedCharge)}
	params.Limit = stripeapi.Int64(MaxDisputes)
	var lost []string
	n := 0
	for dp, err := range d.client.V1Disputes.List(ctx, params) {
		if err != nil {
			return fmt.Errorf("list the disputes of charge %s of %s: %w", p.disputedCharge, p.id, classify(err))
		}
		if dp == nil {
			continue
		}
		if n++; n > MaxDisputes {
			return fmt.Errorf("charge %s of %s has more than %d disputes: %w", p.disputedCharge, p.id, MaxDisputes, gateway.ErrBadAnswer)
		}
		if dp.ID == "" {
			return fmt.Errorf("a dispute of charge %s of %s has no id: %w", p.disputedCharge, p.id, gateway.ErrBadAnswer)
		}
		if dp.Charge == nil || dp.Charge.ID != p.disputedCharge {
			return fmt.Errorf("asked for the disputes of charge %s of %s, dispute %s is about another: %w",
				p.disputedCharge, p.id, quote(dp.ID), gateway.ErrBadAnswer)
		}
		switch dp.Status {
		case stripeapi.DisputeStatusWon, stripeapi.DisputeStatusPrevented, stripeapi.DisputeStatusWarningClosed:
		case stripeapi.DisputeStatusLost:
			lost = append(lost, dp.ID)
		case stripeapi.DisputeStatusNeedsResponse, stripeapi.DisputeStatusUnderReview,
			stripeapi.DisputeStatusWarningNeedsResponse, stripeapi.DisputeStatusWarningUnderReview:
			return fmt.Errorf("dispute %s of %s is %s at Stripe: whether the money stays is known once it closes: %w: %w",
				quote(dp.ID), p.id, quote(string(dp.Status)), gateway.ErrDisputed, gateway.ErrUnavailable)
		default:
			return fmt.Errorf("dispute %s of %s has status %s: %w", quote(dp.ID), p.id, quote(string(dp.Status)), gateway.ErrBadAnswer)
		}
	}
	if n == 0 {
		return fmt.Errorf("charge %s of %s is disputed, but Stripe lists no dispute of it yet: %w: %w",
			p.disputedCharge, p.id, gateway.ErrDisputed, gateway.ErrUnavailable)
	}
	if len(lost) > 0 {
		// What a lost dispute took back cannot be told from it: one partly
		// won keeps status lost and its whole amount, the rest given back
		// to the shop. A person settles it.
		return fmt.Errorf("dispute %s of %s was lost at Stripe: how much of the payment it took back cannot be told from it: %w",
			strings.Join(lost, ", "), p.id, gateway.ErrChargedBack)
	}
	return nil
}

// MaxSearched bounds how many PaymentIntents a search for one order reads.
const MaxSearched = 100

// search finds the PaymentIntents whose metadata order_id is orderID.
func (d *Driver) search(ctx context.Context, orderID string) ([]payment, error) {
	params := &stripeapi.PaymentIntentSearchParams{}
	params.Query = SearchQuery(orderID)
	params.Limit = stripeapi.Int64(MaxSearched)
	params.Single = true
	params.AddExpand("data." + expandCharge)
	var ps []payment
	for pi, err := range d.client.V1PaymentIntents.Search(ctx, params) {
		if err != nil {
			return nil, fmt.Errorf("search PaymentIntents of order %q: %w", orderID, classify(err))
		}
		if pi.Metadata["order_id"] != orderID {
			continue // not exactly this order
		}
		p, err := fromIntent(orderID, pi.ID, pi)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// SearchQuery is the Stripe search query for the PaymentIntents of an
// order: metadata["order_id"]:"<id>", with backslashes and double quotes in
// the id escaped, so that an id cannot change the query.
func SearchQuery(orderID string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `metadata["order_id"]:"` + r.Replace(orderID) + `"`
}

// fromIntent reads a PaymentIntent. orderID, if not empty, must be its
// metadata order_id when it has one.
func fromIntent(orderID, id string, pi *stripeapi.PaymentIntent) (payment, error) {
	if pi == nil || pi.ID != id {
		return payment{}, fmt.Errorf("asked for PaymentIntent %s, the answer is about another: %w", id, gateway.ErrBadAnswer)
	}
	if err := checkOrder(orderID, id, pi.Metadata); err != nil {
		return payment{}, err
	}
	p := payment{id: id, intent: id}
	if pi.Created > 0 {
		p.created = time.Unix(pi.Created, 0).UTC()
	}
	if pi.Currency != "" {
		var err error
		if _, p.currency, err = money(id, 0, pi.Currency); err != nil {
			return payment{}, err
		}
	}
	switch pi.Status {
	case stripeapi.PaymentIntentStatusSucceeded:
		// What Stripe took, never what was asked: a succeeded payment
		// with nothing received is an answer that makes no sense.
		if pi.AmountReceived <= 0 {
			return payment{}, fmt.Errorf("PaymentIntent %s succeeded with amount_received %d: %w", id, pi.AmountReceived, gateway.ErrBadAnswer)
		}
		if err := p.held(id, pi.AmountReceived, pi.LatestCharge, pi.Currency); err != nil {
			return payment{}, err
		}
	case stripeapi.PaymentIntentStatusProcessing:
		p.status, p.processing = gateway.StatusPending, true
	case stripeapi.PaymentIntentStatusRequiresPaymentMethod, stripeapi.PaymentIntentStatusRequiresConfirmation,
		stripeapi.PaymentIntentStatusRequiresAction, stripeapi.PaymentIntentStatusRequiresCapture:
		// requires_capture: authorized, not taken; the shop captures or
		// the close cancels (releasing the authorization).
		p.status, p.closable = gateway.StatusPending, true
	case stripeapi.PaymentIntentStatusCanceled:
		p.status = gateway.StatusFailed
	default:
		return payment{}, fmt.Errorf("PaymentIntent %s has status %s: %w", id, quote(string(pi.Status)), gateway.ErrBadAnswer)
	}
	return p, nil
}

// fromSession reads a Checkout Session.
func fromSession(orderID, id string, s *stripeapi.CheckoutSession) (payment, error) {
	if s == nil || s.ID != id {
		return payment{}, fmt.Errorf("asked for Checkout Session %s, the answer is about another: %w", id, gateway.ErrBadAnswer)
	}
	if err := checkOrder(orderID, id, s.Metadata); err != nil {
		return payment{}, err
	}
	if s.ClientReferenceID != "" && orderID != "" && s.ClientReferenceID != orderID {
		return payment{}, fmt.Errorf("Checkout Session %s has client_reference_id %s, not order %q: %w", id, quote(s.ClientReferenceID), orderID, gateway.ErrBadAnswer)
	}
	p := payment{id: id}
	if s.PaymentIntent != nil {
		p.intent = s.PaymentIntent.ID
	}
	if s.Currency != "" {
		var err error
		if _, p.currency, err = money(id, 0, s.Currency); err != nil {
			return payment{}, err
		}
	}
	switch {
	case s.Status == stripeapi.CheckoutSessionStatusComplete &&
		(s.PaymentStatus == stripeapi.CheckoutSessionPaymentStatusPaid || s.PaymentStatus == stripeapi.CheckoutSessionPaymentStatusNoPaymentRequired):
		if s.PaymentStatus == stripeapi.CheckoutSessionPaymentStatusNoPaymentRequired && s.PaymentIntent == nil {
			// Nothing to pay: nothing to refund either.
			var err error
			if p.amount, p.currency, err = money(id, s.AmountTotal, s.Currency); err != nil {
				return payment{}, err
			}
			p.status = gateway.StatusPaid
			break
		}
		var ch *stripeapi.Charge
		if s.PaymentIntent != nil {
			ch = s.PaymentIntent.LatestCharge
		}
		if err := p.held(id, s.AmountTotal, ch, s.Currency); err != nil {
			return payment{}, err
		}
	case s.Status == stripeapi.CheckoutSessionStatusComplete:
		// Complete but unpaid: a delayed payment method is processing.
		p.status, p.processing = gateway.StatusPending, true
	case s.Status == stripeapi.CheckoutSessionStatusOpen:
		p.status, p.closable = gateway.StatusPending, true
	case s.Status == stripeapi.CheckoutSessionStatusExpired:
		p.status = gateway.StatusFailed
	default:
		return payment{}, fmt.Errorf("Checkout Session %s has status %s: %w", id, quote(string(s.Status)), gateway.ErrBadAnswer)
	}
	return p, nil
}

// expandCharge asks Stripe to put a PaymentIntent's latest charge and its
// refunds in its answer, and expandSessionCharge a Checkout Session's
// PaymentIntent with them: the refunds say how much of the payment was given
// back since, and which refunds are still on their way.
const (
	expandCharge        = "latest_charge.refunds"
	expandSessionCharge = "payment_intent.latest_charge.refunds"
)

// held reads a succeeded payment of received minor units whose latest charge
// is ch: what Stripe still holds is what it received less what was refunded
// since, by this sidecar or by a person in Stripe's dashboard. A payment
// refunded in part is paid with the rest (an amount no order has, so a
// conflict, whose refund is that rest); refunded in full, it holds no money
// and is StatusFailed: never confirmed, reinstated or closed as paid. Only
// succeeded refunds count: while one is pending (or requires action) it may
// still fail and the money stay, so nothing can be said yet:
// ErrUnavailable, asked again later. An answer without the charge and its
// refunds cannot say what was refunded: ErrBadAnswer. (A charge with more
// refunds than one answer lists is read by its amount_refunded.)
func (p *payment) held(id string, received int64, ch *stripeapi.Charge, currency stripeapi.Currency) error {
	if ch == nil || ch.Object != "charge" || ch.Refunds == nil {
		return fmt.Errorf("%s succeeded, but the answer lacks its latest charge and its refunds: what was refunded of it cannot be told: %w", id, gateway.ErrBadAnswer)
	}
	refunded := ch.AmountRefunded
	if !ch.Refunds.HasMore {
		refunded = 0
		var pending []string
		for _, r := range ch.Refunds.Data {
			switch {
			case r == nil:
			case r.Status == stripeapi.RefundStatusSucceeded:
				refunded += r.Amount
			case r.Status == stripeapi.RefundStatusPending || r.Status == stripeapi.RefundStatusRequiresAction:
				pending = append(pending, r.ID)
			}
		}
		if len(pending) > 0 {
			return fmt.Errorf("refund %s of %s is still on its way at Stripe: whether the money is held is known once it succeeds or fails: %w",
				strings.Join(pending, ", "), id, gateway.ErrUnavailable)
		}
	}
	if refunded < 0 || refunded > received {
		return fmt.Errorf("%s received %d with %d refunded: %w", id, received, refunded, gateway.ErrBadAnswer)
	}
	p.received, p.refunded = received, refunded
	if ch.Created > 0 {
		p.paidAt = &gateway.Timestamp{Time: time.Unix(ch.Created, 0).UTC()}
	}
	if ch.Disputed {
		p.disputedCharge = ch.ID
	}
	if received == refunded {
		p.status = gateway.StatusFailed
		return nil
	}
	var err error
	if p.amount, p.currency, err = money(id, received-refunded, currency); err != nil {
		return err
	}
	p.status = gateway.StatusPaid
	return nil
}

func checkOrder(orderID, id string, metadata map[string]string) error {
	if got, ok := metadata["order_id"]; ok && orderID != "" && got != orderID {
		return fmt.Errorf("%s belongs to order %s, not %q: %w", id, quote(got), orderID, gateway.ErrBadAnswer)
	}
	return nil
}

// money converts a Stripe amount and currency for the contract.
func money(id string, minor int64, currency stripeapi.Currency) (gateway.Amount, gateway.Currency, error) {
	c := strings.ToUpper(string(currency))
	var cur gateway.Currency
	if err := json.Unmarshal([]byte(`"`+c+`"`), &cur); err != nil || len(c) != 3 {
		return "", "", fmt.Errorf("%s has currency %s: %w", id, quote(string(currency)), gateway.ErrBadAnswer)
	}
	a, err := Major(minor, c)
	if err != nil {
		return "", "", fmt.Errorf("%s: %v: %w", id, err, gateway.ErrBadAnswer)
	}
	return a, cur, nil
}

// classify maps a stripe-go error to the gateway's error kinds.
func classify(err error) error {
	var se *stripeapi.Error
	if errors.Is(err, errAnswerTooLarge) {
		return fmt.Errorf("%w: %w", gateway.ErrBadAnswer, err)
	}
	if !errors.As(err, &se) {
		var urlErr *url.Error
		var netErr net.Error
		if errors.As(err, &urlErr) || errors.As(err, &netErr) ||
			errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			// Connection refused, reset, timed out: nothing was learnt.
			return fmt.Errorf("%w: %w", gateway.ErrUnavailable, err)
		}
		// An answer stripe-go could not read (malformed JSON).
		return fmt.Errorf("%w: %w", gateway.ErrBadAnswer, err)
	}
	what := fmt.Sprintf("Stripe %s (HTTP %d, code %s, request %s): %s", se.Type, se.HTTPStatusCode, quote(string(se.Code)), se.RequestID, se.Msg)
	if se.Type == errorTypeNotStripe && se.HTTPStatusCode != http.StatusTooManyRequests {
		// A 4xx that is not Stripe's answer (a proxy's page): nothing
		// says what Stripe thinks of the request.
		return fmt.Errorf("%s: %w", se.Msg, gateway.ErrBadAnswer)
	}
	switch {
	case se.HTTPStatusCode == http.StatusTooManyRequests || se.Code == stripeapi.ErrorCodeRateLimit ||
		se.Code == stripeapi.ErrorCodeLockTimeout || se.HTTPStatusCode >= 500 || se.Type == stripeapi.ErrorTypeAPI ||
		se.HTTPStatusCode == http.StatusConflict:
		return fmt.Errorf("%s: %w", what, gateway.ErrUnavailable)
	case se.HTTPStatusCode == http.StatusUnauthorized || se.HTTPStatusCode == http.StatusForbidden:
		return fmt.Errorf("%s: check the API key: %w", what, gateway.ErrBadRequest)
	case se.Type == stripeapi.ErrorTypeInvalidRequest || se.Type == stripeapi.ErrorTypeIdempotency ||
		se.Type == stripeapi.ErrorTypeCard || se.HTTPStatusCode == http.StatusBadRequest || se.HTTPStatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: %w", what, gateway.ErrBadRequest)
	default:
		return fmt.Errorf("%s: %w", what, gateway.ErrBadAnswer)
	}
}

func (d *Driver) done(op string, start time.Time, err error) {
	if d.observe == nil {
		return
	}
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, gateway.ErrDisputed):
		result = "disputed" // not an outage
	case errors.Is(err, gateway.ErrChargedBack):
		result = "charged_back"
	case errors.Is(err, gateway.ErrUnavailable):
		result = "unavailable"
	case errors.Is(err, gateway.ErrBadRequest):
		result = "bad_request"
	default:
		result = "bad_answer"
	}
	d.observe(op, result, time.Since(start))
}

func quote(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%q...", s[:80])
	}
	return fmt.Sprintf("%q", s)
}
