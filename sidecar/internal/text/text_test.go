package text

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRules(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"A-1", "注文-😀", "a b", "\uFFFD"} {
		require.True(t, ID(s, 64), "%q", s)
	}
	for _, s := range []string{"", ".", "..", "A\u202eB", "A\u200bB", "A\u2028B", "A\x85B", "A\nB", "\xff", "\U000E0041"} {
		require.False(t, ID(s, 64), "%q", s)
	}
	require.True(t, Plain(".", 1))
	require.False(t, Plain("abc", 2))
}
