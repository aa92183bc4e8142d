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

func TestNote(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"", 500, "-"},
		{"gateway said: failed", 500, "gateway said: failed"},
		{"two\nlines\u202eevil", 500, "two\uFFFDlines\uFFFDevil"},
		{"bad \xff byte", 500, "bad \uFFFD byte"},
		{"注文12345", 5, "注文12…"},
		{"注文12", 4, "注文12"},
	} {
		got := Note(c.in, c.max)
		require.Equal(t, c.want, got, "%q", c.in)
		require.True(t, Plain(got, c.max), "%q is plain", got)
	}
}
