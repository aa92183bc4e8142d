package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/tests/internal/dbstate"
)

// failHistory is one order with one payment that one fail_payment call
// failed back to PENDING (the event), and the calls given, in the order they
// returned, as the model records them.
func failHistory(calls ...*call) ([]*call, *dbstate.State) {
	paying := "PAYING"
	s := &dbstate.State{
		Orders:   map[string]*dbstate.Order{"order-00001": {ID: "order-00001", Status: "PENDING"}},
		Payments: map[string]*dbstate.Payment{"pay-000001": {ID: "pay-000001", OrderID: "order-00001", Status: "failed"}},
		Events: []dbstate.Event{{ID: 7, OrderID: "order-00001", From: &paying, To: "PENDING", Cause: "payment",
			Detail: map[string]any{"payment_id": "pay-000001", "failed": true}}},
	}
	return calls, s
}

func failCall(seq int64, result string, start, end time.Duration) *call {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	return &call{Seq: seq, Op: "fail", Order: "order-00001", Payment: "pay-000001", Result: result,
		Start: t0.Add(start), End: t0.Add(end)}
}

// TestCheckFailBacks replays the history of seed 1796141674941301362 (issue
// 9): an "ignored" answer that began and returned while the call that
// answered "pending" ran, and so was recorded first. Judged in the order the
// calls returned, the checker counted no "pending" answer yet and failed the
// run; judged on the whole history, it is a legal interleaving. The histories
// no interleaving explains must still be found.
func TestCheckFailBacks(t *testing.T) {
	pending := failCall(47, "pending", 0, 3*time.Millisecond)
	nested := failCall(48, "ignored", time.Millisecond, 2*time.Millisecond)
	require.Empty(t, checkFailBacks(failHistory(nested, pending)), "an ignored answer inside the pending call")
	require.Empty(t, checkFailBacks(failHistory(pending, failCall(49, "ignored", 4*time.Millisecond, 5*time.Millisecond))))

	before := failCall(46, "ignored", -2*time.Millisecond, -time.Millisecond)
	require.Len(t, checkFailBacks(failHistory(before, pending)), 1, "an answer returned before the pending call began")
	confirmed := &call{Seq: 45, Op: "confirm", Order: "order-00001", Payment: "pay-000001", Result: "paid",
		Start: before.Start, End: before.End}
	require.Len(t, checkFailBacks(failHistory(confirmed, pending)), 1, "a confirmation returned before the pending call began")

	require.Len(t, checkFailBacks(failHistory(nested)), 1, "an event without a pending answer")
	require.Len(t, checkFailBacks(failHistory(pending, failCall(50, "pending", time.Millisecond, 4*time.Millisecond))), 1,
		"two pending answers for one event")
	calls, s := failHistory(pending)
	s.Events = nil
	require.Len(t, checkFailBacks(calls, s), 1, "a pending answer without an event")
}
