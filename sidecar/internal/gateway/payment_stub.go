package gateway

// This file stands in for payments.go of branch recon, which implements
// (*Client).Payments over GET /v1/payments?since=. When recon is merged,
// delete this file: recon's Payment type and method replace both below.

import (
	"context"
	"fmt"
	"time"
)

// Payment statuses in a list of payments.
const (
	PaymentPaid     = "paid"
	PaymentRefunded = "refunded"
)

// Payment is one payment in the gateway's records (Gateway.Payments).
type Payment struct {
	OrderID   string   `json:"order_id"`
	PaymentID string   `json:"payment_id"`
	Amount    Amount   `json:"amount"`
	Currency  Currency `json:"currency"`
	// Status is PaymentPaid or PaymentRefunded.
	Status string    `json:"status"`
	At     time.Time `json:"at"`
}

// Payments is not implemented by this build of the JSON contract client
// (branch recon adds it).
func (c *Client) Payments(ctx context.Context, since time.Time, limit int) ([]Payment, error) {
	return nil, fmt.Errorf("list payments since %s: not implemented by the http driver in this build: %w", since.Format(time.RFC3339), ErrBadRequest)
}
