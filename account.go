// Package clouddb holds the domain of clouddb: the resources, their validation rules, the
// coded errors, and the interfaces (Store, Driver) that the other packages implement.
// It imports only the standard library.
package clouddb

import (
	"crypto/sha256"
	"crypto/subtle"
	"time"
)

// Plan is an account's billing plan. Only flexible and annual accounts may use the API.
type Plan string

// Plans.
const (
	PlanFlexible Plan = "flexible"
	PlanAnnual   Plan = "annual"
	PlanFixed    Plan = "fixed"
	PlanFree     Plan = "free"
)

// Valid reports whether p is a known plan.
func (p Plan) Valid() bool {
	switch p {
	case PlanFlexible, PlanAnnual, PlanFixed, PlanFree:
		return true
	}
	return false
}

// APIEnabled reports whether accounts on the plan may call the cloud API.
func (p Plan) APIEnabled() bool { return p == PlanFlexible || p == PlanAnnual }

// Account is a tenant: every resource belongs to exactly one account.
type Account struct {
	ID        int
	Name      string
	Plan      Plan
	CreatedAt time.Time
	UpdatedAt time.Time
}

// APIKeyRole says what a key may do.
type APIKeyRole string

// Roles.
const (
	RoleOwner  APIKeyRole = "owner"
	RoleViewer APIKeyRole = "viewer"
)

// APIKey is an account key (sent as x-api-key) with the digest of its secret (sent as
// x-api-secret-key). The secret itself is never stored.
type APIKey struct {
	ID           int
	AccountID    int
	Name         string
	Key          string
	SecretDigest []byte
	Role         APIKeyRole
	CreatedAt    time.Time
}

// DigestSecret returns the stored form of an API secret.
func DigestSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// MatchSecret compares secret with the key's digest in constant time.
func (k *APIKey) MatchSecret(secret string) bool {
	// Not DigestSecret: its slice escapes, and every request compares a secret.
	sum := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(sum[:], k.SecretDigest) == 1
}

// PaymentMethod is a card an account pays with.
type PaymentMethod struct {
	ID                 int
	AccountID          int
	Type               string
	CreditCardEndsWith int
	NameOnCard         string
	ExpirationMonth    int
	ExpirationYear     int
}
