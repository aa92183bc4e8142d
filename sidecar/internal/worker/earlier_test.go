package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// A paid answer is an earlier order's only when the gateway says it took the
// payment more than clockSkew before the order was created, and the payment
// is not one the shop began for the order.
func TestEarlierOrders(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	st := orderState{CreatedAt: created}
	at := func(d time.Duration) *gateway.Timestamp { return &gateway.Timestamp{Time: created.Add(d)} }
	ref := gateway.Ref{OrderID: "A1", PaymentIDs: []string{"P-begun"}}
	for name, c := range map[string]struct {
		g    gateway.Order
		want bool
	}{
		"no paid_at":                    {gateway.Order{Status: "paid", PaymentID: "P-old"}, false},
		"an hour before":                {gateway.Order{Status: "paid", PaymentID: "P-old", PaidAt: at(-time.Hour)}, true},
		"just past the skew":            {gateway.Order{Status: "paid", PaymentID: "P-old", PaidAt: at(-gateway.ClockSkew - time.Millisecond)}, true},
		"at the skew":                   {gateway.Order{Status: "paid", PaymentID: "P-old", PaidAt: at(-gateway.ClockSkew)}, false},
		"after the order":               {gateway.Order{Status: "paid", PaymentID: "P-old", PaidAt: at(time.Second)}, false},
		"begun for the order, long ago": {gateway.Order{Status: "paid", PaymentID: "P-begun", PaidAt: at(-time.Hour)}, false},
		"Go's zero time (unknown)":      {gateway.Order{Status: "paid", PaymentID: "P-old", PaidAt: &gateway.Timestamp{}}, false},
		"Unix's zero time (unknown)":    {gateway.Order{Status: "paid", PaymentID: "P-old", PaidAt: &gateway.Timestamp{Time: time.Unix(0, 0)}}, false},
		"another zone, an hour before":  {gateway.Order{Status: "paid", PaymentID: "P-old", PaidAt: &gateway.Timestamp{Time: created.Add(-time.Hour).In(time.FixedZone("CST", 8*3600))}}, true},
	} {
		require.Equal(t, c.want, earlierOrders(st, ref, c.g), name)
	}
}
