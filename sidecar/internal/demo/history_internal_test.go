package demo

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

// The demo's histories show amounts as the database keeps them: a late
// payment of 9.00 EUR read "amount=9" and one of 12.50 "amount=12.5",
// because the event's detail went through float64 (and an amount beyond
// 2^53 minor units would have been shown rounded).
func TestHistoryShowsExactAmounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	for _, sql := range []string{
		"SELECT ordertimeout.put_stock('A', 10)",
		`SELECT ordertimeout.create_order('H1', '[{"sku":"A","qty":1}]', interval '1 hour', '{"amount": 9.00, "currency": "EUR"}')`,
		"SELECT ordertimeout.cancel_order('H1')",
		"SELECT ordertimeout.confirm_payment('H1', 'pay-h1', 9.00, 'EUR')",
		`SELECT ordertimeout.create_order('H2', '[{"sku":"A","qty":1}]', interval '1 hour', '{"amount": 123456789012.34, "currency": "EUR"}')`,
		"SELECT ordertimeout.cancel_order('H2')",
		"SELECT ordertimeout.confirm_payment('H2', 'pay-h2', 98765432109876.54, 'EUR')",
	} {
		_, err := db.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	for id, want := range map[string]string{"H1": "amount=9.00 ", "H2": "amount=98765432109876.54 "} {
		events, err := loadEvents(ctx, db, id)
		require.NoError(t, err)
		var b bytes.Buffer
		printHistory(&b, events)
		require.Contains(t, b.String(), want, b.String())
	}
}
