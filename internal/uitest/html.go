package uitest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
)

// The pages' test contract is their data-testid attributes; these read a parsed page by
// them, for the HTTP-level tests of both UIs.

// Attr is n's attribute name, or "".
func Attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// All returns the elements under n (n included) whose data-testid is id, in document
// order.
func All(n *html.Node, id string) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && Attr(n, "data-testid") == id {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

// One returns the only element under n whose data-testid is id.
func One(t *testing.T, n *html.Node, id string) *html.Node {
	t.Helper()
	found := All(n, id)
	require.Len(t, found, 1, "elements with data-testid %q", id)
	return found[0]
}

// Text is the text content of n, with runs of white space folded.
func Text(n *html.Node) string {
	var sb strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			sb.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(sb.String()), " ")
}
