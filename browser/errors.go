package browser

import "net/http"

// reasonPhrase is the "error" of an error body: the HTTP reason phrase of status, as the
// tool's NestJS server writes it ("Bad Request", "Not Found"). The machine code goes in
// the body's "code".
func reasonPhrase(status int) string {
	if status == 499 { // nginx's, which net/http does not name
		return "Client Closed Request"
	}
	if text := http.StatusText(status); text != "" {
		return text
	}
	return "Error"
}

// msgClientCertNameTaken is the tool's message for a client certificate name in use.
const msgClientCertNameTaken = "This client certificate name is already in use."

// Error codes of mode detection and sentinel discovery.
const (
	// errSentinelAsStandalone: a sentinel registered as STANDALONE.
	errSentinelAsStandalone = "SENTINEL_AS_STANDALONE"
)
