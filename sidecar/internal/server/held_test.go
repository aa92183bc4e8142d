package server

import (
	"bytes"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// An answer written in many small pieces grows its buffer past the bytes
// written; the budget is charged with what the buffer holds (its capacity),
// and gets all of it back.
func TestHeldAnswerChargesItsBuffer(t *testing.T) {
	t.Parallel()
	var total atomic.Int64
	rec := httptest.NewRecorder()
	h := &heldAnswer{w: rec, total: &total, budget: 8 << 20}
	piece := bytes.Repeat([]byte("x"), 1000)
	for range 300 {
		n, err := h.Write(piece)
		require.NoError(t, err)
		require.Equal(t, len(piece), n)
		require.EqualValues(t, cap(h.body), total.Load(), "charged: the buffer's capacity")
	}
	require.Greater(t, cap(h.body), len(h.body), "the buffer grew ahead of the bytes written")
	require.Zero(t, rec.Body.Len(), "held, not sent")
	h.send()
	h.release()
	require.Zero(t, total.Load())
	require.Equal(t, 300*len(piece), rec.Body.Len())
}

// A buffer that would grow past the budget is not grown: what is held is
// sent, and the rest goes as it is written.
func TestHeldAnswerDoesNotGrowPastTheBudget(t *testing.T) {
	t.Parallel()
	var total atomic.Int64
	rec := httptest.NewRecorder()
	h := &heldAnswer{w: rec, total: &total, budget: 10_000}
	piece := bytes.Repeat([]byte("y"), 3000)
	for range 5 {
		_, err := h.Write(piece)
		require.NoError(t, err)
		require.LessOrEqual(t, total.Load(), int64(10_000))
	}
	require.True(t, h.sending, "past the budget, the answer is sent as written")
	require.Zero(t, total.Load(), "nothing held once sending")
	require.Equal(t, 15_000, rec.Body.Len())
	h.send()
	h.release()
	require.Zero(t, total.Load())
}
