package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"
)

// Status values of a payment in the gateway's list (GET /v1/payments).
const (
	PaymentPaid     = "paid"
	PaymentRefunded = "refunded"
)

// MaxPaymentsLimit is the largest limit of a Payments call.
const MaxPaymentsLimit = 1000

// maxOrderIDLength is the most characters of an order id (the database's
// limit).
const maxOrderIDLength = 64

// maxPaymentPages bounds the pages one Payments call follows.
const maxPaymentPages = 100

// MaxZoneOffset is the largest offset from UTC, east or west, of a time that
// PostgreSQL accepts as text: 15:59. It refuses 16:00 and more (SQLSTATE
// 22009), while Go's RFC 3339 parser accepts offsets up to 24:00.
const MaxZoneOffset = 15*time.Hour + 59*time.Minute

// CheckZoneOffset refuses a time whose zone offset is beyond MaxZoneOffset,
// east or west: the database would refuse it.
func CheckZoneOffset(t time.Time) error {
	_, offset := t.Zone()
	if d := time.Duration(offset) * time.Second; d > MaxZoneOffset || d < -MaxZoneOffset {
		return fmt.Errorf("zone offset must be from -15:59 to +15:59 (what PostgreSQL accepts), got %s", t.Format("-07:00"))
	}
	return nil
}

// ParseTime reads an RFC 3339 time with a zone whose offset PostgreSQL
// accepts (CheckZoneOffset): the times of the gateway's records, and of the
// reconcile files. time.Parse alone is laxer than RFC 3339: it reads a zone
// minute of 60 ("+00:60") as the next hour, takes a comma before the
// fraction and a one-digit hour; so does time.Time's UnmarshalJSON.
func ParseTime(s string) (time.Time, error) {
	if !rfc3339Shape.MatchString(s) {
		return time.Time{}, fmt.Errorf("must be an RFC 3339 time with a zone like 2026-12-01T10:00:00Z, got %s", quote(s))
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("must be an RFC 3339 time with a zone like 2026-12-01T10:00:00Z, got %s", quote(s))
	}
	if err := CheckZoneOffset(t); err != nil {
		return time.Time{}, fmt.Errorf("%v, in %s", err, quote(s))
	}
	return t, nil
}

