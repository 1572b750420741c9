package browser

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// Usernames are those of Redis 6+ ACL users (clouddb's own ACL users among them): a
// connection with a username authenticates with AUTH username password; without one,
// with AUTH password (the default user). STANDALONE and CLUSTER records take username,
// as RedisInsight's do; a SENTINEL record takes sentinelMaster.username for the master
// and sentinelUsername for the sentinel. A username is not a secret: responses show it.

// maxUsernameBytes caps usernames.
const maxUsernameBytes = 512

// readUsername takes an optional ACL username: not empty, without spaces or control
// characters (the ACL syntax of Redis cannot name such a user).
func readUsername(o *object, field string) (string, error) {
	u, err := o.nonEmpty(field, false, maxUsernameBytes)
	if err != nil {
		return "", err
	}
	if strings.ContainsFunc(u, func(r rune) bool { return r <= 0x20 || r == 0x7f }) {
		return "", invalid(o.name(field), "must be an ACL username, without spaces or control characters")
	}
	return u, nil
}

// sentinelOptions are the options of a client of c's sentinel: o with the sentinel's
// own username.
func sentinelOptions(o *redis.Options, c *connection) *redis.Options {
	o.Username = c.SentinelUsername
	return o
}

// viewUsernames shows c's usernames in v.
func viewUsernames(v *connectionView, c *connection) {
	if c.Type == typeSentinel {
		v.SentinelUsername = c.SentinelUsername
		if v.SentinelMaster != nil {
			v.SentinelMaster.Username = c.Username
		}
		return
	}
	v.Username = c.Username
}

// viewServerVerification shows c's tls.verifyServerCert and tls.caCert ({id, name}) in v.
func viewServerVerification(v *connectionView, c *connection) {
	v.TLS.VerifyServerCert = c.VerifyServerCert
	if c.CACertID != 0 {
		v.TLS.CACert = &certificateView{ID: c.CACertID, Name: c.CACertName}
	}
}
