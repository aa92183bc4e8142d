package worker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every cause and transition that sends a webhook has one type. Issue 9
// reproduced: a late payment on a CANCELLED order and its resolution went
// out as order.cancelled (three cancels for one order), because the type was
// chosen by to_status before cause.
func TestEventType(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name, from, to, cause, detail, want string
	}{
		{"paid", "PAYING", "PAID", "payment", `{"payment_id":"p1"}`, TypePaid},
		{"paid from pending", "PENDING", "PAID", "payment", `{"payment_id":"p1"}`, TypePaid},
		{"timeout", "PENDING", "CANCELLED", "timeout", ``, TypeCancelled},
		{"caught by sweep", "PENDING", "CANCELLED", "sweep", ``, TypeCancelled},
		{"requested", "PENDING", "CANCELLED", "requested", `{"reason":"r"}`, TypeCancelled},
		{"late payment", "CANCELLED", "CANCELLED", "payment", `{"conflict_id":7,"kind":"late_payment"}`, TypeConflict},
		{"late payment on a closed order", "CLOSED", "CANCELLED", "payment", `{"conflict_id":7}`, TypeConflict},
		{"double payment", "PAID", "PAID", "payment", `{"conflict_id":8,"kind":"double_payment"}`, TypeConflict},
		{"paid, found by reconciliation", "PENDING", "PAID", "reconcile", `{"payment_id":"p1"}`, TypePaid},
		{"late payment found by reconciliation", "CANCELLED", "CANCELLED", "reconcile", `{"conflict_id":9}`, TypeConflict},
		{"mismatch on a live order", "PAYING", "PAYING", "payment", `{"conflict_id":9}`, TypeConflict},
		{"refund started", "CANCELLED", "CANCELLED", "conflict", `{"conflict_id":7,"resolution":"refunding"}`, TypeRefunding},
		{"handed to a person", "CANCELLED", "CANCELLED", "conflict", `{"conflict_id":7,"handed_over_why":"sidecar: asked 10 times"}`, TypeHandedOver},
		{"refunded", "CANCELLED", "CANCELLED", "conflict", `{"conflict_id":7,"resolution":"refunded"}`, TypeConflictResolved},
		{"manual", "CANCELLED", "CANCELLED", "conflict", `{"conflict_id":7,"resolution":"manual"}`, TypeConflictResolved},
		{"reinstated", "CANCELLED", "PAID", "conflict", `{"conflict_id":7,"resolution":"reinstated"}`, TypeReinstated},
		{"double payment refunded", "PAID", "PAID", "conflict", `{"conflict_id":8,"resolution":"refunded"}`, TypeConflictResolved},
		{"closed", "CANCELLED", "CLOSED", "admin", ``, TypeChanged},
		{"back to pending", "PAYING", "PENDING", "payment", `{"payment_id":"p1","failed":true}`, TypeChanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := Event{FromStatus: str(tc.from), ToStatus: tc.to, Cause: tc.cause}
			if tc.detail != "" {
				ev.Detail = json.RawMessage(tc.detail)
			}
			require.Equal(t, tc.want, eventType(ev))
		})
	}
}