// rfc3339Shape is RFC 3339's date-time: two-digit fields, a period before
// the fraction, a zone of Z or ±hh:mm with minutes below 60 (the values'
// ranges are time.Parse's to check).
var rfc3339Shape = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-5][0-9])$`)

// Payment is one transaction in the gateway's records: a payment (Status
// PaymentPaid, At when it was paid) or its refund (PaymentRefunded, At when
// it was refunded, Amount the amount refunded).
type Payment struct {
	PaymentID string    `json:"payment_id"`
	OrderID   string    `json:"order_id"`
	Amount    Amount    `json:"amount"`
	Currency  Currency  `json:"currency"`
	Status    string    `json:"status"`
	At        time.Time `json:"at"`
}

// UnmarshalJSON reads a payment of the gateway's list with its at read by
// ParseTime, not by time.Time's laxer parser. A missing or null at leaves At
// zero (validate: "at is missing").
func (p *Payment) UnmarshalJSON(b []byte) error {
	type plain Payment
	var w struct {
		plain
		At *string `json:"at"` // shadows plain's At
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = Payment(w.plain)
	p.At = time.Time{}
	if w.At != nil {
		t, err := ParseTime(*w.At)
		if err != nil {
			return fmt.Errorf("at: %w", err)
		}
		p.At = t
	}
	return nil
}

// paymentKey is a transaction's whole record, as a map key.
type paymentKey struct {
	paymentID, orderID, amount, currency, status string
	at                                           int64
}

func keyOf(p Payment) paymentKey {
	return paymentKey{p.PaymentID, p.OrderID, string(p.Amount), string(p.Currency), p.Status, p.At.UnixNano()}
}

// SameRecord reports whether a and b are the same transaction read twice:
// every field equal (the time to the nanosecond, whatever its zone).
func SameRecord(a, b Payment) bool { return keyOf(a) == keyOf(b) }

// paymentsAnswer is the body of GET /v1/payments.
type paymentsAnswer struct {
	Payments []json.RawMessage `json:"payments"`
	HasMore  *bool             `json:"has_more"`
}

// Payments returns up to limit (1 to MaxPaymentsLimit) transactions the
// gateway recorded at or after since, oldest first (by At, then PaymentID).
// It follows the gateway's has_more, so fewer than limit means there are no
// more for now. Ask again from the last one's At to read on: transactions at
// exactly that moment come again, and the caller drops those it has read
// already (the same record, SameRecord; another record of a payment and
// status is another transaction, such as a second partial refund).
//
// Every transaction is checked as strictly as the other answers: a payment
// id and order id the database accepts, an amount in the grammar of
// ParseAmount, a currency, a status paid or refunded, an RFC 3339 time with
// a zone offset PostgreSQL accepts (CheckZoneOffset), not before since and
// not before the one before it. Anything else, and a page
// without has_more or longer than asked, is ErrBadAnswer.
func (c *Client) Payments(ctx context.Context, since time.Time, limit int) ([]Payment, error) {
	if limit < 1 || limit > MaxPaymentsLimit {
		return nil, fmt.Errorf("list payments: limit must be 1 to %d, got %d: %w", MaxPaymentsLimit, limit, ErrBadRequest)
	}
	var out []Payment
	// A transaction read again (the next page starts at the last one's
	// moment) is the same record; two refunds of one payment (partial
	// refunds) are two records, and both are returned.
	seen := map[paymentKey]bool{}
	cursor := since
	for range maxPaymentPages {
		page, more, err := c.paymentsPage(ctx, cursor, limit)
		if err != nil {
			return nil, err
		}
		added := 0
		for _, p := range page {
			if p.At.Before(since) {
				return nil, fmt.Errorf("list payments since %s: payment %s at %s is before since: %w",
					since.Format(time.RFC3339Nano), quote(p.PaymentID), p.At.Format(time.RFC3339Nano), ErrBadAnswer)
			}
			k := keyOf(p)
			if seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, p)
			added++
		}
		if !more || len(out) >= limit {
			if len(out) > limit {
				out = out[:limit]
			}
			return out, nil
		}
		if added == 0 {
			return nil, fmt.Errorf("list payments since %s: has_more, but the page brings nothing new (more than %d payments at one moment?): %w",
				cursor.Format(time.RFC3339Nano), limit, ErrBadAnswer)
		}
		cursor = page[len(page)-1].At
	}
	return nil, fmt.Errorf("list payments since %s: more than %d pages: %w", since.Format(time.RFC3339Nano), maxPaymentPages, ErrBadAnswer)
}

// paymentsPage asks for one page.
func (c *Client) paymentsPage(ctx context.Context, since time.Time, limit int) ([]Payment, bool, error) {
	q := url.Values{}
	q.Set("since", since.UTC().Format(time.RFC3339Nano))
	q.Set("limit", strconv.Itoa(limit))
	var a paymentsAnswer
	what := "list payments since " + since.UTC().Format(time.RFC3339Nano)
	if err := c.do(ctx, "payments", http.MethodGet, "/v1/payments?"+q.Encode(), nil, &a); err != nil {
		return nil, false, fmt.Errorf("%s: %w", what, err)
	}
	if a.HasMore == nil {
		return nil, false, fmt.Errorf("%s: has_more is missing: %w", what, ErrBadAnswer)
	}
	if a.Payments == nil {
		return nil, false, fmt.Errorf("%s: payments is missing: %w", what, ErrBadAnswer)
	}
	if len(a.Payments) > limit {
		return nil, false, fmt.Errorf("%s: %d payments, more than the limit %d: %w", what, len(a.Payments), limit, ErrBadAnswer)
	}
	page := make([]Payment, 0, len(a.Payments))
	for i, raw := range a.Payments {
		var p Payment
		if err := decodeAnswer(raw, &p); err != nil {
			return nil, false, fmt.Errorf("%s: payment %d: %v: %w", what, i, err, ErrBadAnswer)
		}
		if err := p.validate(); err != nil {
			return nil, false, fmt.Errorf("%s: payment %d: %v: %w", what, i, err, ErrBadAnswer)
		}
		if i > 0 && p.At.Before(page[i-1].At) {
			return nil, false, fmt.Errorf("%s: payment %d is older than the one before it: %w", what, i, ErrBadAnswer)
		}
		page = append(page, p)
	}
	return page, *a.HasMore, nil
}

func (p *Payment) validate() error {
	if err := checkID("payment_id", p.PaymentID); err != nil {
		return err
	}
	if p.OrderID == "" {
		return errors.New("order_id is missing")
	}
	if utf8.RuneCountInString(p.OrderID) > maxOrderIDLength {
		return fmt.Errorf("order_id is longer than %d characters", maxOrderIDLength)
	}
	if err := checkID("order_id", p.OrderID); err != nil {
		return err
	}
	if p.Amount == "" {
		return errors.New("amount is missing")
	}
	if p.Currency == "" {
		return errors.New("currency is missing")
	}
	if p.Status != PaymentPaid && p.Status != PaymentRefunded {
		return fmt.Errorf("unknown status %s", quote(p.Status))
	}
	if p.At.IsZero() {
		return errors.New("at is missing")
	}
	// The database keeps microseconds.
	p.At = p.At.Truncate(time.Microsecond)
	return nil
}
