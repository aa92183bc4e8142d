package worker

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
)

// A job uses the token it holds only if it comes back for it at most the
// grace late. Jobs come back late together after River's leader was missing
// (a restart: they wait for the new leader's first scheduler pass); with a
// grace of a second, a second of held tokens then went out at once on top
// of the rate (TestThrottledBacklogKeepsTheRateAcrossARestart under load:
// 27 to 30 closes in its busiest 2 s, 26 allowed).
func TestHeldSlotIsUsedOnlyWithinTheGrace(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)
	job := func(at time.Time, attempt, snoozes int) *rivertype.JobRow {
		slot, err := json.Marshal(gatewaySlot{At: at, Attempt: attempt, Snoozes: snoozes})
		require.NoError(t, err)
		return &rivertype.JobRow{Attempt: 2,
			Metadata: fmt.Appendf(nil, `{"snoozes": 3, %q: %s}`, slotKey, slot)}
	}
	const grace = 100 * time.Millisecond
	for _, c := range []struct {
		name      string
		job       *rivertype.JobRow
		slotsFrom time.Time
		grace     time.Duration
		left      time.Duration
		ok        bool
	}{
		{"due later", job(now.Add(300*time.Millisecond), 2, 3), time.Time{}, grace, 300 * time.Millisecond, true},
		{"due now", job(now, 2, 3), time.Time{}, grace, 0, true},
		{"late within the grace", job(now.Add(-grace), 2, 3), time.Time{}, grace, -grace, true},
		{"later than the grace", job(now.Add(-grace-time.Millisecond), 2, 3), time.Time{}, grace, 0, false},
		{"a second late, under the largest grace", job(now.Add(-MaxSlotGrace), 2, 3), time.Time{}, MaxSlotGrace, -MaxSlotGrace, true},
		{"due before this process started", job(now.Add(-10*time.Millisecond), 2, 3), now.Add(-5 * time.Millisecond), grace, 0, false},
		{"of an earlier attempt", job(now, 1, 3), time.Time{}, grace, 0, false},
		{"of an earlier run", job(now, 2, 2), time.Time{}, grace, 0, false},
		{"none", &rivertype.JobRow{Attempt: 2, Metadata: []byte(`{"snoozes": 3}`)}, time.Time{}, grace, 0, false},
		{"unreadable", &rivertype.JobRow{Attempt: 2, Metadata: fmt.Appendf(nil, `{%q: "soon"}`, slotKey)}, time.Time{}, grace, 0, false},
	} {
		left, ok := heldSlot(c.job, now, c.slotsFrom, c.grace)
		require.Equal(t, c.ok, ok, c.name)
		if ok {
			require.Equal(t, c.left, left, c.name)
		}
	}
}

// SlotGrace is bounded by MaxSlotGrace, its default.
func TestSlotGraceIsAtMostASecond(t *testing.T) {
	t.Parallel()
	for set, want := range map[time.Duration]time.Duration{
		0:                      MaxSlotGrace,
		-time.Second:           MaxSlotGrace,
		120 * time.Millisecond: 120 * time.Millisecond,
		MaxSlotGrace:           MaxSlotGrace,
		time.Minute:            MaxSlotGrace,
	} {
		require.Equal(t, want, (&Deps{SlotGrace: set}).slotGrace(), "SlotGrace %v", set)
	}
}
