package clouddb

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the size of the encryption key: AES-256.
const KeySize = 32

// sealedPrefix marks a sealed value, so that a store can tell it from plain text written
// before encryption was turned on.
const sealedPrefix = "sealed:v1:"

// Cipher seals secrets at rest (database passwords, cloud-account credentials, task
// payloads that carry them) with AES-256-GCM and a random nonce per value.
type Cipher struct {
	aead cipher.AEAD
}

// NewCipher returns a Cipher for a 32-byte key.
func NewCipher(key []byte) (*Cipher, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("encryption key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Cipher{aead: aead}, nil
}

// ParseKey reads a key written as base64 (standard or URL alphabet) or hex.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, dec := range []func(string) ([]byte, error){
		hex.DecodeString, base64.StdEncoding.DecodeString, base64.URLEncoding.DecodeString, base64.RawStdEncoding.DecodeString,
	} {
		if b, err := dec(s); err == nil && len(b) == KeySize {
			return b, nil
		}
	}
	return nil, fmt.Errorf("encryption key must be %d bytes written as base64 or hex", KeySize)
}

// NewKey returns a random key, base64-encoded.
func NewKey() string {
	b := make([]byte, KeySize)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// Seal encrypts plain. The empty string stays empty: there is nothing to hide and it keeps
// "unset" recognisable.
func (c *Cipher) Seal(plain string) string {
	if plain == "" {
		return ""
	}
	nonce := make([]byte, c.aead.NonceSize())
	rand.Read(nonce)
	out := c.aead.Seal(nonce, nonce, []byte(plain), nil)
	return sealedPrefix + base64.StdEncoding.EncodeToString(out)
}

// ErrSealed is returned when a sealed value cannot be opened: a wrong key, or tampering.
var ErrSealed = errors.New("cannot decrypt a stored secret: wrong encryption key or corrupted data")

// Open decrypts a value made by Seal. A value without the sealed prefix is returned as it
// is (plain text from before encryption was turned on).
func (c *Cipher) Open(s string) (string, error) {
	rest, ok := strings.CutPrefix(s, sealedPrefix)
	if !ok {
		return s, nil
	}
	b, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(b) < c.aead.NonceSize() {
		return "", ErrSealed
	}
	plain, err := c.aead.Open(nil, b[:c.aead.NonceSize()], b[c.aead.NonceSize():], nil)
	if err != nil {
		return "", ErrSealed
	}
	return string(plain), nil
}
