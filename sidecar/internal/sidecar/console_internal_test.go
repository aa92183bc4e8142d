package sidecar

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Without console users, the console is served (read-only) only on a
// loopback address.
func TestIsLoopbackAddr(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:9090": true,
		"127.0.0.2:0":    true,
		"[::1]:9090":     true,
		"localhost:9090": true,
		":9090":          false,
		"0.0.0.0:9090":   false,
		"10.0.0.5:9090":  false,
		"sidecar:9090":   false,
		"127.0.0.1":      false,
	} {
		require.Equal(t, want, isLoopbackAddr(addr), addr)
	}
}
