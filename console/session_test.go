package console

import (
	"crypto/tls"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSessionSeal(t *testing.T) {
	t.Parallel()
	s := newSealer()
	now := time.Now()
	s.now = func() time.Time { return now }
	sess := session{Key: "k", Secret: "the-secret", Account: "acc", Issued: now.UnixNano()}
	v := s.seal(sess)
	require.NotContains(t, v, "the-secret")
	got, err := s.open(v)
	require.NoError(t, err)
	require.Equal(t, sess, *got)
	require.NotEqual(t, v, s.seal(sess), "a fresh nonce every time")

	// Altered at any byte (the nonce, the ciphertext, the tag), cut short, or not
	// base64: no session.
	raw, err := base64.RawURLEncoding.DecodeString(v)
	require.NoError(t, err)
	for _, i := range []int{0, len(raw) / 2, len(raw) - 1} {
		bad := append([]byte{}, raw...)
		bad[i] ^= 1
		_, err = s.open(base64.RawURLEncoding.EncodeToString(bad))
		require.ErrorIs(t, err, errNoSession, "byte %d", i)
	}
	for _, bad := range []string{"", "abc", v[:20], "!!!" + v} {
		_, err = s.open(bad)
		require.ErrorIs(t, err, errNoSession, "%q", bad)
	}

	// Another process (a restart) has another key: its cookies open nowhere else.
	_, err = newSealer().open(v)
	require.ErrorIs(t, err, errNoSession)

	// Too old.
	s.now = func() time.Time { return now.Add(sessionLifetime + time.Second) }
	_, err = s.open(v)
	require.ErrorIs(t, err, errNoSession)
}

// The cookie is Secure when the console was reached over TLS, directly or through a
// proxy that says so.
func TestSessionCookieSecureOverTLS(t *testing.T) {
	t.Parallel()
	s := newSealer()
	for i, overTLS := range []bool{false, true, true, false} {
		r := httptest.NewRequest(http.MethodPost, "/console/signin", nil)
		switch i {
		case 1:
			r.TLS = &tls.ConnectionState{}
		case 2:
			r.Header.Set("X-Forwarded-Proto", "https")
		case 3:
			r.Header.Set("X-Forwarded-Proto", "http")
		}
		w := httptest.NewRecorder()
		s.setCookie(w, r, session{Key: "k", Secret: "s", Issued: time.Now().UnixNano()})
		c := w.Result().Cookies()
		require.Len(t, c, 1)
		require.Equal(t, overTLS, c[0].Secure)
		require.True(t, c[0].HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, c[0].SameSite)
		require.Zero(t, c[0].MaxAge)
		require.True(t, c[0].Expires.IsZero())

		w = httptest.NewRecorder()
		clearCookie(w, r)
		require.Equal(t, overTLS, strings.Contains(w.Header().Get("Set-Cookie"), "Secure"))
		require.Contains(t, w.Header().Get("Set-Cookie"), "Max-Age=0")
	}
}

// A sign-out ends the key's sessions issued until then, not those issued after, nor
// another key's; it is forgotten once those sessions would be too old anyway.
func TestSealerSignOut(t *testing.T) {
	t.Parallel()
	s := newSealer()
	now := time.Now()
	s.now = func() time.Time { return now }
	before := s.seal(session{Key: "k", Secret: "s", Issued: now.UnixNano()})
	otherKey := s.seal(session{Key: "k2", Secret: "s", Issued: now.UnixNano()})
	s.signOut("k")
	_, err := s.open(before)
	require.ErrorIs(t, err, errNoSession)
	_, err = s.open(otherKey)
	require.NoError(t, err)

	now = now.Add(time.Nanosecond)
	after := s.seal(session{Key: "k", Secret: "s", Issued: now.UnixNano()})
	_, err = s.open(after)
	require.NoError(t, err)

	now = now.Add(sessionLifetime + 2*time.Minute)
	s.signOut("k2")
	require.Len(t, s.signedOut, 1, "k's sign-out is forgotten")
	require.Contains(t, s.signedOut, "k2")
}
