package blob

import (
	"net/url"
	"sort"
	"strings"
)

const redacted = "xxxxx"

// Query parameters whose values are secrets (compared case-insensitively): S3 presigned
// URLs, Azure SAS tokens and the usual names.
var secretParams = map[string]bool{
	"x-amz-signature":      true,
	"x-amz-credential":     true,
	"x-amz-security-token": true,
	"x-goog-signature":     true,
	"x-goog-credential":    true,
	"signature":            true,
	"sig":                  true,
	"token":                true,
	"access_token":         true,
	"password":             true,
	"pass":                 true,
	"secret":               true,
	"secret_key":           true,
	"secretkey":            true,
	"key":                  true,
	"accountkey":           true,
	"sharedaccesskey":      true,
}

// Redact returns uri with the password of its userinfo (and any secret-looking query
// parameter) replaced by "xxxxx", for messages and logs: "s3://AK:SK@h/b/k" gives
// "s3://AK:xxxxx@h/b/k", "abs://:KEY@acct/c/b" gives "abs://:xxxxx@acct/c/b". A user name
// without a password is kept. Something that does not parse as a URI is redacted from its
// first "://" (or its start) to the last "@" before the path, and its query is dropped.
func Redact(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.Opaque != "" {
		return redactLoose(uri)
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), redacted)
		}
	}
	u.Fragment, u.RawFragment = "", ""
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = redacted
		} else {
			changed := false
			keys := make([]string, 0, len(q))
			for k := range q {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if secretParams[strings.ToLower(k)] {
					for i := range q[k] {
						q[k][i] = redacted
					}
					changed = true
				}
			}
			if changed {
				u.RawQuery = q.Encode()
			}
		}
	}
	return u.String()
}

func redactLoose(uri string) string {
	start := 0
	if i := strings.Index(uri, "://"); i >= 0 {
		start = i + 3
	}
	rest := uri[start:]
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	authority := rest[:end]
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		authority = redacted + authority[at:]
	}
	tail := rest[end:]
	if i := strings.IndexAny(tail, "?#"); i >= 0 {
		tail = tail[:i] + "?" + redacted
	}
	return uri[:start] + authority + tail
}
