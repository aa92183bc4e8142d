package webhook_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/webhook"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	body := []byte(`{"id":"evt_1","type":"order.cancelled","order_id":"A1"}`)
	now := time.Unix(1_700_000_000, 0)
	header := webhook.Sign(secret, body, now)
	require.Regexp(t, `^t=1700000000,v1=[0-9a-f]{64}$`, header)

	t.Run("authentic and fresh", func(t *testing.T) {
		require.NoError(t, webhook.Verify(secret, header, body, 5*time.Minute, now.Add(time.Minute)))
	})
	t.Run("tampered body", func(t *testing.T) {
		tampered := []byte(`{"id":"evt_1","type":"order.paid","order_id":"A1"}`)
		require.ErrorIs(t, webhook.Verify(secret, header, tampered, 5*time.Minute, now), webhook.ErrMismatch)
	})
	t.Run("other secret", func(t *testing.T) {
		require.ErrorIs(t, webhook.Verify("other", header, body, 5*time.Minute, now), webhook.ErrMismatch)
	})
	t.Run("old timestamp is a replay", func(t *testing.T) {
		require.ErrorIs(t, webhook.Verify(secret, header, body, 5*time.Minute, now.Add(6*time.Minute)), webhook.ErrStale)
	})
	t.Run("timestamp from the future", func(t *testing.T) {
		require.ErrorIs(t, webhook.Verify(secret, header, body, 5*time.Minute, now.Add(-6*time.Minute)), webhook.ErrStale)
	})
	t.Run("timestamp changed to look fresh", func(t *testing.T) {
		later := now.Add(time.Hour)
		forged := "t=" + strconv.FormatInt(later.Unix(), 10) + header[len("t=1700000000"):]
		require.ErrorIs(t, webhook.Verify(secret, forged, body, 5*time.Minute, later), webhook.ErrMismatch)
	})
	t.Run("several signatures, one valid (secret rotation)", func(t *testing.T) {
		rotated := header + ",v1=" + "00"
		require.NoError(t, webhook.Verify(secret, rotated, body, 5*time.Minute, now))
	})
	t.Run("malformed", func(t *testing.T) {
		for _, h := range []string{"", "v1=abc", "t=1700000000", "t=abc,v1=00", "garbage"} {
			require.ErrorIs(t, webhook.Verify(secret, h, body, 5*time.Minute, now), webhook.ErrMalformed, "header %q", h)
		}
	})
}
