package console

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The session is the signed-in user's API key pair, sealed into a cookie: no session is
// stored on the server, and a restart (a new sealing key) signs everyone out. Signing out
// is remembered, per API key, for as long as a session lives: it ends every session of
// that key issued before it, so a copy of the cookie does not outlive the sign-out.

// sessionCookie is the name of the session cookie.
const sessionCookie = "clouddb_console"

// sessionLifetime bounds how long a sealed session is accepted: the cookie itself lives
// until the browser ends its session, but a copy taken from a browser stops working.
const sessionLifetime = 12 * time.Hour

// session is what the cookie holds.
type session struct {
	Key    string `json:"k"`
	Secret string `json:"s"`
	// Account is the account's name, for the page header (saves an API call per page).
	Account string `json:"a"`
	// Issued is when the user signed in, in Unix nanoseconds.
	Issued int64 `json:"t"`
}

// sealer seals sessions with AES-256-GCM under a key made at process start.
type sealer struct {
	aead cipher.AEAD
	now  func() time.Time

	mu sync.Mutex
	// signedOut is when each API key last signed out; entries older than a session's
	// lifetime are forgotten. Only a valid session signs out, so it holds keys that the
	// API accepted.
	signedOut map[string]time.Time
}

func newSealer() *sealer {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (it aborts the process instead)
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err) // AES always has a GCM mode
	}
	return &sealer{aead: aead, now: time.Now, signedOut: map[string]time.Time{}}
}

// seal encrypts a session into a cookie value: base64url(nonce | ciphertext). The cookie's
// name is the additional data, so a value cannot be replayed under another name.
func (s *sealer) seal(sess session) string {
	plain, err := json.Marshal(sess)
	if err != nil {
		panic(err) // a struct of strings and a number always encodes
	}
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(sessionCookie)))
}

var errNoSession = errors.New("console: no valid session")

// open decrypts a cookie value; anything forged, altered, sealed by another process or
// too old is errNoSession.
func (s *sealer) open(v string) (*session, error) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return nil, errNoSession
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(sessionCookie))
	if err != nil {
		return nil, errNoSession
	}
	var sess session
	if json.Unmarshal(plain, &sess) != nil || sess.Key == "" || sess.Secret == "" {
		return nil, errNoSession
	}
	issued := time.Unix(0, sess.Issued)
	age := s.now().Sub(issued)
	if age < -time.Minute || age > sessionLifetime {
		return nil, errNoSession
	}
	s.mu.Lock()
	out, ok := s.signedOut[sess.Key]
	s.mu.Unlock()
	if ok && !issued.After(out) {
		return nil, errNoSession
	}
	return &sess, nil
}

// signOut ends every session of the API key issued until now.
func (s *sealer) signOut(key string) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, t := range s.signedOut {
		if now.Sub(t) > sessionLifetime+time.Minute {
			delete(s.signedOut, k) // its sessions are too old anyway
		}
	}
	s.signedOut[key] = now
}

// session reads the request's session, or errNoSession.
func (s *sealer) session(r *http.Request) (*session, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, errNoSession
	}
	return s.open(c.Value)
}

// setCookie sends the sealed session: a session cookie (no Expires or Max-Age), out of
// scripts' reach, never sent with a request another site starts, and over TLS only when
// the console was reached over TLS.
func (s *sealer) setCookie(w http.ResponseWriter, r *http.Request, sess session) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: s.seal(sess), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r),
	})
}

// clearCookie removes the session cookie.
func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r),
	})
}

// overTLS reports whether the browser reached the console over TLS: directly, or through
// a TLS-terminating proxy that says so (X-Forwarded-Proto: https). The header is trusted
// from anyone because it can only make the cookie stricter: a client that sends it over
// plain HTTP gets a cookie its browser will not send back.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
