package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

var orderIDInput = regexp.MustCompile(`<input id="order-id" [^>]*maxlength="([0-9]+)"`)

// An order id is 1 to 64 characters (code points, as char_length counts),
// but a browser's maxlength counts UTF-16 code units, two for a character
// outside the BMP (an emoji, CJK extension B): with maxlength="64" such an
// id could not be typed or pasted in full into the lookup form. The field
// lets any id of 64 characters through, and the server, which counts
// characters, finds the order and refuses a longer id, saying why.
func TestOrderLookupTakesIDsOutsideTheBMP(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	id := strings.Repeat("😀", 32) + strings.Repeat("𠀀", 32) // 64 characters, 128 UTF-16 units, 256 bytes
	sidecartest.Exec(t, s.DB, `SELECT ordertimeout.create_order($1, '[{"sku":"A","qty":1}]', interval '1 hour')`, id)

	a := site.do(t, http.MethodGet, "/console/order", viewer, nil, nil)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	m := orderIDInput.FindStringSubmatch(a.Body)
	require.NotNil(t, m, "no maxlength on the order id field: %s", a.Body)
	maxLength, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.GreaterOrEqual(t, maxLength, len(utf16.Encode([]rune(id))),
		"the order id field cannot take an order id of 64 characters outside the BMP")

	a = site.do(t, http.MethodGet, "/console/order?id="+url.QueryEscape(id), viewer, nil, nil)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Contains(t, a.Body, `<span class="mono">`+id+`</span>`)
	require.Contains(t, a.Body, `<span class="state state-PENDING" id="order-status">PENDING</span>`)

	for _, tooLong := range []string{strings.Repeat("😀", 65), strings.Repeat("x", 65)} {
		a = site.do(t, http.MethodGet, "/console/order?id="+url.QueryEscape(tooLong), viewer, nil, nil)
		require.Equal(t, http.StatusBadRequest, a.Status, a.Body)
		require.Contains(t, a.Body, "An order id is 1 to 64 characters")
	}
}
