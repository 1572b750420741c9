package clouddb

import "time"

// InternalCloudAccountID selects the service's own resources; it exists once, is visible to
// every account and cannot be changed or deleted.
const InternalCloudAccountID = 1

// CloudAccountStatus is a cloud account's provisioning state. A new account is draft, then
// active; it is never pending (Terraform's waiter fails on pending).
type CloudAccountStatus string

// Cloud account states.
const (
	CloudAccountDraft       CloudAccountStatus = "draft"
	CloudAccountChangeDraft CloudAccountStatus = "change-draft"
	CloudAccountActive      CloudAccountStatus = "active"
	CloudAccountDeleting    CloudAccountStatus = "delete-draft"
	CloudAccountError       CloudAccountStatus = "active-error"
)

// CloudAccount is a set of credentials for a cloud provider. Its secrets are write-only.
type CloudAccount struct {
	ID              int
	AccountID       int // 0 for the internal account
	Name            string
	Provider        string
	Status          CloudAccountStatus
	AccessKeyID     string
	AccessSecretKey string
	ConsoleUsername string
	ConsolePassword string
	SignInLoginURL  string
	Generation      int
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// CloudAccountSpec is the body of a cloud account create or update. Nil fields of an
// update mean "no change".
type CloudAccountSpec struct {
	Name            *string `json:"name,omitempty"`
	Provider        *string `json:"provider,omitempty"`
	AccessKeyID     *string `json:"accessKeyId,omitempty"`
	AccessSecretKey *string `json:"accessSecretKey,omitempty"`
	ConsoleUsername *string `json:"consoleUsername,omitempty"`
	ConsolePassword *string `json:"consolePassword,omitempty"`
	SignInLoginURL  *string `json:"signInLoginUrl,omitempty"`
}

// Cloud providers.
var cloudProviders = []string{"AWS", "GCP"}

// ValidProvider reports whether p is a known cloud provider.
func ValidProvider(p string) bool { return oneOf(p, cloudProviders) }

// ValidateCreate checks a create body: every credential field is required, provider
// defaults to AWS.
func (s *CloudAccountSpec) ValidateCreate() error {
	required := []struct {
		name string
		v    *string
	}{
		{"name", s.Name}, {"accessKeyId", s.AccessKeyID}, {"accessSecretKey", s.AccessSecretKey},
		{"consoleUsername", s.ConsoleUsername}, {"consolePassword", s.ConsolePassword},
		{"signInLoginUrl", s.SignInLoginURL},
	}
	for _, f := range required {
		if f.v == nil || *f.v == "" {
			return Invalid(ErrTypeInvalidField, "cloud account: %s is required", f.name)
		}
	}
	return s.validateCommon()
}

// ValidateUpdate checks an update body.
func (s *CloudAccountSpec) ValidateUpdate() error {
	if s.Provider != nil {
		return Invalid(ErrTypeInvalidField, "cloud account: provider cannot be changed")
	}
	if s.Name != nil && *s.Name == "" {
		return Invalid(ErrTypeInvalidField, "cloud account: name must not be empty")
	}
	return s.validateCommon()
}

func (s *CloudAccountSpec) validateCommon() error {
	const ca = "cloud account"
	if s.Provider != nil && !ValidProvider(*s.Provider) {
		return Invalid(ErrTypeInvalidField, "cloud account: provider must be one of %v", cloudProviders)
	}
	if s.Name != nil {
		if err := checkText(ca, "name", *s.Name, MaxCloudAccountNameLength); err != nil {
			return err
		}
	}
	if s.ConsoleUsername != nil {
		if err := checkText(ca, "consoleUsername", *s.ConsoleUsername, MaxShortText); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"accessKeyId", s.AccessKeyID}, {"accessSecretKey", s.AccessSecretKey}, {"consolePassword", s.ConsolePassword}} {
		if f.v != nil {
			if err := checkLength(ca, f.name, *f.v, MaxSecretLength); err != nil {
				return err
			}
		}
	}
	if s.SignInLoginURL != nil && *s.SignInLoginURL != "" {
		// The console shows it as a link.
		if err := checkWebURL(ca, "signInLoginUrl", *s.SignInLoginURL); err != nil {
			return err
		}
	}
	return nil
}

// Apply copies the set fields of s onto a.
func (s *CloudAccountSpec) Apply(a *CloudAccount) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&a.Name, s.Name)
	set(&a.Provider, s.Provider)
	set(&a.AccessKeyID, s.AccessKeyID)
	set(&a.AccessSecretKey, s.AccessSecretKey)
	set(&a.ConsoleUsername, s.ConsoleUsername)
	set(&a.ConsolePassword, s.ConsolePassword)
	set(&a.SignInLoginURL, s.SignInLoginURL)
	if a.Provider == "" {
		a.Provider = "AWS"
	}
}

func oneOf(v string, allowed []string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}
